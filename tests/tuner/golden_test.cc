// Golden output of a fixed small search (gpt3-1.3b on 8 a100-80g), with the
// volatile field (elapsed milliseconds) masked. Any change to the cost model,
// the enumeration, the ranking or the report layout shows up here as a diff.
//
// To accept an intended change, regenerate the golden file and review the
// diff before committing:
//   MESHTUNE_UPDATE_GOLDEN=1 ./build/tests/meshtune_tuner_tests
//   --gtest_filter='Golden.*'   (one command line)
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

using testing::ReadFile;
using testing::RunTune;
using testing::WriteFile;

// Replaces "in 97 ms" with "in <elapsed> ms".
std::string MaskVolatile(const std::string& text) {
  static const std::regex kElapsed(" in [0-9]+ ms:");
  return std::regex_replace(text, kElapsed, " in <elapsed> ms:");
}

void CheckGolden(const std::string& args, const std::string& golden_name) {
  const auto run = RunTune(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string actual = MaskVolatile(run.out);
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
  EXPECT_EQ(actual, expected)
      << "search output changed; if intended, regenerate with "
         "MESHTUNE_UPDATE_GOLDEN=1 and review the diff";
}

TEST(Golden, MaskVolatileOnlyTouchesElapsed) {
  EXPECT_EQ(MaskVolatile("evaluated 10 configurations in 97 ms: 3 feasible"),
            "evaluated 10 configurations in <elapsed> ms: 3 feasible");
  EXPECT_EQ(MaskVolatile("step 1.000 s"), "step 1.000 s");
}

TEST(Golden, Gpt3_1_3bOn8A100Table) {
  CheckGolden("--model gpt3-1.3b --gpus 8 --gpu a100-80g --top 5",
              "search_gpt3-1.3b_8xa100-80g.txt");
}

TEST(Golden, Gpt3_1_3bOn8A100Megatron) {
  CheckGolden("--model gpt3-1.3b --gpus 8 --format megatron",
              "search_gpt3-1.3b_8xa100-80g_megatron.txt");
}

}  // namespace
}  // namespace meshtune::tuner
