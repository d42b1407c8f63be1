// `tune accuracy`: predicts every row of a published-runs CSV (the columns of
// tests/data/published_calibration.csv, plus an optional megatron_args) and
// compares step times, per-layer times and peak allocated memory.
//
// One CSV record becomes an AccuracyCase: the model, cluster, training and
// parallel configuration it describes, the attention kernel its software
// ran, and its published measurement in the unit it is compared in (or the
// reason it is skipped). A row that cannot be predicted is skipped with its
// reason and never stops the file; only file-level problems are errors (a
// missing column, an unreadable file, malformed CSV, a cell that is not a
// number where one must be). Predict() runs the cost model on a case;
// Summarize() gives the mean absolute percentage error (MAPE) and worst
// error per source and overall, for step times, per-layer times and memory
// apart, and groups the skip reasons. Mapping rules (each documented at its
// function; tuner/accuracy/rules.h has the per-cell rules):
//   model      preset whose normalised name/alias matches the row's model
//              (variants in parentheses stripped and applied:
//              ParseModelVariant) or, with no preset, the row's architecture
//              columns; the row's own non-blank dims (layers, hidden, heads,
//              kv_heads, ffn_hidden, vocab, seq_len) win over the preset
//              (except an MoE row's ffn_hidden equal to the preset's
//              expert width, which the dev set writes there)
//   cluster    GPU name by substring -> preset (ResolveCluster)
//   precision  PrecisionForRow (every dev-set spelling; the table is in
//              tuner/accuracy/rules.h)
//   blanks     sp = on when tp > 1; recompute none; vp 1; mbs 1; cp, ep 1;
//              dp = num_gpus / (tp·pp·cp); a blank required cell (num_gpus,
//              tp, pp, gbs, measured_value, ...) skips the row
//   software   a non-blank megatron_args cell: Megatron's defaults (no
//              distributed optimizer, no TP comm overlap, fp32 gradient
//              reduction, no fp8 weights) with the cell's flags on top
//              (ApplyMegatronFlags). Otherwise NVIDIA recipe sources (NeMo,
//              Megatron-Bridge, DGX Cloud) use the distributed optimizer, and
//              in fp8 the fp8 weights, bf16 gradient reduction and TP comm
//              overlap of NVIDIA's recipes; sources dated 2022 or earlier ran
//              unfused attention
//   metrics    step-time metrics -> seconds per step (PublishedStepTime);
//              layer_fwd_ms / layer_bwd_ms / layer_fwd_bwd_ms -> one
//              transformer layer, one micro-batch (Predict); and
//              allocated_memory_gib -> the predicted allocator peak of the
//              most loaded rank (Estimate::memory.allocated_bytes(), what
//              torch.cuda.max_memory_allocated reports).
// Units: step times in seconds, layer times in ms, memory in GiB (2^30
// bytes), errors in percent (signed: predicted − published over published).
#ifndef MESHTUNE_TUNER_ACCURACY_CASES_H_
#define MESHTUNE_TUNER_ACCURACY_CASES_H_

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
#include "tuner/accuracy/rules.h"
#include "tuner/io/csv_reader.h"

namespace meshtune::tuner {

// Columns a published-runs CSV must have (a blank cell in one of them skips
// that row); the others (layers, hidden, heads, kv_heads, ffn_hidden, vocab,
// seq_len, dp, cp, ep, vp, sp, mbs, recompute, megatron_args) may be absent
// or blank.
const std::vector<std::string>& RequiredAccuracyColumns();

// One CSV record, mapped. The spec fields are meaningful only when
// skipped_reason is empty.
struct AccuracyCase {
  int64_t line = 0;  // line of the record in the CSV
  std::string source;
  std::string model_name;  // as written in the CSV
  std::string gpu_name;    // as written in the CSV
  std::string metric;
  MetricKind kind = MetricKind::kUnknown;
  int64_t num_gpus = 0;
  double published_value = 0;  // as written, in the metric's own unit
  std::string skipped_reason;  // "" = predicted

  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;
  search_spaces::TrainingSpec training;
  search_spaces::ParallelConfig config;
  costmodel::AttentionKernel attention = costmodel::AttentionKernel::kFlash;
  // The published value in the unit it is compared in (MetricUnit(kind)):
  // seconds per step, ms per layer, or GiB. published_step_s is the same
  // number for step-time rows and 0 for the others.
  double published = 0;
  double published_step_s = 0;
  // Flags of the megatron_args cell that the cost model does not model
  // (accepted, listed for the report).
  std::vector<std::string> flags_without_effect;
  // The cells that define the row's model, as written (model column with its
  // variants, the architecture columns, megatron_args): rows with equal
  // model_key resolve to the same ModelSpec (--with-best's search cache,
  // tuner/accuracy/best.h, keys problems by it).
  std::string model_key;
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
  double predicted = 0;  // in MetricUnit(kind), compared with published
  double predicted_step_s = 0;
  double error_pct = 0;  // 100·(predicted − published)/published
  bool fits = false;
  double memory_gib = 0;    // predicted peak per GPU
  double capacity_gib = 0;  // usable HBM per GPU
  // The row's own configuration, term by term (JSON "time_s"): which term
  // is off when a row is.
  costmodel::TimeBreakdown time;
};

// Per-layer rows (Korthikanti et al. 2022 Table 4: one transformer layer of a
// pp 1 run, one micro-batch) are predicted from two estimates that differ by
// one decoder layer: the layer's time is the difference of the per-micro-
// batch compute, recompute and TP/CP/EP communication (optimizer, gradient
// reduction and bubble excluded). Its forward gets the forward share of the
// layer's compute (costmodel::LayerComputeTime) plus half of its exposed
// communication (the forward and backward issue the same collectives);
// the backward gets the rest, the recompute included, as in the paper.
// REQUIRES: c.skipped_reason is empty.
AccuracyPrediction Predict(const AccuracyCase& c, const Estimator& estimator);

// `tune accuracy --with-best` (tuner/accuracy/best.h): the best plan the
// search finds for a step-time row's problem, against the row's own plan.
struct BestPlan {
  bool searched = false;  // false: the row is not searched (see reason)
  // Another row of the same problem was searched first (the result reused).
  bool cached = false;
  // The search's best plan; absent when the row is not searched or nothing
  // in the space is feasible (reason says which).
  std::optional<search_spaces::ParallelConfig> config;
  double step_s = 0;  // its predicted step time, seconds
  // Its time term by term (JSON "best_time_s"; set with config).
  costmodel::TimeBreakdown time;
  // 100·(row's predicted step − step_s)/row's predicted step: how much
  // faster than the row's own configuration the search's plan is predicted
  // (negative when the row's plan is faster: it lies outside the space).
  double gain_pct = 0;
  std::string reason;  // "" when config is set
};

// A case with its prediction (absent when skipped) and, with --with-best,
// the best plan of its problem.
struct AccuracyResult {
  AccuracyCase row;
  std::optional<AccuracyPrediction> prediction;
  std::optional<BestPlan> best;
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
struct MetricStats {
  std::vector<SourceStats> per_source;  // in order of first appearance
  ErrorStats all;
};
// The bar of issue 17: the best plan predicted at most this much faster
// than a tuned published configuration in at least 90 % of the rows.
inline constexpr double kBestGainBarPct = 10.0;

// --with-best over the rows searched (those with a feasible best plan for
// the gain statistics).
struct WithBestSummary {
  int64_t searched = 0;         // step-time rows searched
  int64_t problems = 0;         // distinct problems among them (searches run)
  int64_t found = 0;            // rows with a feasible best plan
  int64_t no_plan = 0;          // rows whose search found nothing feasible
  int64_t within = 0;           // rows with gain_pct <= kBestGainBarPct
  double within_share_pct = 0;  // 100·within/found (0 when found is 0)
  double median_gain_pct = 0;
  double max_gain_pct = 0;
  int64_t max_gain_line = 0;
  // Indices into the results of the rows with gain_pct > kBestGainBarPct,
  // largest gain first.
  std::vector<size_t> beyond;
};

struct SkipReasonCount {
  std::string reason;
  int64_t count = 0;
};
struct AccuracySummary {
  // Step-time rows (per_source lists every source of the file, in order of
  // first appearance, also those without a predicted step-time row).
  std::vector<SourceStats> per_source;
  ErrorStats all;
  MetricStats layer_time;  // per-layer rows (ms)
  MetricStats memory;      // allocated_memory_gib rows
  int64_t rows = 0;
  int64_t predicted = 0;
  int64_t skipped = 0;
  // Predicted rows that do not fit (per-layer rows not counted: they time
  // one layer, measured on a shortened model).
  int64_t out_of_memory = 0;
  // Skipped rows grouped by reason: most frequent first, then by reason.
  std::vector<SkipReasonCount> skip_reasons;
  // Present when any result carries a BestPlan (--with-best).
  std::optional<WithBestSummary> with_best;
};
AccuracySummary Summarize(const std::vector<AccuracyResult>& results);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_CASES_H_
