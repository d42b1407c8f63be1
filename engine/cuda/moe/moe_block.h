// The MoE MLP of one rank on the GPU: engine/moe/moe_block.h's semantics
// (Megatron-Core MoELayer with the all-to-all dispatcher) in the CUDA
// engine's bf16 recipe. The same shape (moe::MoeShape) and the same
// routing code: the router GEMM runs on the GPU and its logits [nl, E]
// come to the host, where cpu::RouterForward / RouterBackward (softmax or
// sigmoid scores, top-k, group-limited routing), the aux loss with its
// counts summed over tp·cp, the capacity rule and the permutation run
// exactly as in the CPU engine. Megatron's all-to-all dispatcher also
// brings the per-expert counts to the host every layer (the split sizes of
// its all-to-all); here the logits travel too, nl·E floats, so a routing
// decision can never differ from the CPU reference's on the same logits.
// The rows move on the GPU: GatherRows into expert order, the device
// dispatcher (token_dispatcher.h) over ep and etp, one cuBLASLt GEMM per
// local expert for fc1 and fc2 (the grouped GEMM), the activation kernels,
// the combine back and the probs-weighted CombineRows; the shared expert
// is a tensor-parallel MLP on the GPU.
//
// Host synchronizations per layer: forward 2 (logits, then the dispatch
// plan over ep/etp), backward 1 (the probs' gradient for the router).
//
// Shapes (moe::MoeShape): nl local rows (n/tp under SP), h hidden, E
// experts, k top-k, fl = f/etp, sl = s/tp, g = 2 for SwiGLU. Weights are
// bf16 device pointers, gradients fp32 main grads (accumulated).
#ifndef MESHTUNE_ENGINE_CUDA_MOE_MOE_BLOCK_H_
#define MESHTUNE_ENGINE_CUDA_MOE_MOE_BLOCK_H_

#include <cstdint>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/cpu/moe_permute.h"
#include "engine/cpu/moe_router.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/moe/token_dispatcher.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "engine/moe/moe_block.h"
#include "engine/moe/token_dispatcher.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// The layer's groups (not owned). Host: tp_cp (aux-loss counts), ep and
// etp (the dispatch plan's counts). Device: tp (shared expert; null when
// tp = 1), ep and etp (the rows; null for a group of one).
struct CudaMoeComms {
  Communicator* tp_cp = nullptr;
  Communicator* ep = nullptr;
  Communicator* etp = nullptr;
  DeviceCommunicator* tp = nullptr;
  DeviceCommunicator* ep_rows = nullptr;
  DeviceCommunicator* etp_rows = nullptr;
};

struct CudaMoeWeights {
  const Bf16* router = nullptr;      // [E, h]
  std::vector<const Bf16*> fc1;      // [fl·g, h] per local expert
  std::vector<const Bf16*> fc2;      // [h, fl]
  const Bf16* shared_fc1 = nullptr;  // [sl·g, h]; null without
  const Bf16* shared_fc2 = nullptr;  // [h, sl]
};
struct CudaMoeGrads {
  float* router = nullptr;
  std::vector<float*> fc1, fc2;
  float* shared_fc1 = nullptr;
  float* shared_fc2 = nullptr;
};

// What one layer's forward keeps for its backward (one per layer and
// micro-batch in flight). Host: the routing; device: the rows, sized per
// call (ReserveBuffer) since they depend on the routing.
struct MoeActivations {
  std::vector<float> logits;        // [nl, E]
  std::vector<float> probs;         // [nl, k]
  std::vector<int32_t> experts;     // [nl, k], -1 = dropped
  std::vector<int64_t> aux_tokens;  // [aux_groups, E] over tp·cp
  cpu::Permutation permutation;     // of the kept choices (m rows)
  moe::DispatchPlan plan;           // M rows at this rank's experts
  double aux_loss = 0;              // this rank's part
  DeviceBuffer probs_dev;           // fp32 [nl·k]
  DeviceBuffer row_of;      // int32 [nl·k]: permuted row of each choice, -1
  DeviceBuffer choice;      // int32 [m]: flat choice of each permuted row
  DeviceBuffer expert_in;   // bf16 [M, h]
  DeviceBuffer fc1_out;     // bf16 [M, fl·g]
  DeviceBuffer act;         // bf16 [M, fl]
  DeviceBuffer routed;      // bf16 [m, h] the combined expert outputs
  DeviceBuffer shared_fc1;  // bf16 [n, sl·g]
  DeviceBuffer shared_act;  // bf16 [n, sl]
};

class CudaMoeBlock {
 public:
  // Nothing is owned; `gemm` and `dispatcher` are shared by the rank's MoE
  // layers (all work is ordered on the legacy default stream).
  CudaMoeBlock(const moe::MoeShape& shape, const CudaMoeComms& comms,
               GemmContext* gemm, DeviceTokenDispatcher* dispatcher);

  // x[nl, h] -> y[nl, h] (overwritten; must not alias x); fills `a`.
  Status Forward(const Bf16* x, const CudaMoeWeights& w, Bf16* y,
                 MoeActivations* a);
  // dy[nl, h] and the forward's x -> dx[nl, h] (overwritten); gradients
  // accumulate into g. With an expert bias, counts the routed tokens of
  // this micro-batch per expert for UpdateExpertBias.
  Status Backward(const Bf16* dy, const Bf16* x, const CudaMoeWeights& w,
                  const CudaMoeGrads& g, Bf16* dx, const MoeActivations& a);

  // DeepSeek-V3's aux-loss-free balancing (engine/cpu/moe_router.h): the
  // host bias [E] (the ParamStore entry mlp.router.expert_bias; not owned)
  // is added to the scores for choosing the experts, in the forward and in
  // the backward's re-routing, exactly as on the CPU.
  void set_expert_bias(const float* bias) { bias_ = bias; }
  // Once per step, after the optimizer: the routed tokens counted since
  // the last update summed over `sum_over` (host groups; the stage's tp and
  // dp·cp ranks), then cpu::UpdateExpertBias on `bias` (the same array as
  // set_expert_bias). Collective over those groups.
  void UpdateExpertBias(const std::vector<Communicator*>& sum_over, float rate,
                        float* bias);

 private:
  // The shape's routing options with the expert bias (forward and backward
  // must route alike).
  cpu::RouterOptions RouterOf() const;
  Status Route(const Bf16* x, const CudaMoeWeights& w, MoeActivations* a);
  Status ExpertsForward(const CudaMoeWeights& w, MoeActivations* a);
  Status ExpertsBackward(const CudaMoeWeights& w, const CudaMoeGrads& g,
                         const MoeActivations& a);
  Status SharedForward(const Bf16* x, const CudaMoeWeights& w, Bf16* y,
                       MoeActivations* a);
  Status SharedBackward(const Bf16* dy, const Bf16* x, const CudaMoeWeights& w,
                        const CudaMoeGrads& g, Bf16* dx,
                        const MoeActivations& a);
  // Partial sums [n, h] over tp (in `partial`, may be modified) reduced to
  // this rank's rows and added into dst [nl, h]: reduce-scattered under
  // SP, all-reduced when tp > 1 without it.
  Status ReduceTpInto(Bf16* partial, Bf16* dst);
  // [nl, h] -> [n, h] into `full` under SP (returned), else `in`.
  StatusOr<const Bf16*> GatherTp(const Bf16* in, DeviceBuffer* full);

  moe::MoeShape sh_;
  CudaMoeComms comms_;
  GemmContext* gemm_;
  DeviceTokenDispatcher* dispatcher_;
  moe::TokenDispatcher planner_;  // the counts, over the host groups
  int64_t gates_;
  const float* bias_ = nullptr;        // host [E]; null without
  std::vector<double> routed_tokens_;  // [E] since the last update
  // Scratch (one call at a time): bf16 logits and their gradient [nl, E],
  // token of each permuted row (int32 [m]), permuted rows and their
  // gradient [m, h], expert outputs and gradients [M, ...], the router's
  // input gradient [nl, h], the shared expert's gathered rows and partial
  // sums [n, h], the probs' gradient fp32 [nl·k].
  DeviceBuffer logits_, dlogits_, token_, permuted_, expert_out_, dexpert_,
      dact_, dfc1_, dexpert_in_, dx_router_, gathered_, gathered_dy_, partial_,
      reduced_, dprobs_;
  std::vector<Bf16> host_bf16_;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_MOE_MOE_BLOCK_H_
