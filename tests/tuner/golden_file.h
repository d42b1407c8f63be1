// Golden-file comparison shared by the tuner's output tests (search, scale,
// compare, explain, launch): `actual` against tests/tuner/testdata/NAME,
// which the caller has freed of volatile fields (version, paths, times).
//   MESHTUNE_UPDATE_GOLDEN=1 ./build/tests/meshtune_tuner_tests
//   --gtest_filter='...'   (one command line) rewrites the files it runs.
#ifndef MESHTUNE_TESTS_TUNER_GOLDEN_FILE_H_
#define MESHTUNE_TESTS_TUNER_GOLDEN_FILE_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/tuner/run_tune.h"

namespace meshtune::tuner::testing {

inline void ExpectGolden(const std::string& actual,
                         const std::string& golden_name) {
  const std::string path =
      std::string(MESHTUNE_SOURCE_DIR) + "/tests/tuner/testdata/" + golden_name;
  const char* update = std::getenv("MESHTUNE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    WriteFile(path, actual);
    GTEST_SKIP() << "rewrote " << path;
  }
  const std::string expected = ReadFile(path);
  ASSERT_FALSE(expected.empty())
      << path << " is missing; run with MESHTUNE_UPDATE_GOLDEN=1";
  EXPECT_EQ(actual, expected) << "output changed; if intended, regenerate "
                                 "with MESHTUNE_UPDATE_GOLDEN=1 and review "
                                 "the diff";
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_GOLDEN_FILE_H_
