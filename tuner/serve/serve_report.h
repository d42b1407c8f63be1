// The report of `tune serve` (docs/serving.md §6): the Pareto front as a
// table, the best plan with its memory and time breakdown, what was
// rejected; and the same as JSON.
#ifndef MESHTUNE_TUNER_SERVE_SERVE_REPORT_H_
#define MESHTUNE_TUNER_SERVE_SERVE_REPORT_H_

#include <nlohmann/json.hpp>
#include <ostream>

#include "tuner/serve/serve_search.h"

namespace meshtune::tuner {

void PrintServeReport(std::ostream& out, const ServeProblem& problem,
                      const ServeResult& result, size_t top);

// {"problem": {...}, "considered": {"layouts", "points"}, "rejected":
// {"<reason>": count}, "best": POINT|null, "pareto": [POINT...]} with POINT
// = {"tp", "pp", "attention_dp", "ep", "moe_tp", "replicas",
// "gpus_per_replica", "batch_per_replica", "weights", "kv_cache_dtype",
// "ttft_ms", "tpot_ms", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
// "output_tokens_per_s_per_user", "meets_targets", "priced_by" ("pass
// calendar" or "closed form": ServePoint::calendar), "memory_gib":
// {"weights", "runtime", "kv_cache"}, "max_sequences_per_replica",
// "prefill_ms", "decode_ms": {"weights", "compute", "kv_cache",
// "elementwise", "tp_comm", "ep_comm", "pp_comm", "overhead"}}.
nlohmann::json ServeReportJson(const ServeProblem& problem,
                               const ServeResult& result);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_SERVE_SERVE_REPORT_H_
