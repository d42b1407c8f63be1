// `tune validate` end to end on this machine (2 MPI ranks of gpt-tiny):
// every candidate runs and is recorded with its training run, the statistics
// are printed (Spearman, MAPE, top-1 loss), the learned factors explain the
// runs better than the base calibration and a second validation that uses
// them predicts the first one's measurements better; a candidate killed the way
// the out-of-memory killer kills a rank is recorded as failed while the
// others run; input errors, those of --backend cuda included (its runs need
// a GPU: scripts/gpu-check).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/backends/registry.h"
#include "results/store.h"
#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

namespace fs = std::filesystem;
using testing::RunTune;

class ValidateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tune_validate_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Db() const { return (dir_ / "v.db").string(); }
  fs::path dir_;
};

constexpr const char* kModel =
    "validate --model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
    " --gbs 8 --seq-len 128 ";

TEST_F(ValidateCommandTest, RunsMeasuresRecordsAndLearns) {
  const auto first =
      RunTune(std::string(kModel) +
              "--top 6 --steps 6 --repeats 2 --json --db '" + Db() + "'");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto j = nlohmann::json::parse(first.out);
  std::printf("%s\n", first.err.c_str());
  // The top 6 plus one candidate per axis with a new value.
  ASSERT_GE(j["candidates"].size(), 7u) << first.out;
  EXPECT_EQ(j["repeats"], 2);
  for (const auto& c : j["candidates"]) {
    EXPECT_EQ(c["status"], "ok") << c.dump();
    EXPECT_GT(c["measured_step_s"].get<double>(), 0.0);
    // Two runs each; the measured time is their median (here their mean)
    // and the spread is their difference over it.
    ASSERT_EQ(c["measured_runs_s"].size(), 2u) << c.dump();
    const double a = c["measured_runs_s"][0].get<double>();
    const double b = c["measured_runs_s"][1].get<double>();
    EXPECT_NEAR(c["measured_step_s"].get<double>(), 0.5 * (a + b), 1e-12);
    EXPECT_NEAR(c["spread_pct"].get<double>(),
                100.0 * std::fabs(a - b) / (0.5 * (a + b)), 1e-9);
    EXPECT_NEAR(c["error_pct"].get<double>(),
                100.0 *
                    (c["predicted_step_s"].get<double>() -
                     c["measured_step_s"].get<double>()) /
                    c["measured_step_s"].get<double>(),
                1e-9);
  }
  // Printed, not asserted: on a shared 2-core machine the top candidates
  // differ by less than the step-time noise (docs/validate.md, measured).
  std::printf(
      "first validation: Spearman %.3f, MAPE %.1f%%, top-1 loss %.1f%%\n",
      j["spearman"].get<double>(), j["mape_pct"].get<double>(),
      j["top1_loss_pct"].get<double>());
  EXPECT_GE(j["spearman"].get<double>(), -1.0);
  EXPECT_LE(j["spearman"].get<double>(), 1.0);
  EXPECT_GE(j["top1_loss_pct"].get<double>(), 0.0);
  ASSERT_TRUE(j["noise_pct"].is_number());
  const size_t n = j["candidates"].size();
  EXPECT_LE(j["separated_pairs"].get<size_t>(), n * (n - 1) / 2);
  EXPECT_LE(j["separated_pairs_in_order"].get<size_t>(),
            j["separated_pairs"].get<size_t>());
  // Learning: the fitted factors explain the runs at least as well as the
  // base. The fit minimises the squared relative error, not its mean
  // absolute value, so on runs this noisy the MAPE may rise a little (CI:
  // 28.8 % -> 29.4 % with a Spearman of -0.33); factors applied the wrong
  // way raise it by far more.
  ASSERT_TRUE(j["learned"].is_object());
  EXPECT_LE(j["learned"]["mape_after_pct"].get<double>(),
            j["learned"]["mape_before_pct"].get<double>() * 1.1 + 1.0);
  // Every run is a data point of the fit: two per candidate.
  EXPECT_EQ(j["learned"]["runs"].get<size_t>(), 2 * j["candidates"].size());

  // The second validation searches with the factors the first one learned,
  // and its predictions move toward what the first one measured.
  const auto second =
      RunTune(std::string(kModel) +
              "--top 6 --steps 6 --repeats 1 --json --db '" + Db() + "'");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto k = nlohmann::json::parse(second.out);
  std::printf("second validation (%s): Spearman %.3f, MAPE %.1f%%\n",
              k["calibration"].get<std::string>().c_str(),
              k["spearman"].get<double>(), k["mape_pct"].get<double>());
  EXPECT_NE(k["calibration"].get<std::string>().find("+fit:"),
            std::string::npos);
  // The fresh measurements of the second validation are not bounded: on a
  // shared 2-core machine a candidate predicted at 0.31 s has measured
  // 0.22 s in one run and 0.63 s in the next (CI, stop 27). What the
  // factors must do is follow the first validation's runs: on the
  // candidates both validations ran, the second one's predictions stay
  // about as close to the first one's measurements as the first
  // predictions were. The fit minimises the squared relative error over
  // every run, the check is the mean absolute error over the candidates
  // run twice, so noisy runs move it either way: 8.3 % -> 10.3 % and
  // 8.3 % -> 11.3 % with right-way factors (CI clone, session 33, with the
  // other tests running beside it; runs of one candidate 0.24 s and
  // 0.46 s). Factors applied the wrong way double that error, which the
  // bound below still catches wherever the first error exceeds 4 % (8.3 %
  // and 28.8 % in the runs recorded here).
  int matched = 0;
  double before_pct = 0, after_pct = 0;
  for (const auto& c2 : k["candidates"]) {
    for (const auto& c1 : j["candidates"]) {
      if (c1["config"] != c2["config"]) continue;
      const double m = c1["measured_step_s"].get<double>();
      before_pct +=
          100.0 * std::fabs(c1["predicted_step_s"].get<double>() - m) / m;
      after_pct +=
          100.0 * std::fabs(c2["predicted_step_s"].get<double>() - m) / m;
      ++matched;
    }
  }
  ASSERT_GE(matched, 3) << second.out;
  before_pct /= matched;
  after_pct /= matched;
  std::printf("on the %d candidates run twice: %.1f%% -> %.1f%%\n", matched,
              before_pct, after_pct);
  EXPECT_LE(after_pct, before_pct * 1.5 + 2.0);
  EXPECT_TRUE(k["noise_pct"].is_null());  // one run each: no estimate
  EXPECT_EQ(k["learned"]["runs"].get<size_t>(),
            2 * j["candidates"].size() + k["candidates"].size());

  auto store = results::Store::Open(Db());
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto validations = (*store)->ListValidations();
  ASSERT_TRUE(validations.ok());
  ASSERT_EQ(validations->size(), 2u);
  auto runs = (*store)->GetValidationRuns((*validations)[0].id);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), j["candidates"].size());
  for (const auto& r : *runs) {
    EXPECT_EQ(r.status, "ok");
    EXPECT_GT(r.training_run_id, 0);
  }
}

TEST_F(ValidateCommandTest, KilledCandidateIsRecordedAndTheOthersRun) {
  const auto run =
      RunTune(std::string(kModel) +
                  "--top 3 --extra 0 --steps 3 --repeats 2 --no-learn --db '" +
                  Db() + "'",
              "", "TUNE_DB= MESHTUNE_VALIDATE_KILL_RANK=2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("[2/3] rank 2"), std::string::npos) << run.err;
  // A failed candidate is not run again: rank 2 starts once, the others
  // twice (round 2 starts with the second candidate).
  EXPECT_EQ(run.err.find("[2/3] rank 2", run.err.find("[2/3] rank 2") + 1),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("[3/3] rank 3 "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("run 2/2"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("failed: killed by signal 9 (Killed): out of memory? "
                         "(the OOM killer sends SIGKILL)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.out.find("measured 2 of 3"), std::string::npos) << run.out;
  auto store = results::Store::Open(Db());
  ASSERT_TRUE(store.ok());
  auto validations = (*store)->ListValidations();
  ASSERT_TRUE(validations.ok());
  ASSERT_EQ(validations->size(), 1u);
  auto runs = (*store)->GetValidationRuns((*validations)[0].id);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].status, "ok");
  EXPECT_EQ((*runs)[1].status, "failed");
  EXPECT_EQ((*runs)[1].training_run_id, 0);
  EXPECT_FALSE((*runs)[1].measured_step_s.has_value());
  EXPECT_EQ((*runs)[2].status, "ok");
}

TEST_F(ValidateCommandTest, InputErrors) {
  auto r = RunTune("validate --model gpt-tiny --gpus 2 --gpu h100 --db '" +
                   Db() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "tune: error: tune validate runs the candidates on this machine "
            "with the CPU engine, so it needs --gpu local (got --gpu h100)\n"
            "tune: hint: use --gpu local, or --backend cuda to run them on "
            "this machine's GPUs\n");
  r = RunTune(std::string(kModel) + "--steps 0 --db '" + Db() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--steps"), std::string::npos) << r.err;
  r = RunTune(std::string(kModel) + "--repeats 0 --db '" + Db() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--repeats"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Db()) && fs::file_size(Db()) > 0 &&
               r.out.find("validation") != std::string::npos);
}

TEST_F(ValidateCommandTest, CudaBackendErrors) {
  const std::string gpt =
      "validate --model gpt-tiny --gpus 1 --db '" + Db() + "' ";
  auto r = RunTune(gpt + "--backend bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "tune: error: --backend: unknown backend 'bogus'\n"
            "tune: hint: use --backend cpu or --backend cuda\n");
  const int gpus = engine::backends::CudaDeviceCount();
  if (!engine::backends::TrainerBackendBuilt("cuda")) {
    r = RunTune(gpt + "--backend cuda");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err,
              "tune: error: tune validate --backend cuda needs the CUDA "
              "engine, and this tune was built without it (CMake found no "
              "CUDA toolkit with cuBLASLt and NCCL)\n"
              "tune: hint: rebuild where the CUDA toolkit is installed "
              "(/usr/local/cuda), or use --backend cpu\n");
  } else if (gpus == 0) {
    r = RunTune(gpt + "--backend cuda");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err,
              "tune: error: tune validate --backend cuda found no CUDA device "
              "on this machine (cudaGetDeviceCount found none)\n"
              "tune: hint: run it on a machine with an NVIDIA GPU and driver, "
              "or use --backend cpu\n");
  } else {
    // On a GPU machine: more GPUs than it has, and the CPU preset.
    r = RunTune("validate --model gpt-tiny --backend cuda --gpus " +
                std::to_string(gpus + 1) + " --db '" + Db() + "'");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "tune: error: --gpus " + std::to_string(gpus + 1) +
                         " is more than the " + std::to_string(gpus) +
                         " GPU(s) of this machine\ntune: hint: pass --gpus " +
                         std::to_string(gpus) + " or fewer\n");
    r = RunTune(gpt + "--backend cuda --gpu local");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.rfind("tune: error: --gpu local is the CPU engine's "
                          "preset, not a GPU's\n",
                          0),
              0u)
        << r.err;
  }
  // Nothing was searched or run.
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace meshtune::tuner
