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
// With --with-best (tuner/accuracy/best.h) every row also has
// "best_config" (ConfigToJson's object, tuner/render/report_json.h),
// "best_config_text" (search_spaces::ToString, with etp and the layout),
// "best_step_s" (s), "best_gain_pct" (100·(predicted_step_s −
// best_step_s)/predicted_step_s) and "best_reason" (null when a plan was
// found; otherwise why the row was not searched or why nothing fits, with
// the other best_* keys null), and the summary has
//   "with_best":{"searched","problems","found","no_plan","bar_pct",
//                "within","within_share_pct","median_gain_pct",
//                "max_gain_pct","max_gain_line",
//                "beyond":[{"line","model","gpu","num_gpus","config",
//                           "best_config","gain_pct"}...]}
// (searched: step-time rows searched; problems: distinct searches; found:
// rows with a feasible plan, the base of within_share_pct; beyond: the rows
// with gain above bar_pct, largest first).
#ifndef MESHTUNE_TUNER_ACCURACY_REPORT_H_
#define MESHTUNE_TUNER_ACCURACY_REPORT_H_

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "tuner/accuracy/cases.h"

namespace meshtune::tuner {

nlohmann::ordered_json AccuracyToJson(
    const std::vector<AccuracyResult>& results, const AccuracySummary& summary);

// One line per row (configuration, published value, published and
// predicted step time, signed error, predicted memory and whether it fits;
// or the reason it was skipped), then the summary footer. With
// --with-best, a best_gain column and a footer with the gain statistics and
// every row beyond kBestGainBarPct.
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
