// Token permutation of an MoE layer (Megatron-Core moe_utils.permute /
// unpermute): the tokens routed to each expert gathered into one
// contiguous block per expert (what a grouped GEMM reads and what expert
// parallelism's all-to-all sends), and the experts' outputs combined back
// into token order weighted by the routing probs. CPU reference over flat
// fp32 buffers, conventions of engine/cpu/ops.h.
//
// Shapes: n tokens, hidden h, k choices per token, E experts, m = the
// number of kept choices (experts[i] >= 0; engine/cpu/moe_router.h).
//   x[n, h]          layer input, token order
//   permuted[m, h]   rows grouped by expert (expert 0's first), each
//                    expert's rows in token order
//   source[m]        the flat choice index t·k + j of each permuted row
//   expert_out[m, h] the experts' outputs, permuted order
//   out[n, h]        Σ_j probs[t, j] · expert_out[row of (t, j)]
#ifndef MESHTUNE_ENGINE_CPU_MOE_PERMUTE_H_
#define MESHTUNE_ENGINE_CPU_MOE_PERMUTE_H_

#include <cstdint>
#include <vector>

namespace meshtune::engine::cpu {

struct Permutation {
  std::vector<int64_t> source;             // [m] flat choice t·k + j per row
  std::vector<int64_t> tokens_per_expert;  // [E], Σ = m
};

// The permutation of experts[n, k]: rows by expert, then by choice index.
Permutation PermutationOf(const int32_t* experts, int64_t n, int64_t k,
                          int64_t num_experts);

// permuted[m, h] = x[source[r] / k] for every row r.
void PermuteForward(const float* x, const Permutation& p, int64_t k, int64_t h,
                    float* permuted);
// dx[n, h] (overwritten) = Σ over the rows of token t of dpermuted[r].
void PermuteBackward(const float* dpermuted, const Permutation& p, int64_t n,
                     int64_t k, int64_t h, float* dx);

// out[n, h] (overwritten) = Σ_r probs[source[r]] · expert_out[r] over the
// rows of each token (a token whose choices were all dropped gets 0).
void UnpermuteForward(const float* expert_out, const float* probs,
                      const Permutation& p, int64_t n, int64_t k, int64_t h,
                      float* out);
// dexpert_out[m, h] (overwritten) = probs[source[r]] · dout[token];
// dprobs[n, k] (overwritten; 0 for dropped choices) = dout[token] ·
// expert_out[r].
void UnpermuteBackward(const float* dout, const float* expert_out,
                       const float* probs, const Permutation& p, int64_t n,
                       int64_t k, int64_t h, float* dexpert_out, float* dprobs);

}  // namespace meshtune::engine::cpu

#endif  // MESHTUNE_ENGINE_CPU_MOE_PERMUTE_H_
