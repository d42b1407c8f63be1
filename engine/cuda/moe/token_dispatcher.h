// The expert-parallel token dispatcher of the CUDA MoE layer: the CPU
// dispatcher's data movement (engine/moe/token_dispatcher.h, Megatron-Core
// MoEAlltoAllTokenDispatcher) on device buffers. The row counts come from
// the CPU dispatcher's Plan, which exchanges them over the host
// communicators (Megatron also brings the split sizes to the host before
// its all-to-all); the rows themselves move by DeviceCommunicator::
// AllToAllV over "ep" and, for expert tensor parallelism, over "etp", with
// the row orders of the CPU dispatcher:
//   permuted[m, h]   this rank's routed rows by global expert
//   received         [src ep rank][local expert] after the ep all-to-all
//   gathered         [etp rank][src ep rank][local expert] after the etp
//                    all-gather (an all-to-all of copies: sizes differ)
//   expert_in[M, h]  [local expert][etp rank][src ep rank]
// Combine is the reverse; its etp reduce-scatter sums the partial outputs
// in etp rank order (bf16 storage, one rounding per add). bf16 rows.
#ifndef MESHTUNE_ENGINE_CUDA_MOE_TOKEN_DISPATCHER_H_
#define MESHTUNE_ENGINE_CUDA_MOE_TOKEN_DISPATCHER_H_

#include <cstdint>

#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "engine/moe/token_dispatcher.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// Grows `buffer` to at least `bytes` (its contents are lost when it grows;
// a growth reallocates with a quarter of headroom, so a layer's varying row
// counts settle after a few steps). The MoE layer's buffers depend on the
// routing, so they are sized per call.
Status ReserveBuffer(DeviceBuffer* buffer, size_t bytes);

class DeviceTokenDispatcher {
 public:
  // ep_size/etp_size and this rank's etp rank; `ep` and `etp` are the
  // device communicators of those groups (not owned; null for a group of
  // one). num_experts divisible by ep_size.
  DeviceTokenDispatcher(DeviceCommunicator* ep, DeviceCommunicator* etp,
                        int ep_size, int etp_size, int etp_rank,
                        int64_t num_experts, int64_t hidden);

  // permuted[m, h] -> expert_in[M, h] (plan.expert_rows() rows; sized by
  // the caller). On the legacy default stream.
  Status Dispatch(const Bf16* permuted, const moe::DispatchPlan& plan,
                  Bf16* expert_in);
  // expert_out[M, h] (partial sums over etp) -> routed[m, h].
  Status Combine(const Bf16* expert_out, const moe::DispatchPlan& plan,
                 Bf16* routed);

 private:
  // Rows of plan.counts blocks [begin, end).
  int64_t CountRows(const moe::DispatchPlan& plan, int64_t begin,
                    int64_t end) const;
  // Rows this rank routed to ep rank r's experts.
  int64_t RoutedRows(const moe::DispatchPlan& plan, int r) const;

  DeviceCommunicator* ep_;
  DeviceCommunicator* etp_;
  int ep_size_, etp_size_, etp_rank_;
  int64_t local_, h_;
  // Scratch: the ep all-to-all's rows, the etp copies, the gathered rows.
  DeviceBuffer received_, copies_, gathered_;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_MOE_TOKEN_DISPATCHER_H_
