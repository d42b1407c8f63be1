// `tune accuracy --with-best`: for each predicted step-time row, the best
// plan the search finds for the same problem, and how much faster than the
// row's own (published) configuration the cost model predicts it.
//
// The problem of a row is everything but its parallel configuration: the
// model as the row resolved it (preset, variants, architecture columns,
// megatron_args), the cluster preset and num_gpus, and the TrainingSpec
// (gbs, seq_len, precision and the software flags the row's source or its
// megatron_args set). The space is the one `tune search` searches without
// pins or a --space file: the value-initialised search_spaces::SearchSpace
// (tuner/inputs/inputs.cc SpaceFromFlags with no pin flags), every axis free.
// The search and the row's prediction use the same cost model and calibration
// (costmodel::DatasheetCalibration with the row's attention kernel), so a
// gain is the model's own disagreement with the published choice: a large
// one points at a term the model understates (issue 17: deep interleaving
// predicted 22 % faster than NVIDIA's tuned tp4 pp8 vpp5).
//
// Rows that are not searched carry a BestPlan with searched = false and the
// reason: skipped rows, per-layer rows (one layer of a shortened model, no
// step to beat) and allocated-memory rows (they compare memory).
#ifndef MESHTUNE_TUNER_ACCURACY_BEST_H_
#define MESHTUNE_TUNER_ACCURACY_BEST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/estimate.h"
#include "search_spaces/parallel_config.h"
#include "tuner/accuracy/cases.h"

namespace meshtune::tuner {

// The cache key of a row's problem: its model_key, cluster preset, num_gpus,
// gbs, seq_len, precision, every software flag of its TrainingSpec and its
// attention kernel. Rows with equal keys pose the same search.
std::string ProblemKey(const AccuracyCase& c);

// "" when the result's row is searched; otherwise why not.
std::string WhyNotSearched(const AccuracyResult& r);

// The time term a best plan saves most on against the row's own plan: the
// term of costmodel::kTimeTerms with the largest row − best (seconds), the
// earlier term on ties. What makes a gain, and where to look when a gain is
// not credible (issue 17: the closing note names it for every row beyond
// kBestGainBarPct). saved_s <= 0 when no term is lower in the best plan.
struct TermSaving {
  const char* term = "";
  double saved_s = 0;
};
TermSaving LargestSaving(const costmodel::TimeBreakdown& row,
                         const costmodel::TimeBreakdown& best);

// The cache key of one search: ProblemKey and the margin (to the MiB).
std::string SearchKey(const AccuracyCase& c, double margin_gib);

// The memory (GiB per GPU) the search of a row's problem keeps free: the
// margin a plan needs not to be "near capacity" (1 − kNearCapacityFraction of
// the usable memory, search_spaces/cluster_spec.h: within it the allocator's
// run-to-run fragmentation may run it out of memory, and `tune` tells users
// to keep it with --memory-headroom), but never more than the row's own plan
// leaves (usable − its predicted peak), so that the published plan stays in
// the searched space. 0 when the row's plan does not fit.
double SearchMarginGib(double row_memory_gib, double usable_gib);

// Searches problems, each distinct ProblemKey once per finder (a dev set has
// ~350 step-time rows but ~120 problems; a DeepSeek-V3 search takes
// seconds).
class BestPlanFinder {
 public:
  // The best plan for the problem of `c`, compared with `row_step_s`, the
  // predicted step time (seconds) of the row's own configuration, among the
  // plans that leave `margin_gib` of the usable memory free (SearchMarginGib;
  // 0: every plan that fits).
  // REQUIRES: WhyNotSearched of c's result is "" and row_step_s > 0.
  BestPlan Find(const AccuracyCase& c, double row_step_s,
                double margin_gib = 0);

  // Whether the problem of `c` has been searched with `margin_gib` already.
  bool HasSearched(const AccuracyCase& c, double margin_gib = 0) const {
    return cache_.count(SearchKey(c, margin_gib)) > 0;
  }

  // Searches run so far (distinct problems), and Find calls answered from
  // the cache.
  int64_t searches() const { return searches_; }
  int64_t cache_hits() const { return cache_hits_; }

 private:
  struct Searched {
    std::optional<search_spaces::ParallelConfig> config;
    double step_s = 0;
    costmodel::TimeBreakdown time;
    std::string reason;  // why nothing is feasible ("" when config is set)
  };
  std::map<std::string, Searched> cache_;
  int64_t searches_ = 0;
  int64_t cache_hits_ = 0;
};

// Called after each distinct problem with (problems done, problems in all).
using BestPlanProgress = std::function<void(int64_t done, int64_t total)>;

// Sets `best` on every result: the finder's plan for searched rows, a
// not-searched BestPlan with its reason for the others.
void AddBestPlans(std::vector<AccuracyResult>* results, BestPlanFinder* finder,
                  const BestPlanProgress& progress = nullptr);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_BEST_H_
