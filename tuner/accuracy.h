// `tune accuracy`: predicts every row of a published-runs CSV (the columns of
// tests/data/published_calibration.csv) and compares step times.
//
// One CSV record becomes an AccuracyCase: the model, cluster, training and
// parallel configuration it describes, the attention kernel its software
// ran, and its published measurement converted to seconds per step (or the
// reason it is skipped). Predict() runs the cost model on a case; Summarize()
// gives the mean absolute percentage error (MAPE) and worst error per source
// and overall. Mapping rules (each documented at its function):
//   model      preset whose normalised name/alias matches the row's model;
//              the row's own non-blank dims (layers, hidden, heads, kv_heads,
//              ffn_hidden, vocab, seq_len) always win over the preset
//   cluster    GPU name by substring -> preset (ResolveCluster)
//   precision  16-bit spellings -> bf16/fp16, fp8 spellings -> fp8
//   blanks     sp = on when tp > 1; recompute none; vp 1; mbs 1; cp, ep 1;
//              dp = num_gpus / (tp·pp·cp)
//   software   NeMo sources use the distributed optimizer, and in fp8 the
//              fp8 weights, bf16 gradient reduction and TP comm overlap of
//              NVIDIA's recipes;
//              sources dated 2022 or earlier ran unfused attention
// (the per-cell rules and the metric conversions: tuner/accuracy_rules.h).
// Units: times in seconds, errors in percent (signed: predicted − published
// over published), memory in GiB.
#ifndef MESHTUNE_TUNER_ACCURACY_H_
#define MESHTUNE_TUNER_ACCURACY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/datasheet_calibration.h"
#include "costmodel/estimate.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"
#include "tuner/accuracy_rules.h"
#include "tuner/csv_reader.h"

namespace meshtune::tuner {

// Columns a published-runs CSV must have; the others (layers, hidden, heads,
// kv_heads, ffn_hidden, vocab, seq_len, dp, cp, ep, vp, sp, mbs, recompute)
// may be absent or blank.
const std::vector<std::string>& RequiredAccuracyColumns();

// One CSV record, mapped. The spec fields are meaningful only when
// skipped_reason is empty.
struct AccuracyCase {
  int64_t line = 0;  // line of the record in the CSV
  std::string source;
  std::string model_name;  // as written in the CSV
  std::string gpu_name;    // as written in the CSV
  std::string metric;
  int64_t num_gpus = 0;
  double published_value = 0;
  std::string skipped_reason;  // "" = predicted

  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;
  search_spaces::TrainingSpec training;
  search_spaces::ParallelConfig config;
  costmodel::AttentionKernel attention = costmodel::AttentionKernel::kFlash;
  double published_step_s = 0;
};

// Maps every record of `table`. Errors (a missing required column, a cell
// that is not a number where one is needed) are InvalidArgument with
// `file:line:`; rows the model cannot predict are cases with a reason.
StatusOr<std::vector<AccuracyCase>> MapAccuracyRows(const CsvTable& table);

// The cost model behind the predictions; the default is
// costmodel::EstimateConfig (an ablation passes one with refinements off).
using Estimator = std::function<costmodel::Estimate(
    const search_spaces::ModelSpec&, const search_spaces::ClusterSpec&,
    const search_spaces::TrainingSpec&, const search_spaces::ParallelConfig&,
    const costmodel::Calibration&)>;
Estimator DefaultEstimator();

struct AccuracyPrediction {
  double predicted_step_s = 0;
  double error_pct = 0;  // 100·(predicted − published)/published
  bool fits = false;
  double memory_gib = 0;    // predicted peak per GPU
  double capacity_gib = 0;  // usable HBM per GPU
};

// REQUIRES: c.skipped_reason is empty.
AccuracyPrediction Predict(const AccuracyCase& c, const Estimator& estimator);

// A case with its prediction (absent when skipped).
struct AccuracyResult {
  AccuracyCase row;
  std::optional<AccuracyPrediction> prediction;
};
std::vector<AccuracyResult> PredictAll(const std::vector<AccuracyCase>& cases,
                                       const Estimator& estimator);

struct ErrorStats {
  int64_t n = 0;           // predicted rows
  double mape_pct = 0;     // mean |error|
  double max_abs_pct = 0;  // largest |error|
  double worst_pct = 0;    // that error, signed
  int64_t worst_line = 0;  // its CSV line
};
struct SourceStats {
  std::string source;
  ErrorStats stats;
};
struct AccuracySummary {
  std::vector<SourceStats> per_source;  // in order of first appearance
  ErrorStats all;
  int64_t skipped = 0;
  int64_t out_of_memory = 0;  // predicted rows that do not fit
};
AccuracySummary Summarize(const std::vector<AccuracyResult>& results);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_H_
