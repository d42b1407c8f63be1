// The MoE router's CPU reference against hand-computed routing (softmax
// after and before top-k, sigmoid with expert bias and scaling, group-
// limited routing), the switch aux loss (a balanced router gives exactly
// its coefficient), the capacity rule's dropped tokens, and the backward
// against finite differences of the forward.
#include "engine/cpu/moe_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace meshtune::engine::cpu {
namespace {

using search_spaces::RouterScore;

RouterOptions Options(int64_t e, int64_t k) {
  RouterOptions o;
  o.num_experts = e;
  o.topk = k;
  return o;
}

struct Routed {
  std::vector<float> probs;
  std::vector<int32_t> experts;
  std::vector<float> aux;
};

Routed Route(const std::vector<float>& logits, const RouterOptions& o) {
  const int64_t n = static_cast<int64_t>(logits.size()) / o.num_experts;
  Routed r;
  r.probs.resize(n * o.topk);
  r.experts.resize(n * o.topk);
  r.aux.resize(n * o.num_experts);
  RouterForward(logits.data(), n, o, r.probs.data(), r.experts.data(),
                r.aux.data());
  return r;
}

// logits [1, 3, 2, 0]: exp = [2.71828, 20.0855, 7.38906, 1], sum 31.1929.
TEST(MoeRouter, SoftmaxAfterTopK) {
  const Routed r = Route({1, 3, 2, 0}, Options(4, 2));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));
  // softmax([3, 2]) = [e/(e+1), 1/(e+1)].
  EXPECT_NEAR(r.probs[0], 0.7310586, 1e-6);
  EXPECT_NEAR(r.probs[1], 0.2689414, 1e-6);
  const std::vector<float> all = {0.0871443f, 0.6439142f, 0.2368828f,
                                  0.0320586f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.aux[i], all[i], 1e-6) << i;
}

TEST(MoeRouter, SoftmaxBeforeTopK) {
  RouterOptions o = Options(4, 2);
  o.pre_softmax = true;
  const Routed r = Route({1, 3, 2, 0}, o);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(r.probs[0], 0.6439142, 1e-6);
  EXPECT_NEAR(r.probs[1], 0.2368828, 1e-6);
}

// sigmoid([0, 1, -1, 2]) = [0.5, 0.7310586, 0.2689414, 0.8807971]; the bias
// of expert 2 makes it chosen, but its weight is its unbiased score; the two
// are normalised (k > 1) and scaled by 2.5.
TEST(MoeRouter, SigmoidWithExpertBiasAndScaling) {
  RouterOptions o = Options(4, 2);
  o.score = RouterScore::kSigmoid;
  const float bias[] = {0, 0, 5, 0};
  o.expert_bias = bias;
  o.scaling_factor = 2.5f;
  const Routed r = Route({0, 1, -1, 2}, o);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 3}));
  // 0.2689414 / 1.1497385 = 0.2339154; 0.8807971 / 1.1497385 = 0.7660846.
  EXPECT_NEAR(r.probs[0], 2.5 * 0.2339154, 1e-6);
  EXPECT_NEAR(r.probs[1], 2.5 * 0.7660846, 1e-6);
  // Aux scores: the sigmoids over their sum 2.3807971.
  EXPECT_NEAR(r.aux[3], 0.8807971 / 2.3807971, 1e-6);
}

// Groups {0, 1} and {2, 3}; a group scores the sum of its top k/group_topk
// = 2 logits: 5 + 0 = 5 against 3 + 3 = 6, so only experts 2 and 3 (equal
// logits: the lower id first) may be chosen, though expert 0 is the best.
TEST(MoeRouter, GroupLimitedRouting) {
  RouterOptions o = Options(4, 2);
  EXPECT_EQ(Route({5, 0, 3, 3}, o).experts, (std::vector<int32_t>{0, 2}));
  o.num_groups = 2;
  o.group_topk = 1;
  EXPECT_EQ(Route({5, 0, 3, 3}, o).experts, (std::vector<int32_t>{2, 3}));
}

// coeff · E / (n² k) · Σ_e tokens_e · Σ_t aux[t, e].
TEST(MoeRouter, SwitchAuxLoss) {
  // Balanced: every expert n·k/E = 1 token and Σ_t aux = n/E = 0.5.
  const std::vector<float> uniform(8, 0.25f);
  const int64_t balanced[] = {1, 1, 1, 1};
  EXPECT_NEAR(SwitchAuxLoss(uniform.data(), balanced, 2, 2, 1, 4, 2, 0.01),
              0.01, 1e-9);
  // Token 0 = logits [1, 3, 2, 0] (experts 1, 2), token 1 uniform (experts
  // 0, 1 by the tie rule): tokens [1, 2, 1, 0]; Σ_t aux = [0.3371443,
  // 0.8939142, 0.4868828, 0.2820586]; Σ tokens·aux = 2.6118555;
  // loss = 0.01 · 4 / 8 · 2.6118555 = 0.01305928.
  const Routed r = Route({1, 3, 2, 0, 0, 0, 0, 0}, Options(4, 2));
  int64_t tokens[4];
  CountTokensPerExpert(r.experts.data(), 2, 2, 4, tokens);
  EXPECT_EQ(std::vector<int64_t>(tokens, tokens + 4),
            (std::vector<int64_t>{1, 2, 1, 0}));
  EXPECT_NEAR(SwitchAuxLoss(r.aux.data(), tokens, 2, 2, 1, 4, 2, 0.01),
              0.01305928, 1e-7);
}

TEST(MoeRouter, CapacityKeepsTheLargestProbs) {
  // ceil(n·k / E · factor).
  EXPECT_EQ(ExpertCapacity(4, 2, 4, 1.0), 2);
  EXPECT_EQ(ExpertCapacity(4, 2, 4, 1.25), 3);
  EXPECT_EQ(ExpertCapacity(4, 2, 4, 0.3), 1);
  // Expert 0 gets tokens 0 (0.6) and 1 (0.9) but holds one: token 0 drops.
  std::vector<float> probs = {0.6f, 0.9f, 0.7f};
  std::vector<int32_t> experts = {0, 0, 1};
  EXPECT_EQ(DropOverCapacity(probs.data(), experts.data(), 3, 1, 2, 1), 1);
  EXPECT_EQ(experts, (std::vector<int32_t>{-1, 0, 1}));
  EXPECT_EQ(probs, (std::vector<float>{0.0f, 0.9f, 0.7f}));
  // Equal probs: the earlier token stays.
  probs = {0.5f, 0.5f};
  experts = {1, 1};
  EXPECT_EQ(DropOverCapacity(probs.data(), experts.data(), 2, 1, 2, 1), 1);
  EXPECT_EQ(experts, (std::vector<int32_t>{1, -1}));
}

// L = Σ dprobs·probs (+ the aux loss): RouterBackward against central
// differences of RouterForward, for every scoring mode, with a dropped
// choice and the aux term.
// groups = 3: the sequence aux loss with one token per sequence (rows
// t % 3), each with its own counts.
void CheckGradient(const RouterOptions& o, double aux_coeff,
                   int64_t groups = 1) {
  const int64_t n = 3, e = o.num_experts, k = o.topk;
  std::vector<float> logits = {0.3f, -1.2f, 2.1f,  0.8f, 1.5f, -0.4f,
                               0.9f, 2.6f,  -0.7f, 1.1f, 0.2f, -1.9f};
  const std::vector<float> dprobs = {0.7f, -0.3f, 1.1f, 0.4f, -0.8f, 0.5f};
  const Routed base = Route(logits, o);
  std::vector<int32_t> experts = base.experts;
  if (k > 1) experts[3] = -1;  // as if capacity dropped token 1's 2nd pick
  std::vector<int64_t> tokens(groups * e);
  CountTokensPerGroupExpert(experts.data(), n, k, e, groups, tokens.data());
  const auto loss = [&](const std::vector<float>& l) {
    const Routed r = Route(l, o);
    double sum = 0;
    for (int64_t i = 0; i < n * k; ++i) {
      if (experts[i] >= 0) sum += dprobs[i] * r.probs[i];
    }
    if (aux_coeff > 0) {
      sum += SwitchAuxLoss(r.aux.data(), tokens.data(), n, n, groups, e, k,
                           aux_coeff);
    }
    return sum;
  };
  std::vector<float> dlogits(n * e);
  RouterBackward(dprobs.data(), logits.data(), experts.data(), n, o, aux_coeff,
                 tokens.data(), n, groups, dlogits.data());
  const float h = 1e-2f;
  for (int64_t i = 0; i < n * e; ++i) {
    std::vector<float> plus = logits, minus = logits;
    plus[i] += h;
    minus[i] -= h;
    const double numeric = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(dlogits[i], numeric, 2e-3) << "logit " << i;
  }
}

TEST(MoeRouter, BackwardMatchesFiniteDifferences) {
  RouterOptions o = Options(4, 2);
  CheckGradient(o, 0.0);
  CheckGradient(o, 0.1);
  o.pre_softmax = true;
  CheckGradient(o, 0.1);
  o = Options(4, 2);
  o.score = RouterScore::kSigmoid;
  o.scaling_factor = 2.5f;
  CheckGradient(o, 0.1);
  o.topk = 1;
  CheckGradient(o, 0.0);
  // The sequence aux loss (3 one-token sequences).
  CheckGradient(Options(4, 2), 0.1, 3);
  o = Options(4, 2);
  o.score = RouterScore::kSigmoid;
  CheckGradient(o, 0.1, 3);
}

// Hand-computed sequence aux loss: 2 sequences of 2 tokens (rows t = pos·2
// + seq), 2 experts, top-1. Sequence 0 (rows 0, 2) sends both to expert 0;
// sequence 1 (rows 1, 3) one to each. Per sequence f_e = T[e]·E/(S·k) and
// P_e = mean score; loss = coeff · mean over sequences of Σ_e f_e·P_e.
// Scores: row 0 (0.75, 0.25), row 2 (0.25, 0.75), rows 1 and 3 (0.5, 0.5):
//   seq 0: f = (2, 0), P_0 = 0.5        -> 1.0
//   seq 1: f = (1, 1), P = (0.5, 0.5)   -> 1.0
// so 0.01 · 1.0 = 0.01; with row 0 at (1, 0), seq 0's P_0 = 0.625 gives
// 1.25 and the loss 0.01 · (1.25 + 1)/2 = 0.01125. The switch loss over the
// 4 tokens: T = (3, 1), Σ_t p = (2, 2): 0.01 · 2/(16·1) · (6 + 2) = 0.01.
TEST(MoeRouter, SequenceAuxLossByHand) {
  const std::vector<float> scores = {0.75f, 0.25f, 0.5f, 0.5f,
                                     0.25f, 0.75f, 0.5f, 0.5f};
  const std::vector<int32_t> experts = {0, 0, 0, 1};
  int64_t per_seq[4];
  CountTokensPerGroupExpert(experts.data(), 4, 1, 2, 2, per_seq);
  EXPECT_EQ(std::vector<int64_t>(per_seq, per_seq + 4),
            (std::vector<int64_t>{2, 0, 1, 1}));
  EXPECT_NEAR(SwitchAuxLoss(scores.data(), per_seq, 4, 4, 2, 2, 1, 0.01), 0.01,
              1e-12);
  std::vector<float> leaning = scores;
  leaning[0] = 1.0f;
  leaning[1] = 0.0f;
  EXPECT_NEAR(SwitchAuxLoss(leaning.data(), per_seq, 4, 4, 2, 2, 1, 0.01),
              0.01125, 1e-12);
  int64_t all[2];
  CountTokensPerGroupExpert(experts.data(), 4, 1, 2, 1, all);
  EXPECT_NEAR(SwitchAuxLoss(scores.data(), all, 4, 4, 1, 2, 1, 0.01), 0.01,
              1e-12);
}

// Megatron's get_updated_expert_bias by hand: loads {3, 1, 2, 2}, mean 2,
// so expert 0 (above the mean) loses a step, expert 1 (below) gains one and
// the two at the mean keep their bias.
TEST(MoeRouter, ExpertBiasStepsTowardTheMeanLoad) {
  const double tokens[4] = {3, 1, 2, 2};
  float bias[4] = {0.5f, 0.0f, 0.0f, -0.5f};
  UpdateExpertBias(tokens, 4, 0.01f, bias);
  EXPECT_FLOAT_EQ(bias[0], 0.49f);
  EXPECT_FLOAT_EQ(bias[1], 0.01f);
  EXPECT_EQ(bias[2], 0.0f);
  EXPECT_EQ(bias[3], -0.5f);
}

}  // namespace
}  // namespace meshtune::engine::cpu
