#include "costmodel/comm_model.h"

#include <algorithm>

namespace meshtune::costmodel {

CommGroup AxisGroup(int64_t stride, int64_t size, int64_t domain_gpus) {
  CommGroup g;
  g.size = size;
  if (size <= 1) return g;
  if (stride >= domain_gpus) {
    // Every member in a different domain (the domain size divides the
    // stride for the power-of-two layouts Megatron uses).
    g.nodes = size;
    g.ranks_per_node = 1;
    return g;
  }
  // Members per domain: the domain holds domain_gpus/stride consecutive
  // members of the group (fewer if the group is smaller).
  const int64_t per_domain =
      std::max<int64_t>(1, std::min<int64_t>(size, domain_gpus / stride));
  g.ranks_per_node = per_domain;
  g.nodes = (size + per_domain - 1) / per_domain;
  return g;
}

double BusFactor(Collective op, int64_t n) {
  if (n <= 1) return 0.0;
  const double dn = static_cast<double>(n);
  switch (op) {
    case Collective::kAllReduce:
      return 2.0 * (dn - 1) / dn;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (dn - 1) / dn;
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double RingSteps(Collective op, int64_t n) {
  if (n <= 1) return 0.0;
  switch (op) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1);
    case Collective::kSendRecv:
      return 1.0;
    default:
      return static_cast<double>(n - 1);
  }
}

double FlatCollectiveTime_s(Collective op, double bytes, int64_t n,
                            const LinkTier& tier) {
  if (n <= 1 || bytes <= 0 || tier.busbw_Bps <= 0) return 0.0;
  const double f = BusFactor(op, n);
  return RingSteps(op, n) * tier.latency_s + f * tier.ramp_s +
         f * bytes / tier.busbw_Bps;
}

}  // namespace meshtune::costmodel
