// ParseSearchSpaceYaml: Megatron-named parallelism keys, each a scalar or a
// list, -> SearchSpace pins.
#include <algorithm>
#include <string>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {
namespace {

using yaml_util::MapReader;

const std::vector<std::string>& SpaceKeys() {
  static const std::vector<std::string> kKeys = {
      "tensor_model_parallel_size",
      "pipeline_model_parallel_size",
      "virtual_pipeline_model_parallel_size",
      "context_parallel_size",
      "expert_model_parallel_size",
      "expert_tensor_parallel_size",
      "data_parallel_size",
      "sequence_parallel",
      "micro_batch_size",
      "recompute_granularity",
      "recompute_method",
      "recompute_num_layers",
      "use_distributed_optimizer",
      "max_tensor_model_parallel_size",
      "max_micro_batch_size",
  };
  return kKeys;
}

// Expands the three recompute keys into SearchSpace::recompute pins.
// Granularity none/selective map one to one. full crosses the given methods
// (default both) with the given num_layers; with neither given it is the
// wildcard {full, num_layers 0}: every variant the rules allow.
Status ParseRecompute(const MapReader& r, std::vector<Recompute>* out) {
  std::vector<std::string> granularity, methods;
  std::vector<int64_t> num_layers;
  MESHTUNE_RETURN_IF_ERROR(r.EnumList(
      "recompute_granularity", {"none", "selective", "full"}, &granularity));
  MESHTUNE_RETURN_IF_ERROR(
      r.EnumList("recompute_method", {"uniform", "block"}, &methods));
  MESHTUNE_RETURN_IF_ERROR(
      r.IntList("recompute_num_layers", 1, limits::kLayerCount, &num_layers));
  const bool has_full = std::find(granularity.begin(), granularity.end(),
                                  "full") != granularity.end();
  if (!has_full) {
    for (const char* key : {"recompute_method", "recompute_num_layers"}) {
      if (r.Has(key)) {
        return Status::InvalidArgument(
            r.WhereKey(key) + ": " + key +
                " applies only to full recompute, but recompute_granularity "
                "does not include full",
            "add full to recompute_granularity, or remove " + std::string(key));
      }
    }
  }
  if (!methods.empty() && num_layers.empty()) {
    return Status::InvalidArgument(
        r.WhereKey("recompute_method") +
            ": recompute_method is pinned without recompute_num_layers",
        "add recompute_num_layers (1 = every layer for uniform), or remove "
        "recompute_method to allow every full-recompute variant");
  }
  std::vector<Recompute> pins;
  for (const std::string& g : granularity) {
    if (g == "none") {
      pins.push_back({RecomputeGranularity::kNone});
    } else if (g == "selective") {
      pins.push_back({RecomputeGranularity::kSelective});
    } else if (num_layers.empty()) {
      pins.push_back(
          {RecomputeGranularity::kFull, RecomputeMethod::kUniform, 0});
    } else {
      if (methods.empty()) methods = {"uniform", "block"};
      for (const std::string& method : methods) {
        for (int64_t n : num_layers) {
          pins.push_back({RecomputeGranularity::kFull,
                          method == "block" ? RecomputeMethod::kBlock
                                            : RecomputeMethod::kUniform,
                          n});
        }
      }
    }
  }
  *out = std::move(pins);
  return Status::Ok();
}

}  // namespace

StatusOr<SearchSpace> ParseSearchSpaceYaml(const std::string& text,
                                           const std::string& source) {
  StatusOr<YAML::Node> root = yaml_util::Load(text, source);
  if (!root.ok()) return root.status();
  SearchSpace space;
  // A file of comments only (like spaces/default.yaml) pins nothing.
  if (!root->IsDefined() || root->IsNull()) return space;
  const MapReader r(*root, source, "search space");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(SpaceKeys()));
  MESHTUNE_RETURN_IF_ERROR(r.IntList("tensor_model_parallel_size", 1,
                                     limits::kParallelSize, &space.tp));
  MESHTUNE_RETURN_IF_ERROR(r.IntList("pipeline_model_parallel_size", 1,
                                     limits::kParallelSize, &space.pp));
  MESHTUNE_RETURN_IF_ERROR(r.IntList("virtual_pipeline_model_parallel_size", 1,
                                     limits::kLayerCount, &space.vpp));
  MESHTUNE_RETURN_IF_ERROR(
      r.IntList("context_parallel_size", 1, limits::kParallelSize, &space.cp));
  MESHTUNE_RETURN_IF_ERROR(r.IntList("expert_model_parallel_size", 1,
                                     limits::kParallelSize, &space.ep));
  // MoE models only; a dense model keeps etp = tp whatever is pinned
  // (search_spaces/space/enumerate.cc).
  MESHTUNE_RETURN_IF_ERROR(r.IntList("expert_tensor_parallel_size", 1,
                                     limits::kParallelSize, &space.etp));
  MESHTUNE_RETURN_IF_ERROR(
      r.IntList("data_parallel_size", 1, limits::kParallelSize, &space.dp));
  MESHTUNE_RETURN_IF_ERROR(
      r.IntList("micro_batch_size", 1, limits::kMicroBatchSize, &space.mbs));
  MESHTUNE_RETURN_IF_ERROR(r.BoolList("sequence_parallel", &space.sp));
  MESHTUNE_RETURN_IF_ERROR(
      r.BoolList("use_distributed_optimizer", &space.dist_opt));
  MESHTUNE_RETURN_IF_ERROR(ParseRecompute(r, &space.recompute));
  MESHTUNE_RETURN_IF_ERROR(r.Int("max_tensor_model_parallel_size", false, 1,
                                 limits::kParallelSize, &space.max_tp));
  MESHTUNE_RETURN_IF_ERROR(r.Int("max_micro_batch_size", false, 1,
                                 limits::kMicroBatchSize, &space.max_mbs));
  return space;
}

}  // namespace meshtune::search_spaces
