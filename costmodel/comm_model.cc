#include "costmodel/comm_model.h"

#include <algorithm>
#include <cmath>

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

double ExpectedDistinctBins(double bins, double draws) {
  if (bins < 1 || draws <= 0) return 0.0;
  return bins * (1.0 - std::pow(1.0 - 1.0 / bins, draws));
}

double FlatCollectiveTime_s(Collective op, double bytes, int64_t n,
                            const LinkTier& tier) {
  if (n <= 1 || bytes <= 0 || tier.busbw_Bps <= 0) return 0.0;
  const double f = BusFactor(op, n);
  return RingSteps(op, n) * tier.latency_s + f * tier.ramp_s +
         f * bytes / tier.busbw_Bps;
}

double FlexDispatchTime_s(double copy_bytes, double topk,
                          const CommGroup& ep_group, const Calibration& cal,
                          const ModelOptions& options) {
  if (ep_group.size <= 1 || copy_bytes <= 0) return 0.0;
  if (ep_group.nodes <= 1) {
    const double ranks =
        ExpectedDistinctBins(static_cast<double>(ep_group.size), topk);
    return cal.CollectiveTime_s(Collective::kAllToAll, ranks * copy_bytes,
                                ep_group, options);
  }
  const double nodes = static_cast<double>(ep_group.nodes);
  // Remote nodes reached: the distinct nodes hit, less this rank's own
  // node when hit ((N−1)/N of the N·(1 − (1 − 1/N)^k) expected).
  const double remote_nodes =
      ExpectedDistinctBins(nodes, topk) * (nodes - 1) / nodes;
  const CommGroup rail{2, 2, 1};  // this rank's NIC to its rail peer
  const double inter = cal.CollectiveTime_s(
      Collective::kSendRecv, remote_nodes * copy_bytes, rail, options);
  const int64_t r = std::max<int64_t>(1, ep_group.ranks_per_node);
  const CommGroup domain{r, 1, r};
  const double intra = cal.CollectiveTime_s(Collective::kAllToAll,
                                            topk * copy_bytes, domain, options);
  return std::max(inter, intra);
}

}  // namespace meshtune::costmodel
