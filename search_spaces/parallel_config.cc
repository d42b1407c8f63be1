#include "search_spaces/parallel_config.h"

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

std::string ToString(const Recompute& r) {
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
  if (c.sp) s += " sp";
  s += " mbs" + std::to_string(c.mbs) + " " + ToString(c.recompute);
  if (c.dist_opt) s += " dist_opt";
  return s;
}

}  // namespace meshtune::search_spaces
