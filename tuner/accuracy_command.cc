// `tune accuracy`: predicts every published run in a CSV and reports the
// error of each row and per source (tuner/accuracy.h has the mapping rules).
#include <CLI/CLI.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tuner/accuracy.h"
#include "tuner/accuracy_report.h"
#include "tuner/command.h"
#include "tuner/csv_reader.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kAccuracyExamples = R"(Examples:
  tune accuracy --csv tests/data/published_calibration.csv
  tune accuracy --csv tests/data/published_calibration.csv --json
  tune accuracy --csv tests/data/published_calibration.csv --source Korthikanti
The CSV has the columns of tests/data/published_calibration.csv. Step times
are compared: tokens_per_sec_per_gpu -> gbs*seq/(value*gpus); tflops_per_gpu
in the source's FLOP convention (SC21 eq. 3); model_tflops_per_gpu, mfu_pct
and hfu_pct through model/hardware FLOPs; iteration_time_s and step_time_s
directly. Other metrics, GPUs without a preset and unknown precisions are
listed as skipped with the reason.)";

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
    sub->footer(kAccuracyExamples);
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    auto table = ReadCsvFile(csv_);
    if (!table.ok()) return table.status();
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
    const std::vector<AccuracyResult> results =
        PredictAll(cases, DefaultEstimator());
    const AccuracySummary summary = Summarize(results);
    if (json_) {
      out << AccuracyToJson(results, summary).dump(2) << "\n";
    } else {
      PrintAccuracyTable(out, csv_, results, summary);
    }
    return Status::Ok();
  }

 private:
  std::string csv_;
  std::string source_prefix_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> AddAccuracyCommand(CLI::App* app) {
  return std::make_unique<AccuracyCommand>(app);
}

}  // namespace meshtune::tuner
