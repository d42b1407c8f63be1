// Reports of `tune accuracy`: the per-row table with an nccl-tests style
// footer, and the JSON document
//   {"rows":[{"source","model","num_gpus","metric","published",
//             "predicted_step_s","published_step_s","error_pct",
//             "skipped_reason"}...],
//    "summary":{"<source>":{"n","mape_pct","max_abs_pct"},..., "all":{...}}}
// Skipped rows have null step times and error and a reason string; predicted
// rows have a null reason. A source with no predicted row has n 0 and null
// errors. Times in seconds, errors in percent, memory in GiB.
#ifndef MESHTUNE_TUNER_ACCURACY_REPORT_H_
#define MESHTUNE_TUNER_ACCURACY_REPORT_H_

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "tuner/accuracy.h"

namespace meshtune::tuner {

nlohmann::ordered_json AccuracyToJson(
    const std::vector<AccuracyResult>& results, const AccuracySummary& summary);

// One line per row (configuration, published value, published and
// predicted step time, signed error, predicted memory and whether it fits;
// or the reason it was skipped), then the summary footer.
void PrintAccuracyTable(std::ostream& out, const std::string& csv_path,
                        const std::vector<AccuracyResult>& results,
                        const AccuracySummary& summary);

// One ablation line: the calibration set's errors with one refinement off.
struct AblationLine {
  std::string name;  // refinement id, or "all refinements on"
  std::string description;
  AccuracySummary summary;
};
// The table docs/costmodel.md quotes: MAPE, worst error and the change of
// MAPE against the first line (everything on).
void PrintAblationTable(std::ostream& out, const std::string& csv_path,
                        const std::vector<AblationLine>& lines);
// {"ablation":[{"refinement_off","n","mape_pct","max_abs_pct",
// "delta_mape_pct"}...]}; the first entry is "none (all on)" with delta 0.
nlohmann::ordered_json AblationToJson(const std::vector<AblationLine>& lines);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_REPORT_H_
