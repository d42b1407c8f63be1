#include "engine/cpu/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace meshtune::engine::cpu {
namespace {

using search_spaces::RouterScore;

// Megatron's epsilon in the sigmoid normalisations.
constexpr double kSigmoidEps = 1e-20;

// Indices of the k largest of values[0, count) among `allowed` (null = all),
// by descending value, ties to the lower index.
std::vector<int32_t> TopK(const double* values, int64_t count, int64_t k,
                          const std::vector<char>* allowed) {
  std::vector<int32_t> idx;
  for (int64_t i = 0; i < count; ++i) {
    if (allowed == nullptr || (*allowed)[i])
      idx.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(idx.begin(), idx.end(), [values](int32_t a, int32_t b) {
    return values[a] > values[b];
  });
  idx.resize(std::min<size_t>(idx.size(), static_cast<size_t>(k)));
  return idx;
}

void Softmax(const double* x, int64_t count, double* out) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < count; ++i) max = std::max(max, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = std::exp(x[i] - max);
    sum += out[i];
  }
  for (int64_t i = 0; i < count; ++i) out[i] /= sum;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Megatron compute_topk: plain top-k, or group-limited (a group scores the
// sum of its top k/group_topk values; only the best group_topk groups'
// experts are eligible).
std::vector<int32_t> ComputeTopK(const double* scores, const RouterOptions& o) {
  const int64_t e = o.num_experts;
  if (o.num_groups <= 0) return TopK(scores, e, o.topk, nullptr);
  const int64_t per_group = e / o.num_groups;
  const int64_t top_in_group = o.topk / o.group_topk;
  std::vector<double> group_score(o.num_groups);
  for (int64_t g = 0; g < o.num_groups; ++g) {
    const std::vector<int32_t> best =
        TopK(scores + g * per_group, per_group, top_in_group, nullptr);
    double sum = 0;
    for (const int32_t i : best) sum += scores[g * per_group + i];
    group_score[g] = sum;
  }
  const std::vector<int32_t> groups =
      TopK(group_score.data(), o.num_groups, o.group_topk, nullptr);
  std::vector<char> allowed(e, 0);
  for (const int32_t g : groups) {
    std::fill(allowed.begin() + g * per_group,
              allowed.begin() + (g + 1) * per_group, 1);
  }
  return TopK(scores, e, o.topk, &allowed);
}

// One token's routing in float64: the chosen experts (before any capacity
// drop), their unscaled weights, and the aux-loss scores over all experts.
struct TokenRoute {
  std::vector<int32_t> chosen;  // k ids, descending routing score
  std::vector<double> weight;   // k unscaled probs
  std::vector<double> all;      // softmax over E, or sigmoid scores q[E]
  std::vector<double> aux;      // aux_scores[E]
  double sigmoid_sum = 0;       // Σ over the chosen q (sigmoid routing)
};

TokenRoute RouteToken(const float* logits, const RouterOptions& o) {
  const int64_t e = o.num_experts;
  TokenRoute r;
  std::vector<double> l(logits, logits + e);
  r.all.resize(e);
  r.aux.resize(e);
  if (o.score == RouterScore::kSigmoid) {
    double total = 0;
    for (int64_t i = 0; i < e; ++i) {
      r.all[i] = Sigmoid(l[i]);
      total += r.all[i];
    }
    for (int64_t i = 0; i < e; ++i) r.aux[i] = r.all[i] / (total + kSigmoidEps);
    std::vector<double> routing = r.all;
    if (o.expert_bias != nullptr) {
      for (int64_t i = 0; i < e; ++i) routing[i] += o.expert_bias[i];
    }
    r.chosen = ComputeTopK(routing.data(), o);
    for (const int32_t i : r.chosen) r.sigmoid_sum += r.all[i];
    for (const int32_t i : r.chosen) {
      r.weight.push_back(o.topk > 1 ? r.all[i] / (r.sigmoid_sum + kSigmoidEps)
                                    : r.all[i]);
    }
    return r;
  }
  Softmax(l.data(), e, r.all.data());
  r.aux = r.all;
  if (o.pre_softmax) {
    r.chosen = ComputeTopK(r.all.data(), o);
    for (const int32_t i : r.chosen) r.weight.push_back(r.all[i]);
    return r;
  }
  r.chosen = ComputeTopK(l.data(), o);
  std::vector<double> chosen_logits;
  for (const int32_t i : r.chosen) chosen_logits.push_back(l[i]);
  r.weight.resize(r.chosen.size());
  Softmax(chosen_logits.data(), static_cast<int64_t>(chosen_logits.size()),
          r.weight.data());
  return r;
}

// dscore -> dlogit through a softmax s over `count` entries:
// dl_i = s_i (g_i - Σ_j s_j g_j).
void SoftmaxBackward(const double* s, const double* g, int64_t count,
                     double* dl) {
  double dot = 0;
  for (int64_t i = 0; i < count; ++i) dot += s[i] * g[i];
  for (int64_t i = 0; i < count; ++i) dl[i] += s[i] * (g[i] - dot);
}

// coeff·E/(G·S²·k) with S = total_tokens/G tokens per group: the weight of
// Σ_g Σ_e T[g, e]·Σ_{t in g} p[t, e] in the (sequence) aux loss.
double AuxLossWeight(int64_t total_tokens, int64_t groups, int64_t experts,
                     int64_t topk, double coeff) {
  const double s = static_cast<double>(total_tokens) / groups;
  return coeff * static_cast<double>(experts) /
         (static_cast<double>(groups) * s * s * static_cast<double>(topk));
}

}  // namespace

void RouterForward(const float* logits, int64_t n, const RouterOptions& o,
                   float* probs, int32_t* experts, float* aux_scores) {
  const int64_t e = o.num_experts;
  const int64_t k = o.topk;
  for (int64_t t = 0; t < n; ++t) {
    const TokenRoute r = RouteToken(logits + t * e, o);
    for (int64_t j = 0; j < k; ++j) {
      experts[t * k + j] = r.chosen[j];
      probs[t * k + j] = static_cast<float>(r.weight[j] * o.scaling_factor);
    }
    for (int64_t i = 0; i < e; ++i) {
      aux_scores[t * e + i] = static_cast<float>(r.aux[i]);
    }
  }
}

void RouterBackward(const float* dprobs, const float* logits,
                    const int32_t* experts, int64_t n, const RouterOptions& o,
                    double aux_coeff, const int64_t* tokens_per_expert,
                    int64_t total_tokens, int64_t aux_groups, float* dlogits) {
  const int64_t e = o.num_experts;
  const int64_t k = o.topk;
  // d aux / d aux_scores[t, e], the same for every token of a group.
  std::vector<double> group_grad(aux_groups * e, 0.0);
  if (aux_coeff > 0) {
    const double w = AuxLossWeight(total_tokens, aux_groups, e, k, aux_coeff);
    for (int64_t i = 0; i < aux_groups * e; ++i) {
      group_grad[i] = w * static_cast<double>(tokens_per_expert[i]);
    }
  }
  std::vector<double> dl(e);
  for (int64_t t = 0; t < n; ++t) {
    const double* aux_grad = group_grad.data() + (t % aux_groups) * e;
    // The routing again (deterministic): the chosen experts before any
    // capacity drop, which the weights' Jacobian needs.
    const TokenRoute r = RouteToken(logits + t * e, o);
    std::fill(dl.begin(), dl.end(), 0.0);
    std::vector<double> dw(k, 0.0);  // d loss / d unscaled weight
    for (int64_t j = 0; j < k; ++j) {
      if (experts[t * k + j] >= 0) {
        dw[j] = static_cast<double>(dprobs[t * k + j]) * o.scaling_factor;
      }
    }
    if (o.score == RouterScore::kSigmoid) {
      std::vector<double> dq(e, 0.0);
      if (k > 1) {
        const double s = r.sigmoid_sum + kSigmoidEps;
        double dot = 0;
        for (int64_t j = 0; j < k; ++j) dot += dw[j] * r.all[r.chosen[j]];
        for (int64_t j = 0; j < k; ++j) {
          dq[r.chosen[j]] += dw[j] / s - dot / (s * s);
        }
      } else {
        dq[r.chosen[0]] += dw[0];
      }
      if (aux_coeff > 0) {
        double total = 0;
        for (int64_t i = 0; i < e; ++i) total += r.all[i];
        total += kSigmoidEps;
        double dot = 0;
        for (int64_t i = 0; i < e; ++i) dot += aux_grad[i] * r.all[i];
        for (int64_t i = 0; i < e; ++i) {
          dq[i] += aux_grad[i] / total - dot / (total * total);
        }
      }
      for (int64_t i = 0; i < e; ++i) {
        dl[i] = dq[i] * r.all[i] * (1.0 - r.all[i]);
      }
    } else {
      if (o.pre_softmax) {
        std::vector<double> g(e, 0.0);
        for (int64_t j = 0; j < k; ++j) g[r.chosen[j]] += dw[j];
        SoftmaxBackward(r.all.data(), g.data(), e, dl.data());
      } else {
        std::vector<double> dsel(k, 0.0);
        SoftmaxBackward(r.weight.data(), dw.data(), k, dsel.data());
        for (int64_t j = 0; j < k; ++j) dl[r.chosen[j]] += dsel[j];
      }
      if (aux_coeff > 0) {
        SoftmaxBackward(r.all.data(), aux_grad, e, dl.data());
      }
    }
    for (int64_t i = 0; i < e; ++i) {
      dlogits[t * e + i] = static_cast<float>(dl[i]);
    }
  }
}

void CountTokensPerExpert(const int32_t* experts, int64_t n, int64_t k,
                          int64_t num_experts, int64_t* tokens_per_expert) {
  CountTokensPerGroupExpert(experts, n, k, num_experts, 1, tokens_per_expert);
}

void UpdateExpertBias(const double* tokens_per_expert, int64_t num_experts,
                      float rate, float* bias) {
  double sum = 0;
  for (int64_t i = 0; i < num_experts; ++i) sum += tokens_per_expert[i];
  const double mean = sum / static_cast<double>(num_experts);
  for (int64_t i = 0; i < num_experts; ++i) {
    const double offset = mean - tokens_per_expert[i];
    const float sign = offset > 0 ? 1.0f : (offset < 0 ? -1.0f : 0.0f);
    bias[i] += sign * rate;
  }
}

void CountTokensPerGroupExpert(const int32_t* experts, int64_t n, int64_t k,
                               int64_t num_experts, int64_t groups,
                               int64_t* tokens) {
  std::fill(tokens, tokens + groups * num_experts, 0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t x = experts[t * k + j];
      if (x >= 0) ++tokens[(t % groups) * num_experts + x];
    }
  }
}

double SwitchAuxLoss(const float* aux_scores, const int64_t* tokens_per_expert,
                     int64_t n, int64_t total_tokens, int64_t aux_groups,
                     int64_t num_experts, int64_t topk, double coeff) {
  double sum = 0;
  for (int64_t g = 0; g < aux_groups; ++g) {
    for (int64_t e = 0; e < num_experts; ++e) {
      double prob_sum = 0;
      for (int64_t t = g; t < n; t += aux_groups) {
        prob_sum += aux_scores[t * num_experts + e];
      }
      sum += prob_sum *
             static_cast<double>(tokens_per_expert[g * num_experts + e]);
    }
  }
  return AuxLossWeight(total_tokens, aux_groups, num_experts, topk, coeff) *
         sum;
}

int64_t ExpertCapacity(int64_t n, int64_t topk, int64_t num_experts,
                       double capacity_factor) {
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(n * topk) / num_experts * capacity_factor));
}

int64_t DropOverCapacity(float* probs, int32_t* experts, int64_t n,
                         int64_t topk, int64_t num_experts, int64_t capacity) {
  // Per expert, its choices (flat index t·k + j) by descending prob; ties
  // keep the earlier token (stable sort over increasing flat index).
  std::vector<std::vector<int64_t>> by_expert(num_experts);
  for (int64_t i = 0; i < n * topk; ++i) {
    if (experts[i] >= 0) by_expert[experts[i]].push_back(i);
  }
  int64_t dropped = 0;
  for (auto& list : by_expert) {
    std::stable_sort(list.begin(), list.end(), [probs](int64_t a, int64_t b) {
      return probs[a] > probs[b];
    });
    for (size_t r = static_cast<size_t>(std::max<int64_t>(capacity, 0));
         r < list.size(); ++r) {
      experts[list[r]] = -1;
      probs[list[r]] = 0.0f;
      ++dropped;
    }
  }
  return dropped;
}

}  // namespace meshtune::engine::cpu
