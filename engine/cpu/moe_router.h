// The CPU reference of Megatron-Core's MoE router (TopKRouter and
// moe_utils.topk_routing_with_score_function, switch_load_balancing_loss_func,
// get_capacity): fp32 scores over the router logits, top-k experts per
// token with optional group-limited routing and aux-loss-free expert bias,
// the load-balancing auxiliary loss, and the capacity rule that drops
// tokens. Forward and backward over flat buffers, as engine/cpu/ops.h; the
// CUDA router and the MoE layer are tested against these.
//
// Shapes: n tokens (rows, [s, b] flattened as in ops.h), E experts, k = topk.
//   logits[n, E]       router output x·W_routerᵀ (fp32)
//   probs[n, k]        routing weight of each chosen expert
//   experts[n, k]      chosen expert ids, by descending routing score;
//                      -1 where the capacity rule dropped the token
//   aux_scores[n, E]   the scores the aux loss reads: softmax over all E
//                      logits (softmax routing), or the sigmoid scores
//                      normalised to sum 1 per token (sigmoid routing)
#ifndef MESHTUNE_ENGINE_CPU_MOE_ROUTER_H_
#define MESHTUNE_ENGINE_CPU_MOE_ROUTER_H_

#include <cstdint>
#include <vector>

#include "search_spaces/model_spec.h"

namespace meshtune::engine::cpu {

struct RouterOptions {
  int64_t num_experts = 0;  // E
  int64_t topk = 0;         // k
  // kSoftmax or kSigmoid (sqrtsoftplus is not implemented here).
  search_spaces::RouterScore score = search_spaces::RouterScore::kSoftmax;
  // Softmax routing: true = softmax over all E, then top-k (probs do not
  // sum to 1); false (Megatron's default) = top-k logits, softmax over k.
  bool pre_softmax = false;
  // Group-limited routing (DeepSeek-V3: 8 groups, top 4): experts split in
  // num_groups equal groups; a group's score is the sum of its top
  // (k / group_topk) scores; only experts of the best group_topk groups are
  // chosen. 0 = off.
  int64_t num_groups = 0;
  int64_t group_topk = 0;
  // Megatron --moe-router-topk-scaling-factor: probs are multiplied by it.
  float scaling_factor = 1.0f;
  // Aux-loss-free balancing: bias[E] added to the scores for choosing the
  // experts only (the probs are the unbiased scores). Null = none; sigmoid
  // routing only, as Megatron requires.
  const float* expert_bias = nullptr;
};

// Routes n tokens: fills probs[n, k], experts[n, k] and aux_scores[n, E].
// Sigmoid routing with k > 1 normalises the k scores to sum 1 before
// scaling (Megatron: probs / (Σ probs + 1e-20)). Ties between equal scores
// go to the lower expert id.
void RouterForward(const float* logits, int64_t n, const RouterOptions& o,
                   float* probs, int32_t* experts, float* aux_scores);

// dlogits[n, E] (overwritten) from dprobs[n, k] through the routing
// weights (entries with experts == -1 carry no gradient) and, when
// aux_coeff > 0, from the aux loss (SwitchAuxLoss, with the forward's
// tokens_per_expert [aux_groups, E], total_tokens and aux_groups) through
// aux_scores. The routing is
// recomputed from the logits (it is deterministic), so the weights of dropped
// choices still enter the softmax's Jacobian; the chosen experts are constants,
// as in PyTorch's top-k.
void RouterBackward(const float* dprobs, const float* logits,
                    const int32_t* experts, int64_t n, const RouterOptions& o,
                    double aux_coeff, const int64_t* tokens_per_expert,
                    int64_t total_tokens, int64_t aux_groups, float* dlogits);

// tokens_per_expert[E] (overwritten): how many of the n·k choices went to
// each expert (dropped ones, -1, not counted).
void CountTokensPerExpert(const int32_t* experts, int64_t n, int64_t k,
                          int64_t num_experts, int64_t* tokens_per_expert);

// tokens[groups, E] (overwritten): CountTokensPerExpert per group, token t
// in group t % groups (rows are sequence-major, so with groups = b a group
// is one sequence of the micro-batch).
void CountTokensPerGroupExpert(const int32_t* experts, int64_t n, int64_t k,
                               int64_t num_experts, int64_t groups,
                               int64_t* tokens);

// Megatron's aux-loss-free balancing update (get_updated_expert_bias,
// DeepSeek-V3 §2.1.2): once per step, after tokens_per_expert[E] (the
// step's routed tokens, summed over tp·cp·dp) are known,
// bias[i] += rate · sign(mean − tokens_per_expert[i]): experts below the
// mean load are favoured next step, those above it less (sign(0) = 0).
void UpdateExpertBias(const double* tokens_per_expert, int64_t num_experts,
                      float rate, float* bias);

// Megatron's load-balancing losses over the n tokens t of aux_scores, in
// G = aux_groups groups (token t in group t % G), S = total_tokens / G:
//   coeff · E / (G · S² · k) · Σ_g Σ_e T[g, e] · Σ_{t in g} aux_scores[t, e]
// where T = tokens_per_expert [G, E] counts the choices of all the groups'
// tokens (also those of the tp·cp ranks that split the sequences, whose
// partial losses then add up to the whole one). G = 1 is the switch loss
// (switch_load_balancing_loss_func, --moe-router-load-balancing-type
// aux_loss); G = b, the micro-batch's sequences, is the sequence aux loss
// (sequence_load_balancing_loss_func, seq_aux_loss: each sequence's switch
// loss, averaged). A perfectly balanced router gives coeff (each expert
// S·k/E of a group's choices and Σ_{t in g} aux_scores[t, e] = S/E).
double SwitchAuxLoss(const float* aux_scores, const int64_t* tokens_per_expert,
                     int64_t n, int64_t total_tokens, int64_t aux_groups,
                     int64_t num_experts, int64_t topk, double coeff);

// Megatron get_capacity over the n·k choices: ceil(n·k / E · factor).
int64_t ExpertCapacity(int64_t n, int64_t topk, int64_t num_experts,
                       double capacity_factor);

// Token dropping with Megatron's "probs" policy: each expert keeps the
// `capacity` choices with the largest probs (ties: the earlier token) and
// the rest become experts = -1, probs = 0. Returns how many were dropped.
int64_t DropOverCapacity(float* probs, int32_t* experts, int64_t n,
                         int64_t topk, int64_t num_experts, int64_t capacity);

}  // namespace meshtune::engine::cpu

#endif  // MESHTUNE_ENGINE_CPU_MOE_ROUTER_H_
