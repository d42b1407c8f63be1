// The MoE MLP of one rank on the CPU (no expert parallelism yet): router
// linear, routing (engine/cpu/moe_router.h), optional capacity drop,
// permutation into per-expert blocks (engine/cpu/moe_permute.h), each
// expert's MLP on its block (the grouped GEMM, one LinearForward per
// expert), the probs-weighted combine, and a shared expert on every token
// added (DeepSeek / Qwen / Nemotron). Megatron-Core MoELayer semantics;
// the reference the parallel and CUDA MoE layers are tested against.
//
// Parameters (fp32, Megatron names; f = expert ffn size, s = shared size):
//   router[E, h]                 router.weight
//   fc1[E, f·g, h]               experts fc1 (g = 2 for SwiGLU: [gate | up])
//   fc2[E, h, f]                 experts fc2
//   shared_fc1[s·g, h], shared_fc2[h, s]   shared_experts (when s > 0)
// No biases (the MoE presets have none).
#ifndef MESHTUNE_ENGINE_CPU_MOE_LAYER_H_
#define MESHTUNE_ENGINE_CPU_MOE_LAYER_H_

#include <cstdint>
#include <vector>

#include "engine/cpu/moe_permute.h"
#include "engine/cpu/moe_router.h"

namespace meshtune::engine::cpu {

struct MoeLayerShape {
  int64_t hidden = 0;          // h
  int64_t expert_ffn = 0;      // f
  int64_t shared_ffn = 0;      // s (0 = no shared expert)
  bool swiglu = true;          // false = GELU
  RouterOptions router;        // E, k, scoring
  double capacity_factor = 0;  // 0 = dropless
  double aux_loss_coeff = 0;   // Megatron --moe-aux-loss-coeff
  // 1: the switch aux loss over all n tokens; b: Megatron's sequence aux
  // loss over the b sequences of sequence-major rows (moe_router.h).
  int64_t aux_groups = 1;
};

struct MoeLayerParams {
  const float* router = nullptr;
  const float* fc1 = nullptr;
  const float* fc2 = nullptr;
  const float* shared_fc1 = nullptr;  // null when shared_ffn == 0
  const float* shared_fc2 = nullptr;
};

// Gradients, accumulated (+=) as ops.h's parameter gradients.
struct MoeLayerGrads {
  float* router = nullptr;
  float* fc1 = nullptr;
  float* fc2 = nullptr;
  float* shared_fc1 = nullptr;
  float* shared_fc2 = nullptr;
};

// What the forward keeps for the backward.
struct MoeLayerCache {
  std::vector<float> logits;     // [n, E]
  std::vector<float> probs;      // [n, k]
  std::vector<int32_t> experts;  // [n, k], -1 = dropped
  std::vector<float> aux_scores;
  std::vector<int64_t> tokens_per_expert;  // [E], after dropping
  std::vector<int64_t> aux_tokens;         // [aux_groups, E], before dropping
  Permutation permutation;
  std::vector<float> permuted;        // [m, h]
  std::vector<float> fc1_out;         // [m, f·g]
  std::vector<float> act;             // [m, f]
  std::vector<float> expert_out;      // [m, h]
  std::vector<float> shared_fc1_out;  // [n, s·g]
  std::vector<float> shared_act;      // [n, s]
  double aux_loss = 0;                // the load-balancing loss of this call
  int64_t dropped = 0;                // choices the capacity rule dropped
};

// The experts' activation: out[rows, width] from fc1's output in[rows,
// width·g] ([gate | up] SwiGLU, g = 2, or GELU, g = 1), and its backward
// din[rows, width·g] (overwritten) from dout[rows, width]. The MoE layers
// of every backend use these (engine/moe/moe_block.h too).
void ExpertActivationForward(bool swiglu, const float* in, float* out,
                             int64_t rows, int64_t width);
void ExpertActivationBackward(bool swiglu, const float* dout, const float* in,
                              float* din, int64_t rows, int64_t width);

// out[n, h] (overwritten) for x[n, h].
void MoeLayerForward(const float* x, int64_t n, const MoeLayerShape& s,
                     const MoeLayerParams& p, float* out, MoeLayerCache* c);

// dx[n, h] (overwritten) from dout[n, h], plus the aux loss's gradient
// (scaled by aux_grad_scale: the caller's loss scaling of the aux term,
// 1 for a loss that adds aux_loss as it is); parameter gradients +=.
void MoeLayerBackward(const float* dout, const float* x, int64_t n,
                      const MoeLayerShape& s, const MoeLayerParams& p,
                      const MoeLayerCache& c, double aux_grad_scale, float* dx,
                      MoeLayerGrads* g);

}  // namespace meshtune::engine::cpu

#endif  // MESHTUNE_ENGINE_CPU_MOE_LAYER_H_
