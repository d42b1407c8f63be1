#include "tuner/validate/workflow.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>

#include "engine/backends/registry.h"
#include "engine/train_config.h"
#include "tuner/io/text_format.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/machine/learned_factors.h"
#include "tuner/search/search_driver.h"
#include "tuner/store/results_db.h"
#include "tuner/train/report.h"

namespace meshtune::tuner {
namespace {

// The search, its recorded candidates and the selection to run.
StatusOr<ValidationResult> SearchAndSelect(const ValidationRequest& r,
                                           results::Store* store) {
  const Inputs& in = r.inputs;
  auto calibration = ChooseCalibration(store, in.cluster, r.hardware_id);
  if (!calibration.ok()) return calibration.status();
  const SearchResult result = RunSearch(in.model, in.cluster, in.training,
                                        in.space, *calibration.value());
  if (result.feasible == 0) {
    return NoFeasibleConfigStatus(in.model, in.cluster, in.training, result);
  }
  auto trainable = [&](const costmodel::Estimate& e) {
    engine::TrainConfig c;
    c.model = in.model;
    c.parallel = e.config;
    c.global_batch_size = in.training.global_batch_size;
    c.seq_length = in.training.seq_length;
    c.train_iters = r.steps;
    return engine::backends::CheckTrainerSupported(r.backend, c).ok();
  };
  const std::vector<SelectedCandidate> picks =
      SelectCandidates(result.ranked, r.top, r.extra, trainable, r.spread);
  if (picks.empty()) {
    return Status::InvalidArgument(
        "none of the " + std::to_string(result.feasible) +
            " feasible configurations can be trained by the engine",
        r.backend == "cuda"
            ? "see docs/engine-cuda.md for what the CUDA engine trains "
              "(one GPU per rank: dp only)"
            : "see 'tune train --help' for what the engine supports");
  }
  size_t depth = 0;
  for (const SelectedCandidate& p : picks) depth = std::max(depth, p.index + 1);
  ValidationResult out;
  out.calibration = calibration.value()->Name();
  MESHTUNE_ASSIGN_OR_RETURN(
      out.search_id,
      RecordSearch(store, r.flags, in, result, static_cast<int64_t>(depth)));
  auto stored = store->GetCandidates(out.search_id);
  if (!stored.ok()) return stored.status();
  for (const SelectedCandidate& pick : picks) {
    ValidatedCandidate c;
    c.pick = pick;
    c.estimate = result.ranked[pick.index];
    for (const results::CandidateRecord& s : *stored) {
      if (s.rank == static_cast<int64_t>(pick.index) + 1) c.candidate_id = s.id;
    }
    out.candidates.push_back(std::move(c));
  }
  return out;
}

// Rounds: every candidate once per round, the order rotated each round, so
// that a slow stretch of a shared machine spreads over candidates instead
// of landing on one of them. A candidate that fails once (out of memory,
// crash, timeout) is not run again.
void RunRounds(const ValidationRequest& r, results::Store* store,
               std::ostream& progress, ValidationResult* v) {
  const std::string db_path = std::filesystem::absolute(store->path()).string();
  std::vector<ValidatedCandidate>& rows = v->candidates;
  // For the ETA: the runs so far (start-up included) and their wall time.
  int64_t runs_done = 0;
  double wall_done_s = 0;
  for (int64_t round = 0; round < r.repeats; ++round) {
    const std::vector<size_t> order = RoundOrder(rows.size(), round);
    for (size_t position = 0; position < order.size(); ++position) {
      const size_t i = order[position];
      ValidatedCandidate& row = rows[i];
      if (!row.error.empty()) continue;
      progress << "tune: validate [" << i + 1 << "/" << rows.size() << "] rank "
               << row.pick.index + 1 << " "
               << search_spaces::ToString(row.estimate.config) << " ("
               << row.pick.reason << ")";
      if (r.repeats > 1) progress << ", run " << round + 1 << "/" << r.repeats;
      progress << ": " << r.steps << " steps ... " << std::flush;
      CandidateRunRequest request;
      request.search_id = v->search_id;
      request.rank = static_cast<int64_t>(row.pick.index) + 1;
      request.world = row.estimate.config.world();
      request.steps = r.steps;
      request.db = db_path;
      request.timeout_s = r.timeout_s;
      request.backend = r.backend;
      request.gpu = r.inputs.cluster.name;
      const CandidateRunResult run = r.run(request);
      row.wall_s += run.wall_s;
      ++runs_done;
      wall_done_s += run.wall_s;
      if (!run.ok) {
        row.error = run.error;
        progress << "failed: " << run.error;
      } else {
        row.runs_s.push_back(run.step_time_median_s);
        progress << Fixed(run.step_time_median_s, 3) << " s/step (predicted "
                 << Fixed(row.estimate.step_time_s, 3) << ")";
        auto runs = store->GetTrainingRuns(row.candidate_id);
        if (runs.ok() && !runs->empty()) row.training_run_id = runs->back().id;
      }
      // Runs left: the rest of this round and the later rounds, without the
      // candidates that failed (they are not run again).
      int64_t left = 0;
      for (size_t p = position + 1; p < order.size(); ++p) {
        left += rows[order[p]].error.empty();
      }
      for (const ValidatedCandidate& c : rows) {
        left += (r.repeats - round - 1) * c.error.empty();
      }
      if (left > 0) {
        progress << ", ETA "
                 << FormatDuration(
                        ValidationEtaSeconds(runs_done, wall_done_s, left));
      }
      progress << "\n";
    }
  }
}

ValidationStats Analyze(const std::vector<ValidatedCandidate>& rows) {
  std::vector<CandidateOutcome> outcomes;
  for (const ValidatedCandidate& r : rows) {
    CandidateOutcome o;
    o.predicted_step_s = r.estimate.step_time_s;
    if (r.ok()) {
      o.measured_step_s = r.measured_s();
      if (r.runs_s.size() >= 2) o.spread_pct = r.measured().spread_pct;
    }
    outcomes.push_back(o);
  }
  return AnalyzeOutcomes(outcomes);
}

// Refits the machine's factors against the base (unfitted) calibration
// from every linked run, and stores them.
StatusOr<std::optional<costmodel::FitResult>> Learn(const ValidationRequest& r,
                                                    results::Store* store) {
  auto base = ChooseBaseCalibration(store, r.inputs.cluster, r.hardware_id);
  if (!base.ok()) return base.status();
  auto fit = FitMachineFactors(*store, r.inputs.cluster, **base, r.hardware_id);
  if (!fit.ok() || !fit->has_value()) return fit;
  results::FittedFactorsRecord f;
  f.hardware_id = r.hardware_id;
  f.base_calibration = (*base)->Name();
  f.compute = (*fit)->factors.compute;
  f.memory = (*fit)->factors.memory;
  f.collective = (*fit)->factors.collective;
  f.runs = (*fit)->runs;
  f.mape_before_pct = (*fit)->mape_before_pct;
  f.mape_after_pct = (*fit)->mape_after_pct;
  auto put = store->PutFittedFactors(f, ToolProvenance());
  if (!put.ok()) return put.status();
  return fit;
}

StatusOr<int64_t> Record(const ValidationRequest& r, results::Store* store,
                         const ValidationResult& v) {
  const ValidationStats& stats = v.stats;
  results::ValidationRecord record;
  record.search_id = v.search_id;
  record.hardware_id = r.hardware_id;
  record.steps = r.steps;
  record.measured = stats.measured;
  record.spearman = stats.spearman;
  record.mape_pct = stats.mape_pct;
  record.top1_is_measured_best = stats.top1_is_measured_best;
  record.top1_loss_pct = stats.top1_loss_pct;
  if (stats.measured_best.has_value()) {
    record.measured_best_candidate_id =
        v.candidates[*stats.measured_best].candidate_id;
  }
  std::vector<results::ValidationRunRecord> runs;
  for (const ValidatedCandidate& c : v.candidates) {
    results::ValidationRunRecord run;
    run.candidate_id = c.candidate_id;
    run.reason = c.pick.reason;
    run.status = c.ok() ? "ok" : "failed";
    run.error = c.error;
    run.predicted_step_s = c.estimate.step_time_s;
    if (c.ok()) run.measured_step_s = c.measured_s();
    run.training_run_id = c.ok() ? c.training_run_id : 0;
    run.wall_s = c.wall_s;
    runs.push_back(std::move(run));
  }
  return store->PutValidation(record, runs, ToolProvenance());
}

}  // namespace

double ValidationEtaSeconds(int64_t runs_done, double wall_done_s,
                            int64_t runs_left) {
  if (runs_done <= 0 || runs_left <= 0) return 0;
  return wall_done_s / static_cast<double>(runs_done) *
         static_cast<double>(runs_left);
}

StatusOr<ValidationResult> RunValidation(const ValidationRequest& request,
                                         results::Store* store,
                                         std::ostream& progress) {
  ValidationResult v;
  MESHTUNE_ASSIGN_OR_RETURN(v, SearchAndSelect(request, store));
  RunRounds(request, store, progress, &v);
  v.stats = Analyze(v.candidates);
  if (request.learn && v.stats.measured > 0) {
    MESHTUNE_ASSIGN_OR_RETURN(v.fit, Learn(request, store));
  }
  MESHTUNE_ASSIGN_OR_RETURN(v.validation_id, Record(request, store, v));
  return v;
}

}  // namespace meshtune::tuner
