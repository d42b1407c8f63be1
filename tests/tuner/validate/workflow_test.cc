// RunValidation in process, with a runner that measures without starting
// processes: which candidates run, in how many rounds, what the statistics
// say and what the database holds afterwards.
#include "tuner/validate/workflow.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tuner/machine/calibration_source.h"

namespace meshtune::tuner {
namespace {

namespace fs = std::filesystem;

class ValidationWorkflowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("meshtune_validate_workflow_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto store = results::Store::Open((dir_ / "v.db").string());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();

    request_.flags.model = "gpt-tiny";
    request_.flags.gpu = "local";
    request_.flags.gpus = "2";
    request_.flags.gbs = "8";
    request_.flags.seq_len = "128";
    auto in = ResolveInputs(request_.flags);
    ASSERT_TRUE(in.ok()) << in.status().message();
    request_.inputs = std::move(in).value();
    request_.inputs.training.python_launches = false;
    request_.inputs.space.cp = {1};
    request_.inputs.space.ep = {1};
    request_.hardware_id = LocalHardwareId();
    request_.top = 2;
    request_.extra = 1;
    request_.steps = 4;
    request_.repeats = 2;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::unique_ptr<results::Store> store_;
  ValidationRequest request_;
};

// Every candidate measures 1.25x its prediction: errors of -20 %, the
// ranking kept, two interleaved runs each, and one validation recorded with
// a run row per candidate.
TEST_F(ValidationWorkflowTest, MeasuresEveryCandidateInRoundsAndRecords) {
  std::map<int64_t, int> runs_per_rank;
  std::map<int64_t, double> predicted;  // by rank, read from the store
  request_.run = [&](const CandidateRunRequest& r) {
    if (predicted.empty()) {
      auto stored = store_->GetCandidates(r.search_id);
      EXPECT_TRUE(stored.ok());
      for (const results::CandidateRecord& c : stored.value()) {
        predicted[c.rank] = c.step_time_s;
      }
    }
    ++runs_per_rank[r.rank];
    EXPECT_EQ(r.steps, 4);
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_EQ(r.gpu, "local");
    CandidateRunResult out;
    out.ok = true;
    out.step_time_median_s = 1.25 * predicted.at(r.rank);
    out.wall_s = 1;
    return out;
  };
  std::ostringstream progress;
  auto v = RunValidation(request_, store_.get(), progress);
  ASSERT_TRUE(v.ok()) << v.status().message();

  ASSERT_EQ(v->candidates.size(), 3u);         // top 2 + 1 extra
  EXPECT_EQ(v->candidates[0].pick.index, 0u);  // the top-1 first
  for (const auto& [rank, n] : runs_per_rank) EXPECT_EQ(n, 2) << rank;
  EXPECT_EQ(v->stats.measured, 3);
  ASSERT_TRUE(v->stats.mape_pct.has_value());
  EXPECT_NEAR(*v->stats.mape_pct, 20.0, 1e-9);
  EXPECT_TRUE(v->stats.top1_is_measured_best);
  for (const ValidatedCandidate& c : v->candidates) {
    EXPECT_TRUE(c.ok());
    EXPECT_NEAR(c.measured_s(), 1.25 * c.estimate.step_time_s, 1e-12);
  }
  // No training run is linked (the runner records none): nothing learned.
  EXPECT_FALSE(v->fit.has_value());

  auto validations = store_->ListValidations();
  ASSERT_TRUE(validations.ok());
  ASSERT_EQ(validations->size(), 1u);
  EXPECT_EQ((*validations)[0].id, v->validation_id);
  EXPECT_EQ((*validations)[0].search_id, v->search_id);
  EXPECT_EQ((*validations)[0].measured, 3);
  auto rows = store_->GetValidationRuns(v->validation_id);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 3u);
  EXPECT_NE(progress.str().find("tune: validate [1/3] rank 1 "),
            std::string::npos)
      << progress.str();
  // Six runs of 1 s each (the runner's injected wall time): the ETA counts
  // down by the mean, and the last run has none.
  std::istringstream lines(progress.str());
  std::vector<std::string> etas;
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(", ETA ");
    etas.push_back(at == std::string::npos ? "" : line.substr(at + 6));
  }
  EXPECT_EQ(etas, (std::vector<std::string>{"5s", "4s", "3s", "2s", "1s", ""}))
      << progress.str();
}

// --spread 4 adds four candidates across the predicted range after the
// top 2 and the extra; they run like the others and the statistics are
// over all seven.
TEST_F(ValidationWorkflowTest, SpreadCandidatesRunAndCountInTheStatistics) {
  request_.spread = 4;
  request_.repeats = 1;
  std::map<int64_t, double> predicted;  // by rank, read from the store
  request_.run = [&](const CandidateRunRequest& r) {
    if (predicted.empty()) {
      auto stored = store_->GetCandidates(r.search_id);
      EXPECT_TRUE(stored.ok());
      for (const results::CandidateRecord& c : stored.value()) {
        predicted[c.rank] = c.step_time_s;
      }
    }
    // Off by a factor that depends on the rank, so that the measured
    // order is not the predicted one.
    CandidateRunResult out;
    out.ok = true;
    out.step_time_median_s = predicted.at(r.rank) * (1.0 + 0.3 * (r.rank % 3));
    out.wall_s = 1;
    return out;
  };
  std::ostringstream progress;
  auto v = RunValidation(request_, store_.get(), progress);
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->candidates.size(), 7u) << progress.str();
  const std::string reasons[] = {"spread q=0", "spread q=0.33", "spread q=0.67",
                                 "spread q=1"};
  std::vector<double> pred, meas;
  double slowest_other = 0;
  for (size_t i = 0; i < v->candidates.size(); ++i) {
    const ValidatedCandidate& c = v->candidates[i];
    EXPECT_EQ(c.pick.from_spread, i >= 3) << i;
    if (i >= 3) {
      EXPECT_EQ(c.pick.reason, reasons[i - 3]);
    }
    if (i < 6) slowest_other = std::max(slowest_other, c.estimate.step_time_s);
    ASSERT_TRUE(c.ok()) << i;
    pred.push_back(c.estimate.step_time_s);
    meas.push_back(c.measured_s());
  }
  // q=1 is the slowest trainable candidate.
  EXPECT_GE(v->candidates[6].estimate.step_time_s, slowest_other);
  EXPECT_NE(progress.str().find("(spread q=1): 4 steps"), std::string::npos)
      << progress.str();
  EXPECT_EQ(v->stats.measured, 7);
  ASSERT_TRUE(v->stats.spearman.has_value());
  EXPECT_DOUBLE_EQ(*v->stats.spearman, SpearmanRho(pred, meas));
  auto rows = store_->GetValidationRuns(v->validation_id);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 7u);
  EXPECT_EQ((*rows)[6].reason, "spread q=1");
}

TEST(ValidationEta, MeanRunTimeTimesRunsLeft) {
  EXPECT_DOUBLE_EQ(ValidationEtaSeconds(2, 90, 4), 180);
  EXPECT_DOUBLE_EQ(ValidationEtaSeconds(0, 0, 4), 0);
  EXPECT_DOUBLE_EQ(ValidationEtaSeconds(3, 30, 0), 0);
}

// A candidate that fails is recorded with its error and not run again; the
// others go on.
TEST_F(ValidationWorkflowTest, FailedCandidateIsNotRunAgain) {
  int rank1_runs = 0;
  request_.run = [&](const CandidateRunRequest& r) {
    CandidateRunResult out;
    if (r.rank == 1) {
      ++rank1_runs;
      out.error = "killed by signal 9 (Killed): out of memory?";
      return out;
    }
    out.ok = true;
    out.step_time_median_s = 0.5;
    out.wall_s = 60;
    return out;
  };
  std::ostringstream progress;
  auto v = RunValidation(request_, store_.get(), progress);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(rank1_runs, 1);
  // After the failure (0 s) four runs are left, not five: rank 1 is not
  // run again. The mean is 0 s, then 30 s, 40 s, 45 s.
  EXPECT_NE(progress.str().find("out of memory?, ETA 0s\n"), std::string::npos)
      << progress.str();
  EXPECT_NE(progress.str().find("(predicted "), std::string::npos);
  EXPECT_NE(progress.str().find("), ETA 1m 30s\n"), std::string::npos)
      << progress.str();
  EXPECT_FALSE(v->candidates[0].ok());
  EXPECT_EQ(v->candidates[0].error,
            "killed by signal 9 (Killed): out of memory?");
  EXPECT_EQ(v->stats.measured, 2);
  EXPECT_FALSE(v->stats.top1_loss_pct.has_value());
  auto rows = store_->GetValidationRuns(v->validation_id);
  ASSERT_TRUE(rows.ok());
  int failed = 0;
  for (const auto& r : *rows) failed += r.status == "failed";
  EXPECT_EQ(failed, 1);
}

}  // namespace
}  // namespace meshtune::tuner
