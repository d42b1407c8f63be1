#include "search_spaces/parallel_config.h"

#include <utility>

namespace meshtune::search_spaces {

const char* ToString(RecomputeGranularity g) {
  switch (g) {
    case RecomputeGranularity::kNone:
      return "none";
    case RecomputeGranularity::kSelective:
      return "selective";
    case RecomputeGranularity::kFull:
      return "full";
  }
  return "?";
}

const char* ToString(RecomputeMethod m) {
  switch (m) {
    case RecomputeMethod::kUniform:
      return "uniform";
    case RecomputeMethod::kBlock:
      return "block";
  }
  return "?";
}

std::string RecomputeModulesToString(uint32_t modules) {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {kRecomputeCoreAttn, "core_attn"},
      {kRecomputeMlp, "mlp"},
      {kRecomputeMoe, "moe"},
      {kRecomputeMoeAct, "moe_act"},
      {kRecomputeLayernorm, "layernorm"},
      {kRecomputeMlaUpProj, "mla_up_proj"},
      {kRecomputeSharedExperts, "shared_experts"},
  };
  std::string s;
  for (const auto& [bit, name] : kNames) {
    if ((modules & bit) == 0) continue;
    if (!s.empty()) s += "+";
    s += name;
  }
  return s;
}

std::string ToString(const Recompute& r) {
  if (r.granularity == RecomputeGranularity::kSelective &&
      r.modules != kRecomputeCoreAttn) {
    return "selective:" + RecomputeModulesToString(r.modules);
  }
  if (r.granularity != RecomputeGranularity::kFull) {
    return ToString(r.granularity);
  }
  // num_layers <= 0 is the search-space wildcard "any full variant".
  if (r.num_layers <= 0) return "full:any";
  // Megatron's usual full recompute (uniform, one layer per chunk) is "full".
  if (r.method == RecomputeMethod::kUniform && r.num_layers == 1) {
    return "full";
  }
  return std::string("full:") + ToString(r.method) + ":" +
         std::to_string(r.num_layers);
}

std::string ToString(const ParallelConfig& c) {
  std::string s = "tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp) +
                  " vpp" + std::to_string(c.vpp) + " cp" +
                  std::to_string(c.cp) + " ep" + std::to_string(c.ep) + " dp" +
                  std::to_string(c.dp);
  if (c.expert_tp() != c.tp) s += " etp" + std::to_string(c.expert_tp());
  if (c.sp) s += " sp";
  s += " mbs" + std::to_string(c.mbs) + " " + ToString(c.recompute);
  if (c.dist_opt) s += " dist_opt";
  if (c.uneven_layout()) {
    s += " layout" + std::to_string(c.layout_first_layers) + "/" +
         std::to_string(c.layout_last_layers);
  }
  return s;
}

}  // namespace meshtune::search_spaces
