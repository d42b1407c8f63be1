#include "tuner/render/report_json.h"

#include <algorithm>

#include "search_spaces/cluster_spec.h"
#include "tuner/inputs/inputs.h"
#include "tuner/render/model_facts.h"

namespace meshtune::tuner {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

nlohmann::json ConfigToJson(const search_spaces::ParallelConfig& c, int64_t gbs,
                            const std::string& precision) {
  using nlohmann::json;
  const bool full =
      c.recompute.granularity == search_spaces::RecomputeGranularity::kFull;
  return {
      {"tp", c.tp},
      {"pp", c.pp},
      {"dp", c.dp},
      {"cp", c.cp},
      {"ep", c.ep},
      {"etp", c.expert_tp()},
      {"vpp", c.vpp},
      {"sp", c.sp},
      {"mbs", c.mbs},
      {"gbs", gbs},
      {"recompute", FormatRecompute(c.recompute)},
      {"recompute_num_layers",
       full ? json(c.recompute.num_layers) : json(nullptr)},
      {"dist_opt", c.dist_opt},
      {"precision", precision},
      // Megatron's uneven-layout flags; null for the even split.
      {"decoder_first_pipeline_num_layers",
       c.uneven_layout() ? json(c.layout_first_layers) : json(nullptr)},
      {"decoder_last_pipeline_num_layers",
       c.uneven_layout() ? json(c.layout_last_layers) : json(nullptr)},
  };
}

nlohmann::ordered_json TimeBreakdownToJson(const costmodel::TimeBreakdown& t) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
    j[term.name] = t.*term.seconds;
  }
  return j;
}

nlohmann::json EstimateToJson(const costmodel::Estimate& e,
                              const search_spaces::TrainingSpec& training) {
  using nlohmann::json;
  const json config = ConfigToJson(e.config, training.global_batch_size,
                                   search_spaces::ToString(training.precision));
  const auto& m = e.memory;
  json memory = {
      {"total", m.total_bytes() / kGiB},
      {"weights", m.weights_bytes / kGiB},
      {"gradients", m.gradients_bytes / kGiB},
      {"optimizer", m.optimizer_bytes / kGiB},
      {"activations", m.activations_bytes / kGiB},
      {"other", m.rest_bytes() / kGiB},
  };
  const json time = TimeBreakdownToJson(e.time);
  return json{
      {"config", config},
      {"fits", e.fits},
      {"infeasible_reason",
       e.fits ? json(nullptr)
              : json(e.infeasible_reason.empty() ? "out_of_memory"
                                                 : e.infeasible_reason)},
      {"memory_gib", memory},
      // Fits, but within 5 % of the usable memory
      // (search_spaces::kNearCapacityFraction): a plan that run-to-run
      // allocator fragmentation may push out of memory.
      {"near_capacity", search_spaces::IsNearMemoryCapacity(
                            m.total_bytes(), e.memory_capacity_bytes)},
      {"time_s", time},
      {"step_time_s", e.step_time_s},
      {"tokens_per_s", e.tokens_per_s},
      {"tokens_per_s_per_gpu", e.tokens_per_s_per_gpu},
      {"model_tflops_per_gpu", e.model_tflops_per_gpu},
      {"mfu", e.mfu},
      {"hfu", e.hfu},
      {"days_to_train", e.days_to_train},
      {"calibration", e.calibration},
  };
}

nlohmann::json InputsToJson(const Inputs& in) {
  const search_spaces::ClusterSpec& c = in.cluster;
  const search_spaces::TrainingSpec& t = in.training;
  return {
      {"model", in.model.name},
      {"model_display_name", in.model.display_name},
      {"parameters", ParameterCountB(in.model) * 1e9},
      {"gpus", t.num_gpus},
      {"gpu", c.name},
      {"gpu_display_name", c.gpu.display_name},
      {"gpu_defaulted", in.gpu_defaulted},
      {"global_batch_size", t.global_batch_size},
      {"seq_length", t.seq_length},
      {"precision", search_spaces::ToString(t.precision)},
      {"train_tokens", t.train_tokens},
      {"cluster",
       {
           {"name", c.name},
           {"nodes", in.num_nodes()},
           {"gpus_per_node", c.gpus_per_node},
           {"nvlink_domain_gpus", c.nvlink_domain_gpus},
           {"usable_memory_gib", c.UsableMemoryGib()},
           {"memory_reserve_gib", c.memory_reserve_gib},
           {"memory_headroom_gib", c.memory_headroom_gib},
       }},
  };
}

nlohmann::json SearchToJson(const SearchResult& result, const Inputs& inputs,
                            int64_t top_k) {
  nlohmann::json candidates = nlohmann::json::array();
  const size_t n = std::min<size_t>(
      result.ranked.size(), static_cast<size_t>(std::max<int64_t>(top_k, 0)));
  for (size_t i = 0; i < n; ++i) {
    candidates.push_back(EstimateToJson(result.ranked[i], inputs.training));
  }
  nlohmann::json pruned = nlohmann::json::object();
  for (const auto& [reason, count] : result.rejected) pruned[reason] = count;
  return nlohmann::json{
      {"inputs", InputsToJson(inputs)},
      {"candidates", candidates},
      {"evaluated", result.evaluated},
      {"feasible", result.feasible},
      {"pruned", pruned},
      {"elapsed_s", result.elapsed_s},
  };
}

}  // namespace meshtune::tuner
