// `tune validate`: search, run the top candidates (and a few deliberately
// different ones) for real on this machine, compare predicted with measured
// step times, learn this machine's efficiency factors, and recommend the
// measured best. Selection and statistics: tuner/validate/analysis.h;
// running one candidate: tuner/validate/runner.h; learning:
// tuner/machine/learned_factors.h. With --backend cuda the candidates run on
// this machine's GPUs through the CUDA engine (engine/backends/registry.h) and
// what is learned is filed under the GPU machine (GpuMachineHardwareId).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/backends/registry.h"
#include "engine/train_config.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/local_cluster.h"
#include "tuner/io/text_format.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/machine/learned_factors.h"
#include "tuner/machine/local_gpu.h"
#include "tuner/render/report_json.h"
#include "tuner/search/search_driver.h"
#include "tuner/store/results_db.h"
#include "tuner/validate/analysis.h"
#include "tuner/validate/runner.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kValidateExamples = R"(Examples:
  tune validate --model gpt-tiny --gpus 2 --gpu local --gbs 8 --seq-len 128
  tune validate --model llama-tiny --gpus 4 --gpu local --top 3 --steps 10 --json
  tune validate --backend cuda --model gpt-tiny --gpus 1 --top 2 --extra 1
  tune db export --table validations --csv -      earlier validations
Runs each candidate as 'tune train --from-search ID --rank R' (mpirun for
more than one rank; with --backend cuda one rank per GPU) and records
everything in the results database.)";

// With --backend cuda: checks that this tune has the CUDA engine and this
// machine a GPU, and defaults --gpu to the GPU's preset. Sets *gpu_name and
// *gpu_count to the local devices.
Status PrepareCudaValidation(InputFlags* flags, std::string* gpu_name,
                             int* gpu_count) {
  if (!engine::backends::TrainerBackendBuilt("cuda")) {
    return Status::Unimplemented(
        "tune validate --backend cuda needs the CUDA engine, and this tune "
        "was built without it (CMake found no CUDA toolkit with cuBLASLt and "
        "NCCL)",
        "rebuild where the CUDA toolkit is installed (/usr/local/cuda), or "
        "use --backend cpu");
  }
  *gpu_count = engine::backends::CudaDeviceCount();
  if (*gpu_count == 0) {
    return Status::InvalidArgument(
        "tune validate --backend cuda found no CUDA device on this machine "
        "(cudaGetDeviceCount found none)",
        "run it on a machine with an NVIDIA GPU and driver, or use "
        "--backend cpu");
  }
  *gpu_name = engine::backends::CudaDeviceName();
  if (flags->gpu == kLocalCluster) {
    return Status::InvalidArgument(
        "--gpu local is the CPU engine's preset, not a GPU's",
        "leave out --gpu to use this machine's GPU (" + *gpu_name +
            "), or pass its preset ('tune gpus')");
  }
  if (flags->gpu.empty()) {
    flags->gpu = DetectedGpuPreset();
    if (flags->gpu.empty()) {
      return Status::InvalidArgument(
          "no GPU preset matches this machine's GPU '" + *gpu_name + "'",
          "pass --gpu PRESET with the preset closest to it ('tune gpus')");
    }
  }
  return Status::Ok();
}

std::string Signed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%+.1f", v);
  return buf;
}

nlohmann::json OptionalJson(const std::optional<double>& v) {
  return v.has_value() ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

struct Row {
  SelectedCandidate pick;
  int64_t candidate_id = 0;
  costmodel::Estimate estimate;
  std::vector<double> runs_s;   // each run's median step time, in run order
  std::string error;            // the failed run's one line; "" while ok
  double wall_s = 0;            // all its runs, start-up included
  int64_t training_run_id = 0;  // the latest recorded run

  bool ok() const { return error.empty() && !runs_s.empty(); }
  RepeatedRuns measured() const { return SummarizeRuns(runs_s); }
  double measured_s() const { return measured().median_s; }
};

class ValidateCommand : public Command {
 public:
  explicit ValidateCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "validate",
        "run the top candidates for real on this machine; predicted vs "
        "measured");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/true);
    sub->add_option("--top", top_,
                    "analytical best candidates to run (default 5)")
        ->type_name("K");
    sub->add_option("--extra", extra_,
                    "deliberately different candidates to add: other tp/pp "
                    "split, other recompute, other micro-batch (default 3)")
        ->type_name("E");
    sub->add_option("--steps", steps_,
                    "training steps per candidate; the first 2 are warm-up "
                    "(default 8)")
        ->type_name("S");
    sub->add_option("--repeats", repeats_,
                    "runs per candidate, interleaved across candidates; the "
                    "measured step time is their median (default 3)")
        ->type_name("R");
    sub->add_option("--backend", backend_,
                    "engine that runs the candidates: cpu (default: MPI "
                    "ranks on this machine's cores, --gpu local) or cuda "
                    "(one rank per GPU of this machine)")
        ->type_name("cpu|cuda");
    sub->add_option("--timeout", timeout_,
                    "seconds one candidate may run before it is killed and "
                    "recorded as failed (default 600)")
        ->type_name("SEC");
    sub->add_flag("--no-learn", no_learn_,
                  "do not refit this machine's efficiency factors");
    sub->add_flag("--json", json_, "print the result as JSON on stdout");
    AddDbOption(sub, &flags_.db);
    sub->footer(kValidateExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    auto top = ParsePositiveInt(top_, "--top");
    if (!top.ok()) return top.status();
    auto steps = ParsePositiveInt(steps_, "--steps");
    if (!steps.ok()) return steps.status();
    auto repeats = ParsePositiveInt(repeats_, "--repeats");
    if (!repeats.ok()) return repeats.status();
    repeat_count_ = *repeats;
    auto timeout = ParsePositiveInt(timeout_, "--timeout");
    if (!timeout.ok()) return timeout.status();
    int64_t extra = 0;
    if (extra_ != "0") {
      auto e = ParsePositiveInt(extra_, "--extra");
      if (!e.ok()) return e.status();
      extra = *e;
    }
    if (backend_ != "cpu" && backend_ != "cuda") {
      return Status::InvalidArgument(
          "--backend: unknown backend '" + backend_ + "'",
          "use --backend cpu or --backend cuda");
    }
    const bool cuda = backend_ == "cuda";
    std::string gpu_name;
    int gpu_count = 0;
    if (cuda) {
      MESHTUNE_RETURN_IF_ERROR(
          PrepareCudaValidation(&flags_, &gpu_name, &gpu_count));
    }
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    Inputs in = std::move(inputs).value();
    // The candidates run on meshtune's engine, which launches from C++.
    in.training.python_launches = false;
    if (!cuda && in.cluster.name != kLocalCluster) {
      return Status::InvalidArgument(
          "tune validate runs the candidates on this machine with the CPU "
          "engine, so it needs --gpu local (got --gpu " +
              in.cluster.name + ")",
          "use --gpu local, or --backend cuda to run them on this machine's "
          "GPUs");
    }
    if (cuda && in.training.num_gpus > gpu_count) {
      return Status::InvalidArgument(
          "--gpus " + std::to_string(in.training.num_gpus) +
              " is more than the " + std::to_string(gpu_count) +
              " GPU(s) of this machine",
          "pass --gpus " + std::to_string(gpu_count) + " or fewer");
    }
    if (cuda) train_flags_ = " --backend cuda --gpu " + in.cluster.name;
    // The engine trains dense models without context or expert parallelism.
    if ((!in.space.cp.empty() && in.space.cp != std::vector<int64_t>{1}) ||
        (!in.space.ep.empty() && in.space.ep != std::vector<int64_t>{1})) {
      return Status::InvalidArgument(
          "the training engine does not run context or expert parallelism "
          "yet, so --cp/--ep other than 1 cannot be validated",
          "drop --cp and --ep");
    }
    in.space.cp = {1};
    in.space.ep = {1};

    auto db = OpenSearchDb(flags_, err);
    if (!db.ok()) return db.status();
    if (*db == nullptr) {
      return Status::InvalidArgument(
          "tune validate needs a results database to record the runs in",
          "pass --db PATH");
    }
    results::Store* store = db->get();
    const std::string db_path =
        std::filesystem::absolute(store->path()).string();
    // The CPU engine's runs belong to this CPU; the CUDA engine's to the GPU
    // machine, under the id its profile (if any) has, so that its measured
    // calibration and the factors learned here go together.
    std::string hardware_id = LocalHardwareId();
    if (cuda) {
      auto filed = FileGpuMachine(store, in.cluster, gpu_name, gpu_count);
      if (!filed.ok()) return filed.status();
      hardware_id = *filed;
    }

    auto calibration = ChooseCalibration(store, in.cluster, hardware_id);
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
      c.train_iters = *steps;
      return c.Validate().ok() &&
             (!cuda || engine::backends::CheckTrainerSupported("cuda", c).ok());
    };
    const std::vector<SelectedCandidate> picks =
        SelectCandidates(result.ranked, *top, extra, trainable);
    if (picks.empty()) {
      return Status::InvalidArgument(
          "none of the " + std::to_string(result.feasible) +
              " feasible configurations can be trained by the engine",
          cuda ? "see docs/engine-cuda.md for what the CUDA engine trains "
                 "(one GPU per rank: dp only)"
               : "see 'tune train --help' for what the engine supports");
    }
    size_t depth = 0;
    for (const SelectedCandidate& p : picks)
      depth = std::max(depth, p.index + 1);
    auto search_id =
        RecordSearch(store, flags_, in, result, static_cast<int64_t>(depth));
    if (!search_id.ok()) return search_id.status();
    auto stored = store->GetCandidates(*search_id);
    if (!stored.ok()) return stored.status();

    std::vector<Row> rows;
    for (size_t i = 0; i < picks.size(); ++i) {
      Row row;
      row.pick = picks[i];
      row.estimate = result.ranked[picks[i].index];
      for (const results::CandidateRecord& c : *stored) {
        if (c.rank == static_cast<int64_t>(picks[i].index) + 1) {
          row.candidate_id = c.id;
        }
      }
      rows.push_back(std::move(row));
    }
    // Rounds: every candidate once per round, the order rotated each round,
    // so that a slow stretch of a shared machine spreads over candidates
    // instead of landing on one of them. A candidate that fails once (out
    // of memory, crash, timeout) is not run again.
    for (int64_t round = 0; round < *repeats; ++round) {
      for (size_t i : RoundOrder(rows.size(), round)) {
        Row& row = rows[i];
        if (!row.error.empty()) continue;
        err << "tune: validate [" << i + 1 << "/" << rows.size() << "] rank "
            << row.pick.index + 1 << " "
            << search_spaces::ToString(row.estimate.config) << " ("
            << row.pick.reason << ")";
        if (*repeats > 1) err << ", run " << round + 1 << "/" << *repeats;
        err << ": " << *steps << " steps ... " << std::flush;
        CandidateRunRequest request;
        request.search_id = *search_id;
        request.rank = static_cast<int64_t>(row.pick.index) + 1;
        request.world = row.estimate.config.world();
        request.steps = *steps;
        request.db = db_path;
        request.timeout_s = static_cast<double>(*timeout);
        request.backend = backend_;
        request.gpu = in.cluster.name;
        const CandidateRunResult run = RunCandidate(request);
        row.wall_s += run.wall_s;
        if (!run.ok) {
          row.error = run.error;
          err << "failed: " << run.error << "\n";
          continue;
        }
        row.runs_s.push_back(run.step_time_median_s);
        err << Fixed(run.step_time_median_s, 3) << " s/step (predicted "
            << Fixed(row.estimate.step_time_s, 3) << ")\n";
        auto runs = store->GetTrainingRuns(row.candidate_id);
        if (runs.ok() && !runs->empty()) {
          row.training_run_id = runs->back().id;
        }
      }
    }

    std::vector<CandidateOutcome> outcomes;
    for (const Row& r : rows) {
      CandidateOutcome o;
      o.predicted_step_s = r.estimate.step_time_s;
      if (r.ok()) {
        o.measured_step_s = r.measured_s();
        if (r.runs_s.size() >= 2) o.spread_pct = r.measured().spread_pct;
      }
      outcomes.push_back(o);
    }
    const ValidationStats stats = AnalyzeOutcomes(outcomes);

    // Learning: refit against the base calibration (the unfitted one).
    std::optional<costmodel::FitResult> fit;
    if (!no_learn_ && stats.measured > 0) {
      auto base = ChooseBaseCalibration(store, in.cluster, hardware_id);
      if (!base.ok()) return base.status();
      auto fitted = FitMachineFactors(*store, in.cluster, **base, hardware_id);
      if (!fitted.ok()) return fitted.status();
      fit = *fitted;
      if (fit.has_value()) {
        results::FittedFactorsRecord f;
        f.hardware_id = hardware_id;
        f.base_calibration = (*base)->Name();
        f.compute = fit->factors.compute;
        f.memory = fit->factors.memory;
        f.collective = fit->factors.collective;
        f.runs = fit->runs;
        f.mape_before_pct = fit->mape_before_pct;
        f.mape_after_pct = fit->mape_after_pct;
        auto put = store->PutFittedFactors(f, ToolProvenance());
        if (!put.ok()) return put.status();
      }
    }

    results::ValidationRecord v;
    v.search_id = *search_id;
    v.hardware_id = hardware_id;
    v.steps = *steps;
    v.measured = stats.measured;
    v.spearman = stats.spearman;
    v.mape_pct = stats.mape_pct;
    v.top1_is_measured_best = stats.top1_is_measured_best;
    v.top1_loss_pct = stats.top1_loss_pct;
    if (stats.measured_best.has_value()) {
      v.measured_best_candidate_id = rows[*stats.measured_best].candidate_id;
    }
    std::vector<results::ValidationRunRecord> records;
    for (const Row& r : rows) {
      results::ValidationRunRecord rec;
      rec.candidate_id = r.candidate_id;
      rec.reason = r.pick.reason;
      rec.status = r.ok() ? "ok" : "failed";
      rec.error = r.error;
      rec.predicted_step_s = r.estimate.step_time_s;
      if (r.ok()) rec.measured_step_s = r.measured_s();
      rec.training_run_id = r.ok() ? r.training_run_id : 0;
      rec.wall_s = r.wall_s;
      records.push_back(std::move(rec));
    }
    auto validation_id = store->PutValidation(v, records, ToolProvenance());
    if (!validation_id.ok()) return validation_id.status();

    if (json_) {
      PrintJson(out, rows, stats, fit, *search_id, *validation_id, in,
                calibration.value()->Name());
    } else {
      PrintTable(out, rows, stats, fit, *search_id, *validation_id,
                 calibration.value()->Name());
    }
    if (stats.measured == 0) {
      return Status::IoError("every candidate failed; see the errors above",
                             "run one of them with 'tune train --from-search " +
                                 std::to_string(*search_id) + " --rank R" +
                                 train_flags_ + "' to see its output");
    }
    return Status::Ok();
  }

 private:
  void PrintTable(std::ostream& out, const std::vector<Row>& rows,
                  const ValidationStats& stats,
                  const std::optional<costmodel::FitResult>& fit,
                  int64_t search_id, int64_t validation_id,
                  const std::string& calibration) {
    char line[512];
    out << "validation " << validation_id << " of search " << search_id
        << " (calibration " << calibration << ", " << steps_
        << " steps per run, first 2 are warm-up; " << repeat_count_
        << (repeat_count_ == 1 ? " run" : " interleaved runs")
        << " per candidate, their median)\n";
    std::snprintf(line, sizeof(line), "%4s  %-44s %-18s %9s %9s %8s %7s  %s\n",
                  "rank", "config", "why", "pred_s", "meas_s", "spread%",
                  "err%", "status");
    out << line;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const std::string meas = r.ok() ? Fixed(r.measured_s(), 3) : "-";
      const std::string spread = r.ok() && r.runs_s.size() >= 2
                                     ? Fixed(r.measured().spread_pct, 1)
                                     : "-";
      const std::string errp =
          r.ok() ? Signed(ErrorPercent(r.estimate.step_time_s, r.measured_s()))
                 : "-";
      std::string status = r.ok() ? "ok" : "failed: " + r.error;
      if (stats.measured_best.has_value() && *stats.measured_best == i) {
        status += " (measured best)";
      }
      std::snprintf(
          line, sizeof(line), "%4zu  %-44s %-18s %9s %9s %8s %7s  %s\n",
          r.pick.index + 1, search_spaces::ToString(r.estimate.config).c_str(),
          r.pick.reason.c_str(), Fixed(r.estimate.step_time_s, 3).c_str(),
          meas.c_str(), spread.c_str(), errp.c_str(), status.c_str());
      out << line;
    }
    out << "measured " << stats.measured << " of " << rows.size();
    if (stats.mape_pct.has_value()) {
      out << "; mean absolute error " << Fixed(*stats.mape_pct, 1) << "%";
    }
    if (stats.spearman.has_value()) {
      out << "; Spearman rank correlation " << Fixed(*stats.spearman, 2);
    }
    out << "\n";
    if (stats.noise_pct.has_value()) {
      out << "run-to-run spread " << Fixed(*stats.noise_pct, 1)
          << "% (median over candidates); of the " << stats.separated_pairs
          << " candidate pairs predicted further apart than that, "
          << stats.separated_pairs_in_order
          << " were measured in the predicted order\n";
    }
    if (stats.top1_loss_pct.has_value()) {
      if (stats.top1_is_measured_best) {
        out << "the analytical top-1 is the measured best\n";
      } else {
        out << "the analytical top-1 is " << Fixed(*stats.top1_loss_pct, 1)
            << "% slower than the measured best\n";
      }
    } else {
      out << "the analytical top-1 failed to run\n";
    }
    if (stats.measured_best.has_value()) {
      const Row& best = rows[*stats.measured_best];
      out << "recommended (measured best): rank " << best.pick.index + 1 << " "
          << search_spaces::ToString(best.estimate.config) << ", "
          << Fixed(best.measured_s(), 3) << " s/step\n"
          << "  train it: tune train --from-search " << search_id << " --rank "
          << best.pick.index + 1 << train_flags_ << "\n";
    }
    if (fit.has_value()) {
      out << "learned for this machine from " << fit->runs
          << " measured runs: compute x" << Fixed(fit->factors.compute, 2)
          << ", memory x" << Fixed(fit->factors.memory, 2) << ", collective x"
          << Fixed(fit->factors.collective, 2) << " (their error "
          << Fixed(fit->mape_before_pct, 1) << "% -> "
          << Fixed(fit->mape_after_pct, 1) << "%); later searches use them\n";
    }
  }

  void PrintJson(std::ostream& out, const std::vector<Row>& rows,
                 const ValidationStats& stats,
                 const std::optional<costmodel::FitResult>& fit,
                 int64_t search_id, int64_t validation_id, const Inputs& in,
                 const std::string& calibration) {
    nlohmann::json j;
    j["search_id"] = search_id;
    j["validation_id"] = validation_id;
    j["calibration"] = calibration;
    j["candidates"] = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json c;
      c["rank"] = r.pick.index + 1;
      c["reason"] = r.pick.reason;
      c["config"] =
          ConfigToJson(r.estimate.config, in.training.global_batch_size,
                       search_spaces::ToString(in.training.precision));
      c["predicted_step_s"] = r.estimate.step_time_s;
      c["measured_step_s"] =
          r.ok() ? nlohmann::json(r.measured_s()) : nlohmann::json(nullptr);
      c["measured_runs_s"] = r.runs_s;
      c["spread_pct"] = r.ok() && r.runs_s.size() >= 2
                            ? nlohmann::json(r.measured().spread_pct)
                            : nlohmann::json(nullptr);
      c["error_pct"] = r.ok() ? nlohmann::json(ErrorPercent(
                                    r.estimate.step_time_s, r.measured_s()))
                              : nlohmann::json(nullptr);
      c["status"] = r.ok() ? "ok" : "failed";
      c["error"] = r.ok() ? nlohmann::json(nullptr) : nlohmann::json(r.error);
      j["candidates"].push_back(c);
    }
    j["repeats"] = repeat_count_;
    j["spearman"] = OptionalJson(stats.spearman);
    j["noise_pct"] = OptionalJson(stats.noise_pct);
    j["separated_pairs"] = stats.separated_pairs;
    j["separated_pairs_in_order"] = stats.separated_pairs_in_order;
    j["mape_pct"] = OptionalJson(stats.mape_pct);
    j["top1_is_measured_best"] = stats.top1_is_measured_best;
    j["top1_loss_pct"] = OptionalJson(stats.top1_loss_pct);
    j["recommended_rank"] =
        stats.measured_best.has_value()
            ? nlohmann::json(rows[*stats.measured_best].pick.index + 1)
            : nlohmann::json(nullptr);
    if (fit.has_value()) {
      j["learned"] = {{"runs", fit->runs},
                      {"compute", fit->factors.compute},
                      {"memory", fit->factors.memory},
                      {"collective", fit->factors.collective},
                      {"mape_before_pct", fit->mape_before_pct},
                      {"mape_after_pct", fit->mape_after_pct}};
    } else {
      j["learned"] = nullptr;
    }
    out << j.dump(2) << "\n";
  }

  InputFlags flags_;
  std::string top_ = "5";
  std::string extra_ = "3";
  std::string steps_ = "8";
  std::string repeats_ = "3";
  int64_t repeat_count_ = 3;  // repeats_ once parsed
  std::string timeout_ = "600";
  std::string backend_ = "cpu";
  // What `tune train --from-search` needs besides the rank to run a
  // candidate the way it ran here ("" for the CPU engine).
  std::string train_flags_;
  bool no_learn_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> AddValidateCommand(CLI::App* app) {
  return std::make_unique<ValidateCommand>(app);
}

}  // namespace meshtune::tuner
