#include "costmodel/ep_overlap.h"

#include <algorithm>

namespace meshtune::costmodel {

double PairedEpExposed_s(double a2a_fwd_s, double a2a_bwd_s, double fwd_s,
                         double bwd_s, double moe_fwd_s, double extra_s) {
  const double attn_fwd_s = std::max(0.0, fwd_s - moe_fwd_s);
  const double attn_bwd_and_wgrad_s = std::max(0.0, bwd_s - moe_fwd_s);
  const double comm[4] = {a2a_bwd_s, a2a_fwd_s, a2a_bwd_s, a2a_fwd_s};
  const double compute[4] = {attn_fwd_s, moe_fwd_s, moe_fwd_s,
                             attn_bwd_and_wgrad_s};
  double exposed_s = 0, idle_compute_s = 0;
  for (int i = 0; i < 4; ++i) {
    exposed_s += std::max(0.0, comm[i] - compute[i]);
    idle_compute_s += std::max(0.0, compute[i] - comm[i]);
  }
  return exposed_s + std::max(0.0, extra_s - idle_compute_s);
}

}  // namespace meshtune::costmodel
