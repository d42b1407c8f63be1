// `tune validate`'s pure parts: which candidates of a search to run for real,
// and how the measured step times compare with the predictions.
//
// Selection: the analytical top K (the ranking's best), plus up to E
// deliberately different candidates, one per axis the cost model must get
// right, each the best-ranked candidate whose value on that axis none of the
// already chosen candidates has:
//   "other tp/pp split"  (tensor vs pipeline vs data parallel trade-off)
//   "other recompute"    (recompute granularity)
//   "other micro-batch"  (GEMM sizes and the number of micro-batches)
// so a ranking that is right only among near-identical configurations is
// exposed. Only candidates the engine can train are chosen (the predicate).
//
// Spread (tune validate --spread N, off with N = 0): the top candidates are
// predicted within a few percent of each other, less than a shared
// machine's run-to-run noise, so a rank correlation over them measures the
// noise. N more candidates are drawn across the whole predicted range:
// over the M feasible, trainable candidates sorted by predicted step time
// t(0) <= ... <= t(M−1) (ties by rank), quantile q_i = i/(N−1),
// i = 0..N−1, is the value at position h = q_i·(M−1), linearly
// interpolated between t(⌊h⌋) and t(⌊h⌋+1); its pick is the candidate whose
// prediction is nearest that value and which is not chosen yet (top,
// extra or an earlier quantile), ties going to the faster, then the better
// ranked. Once every one of the M is chosen the spread stops short of N.
// Nothing beyond the predicate filters them: MoE and context-parallel plans
// are picked whenever the engine accepts them.
//
// Statistics (over the candidates that ran successfully):
//   signed error   100·(predicted − measured)/measured per candidate
//   MAPE           mean |signed error|
//   Spearman ρ     rank correlation of predicted and measured step times
//                  (Pearson correlation of the ranks; ties get their
//                  average rank), undefined below 2 runs
//   top-1          whether the analytical top-1 is the measured best, and
//                  if not, by how much it is slower than the measured best:
//                  100·(measured(top-1) − measured(best))/measured(best).
//   noise          with repeated runs (--repeats), each candidate's spread
//                  100·(max − min)/median of its runs' step times; the
//                  machine's noise is the median spread over candidates.
//   separated      candidate pairs whose predictions differ by more than
//   pairs          the noise (relative to the faster prediction), and how
//                  many of them were measured in the predicted order: the
//                  part of the ranking a measurement here can check at all
//                  (pairs closer than the noise are a coin toss on this
//                  machine whatever the model says).
#ifndef MESHTUNE_TUNER_VALIDATE_ANALYSIS_H_
#define MESHTUNE_TUNER_VALIDATE_ANALYSIS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/estimate.h"

namespace meshtune::tuner {

struct SelectedCandidate {
  size_t index = 0;    // into the ranked list (rank = index + 1)
  std::string reason;  // "top 3", "other tp/pp split", "spread q=0.25", ...
  bool from_spread = false;  // chosen for a quantile of --spread
};

// REQUIRES: top_k >= 1, extras >= 0, spread == 0 or spread >= 2.
// `trainable` says whether the engine can run an estimate's configuration.
// The top-1 (first trainable estimate) comes first; the rest follow in
// selection order: the top K, the extras, then the spread's picks in
// quantile order (reason "spread q=<q_i>", q_i to two decimals).
std::vector<SelectedCandidate> SelectCandidates(
    const std::vector<costmodel::Estimate>& ranked, int64_t top_k,
    int64_t extras,
    const std::function<bool(const costmodel::Estimate&)>& trainable,
    int64_t spread = 0);

// The range of a set of predicted step times, for the report: how far
// apart the candidates are predicted (max/min).
struct PredictedRange {
  double min_s = 0;
  double max_s = 0;
  double ratio() const { return max_s / min_s; }
};
// REQUIRES: every time > 0. Empty input: nullopt.
std::optional<PredictedRange> RangeOf(const std::vector<double>& predicted_s);

// Repeated runs of one candidate (tune validate --repeats R, interleaved
// with the other candidates' runs so that a slow minute of a shared machine
// does not land on one candidate): its measured step time is the median of
// the runs' step-time medians, robust to one slow run out of three.
struct RepeatedRuns {
  double median_s = 0;
  double spread_pct = 0;  // 100·(max − min)/median; 0 for a single run
};
// REQUIRES: !runs_s.empty(), every run > 0.
RepeatedRuns SummarizeRuns(const std::vector<double>& runs_s);

// The order of round `round` (0-based) over n candidates: 0..n−1 rotated
// left by round mod n, so that no candidate is always the first one run
// after the search or the last one before the statistics.
std::vector<size_t> RoundOrder(size_t n, int64_t round);

// One candidate's outcome.
struct CandidateOutcome {
  double predicted_step_s = 0;
  std::optional<double> measured_step_s;  // absent when the run failed
  std::optional<double> spread_pct;       // with >= 2 runs
};

struct ValidationStats {
  int64_t measured = 0;                 // candidates that ran
  std::optional<double> spearman;       // needs >= 2 measured
  std::optional<double> mape_pct;       // needs >= 1 measured
  std::optional<size_t> measured_best;  // index of the fastest measured
  // outcomes[0] is the analytical top-1: false when it failed.
  bool top1_is_measured_best = false;
  std::optional<double> top1_loss_pct;  // 0 when it is the best
  // Median spread of the candidates measured more than once.
  std::optional<double> noise_pct;
  // Pairs of measured candidates whose predictions differ by more than
  // noise_pct (0 when there is no noise estimate), and how many of them
  // were measured in the predicted order.
  int64_t separated_pairs = 0;
  int64_t separated_pairs_in_order = 0;
};

// `outcomes[0]` must be the analytical top-1 (SelectCandidates order).
ValidationStats AnalyzeOutcomes(const std::vector<CandidateOutcome>& outcomes);

// Spearman's ρ of two equally long series (ties: average ranks). NaN when
// either series is constant.
double SpearmanRho(const std::vector<double>& a, const std::vector<double>& b);

// 100·(predicted − measured)/measured.
double ErrorPercent(double predicted_s, double measured_s);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_VALIDATE_ANALYSIS_H_
