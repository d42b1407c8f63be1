#include "engine/cpu/moe_layer.h"

#include <algorithm>

#include "engine/cpu/ops.h"

namespace meshtune::engine::cpu {
namespace {

int64_t Gates(const MoeLayerShape& s) { return s.swiglu ? 2 : 1; }

// First row of each expert's block in the permuted order.
std::vector<int64_t> BlockStarts(const Permutation& p) {
  std::vector<int64_t> start(p.tokens_per_expert.size() + 1, 0);
  for (size_t e = 0; e < p.tokens_per_expert.size(); ++e) {
    start[e + 1] = start[e] + p.tokens_per_expert[e];
  }
  return start;
}

}  // namespace

void ExpertActivationForward(bool swiglu, const float* in, float* out,
                             int64_t rows, int64_t width) {
  if (swiglu) {
    SwigluForward(in, out, rows, width);
  } else {
    GeluForward(in, out, rows * width);
  }
}

void ExpertActivationBackward(bool swiglu, const float* dout, const float* in,
                              float* din, int64_t rows, int64_t width) {
  if (swiglu) {
    SwigluBackward(dout, in, din, rows, width);
  } else {
    GeluBackward(dout, in, din, rows * width);
  }
}

void MoeLayerForward(const float* x, int64_t n, const MoeLayerShape& s,
                     const MoeLayerParams& p, float* out, MoeLayerCache* c) {
  const RouterOptions& r = s.router;
  const int64_t e_count = r.num_experts, k = r.topk, h = s.hidden;
  const int64_t f = s.expert_ffn, fg = f * Gates(s);
  c->logits.resize(n * e_count);
  LinearForward(x, p.router, nullptr, c->logits.data(), n, h, e_count);
  c->probs.resize(n * k);
  c->experts.resize(n * k);
  c->aux_scores.resize(n * e_count);
  RouterForward(c->logits.data(), n, r, c->probs.data(), c->experts.data(),
                c->aux_scores.data());
  // The aux loss counts the routing before any drop (Megatron's
  // compute_routing_scores_for_aux_loss).
  c->aux_tokens.resize(s.aux_groups * e_count);
  CountTokensPerGroupExpert(c->experts.data(), n, k, e_count, s.aux_groups,
                            c->aux_tokens.data());
  c->aux_loss =
      s.aux_loss_coeff > 0
          ? SwitchAuxLoss(c->aux_scores.data(), c->aux_tokens.data(), n, n,
                          s.aux_groups, e_count, k, s.aux_loss_coeff)
          : 0.0;
  c->dropped = 0;
  if (s.capacity_factor > 0) {
    c->dropped =
        DropOverCapacity(c->probs.data(), c->experts.data(), n, k, e_count,
                         ExpertCapacity(n, k, e_count, s.capacity_factor));
  }
  c->tokens_per_expert.resize(e_count);
  CountTokensPerExpert(c->experts.data(), n, k, e_count,
                       c->tokens_per_expert.data());

  c->permutation = PermutationOf(c->experts.data(), n, k, e_count);
  const int64_t m = static_cast<int64_t>(c->permutation.source.size());
  c->permuted.resize(m * h);
  PermuteForward(x, c->permutation, k, h, c->permuted.data());
  // The grouped GEMM: each expert's weights on its block of rows.
  const std::vector<int64_t> start = BlockStarts(c->permutation);
  c->fc1_out.resize(m * fg);
  c->act.resize(m * f);
  c->expert_out.resize(m * h);
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t rows = start[e + 1] - start[e];
    if (rows == 0) continue;
    LinearForward(c->permuted.data() + start[e] * h, p.fc1 + e * fg * h,
                  nullptr, c->fc1_out.data() + start[e] * fg, rows, h, fg);
  }
  ExpertActivationForward(s.swiglu, c->fc1_out.data(), c->act.data(), m, f);
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t rows = start[e + 1] - start[e];
    if (rows == 0) continue;
    LinearForward(c->act.data() + start[e] * f, p.fc2 + e * h * f, nullptr,
                  c->expert_out.data() + start[e] * h, rows, f, h);
  }
  UnpermuteForward(c->expert_out.data(), c->probs.data(), c->permutation, n, k,
                   h, out);

  if (s.shared_ffn > 0) {
    const int64_t sw = s.shared_ffn, swg = sw * Gates(s);
    c->shared_fc1_out.resize(n * swg);
    c->shared_act.resize(n * sw);
    LinearForward(x, p.shared_fc1, nullptr, c->shared_fc1_out.data(), n, h,
                  swg);
    ExpertActivationForward(s.swiglu, c->shared_fc1_out.data(),
                            c->shared_act.data(), n, sw);
    std::vector<float> shared(n * h);
    LinearForward(c->shared_act.data(), p.shared_fc2, nullptr, shared.data(), n,
                  sw, h);
    Add(shared.data(), out, n * h);
  }
}

void MoeLayerBackward(const float* dout, const float* x, int64_t n,
                      const MoeLayerShape& s, const MoeLayerParams& p,
                      const MoeLayerCache& c, double aux_grad_scale, float* dx,
                      MoeLayerGrads* g) {
  const RouterOptions& r = s.router;
  const int64_t e_count = r.num_experts, k = r.topk, h = s.hidden;
  const int64_t f = s.expert_ffn, fg = f * Gates(s);
  const int64_t m = static_cast<int64_t>(c.permutation.source.size());
  const std::vector<int64_t> start = BlockStarts(c.permutation);

  std::vector<float> dexpert_out(m * h), dprobs(n * k);
  UnpermuteBackward(dout, c.expert_out.data(), c.probs.data(), c.permutation, n,
                    k, h, dexpert_out.data(), dprobs.data());
  std::vector<float> dact(m * f), dfc1(m * fg), dpermuted(m * h);
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t rows = start[e + 1] - start[e];
    if (rows == 0) continue;
    LinearBackward(dexpert_out.data() + start[e] * h,
                   c.act.data() + start[e] * f, p.fc2 + e * h * f,
                   dact.data() + start[e] * f, g->fc2 + e * h * f, nullptr,
                   rows, f, h);
  }
  ExpertActivationBackward(s.swiglu, dact.data(), c.fc1_out.data(), dfc1.data(),
                           m, f);
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t rows = start[e + 1] - start[e];
    if (rows == 0) continue;
    LinearBackward(dfc1.data() + start[e] * fg,
                   c.permuted.data() + start[e] * h, p.fc1 + e * fg * h,
                   dpermuted.data() + start[e] * h, g->fc1 + e * fg * h,
                   nullptr, rows, h, fg);
  }
  PermuteBackward(dpermuted.data(), c.permutation, n, k, h, dx);

  // The router: through the routing weights and the aux loss.
  std::vector<float> dlogits(n * e_count), dx_router(n * h);
  RouterBackward(dprobs.data(), c.logits.data(), c.experts.data(), n, r,
                 s.aux_loss_coeff * aux_grad_scale, c.aux_tokens.data(), n,
                 s.aux_groups, dlogits.data());
  LinearBackward(dlogits.data(), x, p.router, dx_router.data(), g->router,
                 nullptr, n, h, e_count);
  Add(dx_router.data(), dx, n * h);

  if (s.shared_ffn > 0) {
    const int64_t sw = s.shared_ffn, swg = sw * Gates(s);
    std::vector<float> dshared_act(n * sw), dshared_fc1(n * swg),
        dx_shared(n * h);
    LinearBackward(dout, c.shared_act.data(), p.shared_fc2, dshared_act.data(),
                   g->shared_fc2, nullptr, n, sw, h);
    ExpertActivationBackward(s.swiglu, dshared_act.data(),
                             c.shared_fc1_out.data(), dshared_fc1.data(), n,
                             sw);
    LinearBackward(dshared_fc1.data(), x, p.shared_fc1, dx_shared.data(),
                   g->shared_fc1, nullptr, n, h, swg);
    Add(dx_shared.data(), dx, n * h);
  }
}

}  // namespace meshtune::engine::cpu
