// Communication model: where a process group lies on the fabric, and the
// alpha-beta time of one NCCL collective on one link tier.
//
// Placement is computed in closed form from Megatron's rank order
// (tp-cp-ep-dp-pp, tp fastest): a group is `size` ranks spaced `stride` apart.
// This is what search_spaces::RankGrid::Placement returns for the axis groups
// (checked in tests/costmodel/comm_model_test.cc), without building the rank
// lists, so the estimator allocates nothing per call. "Node" here means the
// NVLink domain (gpus_per_node on DGX/HGX, 72 on GB200 NVL72): bandwidth
// changes at its edge, not at the host's.
//
// Collective cost (nccl-tests conventions, doc/PERFORMANCE.md): for a buffer
// of S bytes over n ranks with bus factor f (all-reduce 2(n−1)/n; all-gather,
// reduce-scatter, all-to-all (n−1)/n; send/recv 1),
//   t = steps·α + f·τ + f·S / busbw,
// where α is the per-ring-step latency of the tier and τ the time constant of
// the message-size ramp: busbw(S) = busbw_max·S/(S + busbw_max·τ). With
// τ = 50 µs, busbw_max = 230 GB/s and 3.4 µs per ring step, the 8×A100
// all-reduce busbw comes out at 13/74/182/216/226 GB/s for 1 MiB/8 MiB/
// 64 MiB/256 MiB/1 GiB against the measured 18/110/172/194/229
// (ml-engineering tables; comm_model_test prints the curve).
#ifndef MESHTUNE_COSTMODEL_COMM_MODEL_H_
#define MESHTUNE_COSTMODEL_COMM_MODEL_H_

#include <cstdint>

#include "costmodel/calibration.h"

namespace meshtune::costmodel {

// Placement of a group of `size` ranks spaced `stride` apart in rank order,
// on a fabric whose NVLink domains hold `domain_gpus` consecutive ranks.
// REQUIRES: size, stride, domain_gpus >= 1.
CommGroup AxisGroup(int64_t stride, int64_t size, int64_t domain_gpus);

// nccl-tests bus-bandwidth factor of `op` over n ranks.
double BusFactor(Collective op, int64_t n);

// Ring steps that pay the per-step latency (2(n−1) for all-reduce, n−1 for
// all-gather/reduce-scatter/all-to-all, 1 for send/recv).
double RingSteps(Collective op, int64_t n);

// One link tier: achieved large-message bus bandwidth, per-step latency and
// the ramp time constant.
struct LinkTier {
  double busbw_Bps = 0;   // bytes/s
  double latency_s = 0;   // per ring step
  double ramp_s = 50e-6;  // τ: busbw(S) = busbw·S/(S + busbw·τ)
};

// Expected number of distinct bins hit by `draws` independent uniform draws
// over `bins` bins: bins·(1 − (1 − 1/bins)^draws). The flex dispatcher's
// destinations: a token routed to k experts spread evenly over N nodes (or
// ranks) reaches this many of them (sampling with replacement, which
// slightly overstates the spread of k distinct experts). 0 if bins < 1.
double ExpectedDistinctBins(double bins, double draws);

// Seconds of one dispatch (or combine) of Megatron's flex token dispatcher
// (--moe-token-dispatcher-type flex: DeepEP normal kernels or HybridEP) for
// one rank: `copy_bytes` is one copy of the rank's routed tokens, `topk`
// the experts each token goes to, `ep_group` the EP group's placement.
// DeepEP README (deepseek-ai/DeepEP, "normal kernels ... forwarding data
// from NVLink domain to RDMA domain"): a token crosses the network once per
// destination node, to the GPU on its own rail, and that GPU forwards it
// over NVLink to the GPUs holding its experts; both domains run at once:
//   max(send/recv of remote·copy_bytes on the network,
//       all-to-all of topk·copy_bytes among the ranks_per_node ranks),
// remote = ExpectedDistinctBins(N, topk)·(N−1)/N for N = ep_group.nodes.
// Inside one NVLink domain a token goes once to each destination rank:
// all-to-all of ExpectedDistinctBins(ep, topk)·copy_bytes.
double FlexDispatchTime_s(double copy_bytes, double topk,
                          const CommGroup& ep_group, const Calibration& cal,
                          const ModelOptions& options);

// Flat (single-tier) collective time on n ranks, `bytes` in nccl-tests
// convention. Zero when n <= 1 or bytes <= 0.
double FlatCollectiveTime_s(Collective op, double bytes, int64_t n,
                            const LinkTier& tier);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_COMM_MODEL_H_
