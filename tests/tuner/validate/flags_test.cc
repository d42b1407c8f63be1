// `tune validate`'s own count flags through the built binary: a bad
// --spread is an input error (exit 2, one line and a hint) before anything
// is searched or run.
#include <gtest/gtest.h>

#include <string>

#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

using testing::RunTune;

constexpr const char* kValidate =
    "validate --model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
    " --gbs 8 --seq-len 128 --no-learn --db /nonexistent/dir/v.db ";

constexpr const char* kSpreadHint =
    "tune: hint: write 0 (off) or a whole number of at least 2, e.g. --spread "
    "6: the candidates nearest 6 evenly spaced quantiles of the predicted "
    "step times, fastest to slowest\n";

TEST(ValidateSpreadFlag, BadValuesAreInputErrors) {
  const struct {
    const char* value;
    const char* error;
  } cases[] = {
      {"-1", "--spread must be 0 (off) or at least 2, got -1"},
      {"1", "--spread must be 0 (off) or at least 2, got 1"},
      {"abc", "--spread must be a whole number, got 'abc'"},
      {"2.5", "--spread must be a whole number, got '2.5'"},
      {"4x", "--spread must be a whole number, got '4x'"},
      {"99999999999999999999",
       "--spread must be a whole number, got '99999999999999999999'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.value);
    const auto r = RunTune(std::string(kValidate) + "--spread " + c.value);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "tune: error: " + std::string(c.error) + "\n" +
                         std::string(kSpreadHint));
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
}  // namespace meshtune::tuner
