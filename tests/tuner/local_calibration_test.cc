// Issue 4's loop on one machine: `tune profile --backend cpu` stores this
// machine's measurements, and a later `tune estimate --gpu local` plans with
// them ("calibration": "measured:<hardware id>").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

using nlohmann::json;
using testing::MakeTempDir;
using testing::RunTune;

TEST(LocalCalibration, ProfileThenEstimateUsesTheMeasurements) {
  const std::string db = MakeTempDir() + "/local.db";
  const std::string estimate =
      "estimate --model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
      " --tp 2 --sp --json "
      "--db '" +
      db + "'";

  // No database yet: the local preset's nominal (datasheet) numbers.
  const auto before = RunTune(estimate);
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_EQ(json::parse(before.out)["calibration"], "datasheet");

  const auto profile =
      RunTune("profile --backend cpu --quick --db '" + db + "'");
  ASSERT_EQ(profile.exit_code, 0) << profile.err;

  const auto after = RunTune(estimate);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  const json e = json::parse(after.out);
  const std::string calibration = e["calibration"];
  EXPECT_EQ(calibration.rfind("measured:cpu-", 0), 0u) << calibration;
  EXPECT_GT(e["step_time_s"].get<double>(), 0.0);
  // MFU divides this host's measured speed by the pinned preset's peak
  // (80 GFLOP/s per core), not by this core's: an AVX-512 core runs Eigen's
  // GEMM faster than that, so MFU may pass 1 here. What must not happen is
  // a units slip (GFLOP/s read as TFLOP/s: 1000x).
  EXPECT_LT(e["mfu"].get<double>(), 10.0) << "measured GEMM rate off by 10x+";

  // --no-db ignores the measurements.
  const auto sheet = RunTune(estimate + " --no-db");
  ASSERT_EQ(sheet.exit_code, 0) << sheet.err;
  EXPECT_EQ(json::parse(sheet.out)["calibration"], "datasheet");
}

TEST(LocalCalibration, ForeignDatabaseIsAnInputError) {
  const std::string dir = MakeTempDir();
  testing::WriteFile(dir + "/foreign.db", "not a database\n");
  const auto run =
      RunTune("estimate --model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
              " --db '" +
              dir + "/foreign.db'");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("tune: error: "), std::string::npos) << run.err;
  EXPECT_EQ(testing::ReadFile(dir + "/foreign.db"), "not a database\n");
}

}  // namespace
}  // namespace meshtune::tuner
