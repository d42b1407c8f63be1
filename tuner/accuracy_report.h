// Reports of `tune accuracy`: the per-row table with an nccl-tests style
// footer, and the JSON document
//   {"rows":[{"line","source","model","gpu","num_gpus","metric","unit",
//             "published_value","published","predicted","error_pct",
//             "predicted_step_s","published_step_s","memory_gib","fits",
//             "skipped_reason"}...],
//    "summary":{"rows","predicted","skipped","out_of_memory",
//               "step_time":{"<source>":STATS,...,"all":STATS},
//               "layer_time":{...},"memory":{...},
//               "skip_reasons":[{"reason","count"}...]}}
// with STATS = {"n","mape_pct","max_abs_pct","worst_pct","worst_line"}.
// `metric` and `published_value` are as written in the CSV; `published` and
// `predicted` are in `unit`, the unit the row is compared in: "s" (seconds
// per step, for every step-time metric: tokens/s and TFLOP/s rows are
// converted), "ms" (one layer's time) or "GiB" (peak allocated memory);
// error_pct = 100·(predicted − published)/published. Skipped rows have null
// published/predicted/error/step times/memory/fits and a reason string;
// predicted rows have a null reason. step_time lists every source of the
// file (n 0 and null errors where none has a predicted step-time row);
// layer_time and memory list the sources that have such rows. skip_reasons
// groups the skipped rows by reason, most frequent first.
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
