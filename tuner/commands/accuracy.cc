// `tune accuracy`: predicts every published run in a CSV and reports the
// error of each row and per source (tuner/accuracy/cases.h has the mapping
// rules).
#include <CLI/CLI.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/model_options.h"
#include "tuner/accuracy/best.h"
#include "tuner/accuracy/cases.h"
#include "tuner/accuracy/report.h"
#include "tuner/accuracy/serving_cases.h"
#include "tuner/accuracy/serving_report.h"
#include "tuner/commands/command.h"
#include "tuner/io/csv_reader.h"
#include "tuner/io/terminal.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kAccuracyExamples = R"(Examples:
  tune accuracy --csv tests/data/published_calibration.csv
  tune accuracy --csv tests/data/published_calibration.csv --json
  tune accuracy --csv tests/data/published_calibration.csv --source Korthikanti
  tune accuracy --csv tests/data/published_calibration.csv --ablation
  tune accuracy --csv runs.csv --with-best
  tune accuracy --csv runs.csv --with-best --json > with_best.json
The CSV has the columns of tests/data/published_calibration.csv. Step times
are compared: tokens_per_sec_per_gpu -> gbs*seq/(value*gpus); tflops_per_gpu
in the source's FLOP convention (SC21 eq. 3); model_tflops_per_gpu, mfu_pct
and hfu_pct through model/hardware FLOPs; iteration_time_s and step_time_s
directly. Other metrics, GPUs without a preset and unknown precisions are
listed as skipped with the reason. --ablation prints one line per cost-model
refinement with it switched off: MAPE, worst error and the change of MAPE.
--with-best also searches each predicted step-time row's problem (its model,
GPU preset and count, gbs, seq_len, precision and software flags) over the
default space of 'tune search' and reports the best plan and its gain: how
much faster than the row's own configuration the cost model predicts it.
Each distinct problem is searched once; large MoE problems take seconds.)";

class AccuracyCommand : public Command {
 public:
  explicit AccuracyCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "accuracy",
        "predict published runs from a CSV and report the cost model's error");
    sub->add_option("--csv", csv_, "CSV of published runs (required)")
        ->required();
    sub->add_flag("--json", json_,
                  "print {\"rows\":[...],\"summary\":{...}} on stdout");
    sub->add_option("--source", source_prefix_,
                    "only rows whose source starts with this prefix");
    sub->add_flag("--ablation", ablation_,
                  "switch each cost-model refinement off in turn and print "
                  "the error of each (with --json: {\"ablation\":[...]})");
    sub->add_flag("--with-best", with_best_,
                  "also search each step-time row's problem and report the "
                  "best plan and how much faster it is predicted than the "
                  "row's own configuration");
    sub->footer(kAccuracyExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    if (ablation_ && with_best_) {
      return Status::InvalidArgument(
          "--ablation and --with-best cannot be combined",
          "run tune accuracy once with each");
    }
    auto table = ReadCsvFile(csv_);
    if (!table.ok()) return table.status();
    if (IsServingCsv(table.value())) return RunServing(table.value(), out);
    auto mapped = MapAccuracyRows(table.value());
    if (!mapped.ok()) return mapped.status();
    std::vector<AccuracyCase> cases;
    std::set<std::string> sources;
    for (AccuracyCase& c : mapped.value()) {
      sources.insert(c.source);
      if (c.source.rfind(source_prefix_, 0) == 0) cases.push_back(std::move(c));
    }
    if (cases.empty()) {
      std::string known;
      for (const std::string& s : sources)
        known += (known.empty() ? "" : ", ") + s;
      return Status::InvalidArgument(
          source_prefix_.empty()
              ? csv_ + ": no rows after the header"
              : "no row of " + csv_ + " has a source starting with '" +
                    source_prefix_ + "'",
          known.empty() ? "add rows to the CSV" : "sources: " + known);
    }
    if (ablation_) return RunAblation(cases, out);
    std::vector<AccuracyResult> results = PredictAll(cases, DefaultEstimator());
    if (with_best_) {
      // A bar on a terminal only (tuner/io/terminal.h), as `tune search` shows.
      ProgressBar bar(err, "searching best plans", 0,
                      DefaultProgressOptions(err, /*quiet=*/false));
      BestPlanFinder finder;
      AddBestPlans(&results, &finder, [&bar](int64_t done, int64_t total) {
        bar.Update(done, total);
      });
      bar.Finish();
    }
    const AccuracySummary summary = Summarize(results);
    if (json_) {
      out << AccuracyToJson(results, summary).dump(2) << "\n";
    } else {
      PrintAccuracyTable(out, csv_, results, summary);
    }
    return Status::Ok();
  }

 private:
  // A serving CSV (tuner/accuracy/serving_cases.h): no ablation or best
  // plans yet, the rows' errors per source and metric.
  Status RunServing(const CsvTable& table, std::ostream& out) const {
    if (ablation_ || with_best_ || !source_prefix_.empty()) {
      return Status::InvalidArgument(
          csv_ +
              " holds serving rows: --ablation, --with-best and --source "
              "apply to training rows only",
          "run tune accuracy --csv " + csv_ + " [--json]");
    }
    auto cases = MapServingRows(table);
    if (!cases.ok()) return cases.status();
    if (cases.value().empty()) {
      return Status::InvalidArgument(csv_ + ": no rows after the header",
                                     "add rows to the CSV");
    }
    const std::vector<ServingRowResult> rows =
        PredictServingRows(std::move(cases).value());
    const ServingSummary summary = SummarizeServing(rows);
    if (json_) {
      out << ServingAccuracyToJson(rows, summary).dump(2) << "\n";
    } else {
      PrintServingAccuracy(out, csv_, rows, summary);
    }
    return Status::Ok();
  }

  // The full model, then each refinement of costmodel::AllRefinements()
  // switched off alone.
  Status RunAblation(const std::vector<AccuracyCase>& cases,
                     std::ostream& out) const {
    std::vector<AblationLine> lines;
    auto run = [&](const costmodel::ModelOptions& options) {
      const Estimator estimator =
          [&options](const search_spaces::ModelSpec& model,
                     const search_spaces::ClusterSpec& cluster,
                     const search_spaces::TrainingSpec& training,
                     const search_spaces::ParallelConfig& config,
                     const costmodel::Calibration& calibration) {
            return costmodel::EstimateConfig(model, cluster, training, config,
                                             calibration, options);
          };
      return Summarize(PredictAll(cases, estimator));
    };
    lines.push_back({"none (all on)", "the full cost model",
                     run(costmodel::ModelOptions())});
    for (const costmodel::RefinementInfo& r : costmodel::AllRefinements()) {
      costmodel::ModelOptions options;
      options.Disable(r.id);
      lines.push_back({r.name, r.description, run(options)});
    }
    if (json_) {
      out << AblationToJson(lines).dump(2) << "\n";
    } else {
      PrintAblationTable(out, csv_, lines);
    }
    return Status::Ok();
  }

  std::string csv_;
  std::string source_prefix_;
  bool json_ = false;
  bool ablation_ = false;
  bool with_best_ = false;
};

}  // namespace

std::unique_ptr<Command> AddAccuracyCommand(CLI::App* app) {
  return std::make_unique<AccuracyCommand>(app);
}

}  // namespace meshtune::tuner
