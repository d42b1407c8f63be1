// JSON reports (docs/design.md §5): one object per estimate, and the search
// envelope {"inputs", "candidates", "evaluated", "feasible", "pruned",
// "elapsed_s"}.
// Memory is in GiB (2^30 bytes), times in seconds.
#ifndef MESHTUNE_TUNER_RENDER_REPORT_JSON_H_
#define MESHTUNE_TUNER_RENDER_REPORT_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "costmodel/estimate.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"
#include "tuner/inputs/inputs.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {

// The docs/design.md §5 "config" object: {"tp", "pp", "dp", "cp", "ep",
// "vpp", "sp", "mbs", "gbs", "recompute", "recompute_num_layers", "dist_opt",
// "precision"}. Shared by estimates and `tune train --json`.
nlohmann::json ConfigToJson(const search_spaces::ParallelConfig& c, int64_t gbs,
                            const std::string& precision);

// One estimate: {"config", "fits", "infeasible_reason", "memory_gib",
// "time_s", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
// "model_tflops_per_gpu", "mfu", "hfu", "days_to_train", "calibration"}.
// The step time's terms in seconds (compute, recompute, tp_comm, cp_comm,
// ep_comm, pp_comm, pp_bubble, dp_comm, optimizer), in that order.
nlohmann::ordered_json TimeBreakdownToJson(const costmodel::TimeBreakdown& t);

nlohmann::json EstimateToJson(const costmodel::Estimate& e,
                              const search_spaces::TrainingSpec& training);

// What the search was asked, so that a saved file reads alone: {"model"
// (preset name), "model_display_name", "parameters" (count, every expert
// included), "gpus", "gpu" (preset name), "gpu_display_name",
// "gpu_defaulted" (no --gpu given), "global_batch_size" (sequences),
// "seq_length" (tokens), "precision", "train_tokens", "cluster": {"name",
// "nodes", "gpus_per_node", "nvlink_domain_gpus", "usable_memory_gib",
// "memory_reserve_gib", "memory_headroom_gib"}}.
nlohmann::json InputsToJson(const Inputs& inputs);

// The search envelope {"inputs", "candidates", "evaluated", "feasible",
// "pruned", "elapsed_s"} with the best `top_k` candidates.
nlohmann::json SearchToJson(const SearchResult& result, const Inputs& inputs,
                            int64_t top_k);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_REPORT_JSON_H_
