// `tune scale`: golden tables for 175b on 64..1024 A100-80GB with and without
// a price, the JSON shape, one row's efficiency and cost checked by hand from
// its own numbers, and every input error's exact message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/tuner/golden_file.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using testing::ExpectGolden;
using testing::RunTuneInProcess;

constexpr const char* kSizes =
    "scale --model 175b --gpus 64,128,256,512,1024 --gpu a100-80g --no-db";

TEST(ScaleCommand, GoldenTable175bA100) {
  const auto run = RunTuneInProcess(kSizes);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectGolden(run.out, "scale_175b_a100-80g.txt");
}

TEST(ScaleCommand, GoldenTable175bA100WithPrice) {
  const auto run =
      RunTuneInProcess(std::string(kSizes) + " --price-per-gpu-hour 2.5");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectGolden(run.out, "scale_175b_a100-80g_price.txt");
}

TEST(ScaleCommand, JsonShapeEfficiencyAndCost) {
  const auto run = RunTuneInProcess(std::string(kSizes) +
                                    " --price-per-gpu-hour 2.5 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["model"], "gpt3-175b");
  EXPECT_EQ(j["gpu"], "a100-80g");
  EXPECT_EQ(j["gbs_fixed_by"], "model_default");
  EXPECT_DOUBLE_EQ(j["price_per_gpu_hour"].get<double>(), 2.5);
  ASSERT_EQ(j["rows"].size(), 5u);
  for (const char* key : {"gpus", "config", "step_time_s", "tokens_per_s",
                          "mfu", "scaling_efficiency", "days_to_train",
                          "cost_usd", "feasible", "reason"}) {
    EXPECT_TRUE(j["rows"][0].contains(key)) << key;
  }
  // Sizes come back ascending, the smallest is the baseline.
  EXPECT_EQ(j["rows"][0]["gpus"], 64);
  EXPECT_EQ(j["rows"][4]["gpus"], 1024);
  ASSERT_TRUE(j["rows"][0]["feasible"].get<bool>());
  ASSERT_TRUE(j["rows"][4]["feasible"].get<bool>());
  EXPECT_DOUBLE_EQ(j["rows"][0]["scaling_efficiency"].get<double>(), 1.0);
  // By hand, row 1024: efficiency = (tokens/s / 1024) / (tokens/s / 64) of
  // the baseline; cost = days x 24 h x 1024 GPUs x 2.5 USD.
  const auto& base = j["rows"][0];
  const auto& row = j["rows"][4];
  const double expected_eff = (row["tokens_per_s"].get<double>() / 1024.0) /
                              (base["tokens_per_s"].get<double>() / 64.0);
  EXPECT_NEAR(row["scaling_efficiency"].get<double>(), expected_eff,
              1e-12 * expected_eff);
  EXPECT_GT(row["scaling_efficiency"].get<double>(), 0.0);
  EXPECT_LE(row["scaling_efficiency"].get<double>(), 1.2);
  const double expected_cost =
      row["days_to_train"].get<double>() * 24.0 * 1024.0 * 2.5;
  EXPECT_NEAR(row["cost_usd"].get<double>(), expected_cost,
              1e-9 * expected_cost);
  // Without a price there is no cost.
  const auto no_price = RunTuneInProcess(std::string(kSizes) + " --json");
  ASSERT_EQ(no_price.exit_code, 0) << no_price.err;
  const auto k = nlohmann::json::parse(no_price.out);
  EXPECT_TRUE(k["price_per_gpu_hour"].is_null());
  EXPECT_TRUE(k["rows"][0]["cost_usd"].is_null());
}

TEST(ScaleCommand, InfeasibleSizeIsARowWithItsReason) {
  // One GPU cannot hold 175B parameters; the row says why, the run succeeds
  // and the baseline moves to the smallest feasible size.
  const auto run = RunTuneInProcess(
      "scale --model 175b --gpus 1,64 --gpu a100-80g --no-db --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_FALSE(j["rows"][0]["feasible"].get<bool>());
  EXPECT_FALSE(j["rows"][0]["reason"].get<std::string>().empty());
  EXPECT_TRUE(j["rows"][0]["config"].is_null());
  EXPECT_DOUBLE_EQ(j["rows"][1]["scaling_efficiency"].get<double>(), 1.0);
  const auto text =
      RunTuneInProcess("scale --model 175b --gpus 1,64 --gpu a100-80g --no-db");
  EXPECT_NE(text.out.find("     1  no feasible configuration ("),
            std::string::npos)
      << text.out;
}

TEST(ScaleCommand, GbsFlagIsNamedInTheHeader) {
  const auto run = RunTuneInProcess(
      "scale --model 175b --gpus 64,128 --gpu a100-80g --gbs 512 --no-db");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("global batch 512 sequences of 2048 tokens, fixed "
                         "at every size (--gbs)"),
            std::string::npos)
      << run.out;
}

struct ErrorCase {
  const char* args;
  const char* err;
};

TEST(ScaleCommand, ErrorsAreOneLineWithAHint) {
  const ErrorCase cases[] = {
      {"scale --model 175b --gpus 64,abc",
       "tune: error: --gpus must be a comma list of positive integers, got "
       "'64,abc'\ntune: hint: e.g. --gpus 4,8\n"},
      {"scale --model 175b --gpus 64,128,64",
       "tune: error: --gpus lists 64 twice\ntune: hint: give each GPU count "
       "once\n"},
      {"scale --model 175b --gpus 64,100",
       "tune: error: --gpus 100 is not a whole number of a100-80g nodes (8 "
       "GPUs per node)\ntune: hint: use a multiple of 8, or set "
       "--gpus-per-node\n"},
      {"scale --model 175b --gpus 64 --price-per-gpu-hour -1",
       "tune: error: --price-per-gpu-hour must be a positive number of USD, "
       "got '-1'\ntune: hint: e.g. --price-per-gpu-hour 2.5\n"},
      {"scale --model 175b --gpus 64 --price-per-gpu-hour 2usd",
       "tune: error: --price-per-gpu-hour must be a positive number of USD, "
       "got '2usd'\ntune: hint: e.g. --price-per-gpu-hour 2.5\n"},
      {"scale --model 175b",
       "tune: error: --gpus is required\ntune: hint: run 'tune scale --help' "
       "for its flags and examples\n"},
  };
  for (const ErrorCase& c : cases) {
    const auto run = RunTuneInProcess(std::string(c.args) + " --no-db");
    EXPECT_EQ(run.exit_code, 2) << c.args;
    EXPECT_EQ(run.err, c.err) << c.args;
    EXPECT_EQ(run.out, "") << c.args;
  }
}

}  // namespace
}  // namespace meshtune::tuner
