// Ranking of feasible estimates: fastest first, deterministic.
//
// Order (the search contract, docs/design.md §4: output order is
// deterministic):
//   1. step time; two estimates within kStepTimeTieFraction (0.1 %) of the
//      fastest of their tie group count as equally fast, because the cost
//      model is not that precise;
//   2. within a tie group, the simpler configuration first: smaller
//      tp·pp·cp·ep·vpp (cp 1 before cp 2, fewer virtual stages), then
//      recompute none < selective < full, then Megatron's even layout
//      before an uneven one (issue 17: equally fast plans are told apart by
//      what a user has to run, not by the model's noise);
//   3. then more memory headroom (capacity − total), then sp off before sp
//      on;
//   4. then a fixed key over every axis, so equal scores never depend on the
//      enumeration order.
#ifndef MESHTUNE_TUNER_SEARCH_RANKING_H_
#define MESHTUNE_TUNER_SEARCH_RANKING_H_

#include <vector>

#include "costmodel/estimate.h"
#include "search_spaces/parallel_config.h"

namespace meshtune::tuner {

inline constexpr double kStepTimeTieFraction = 1e-3;

// True when `a` should be listed before `b` by rules 2-4 (ignores step time).
bool TieBreakBefore(const costmodel::Estimate& a, const costmodel::Estimate& b);

// Strict total order over configurations (rule 4 alone).
bool ConfigKeyBefore(const search_spaces::ParallelConfig& a,
                     const search_spaces::ParallelConfig& b);

// Sorts `estimates` (all feasible) in place by the order above. Tie groups
// are formed greedily over the step-time-sorted list: a group starts at its
// fastest member and takes every later estimate within 0.1 % of it, which
// keeps the order a well-defined function of the set.
void RankEstimates(std::vector<costmodel::Estimate>* estimates);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_SEARCH_RANKING_H_
