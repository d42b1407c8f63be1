// `tune regress` (tuner/commands/regress.h, docs/regress.md): runs the
// built-in benchmarks (tuner/regress/benchmarks.h), stores results and
// named baselines in the results database (results/store_regress.cc),
// moves baselines in and out as files (tuner/regress/baseline_file.h) and
// judges a result against a baseline (tuner/regress/verdict.h).
#include "tuner/commands/regress.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "results/store.h"
#include "tuner/regress/baseline_file.h"
#include "tuner/regress/benchmarks.h"
#include "tuner/regress/text.h"
#include "tuner/regress/verdict.h"
#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

using regress_text::Describe;
using regress_text::Fixed;
using regress_text::PrintTable;
using regress_text::Throughput;

constexpr const char* kRegressExamples = R"(Examples:
  tune regress list
  tune regress run --benchmark cpu-gpt-tiny-v1
  tune regress run --benchmark cuda-gpt-tiny-v1 --backend cuda
  tune regress baseline set --name main --benchmark cpu-gpt-tiny-v1
  tune regress check --benchmark cpu-gpt-tiny-v1 --baseline main --threshold 10
  tune regress check --benchmark cpu-gpt-tiny-v1 --baseline ci.json --allow-other-hardware
  tune regress baseline export --name main --benchmark cpu-gpt-tiny-v1 --file ci.json
Verdict: a regression when the median throughput (tokens per CPU second by
default; per wall second for cuda- benchmarks) is below the baseline's by
more than --threshold percent AND the drop is larger than the two runs'
spreads (median absolute deviations of the repeats) together; or when any step's loss differs from the
baseline's by more than --loss-rtol (relative). Exit 0 pass, 1
regression, 2 input error. See docs/regress.md.)";

StatusOr<results::HardwareFingerprint> StoredHardware(
    const results::Store& store, const std::string& id) {
  StatusOr<std::vector<results::HardwareFingerprint>> all =
      store.ListHardware();
  if (!all.ok()) return all.status();
  for (const results::HardwareFingerprint& hw : all.value()) {
    if (hw.id == id) return hw;
  }
  return Status::Internal(store.path() + ": hardware row '" + id +
                          "' of a regress baseline is missing");
}

class RegressCommand : public Command {
 public:
  explicit RegressCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "regress",
        "throughput and numerics regression gate against a stored baseline");
    sub->require_subcommand(1);
    sub->footer(kRegressExamples);

    list_ = sub->add_subcommand("list", "list the built-in benchmarks");

    run_ = sub->add_subcommand(
        "run", "run a benchmark on this machine and record the result");
    run_->add_option("--benchmark", benchmark_,
                     "benchmark name (tune regress "
                     "list)")
        ->required();
    run_->add_option("--repeats", repeats_,
                     "timed repeats (default: the benchmark's, 5)");
    run_->add_option("--backend", backend_,
                     "engine: cpu or cuda; must be the benchmark's (cpu- or "
                     "cuda- name), which is the default");
    AddDbOption(run_, &db_);
    run_->footer(
        "Examples:\n  tune regress run --benchmark cpu-gpt-tiny-v1\n"
        "  tune regress run --benchmark cuda-gpt-tiny-v1 --backend cuda\n"
        "  tune regress run --benchmark cpu-llama-tiny-v1 --repeats 9\n"
        "Records per-repeat tokens/s (wall and CPU time) and every step's "
        "loss with the\ngit revision; MESHTUNE_PLANTED_SLOWDOWN=K (a test "
        "hook) makes linear layers slower.");

    results_ = sub->add_subcommand("results", "list stored benchmark results");
    results_->add_option("--benchmark", benchmark_, "only this benchmark");
    AddDbOption(results_, &db_);

    check_ = sub->add_subcommand(
        "check",
        "judge the newest result against a baseline (exit 1 on a "
        "regression)");
    check_->add_option("--benchmark", benchmark_, "benchmark name")->required();
    check_
        ->add_option("--baseline", baseline_,
                     "baseline name (tune regress baseline list) or a "
                     "baseline file (tune regress baseline export)")
        ->required();
    check_->add_option("--threshold", threshold_pct_,
                       "largest tolerated drop of the median throughput, in "
                       "percent (default 10)");
    check_->add_option("--loss-rtol", loss_rtol_,
                       "largest tolerated relative loss difference at any "
                       "step (default 1e-5; 5e-3 for cuda- benchmarks)");
    check_->add_option("--metric", metric_,
                       "throughput the gate judges: cpu (tokens per CPU "
                       "second, default) or wall (default for cuda- "
                       "benchmarks)");
    check_->add_flag("--allow-other-hardware", allow_other_hardware_,
                     "compare with a baseline measured on another machine");
    AddDbOption(check_, &db_);
    check_->footer(kRegressExamples);

    CLI::App* baseline =
        sub->add_subcommand("baseline", "set, list, export, import baselines");
    baseline->require_subcommand(1);
    set_ = baseline->add_subcommand(
        "set", "name a result as a baseline (setting a name again promotes)");
    set_->add_option("--name", name_, "baseline name, e.g. main")->required();
    set_->add_option("--benchmark", benchmark_, "benchmark name")->required();
    set_->add_option("--result", result_id_,
                     "result id (tune regress results); default the newest "
                     "on this machine");
    AddDbOption(set_, &db_);
    blist_ = baseline->add_subcommand("list", "list baselines");
    blist_->add_option("--benchmark", benchmark_, "only this benchmark");
    AddDbOption(blist_, &db_);
    export_ = baseline->add_subcommand("export", "write a baseline file");
    export_->add_option("--name", name_, "baseline name")->required();
    export_->add_option("--benchmark", benchmark_,
                        "benchmark (needed when the name has several)");
    export_->add_option("--file", file_, "JSON file to write")->required();
    AddDbOption(export_, &db_);
    import_ = baseline->add_subcommand("import", "store a baseline file");
    import_->add_option("--file", file_, "JSON file written by export")
        ->required();
    import_->add_option("--name", name_, "store under this name instead");
    AddDbOption(import_, &db_);
    baseline->footer(
        "Examples:\n"
        "  tune regress baseline set --name main --benchmark cpu-gpt-tiny-v1\n"
        "  tune regress baseline set --name main --benchmark cpu-gpt-tiny-v1 "
        "--result 12\n"
        "  tune regress baseline list\n"
        "  tune regress baseline export --name main --file main.json\n"
        "  tune regress baseline import --file main.json --name ci");
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    if (list_->parsed()) return List(out);
    if (run_->parsed()) return RunBenchmark(out, err);
    if (results_->parsed()) return Results(out);
    if (check_->parsed()) return Check(out);
    if (set_->parsed()) return SetBaseline(out);
    if (blist_->parsed()) return ListBaselines(out);
    if (export_->parsed()) return Export(out);
    return Import(out);
  }

 private:
  StatusOr<std::unique_ptr<results::Store>> OpenDb(bool read_only) const {
    results::OpenOptions options;
    options.read_only = read_only;
    return results::Store::Open(ResolveDbPath(db_), options);
  }

  Status List(std::ostream& out) const {
    std::vector<std::vector<std::string>> rows = {
        {"benchmark", "repeats", "steps", "tokens/step", "definition"}};
    for (const RegressBenchmark& b : RegressBenchmarks()) {
      rows.push_back({b.name, std::to_string(b.default_repeats),
                      std::to_string(b.warmup_steps) + "+" +
                          std::to_string(b.default_repeats) + "x" +
                          std::to_string(b.steps_per_repeat),
                      std::to_string(b.tokens_per_step()), b.Spec()});
    }
    PrintTable(out, rows);
    return Status::Ok();
  }

  Status RunBenchmark(std::ostream& out, std::ostream& err) const {
    StatusOr<const RegressBenchmark*> b = FindRegressBenchmark(benchmark_);
    if (!b.ok()) return b.status();
    if (!backend_.empty() && backend_ != "cpu" && backend_ != "cuda") {
      return Status::InvalidArgument(
          "--backend: unknown backend '" + backend_ + "'",
          "use --backend cpu or --backend cuda");
    }
    if (!backend_.empty() && backend_ != b.value()->backend) {
      return Status::InvalidArgument(
          b.value()->name + " is a benchmark of the " + b.value()->backend +
              " engine, not of " + backend_,
          "pick a " + backend_ +
              "- benchmark ('tune regress list'), or leave "
              "out --backend");
    }
    MESHTUNE_RETURN_IF_ERROR(
        CheckRegressBackend(*b.value(), "tune regress run"));
    const int64_t repeats =
        run_->count("--repeats") > 0 ? repeats_ : b.value()->default_repeats;
    if (repeats < 1 || repeats > 1000) {
      return Status::InvalidArgument(
          "--repeats " + std::to_string(repeats) + " is out of range",
          "pass --repeats N with N from 1 to 1000 (default " +
              std::to_string(b.value()->default_repeats) + ")");
    }
    StatusOr<std::unique_ptr<results::Store>> store = OpenDb(false);
    if (!store.ok()) return store.status();
    const results::HardwareFingerprint hw = RegressHardware(*b.value());
    err << "tune regress run: " << b.value()->name << " on " << Describe(hw)
        << ", " << repeats << " repeats of " << b.value()->steps_per_repeat
        << " steps after " << b.value()->warmup_steps << " warm-up steps\n";
    const std::string planted = PlantedSlowdownSetting();
    if (!planted.empty()) {
      err << "tune regress run: note: MESHTUNE_PLANTED_SLOWDOWN=" << planted
          << " is set (test hook: slower linear layers)\n";
    }
    StatusOr<results::RegressResult> r =
        RunRegressBenchmark(*b.value(), repeats, err);
    if (!r.ok()) return r.status();
    r->hardware_id = hw.id;
    const results::Provenance prov = ToolProvenance();
    MESHTUNE_RETURN_IF_ERROR(store.value()->PutHardware(hw, prov));
    StatusOr<int64_t> id = store.value()->PutRegressResult(r.value(), prov);
    if (!id.ok()) return id.status();
    out << "result " << id.value() << ": " << b.value()->name << " on " << hw.id
        << " at git " << prov.git_revision << ": "
        << Throughput(r->cpu_tokens_per_s_median, r->cpu_tokens_per_s_spread)
        << " tokens per CPU second, "
        << Throughput(r->tokens_per_s_median, r->tokens_per_s_spread)
        << " tokens per wall second, final loss " << Fixed(r->losses.back(), 6)
        << "\n";
    err << "tune: recorded regress result " << id.value() << " in "
        << store.value()->path() << "\n";
    return Status::Ok();
  }

  Status Results(std::ostream& out) const {
    if (!benchmark_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(FindRegressBenchmark(benchmark_).status());
    }
    StatusOr<std::unique_ptr<results::Store>> store = OpenDb(true);
    if (!store.ok()) return store.status();
    StatusOr<std::vector<results::RegressResult>> all =
        store.value()->GetRegressResults(benchmark_);
    if (!all.ok()) return all.status();
    std::vector<std::vector<std::string>> rows = {
        {"id", "time (UTC)", "benchmark", "hardware", "git", "repeats",
         "tokens/CPU s", "tokens/wall s", "final loss"}};
    for (const results::RegressResult& r : all.value()) {
      rows.push_back(
          {std::to_string(r.id), UtcMinuteText(r.provenance.created_unix_s),
           r.benchmark, r.hardware_id, r.provenance.git_revision,
           std::to_string(r.tokens_per_s.size()),
           Throughput(r.cpu_tokens_per_s_median, r.cpu_tokens_per_s_spread),
           Throughput(r.tokens_per_s_median, r.tokens_per_s_spread),
           Fixed(r.losses.back(), 6)});
    }
    PrintTable(out, rows);
    return Status::Ok();
  }

  // The baseline REF names: a file when one exists at that path, else a
  // stored name.
  StatusOr<BaselineFile> LoadBaseline(const results::Store& store,
                                      const RegressBenchmark& b) const {
    struct stat info;
    if (stat(baseline_.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
      StatusOr<BaselineFile> file = ReadBaselineFile(baseline_);
      if (!file.ok()) return file.status();
      if (file->baseline.result.benchmark != b.name) {
        return Status::InvalidArgument(
            baseline_ + ": a baseline of " + file->baseline.result.benchmark +
                ", not of " + b.name,
            "pass --benchmark " + file->baseline.result.benchmark +
                " or another baseline file");
      }
      return file;
    }
    StatusOr<results::RegressBaseline> stored =
        store.GetRegressBaseline(baseline_, b.name);
    if (!stored.ok()) {
      if (stored.status().code() != Status::Code::kNotFound) {
        return stored.status();
      }
      const bool json_name =
          baseline_.size() > 5 &&
          baseline_.compare(baseline_.size() - 5, 5, ".json") == 0;
      if (baseline_.find('/') != std::string::npos || json_name) {
        return Status::NotFound(
            "no baseline file '" + baseline_ + "'",
            "pass a file written by 'tune regress baseline export', or a "
            "baseline name ('tune regress baseline list')");
      }
      return Status::NotFound(
          "no baseline '" + baseline_ + "' for " + b.name + " in " +
              store.path(),
          "set one with 'tune regress baseline set --name " + baseline_ +
              " --benchmark " + b.name +
              "' after 'tune regress run', or import a file with 'tune "
              "regress baseline import --file F' ('tune regress baseline "
              "list' shows the stored ones)");
    }
    BaselineFile file;
    file.baseline = stored.value();
    StatusOr<results::HardwareFingerprint> hw =
        StoredHardware(store, file.baseline.result.hardware_id);
    if (!hw.ok()) return hw.status();
    file.hardware = hw.value();
    return file;
  }

  // --threshold, --loss-rtol and --metric of `check`.
  Status CheckGateFlags() const {
    if (!(threshold_pct_ >= 0 && threshold_pct_ < 100)) {
      return Status::InvalidArgument(
          "--threshold " + Fixed(threshold_pct_, 2) + " is out of range",
          "pass a drop in percent from 0 to 100, e.g. --threshold 10");
    }
    if (!(loss_rtol_ >= 0 && loss_rtol_ < 1)) {
      return Status::InvalidArgument(
          "--loss-rtol " + std::to_string(loss_rtol_) + " is out of range",
          "pass a relative tolerance from 0 to 1, e.g. --loss-rtol 1e-5");
    }
    if (!metric_.empty() && metric_ != "cpu" && metric_ != "wall") {
      return Status::InvalidArgument(
          "--metric '" + metric_ + "' is not cpu or wall",
          "pass --metric cpu (default) or wall");
    }
    return Status::Ok();
  }

  // This machine's newest result of `b` under its current definition.
  static StatusOr<results::RegressResult> CurrentResult(
      const results::Store& store, const RegressBenchmark& b,
      const results::HardwareFingerprint& hw) {
    StatusOr<std::vector<results::RegressResult>> mine =
        store.GetRegressResults(b.name, hw.id);
    if (!mine.ok()) return mine.status();
    const results::RegressResult* current = nullptr;
    for (const results::RegressResult& r : mine.value()) {
      if (r.spec == b.Spec()) current = &r;
    }
    if (current == nullptr) {
      return Status::NotFound(
          "no " + b.name + " result for this machine (" + hw.id + ") in " +
              store.path(),
          "run 'tune regress run --benchmark " + b.name + "' first");
    }
    return *current;
  }

  // The failed gate as an error (exit 1: a runtime failure, not an input
  // error) naming what regressed.
  Status GateFailure(const RegressVerdict& v, const RegressBenchmark& b,
                     const std::string& baseline, const std::string& metric,
                     double loss_rtol) const {
    std::string what;
    if (v.throughput_regressed) {
      what = (metric == "wall" ? "tokens per wall second "
                               : "tokens per CPU second ") +
             Fixed(v.change_pct, 1) + "% (threshold -" +
             Fixed(threshold_pct_, 1) + "%)";
    }
    if (v.numerics_changed) {
      what += std::string(what.empty() ? "" : "; ") + "loss at step " +
              std::to_string(v.worst_step) + " differs by " +
              std::to_string(v.max_loss_rel_diff) + " (relative; tolerance " +
              std::to_string(loss_rtol) + ")";
    }
    return Status::IoError(
        b.name + " regressed against baseline '" + baseline + "': " + what,
        "if the change is intended, promote a new baseline: tune regress "
        "baseline set --name " +
            baseline + " --benchmark " + b.name);
  }

  Status Check(std::ostream& out) const {
    StatusOr<const RegressBenchmark*> found = FindRegressBenchmark(benchmark_);
    if (!found.ok()) return found.status();
    const RegressBenchmark& b = *found.value();
    MESHTUNE_RETURN_IF_ERROR(CheckGateFlags());
    // GPU throughput is wall time (the host thread mostly waits for the
    // device), and GPU losses repeat only to kCudaLossRtol.
    const bool cuda = b.backend == "cuda";
    const std::string metric = !metric_.empty() ? metric_
                               : cuda           ? "wall"
                                                : "cpu";
    const double loss_rtol =
        check_->count("--loss-rtol") > 0 || !cuda ? loss_rtol_ : kCudaLossRtol;
    MESHTUNE_RETURN_IF_ERROR(CheckRegressBackend(b, "tune regress check"));
    StatusOr<std::unique_ptr<results::Store>> store = OpenDb(true);
    if (!store.ok()) return store.status();
    StatusOr<BaselineFile> base = LoadBaseline(*store.value(), b);
    if (!base.ok()) return base.status();
    const results::RegressBaseline& baseline = base->baseline;
    if (baseline.result.spec != b.Spec()) {
      return Status::InvalidArgument("baseline '" + baseline.name +
                                         "' was measured with another "
                                         "definition of " +
                                         b.name + " ('" + baseline.result.spec +
                                         "')",
                                     "set a new baseline with this tune");
    }
    const results::HardwareFingerprint hw = RegressHardware(b);
    if (baseline.result.hardware_id != hw.id && !allow_other_hardware_) {
      return Status::InvalidArgument(
          "baseline '" + baseline.name + "' of " + b.name +
              " was measured on " + Describe(base->hardware) +
              ", this machine is " + Describe(hw),
          "run and set a baseline on this machine (tune regress baseline "
          "set --name " +
              baseline.name + " --benchmark " + b.name +
              "), or pass --allow-other-hardware to compare anyway");
    }
    StatusOr<results::RegressResult> current =
        CurrentResult(*store.value(), b, hw);
    if (!current.ok()) return current.status();
    const RegressVerdict v = CompareRegress(
        baseline.result, *current, threshold_pct_, loss_rtol,
        metric == "wall" ? RegressMetric::kWall : RegressMetric::kCpu);
    out << "tune regress check: " << b.name << "\n"
        << "  current:  result " << current->id << ", git "
        << current->provenance.git_revision << ", "
        << UtcMinuteText(current->provenance.created_unix_s) << " UTC, "
        << Describe(hw) << ", " << current->tokens_per_s.size() << " repeats\n"
        << "  baseline: '" << baseline.name << "'"
        << (baseline.source_result_id > 0
                ? " (result " + std::to_string(baseline.source_result_id) + ")"
                : std::string(" (imported)"))
        << ", git " << baseline.result.provenance.git_revision << ", "
        << UtcMinuteText(baseline.result.provenance.created_unix_s) << " UTC, "
        << Describe(base->hardware) << ", "
        << baseline.result.tokens_per_s.size() << " repeats"
        << (baseline.result.hardware_id != hw.id ? " [other hardware]" : "")
        << "\n"
        << FormatVerdictTable(v);
    if (v.passed()) return Status::Ok();
    return GateFailure(v, b, baseline.name, metric, loss_rtol);
  }

  Status SetBaseline(std::ostream& out) const {
    StatusOr<const RegressBenchmark*> b = FindRegressBenchmark(benchmark_);
    if (!b.ok()) return b.status();
    StatusOr<std::unique_ptr<results::Store>> store = OpenDb(false);
    if (!store.ok()) return store.status();
    results::RegressResult r;
    if (result_id_ > 0) {
      StatusOr<results::RegressResult> one =
          store.value()->GetRegressResult(result_id_);
      if (!one.ok()) return one.status();
      if (one->benchmark != b.value()->name) {
        return Status::InvalidArgument(
            "result " + std::to_string(result_id_) + " is a " + one->benchmark +
                " result, not " + b.value()->name,
            "pass --benchmark " + one->benchmark + " or another --result");
      }
      r = one.value();
    } else {
      const std::string hw = RegressHardware(*b.value()).id;
      StatusOr<std::vector<results::RegressResult>> mine =
          store.value()->GetRegressResults(b.value()->name, hw);
      if (!mine.ok()) return mine.status();
      if (mine->empty()) {
        return Status::NotFound(
            "no " + b.value()->name + " result for this machine (" + hw +
                ") in " + store.value()->path(),
            "run 'tune regress run --benchmark " + b.value()->name +
                "' first, or pass --result ID");
      }
      r = mine->back();
    }
    if (r.spec != b.value()->Spec()) {
      return Status::InvalidArgument("result " + std::to_string(r.id) +
                                         " was measured with another "
                                         "definition of " +
                                         b.value()->name,
                                     "run the benchmark again with this tune");
    }
    StatusOr<results::RegressBaseline> old =
        store.value()->GetRegressBaseline(name_, b.value()->name);
    results::RegressBaseline baseline;
    baseline.name = name_;
    baseline.source_result_id = r.id;
    baseline.result = r;
    MESHTUNE_RETURN_IF_ERROR(
        store.value()->PutRegressBaseline(baseline, ToolProvenance()));
    out << "baseline '" << name_ << "' of " << b.value()->name
        << " set to result " << r.id << " (git " << r.provenance.git_revision
        << ", "
        << Throughput(r.cpu_tokens_per_s_median, r.cpu_tokens_per_s_spread)
        << " tokens per CPU second)";
    if (old.ok()) {
      out << "; was "
          << (old->source_result_id > 0
                  ? "result " + std::to_string(old->source_result_id)
                  : std::string("an imported baseline"));
    }
    out << "\n";
    return Status::Ok();
  }

  Status ListBaselines(std::ostream& out) const {
    if (!benchmark_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(FindRegressBenchmark(benchmark_).status());
    }
    StatusOr<std::unique_ptr<results::Store>> store = OpenDb(true);
    if (!store.ok()) return store.status();
    StatusOr<std::vector<results::RegressBaseline>> all =
        store.value()->ListRegressBaselines(benchmark_);
    if (!all.ok()) return all.status();
    std::vector<std::vector<std::string>> rows = {
        {"name", "benchmark", "hardware", "result", "git", "tokens/CPU s",
         "tokens/wall s", "set (UTC)"}};
    for (const results::RegressBaseline& b : all.value()) {
      const results::RegressResult& r = b.result;
      rows.push_back(
          {b.name, r.benchmark, r.hardware_id,
           b.source_result_id > 0 ? std::to_string(b.source_result_id)
                                  : "imported",
           r.provenance.git_revision,
           Throughput(r.cpu_tokens_per_s_median, r.cpu_tokens_per_s_spread),
           Throughput(r.tokens_per_s_median, r.tokens_per_s_spread),
           UtcMinuteText(b.provenance.created_unix_s)});
    }
    PrintTable(out, rows);
    return Status::Ok();
  }

  Status Export(std::ostream& out) const {
    if (!benchmark_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(FindRegressBenchmark(benchmark_).status());
    }
    StatusOr<std::unique_ptr<results::Store>> store = OpenDb(true);
    if (!store.ok()) return store.status();
    StatusOr<std::vector<results::RegressBaseline>> all =
        store.value()->ListRegressBaselines(benchmark_);
    if (!all.ok()) return all.status();
    std::vector<results::RegressBaseline> named;
    for (const results::RegressBaseline& b : all.value()) {
      if (b.name == name_) named.push_back(b);
    }
    if (named.empty()) {
      return Status::NotFound(
          "no baseline '" + name_ + "'" +
              (benchmark_.empty() ? "" : " for " + benchmark_) + " in " +
              store.value()->path(),
          "'tune regress baseline list' shows the stored baselines");
    }
    if (named.size() > 1) {
      return Status::InvalidArgument(
          "baseline '" + name_ + "' exists for " +
              std::to_string(named.size()) + " benchmarks",
          "pass --benchmark, e.g. --benchmark " + named[0].result.benchmark);
    }
    BaselineFile file;
    file.baseline = named[0];
    StatusOr<results::HardwareFingerprint> hw =
        StoredHardware(*store.value(), file.baseline.result.hardware_id);
    if (!hw.ok()) return hw.status();
    file.hardware = hw.value();
    MESHTUNE_RETURN_IF_ERROR(WriteBaselineFile(file_, file));
    out << "wrote baseline '" << name_ << "' of "
        << file.baseline.result.benchmark << " to " << file_ << "\n";
    return Status::Ok();
  }

  Status Import(std::ostream& out) const {
    StatusOr<BaselineFile> file = ReadBaselineFile(file_);
    if (!file.ok()) return file.status();
    if (!name_.empty()) file->baseline.name = name_;
    StatusOr<std::unique_ptr<results::Store>> store = OpenDb(false);
    if (!store.ok()) return store.status();
    const results::Provenance prov = ToolProvenance();
    MESHTUNE_RETURN_IF_ERROR(store.value()->PutHardware(file->hardware, prov));
    file->baseline.source_result_id = 0;
    MESHTUNE_RETURN_IF_ERROR(
        store.value()->PutRegressBaseline(file->baseline, prov));
    const results::RegressResult& r = file->baseline.result;
    out << "imported baseline '" << file->baseline.name << "' of "
        << r.benchmark << " (measured on " << Describe(file->hardware)
        << " at git " << r.provenance.git_revision << ") into "
        << store.value()->path() << "\n";
    return Status::Ok();
  }

  CLI::App *list_, *run_, *results_, *check_, *set_, *blist_, *export_,
      *import_;
  std::string benchmark_, baseline_, name_, file_, db_;
  std::string metric_;   // "" = the benchmark's default (cpu; cuda: wall)
  std::string backend_;  // "" = the benchmark's
  int64_t repeats_ = 0;
  int64_t result_id_ = 0;
  double threshold_pct_ = 10;
  double loss_rtol_ = kDefaultLossRtol;
  bool allow_other_hardware_ = false;
};

}  // namespace

std::unique_ptr<Command> AddRegressCommand(CLI::App* app) {
  return std::make_unique<RegressCommand>(app);
}

}  // namespace meshtune::tuner
