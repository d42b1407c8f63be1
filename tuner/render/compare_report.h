// `tune compare` results: several configurations' time and memory terms side
// by side, the difference of each to the first, and one sentence naming the
// terms that account for most of each difference.
#ifndef MESHTUNE_TUNER_RENDER_COMPARE_REPORT_H_
#define MESHTUNE_TUNER_RENDER_COMPARE_REPORT_H_

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "costmodel/estimate.h"
#include "tuner/inputs/inputs.h"

namespace meshtune::tuner {

// "tp4 pp8 dp32 mbs1 sp selective is 0.410 s slower than tp8 pp4 ...:
// pp_bubble +0.520 s, tp_comm -0.090 s": the time terms by size of their
// change, as many as cover 90% of the total absolute change (at most 3).
std::string ExplainDifference(const costmodel::Estimate& base,
                              const costmodel::Estimate& other);

void PrintCompareTable(std::ostream& out, const Inputs& in,
                       const std::vector<costmodel::Estimate>& estimates);

// {"model", "gpu", "gpus", "configs": [{"config", "fits", "infeasible_reason",
//  "time_s": {term: s}, "memory_gib": {term: GiB}, "tokens_per_s", "mfu"}],
//  "differences": [{"config", "vs", "time_s": {term: delta},
//  "memory_gib": {term: delta}, "explanation"}]}.
nlohmann::json CompareToJson(const Inputs& in,
                             const std::vector<costmodel::Estimate>& estimates);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_COMPARE_REPORT_H_
