// The MoE MLP of one rank inside a transformer layer (Megatron-Core
// MoELayer with the all-to-all dispatcher): the router (replicated over tp,
// on this rank's token rows), top-k routing with optional capacity dropping
// (engine/cpu/moe_router.h), the load-balancing aux loss, the permutation
// by expert, the expert-parallel dispatch (token_dispatcher.h), this rank's
// local experts as grouped GEMMs (one Eigen GEMM per expert, their FFN
// split over etp: fc1 by columns, fc2 by rows), the combine weighted by the
// routing probs, and the shared expert (a tensor-parallel MLP on every
// token). Forward and backward; engine/cpu/moe_layer.h is the one-rank
// reference it equals.
//
// Rows are this rank's local token rows (sequence-major): n/tp under
// sequence parallelism (which Megatron requires for MoE with tp > 1), n
// otherwise. Weights are buffers the caller owns (engine/transformer_layer.h
// registers them under Megatron-Core's names): the router [E, h]
// (replicated), this ep rank's experts' fc1 [f·g, h] split by rows over etp
// and fc2 [h, f] split by columns, the shared expert's fc1 [s·g, h] and fc2
// [h, s] split over tp; f the expert FFN size, s the shared size, g = 2 for
// SwiGLU ([gate | up] per shard).
//
// The aux loss (Megatron switch_load_balancing_loss_func) counts each
// expert's choices over the tp·cp ranks that split the sequences (before
// capacity dropping, as Megatron's compute_routing_scores_for_aux_loss), so
// the per-rank partial losses add up to the one-rank loss.
#ifndef MESHTUNE_ENGINE_MOE_MOE_BLOCK_H_
#define MESHTUNE_ENGINE_MOE_MOE_BLOCK_H_

#include <cstdint>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/cpu/moe_permute.h"
#include "engine/cpu/moe_router.h"
#include "engine/moe/token_dispatcher.h"

namespace meshtune::engine::moe {

// Sizes and options of one MoE layer on one rank.
struct MoeShape {
  int64_t n = 0;   // rows of one micro-batch on this rank before SP: s·b/cp
  int64_t nl = 0;  // this rank's rows: n/tp under SP, else n
  int64_t hidden = 0;          // h
  int64_t expert_ffn = 0;      // f/etp: this rank's share of one expert
  int64_t shared_ffn = 0;      // s/tp (0 = no shared expert)
  bool swiglu = true;          // false = GELU
  cpu::RouterOptions router;   // E, k, scoring
  double capacity_factor = 0;  // 0 = dropless
  double aux_loss_coeff = 0;   // Megatron --moe-aux-loss-coeff
  // 1: the switch aux loss over the micro-batch; b (the micro-batch size):
  // the sequence aux loss, per sequence of the sequence-major rows
  // (engine/cpu/moe_router.h SwitchAuxLoss).
  int64_t aux_groups = 1;
  // The factor the trainer's loss applies to one micro-batch's aux loss:
  // cp / num_microbatches (the micro-batch mean, times cp because gradients
  // are averaged over dp·cp while the cp ranks' partial losses add up).
  double aux_grad_scale = 0;
  bool sp = false;  // sequence parallelism with tp > 1
};

// The communicators of the layer (not owned): tp (shared expert, SP),
// tp_cp (aux-loss counts), ep and etp (dispatcher).
struct MoeComms {
  Communicator* tp = nullptr;
  Communicator* tp_cp = nullptr;
  Communicator* ep = nullptr;
  Communicator* etp = nullptr;
};

// This rank's tensors (local shapes; fc1/fc2 per local expert) and, for
// Backward, their gradients (accumulated).
struct MoeWeights {
  const float* router = nullptr;       // [E, h]
  const float* expert_bias = nullptr;  // [E] aux-loss-free bias; null without
  std::vector<const float*> fc1;       // [f/etp·g, h] each
  std::vector<const float*> fc2;       // [h, f/etp] each
  const float* shared_fc1 = nullptr;   // [s/tp·g, h]; null without
  const float* shared_fc2 = nullptr;   // [h, s/tp]
};
struct MoeGrads {
  float* router = nullptr;
  std::vector<float*> fc1, fc2;
  float* shared_fc1 = nullptr;
  float* shared_fc2 = nullptr;
};

// What Forward keeps for Backward. nl local rows, k, E, m routed rows, M
// rows at this rank's experts, fl = f/etp, sl = s/tp.
struct MoeCache {
  std::vector<float> logits;        // [nl, E]
  std::vector<float> probs;         // [nl, k]
  std::vector<int32_t> experts;     // [nl, k], -1 = dropped
  std::vector<float> aux_scores;    // [nl, E]
  std::vector<int64_t> aux_tokens;  // [aux_groups, E] over tp·cp, undropped
  cpu::Permutation permutation;     // of the kept choices
  DispatchPlan plan;                // row counts of the dispatch
  std::vector<float> expert_in;     // [M, h]
  std::vector<float> fc1_out;       // [M, fl·g]
  std::vector<float> act;           // [M, fl]
  std::vector<float> routed_out;    // [m, h] combined expert output
  std::vector<float> shared_fc1, shared_act;  // [n, sl·g], [n, sl]
  double aux_loss = 0;  // this rank's part of the layer's aux loss
  int64_t dropped = 0;  // choices the capacity rule dropped here
  void Clear() { *this = MoeCache(); }
};

class MoeBlock {
 public:
  MoeBlock(const MoeShape& shape, const MoeComms& comms);

  // x[nl, h] -> y[nl, h] (overwritten).
  void Forward(const float* x, const MoeWeights& w, float* y, MoeCache* c);
  // dy[nl, h] and the forward's x -> dx[nl, h] (overwritten); gradients
  // accumulate into g.
  void Backward(const float* dy, const float* x, const MoeWeights& w,
                const MoeGrads& g, float* dx, MoeCache* c);

 private:
  // The shape's routing options with this step's expert bias (forward and
  // backward must route alike).
  cpu::RouterOptions RouterOf(const MoeWeights& w) const;
  void SharedForward(const float* x, const MoeWeights& w, float* y,
                     MoeCache* c);
  void SharedBackward(const float* dy, const float* x, const MoeWeights& w,
                      const MoeGrads& g, float* dx, MoeCache* c);

  MoeShape sh_;
  MoeComms comms_;
  TokenDispatcher dispatcher_;
  int64_t gates_ = 1;  // 2 for SwiGLU
};

}  // namespace meshtune::engine::moe

#endif  // MESHTUNE_ENGINE_MOE_MOE_BLOCK_H_
