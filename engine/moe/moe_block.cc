#include "engine/moe/moe_block.h"

#include <algorithm>
#include <cmath>

#include "engine/cpu/moe_layer.h"
#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::moe {

MoeBlock::MoeBlock(const MoeShape& shape, const MoeComms& comms)
    : sh_(shape),
      comms_(comms),
      dispatcher_(comms.ep, comms.etp, shape.router.num_experts, shape.hidden),
      gates_(shape.swiglu ? 2 : 1) {
  MESHTUNE_CHECK(comms.tp != nullptr && comms.tp_cp != nullptr);
}

cpu::RouterOptions MoeBlock::RouterOf(const MoeWeights& w) const {
  cpu::RouterOptions router = sh_.router;
  router.expert_bias = w.expert_bias;
  return router;
}

void MoeBlock::Forward(const float* x, const MoeWeights& w, float* y,
                       MoeCache* c) {
  const int64_t e_count = sh_.router.num_experts, k = sh_.router.topk;
  const int64_t fl = sh_.expert_ffn, flg = fl * gates_;
  // Router and routing on this rank's rows.
  c->logits.resize(sh_.nl * e_count);
  cpu::LinearForward(x, w.router, nullptr, c->logits.data(), sh_.nl, sh_.hidden,
                     e_count);
  c->probs.resize(sh_.nl * k);
  c->experts.resize(sh_.nl * k);
  c->aux_scores.resize(sh_.nl * e_count);
  cpu::RouterForward(c->logits.data(), sh_.nl, RouterOf(w), c->probs.data(),
                     c->experts.data(), c->aux_scores.data());
  // Aux loss over the whole sequences: counts summed over tp·cp.
  const int64_t groups = sh_.aux_groups;
  c->aux_tokens.resize(groups * e_count);
  cpu::CountTokensPerGroupExpert(c->experts.data(), sh_.nl, k, e_count, groups,
                                 c->aux_tokens.data());
  Communicator* seq = comms_.tp_cp;
  if (sh_.aux_loss_coeff > 0 && seq->size() > 1) {
    std::vector<double> counts(c->aux_tokens.begin(), c->aux_tokens.end());
    seq->AllReduceSum(counts.data(), groups * e_count);
    for (int64_t i = 0; i < groups * e_count; ++i) {
      c->aux_tokens[i] = static_cast<int64_t>(std::llround(counts[i]));
    }
  }
  c->aux_loss =
      sh_.aux_loss_coeff > 0
          ? cpu::SwitchAuxLoss(c->aux_scores.data(), c->aux_tokens.data(),
                               sh_.nl, sh_.nl * seq->size(), groups, e_count, k,
                               sh_.aux_loss_coeff)
          : 0.0;
  // Megatron's capacity is per rank over its own tokens (get_capacity).
  c->dropped = 0;
  if (sh_.capacity_factor > 0) {
    c->dropped = cpu::DropOverCapacity(
        c->probs.data(), c->experts.data(), sh_.nl, k, e_count,
        cpu::ExpertCapacity(sh_.nl, k, e_count, sh_.capacity_factor));
  }
  // Permute, dispatch, experts, combine.
  c->permutation = cpu::PermutationOf(c->experts.data(), sh_.nl, k, e_count);
  const int64_t m = static_cast<int64_t>(c->permutation.source.size());
  std::vector<float> permuted(m * sh_.hidden);
  cpu::PermuteForward(x, c->permutation, k, sh_.hidden, permuted.data());
  dispatcher_.Plan(c->permutation.tokens_per_expert.data(), &c->plan);
  dispatcher_.Dispatch(permuted.data(), c->plan, &c->expert_in);
  const int64_t rows_total = c->plan.expert_rows();
  c->fc1_out.resize(rows_total * flg);
  c->act.resize(rows_total * fl);
  std::vector<float> expert_out(rows_total * sh_.hidden);
  int64_t at = 0;
  for (size_t le = 0; le < w.fc1.size(); ++le) {
    const int64_t rows = c->plan.rows_per_local_expert[le];
    if (rows > 0) {
      cpu::LinearForward(c->expert_in.data() + at * sh_.hidden, w.fc1[le],
                         nullptr, c->fc1_out.data() + at * flg, rows,
                         sh_.hidden, flg);
    }
    at += rows;
  }
  cpu::ExpertActivationForward(sh_.swiglu, c->fc1_out.data(), c->act.data(),
                               rows_total, fl);
  at = 0;
  for (size_t le = 0; le < w.fc2.size(); ++le) {
    const int64_t rows = c->plan.rows_per_local_expert[le];
    if (rows > 0) {
      cpu::LinearForward(c->act.data() + at * fl, w.fc2[le], nullptr,
                         expert_out.data() + at * sh_.hidden, rows, fl,
                         sh_.hidden);
    }
    at += rows;
  }
  dispatcher_.Combine(expert_out.data(), c->plan, &c->routed_out);
  cpu::UnpermuteForward(c->routed_out.data(), c->probs.data(), c->permutation,
                        sh_.nl, k, sh_.hidden, y);
  if (w.shared_fc1 != nullptr) SharedForward(x, w, y, c);
}

void MoeBlock::Backward(const float* dy, const float* x, const MoeWeights& w,
                        const MoeGrads& g, float* dx, MoeCache* c) {
  const int64_t e_count = sh_.router.num_experts, k = sh_.router.topk;
  const int64_t fl = sh_.expert_ffn, flg = fl * gates_;
  const int64_t m = static_cast<int64_t>(c->permutation.source.size());
  std::vector<float> drouted(m * sh_.hidden), dprobs(sh_.nl * k);
  cpu::UnpermuteBackward(dy, c->routed_out.data(), c->probs.data(),
                         c->permutation, sh_.nl, k, sh_.hidden, drouted.data(),
                         dprobs.data());
  // The backward of Combine is a Dispatch of the gradient.
  std::vector<float> dexpert_out;
  dispatcher_.Dispatch(drouted.data(), c->plan, &dexpert_out);
  const int64_t rows_total = c->plan.expert_rows();
  std::vector<float> dact(rows_total * fl), dfc1(rows_total * flg),
      dexpert_in(rows_total * sh_.hidden);
  int64_t at = 0;
  for (size_t le = 0; le < w.fc2.size(); ++le) {
    const int64_t rows = c->plan.rows_per_local_expert[le];
    if (rows > 0) {
      cpu::LinearBackward(dexpert_out.data() + at * sh_.hidden,
                          c->act.data() + at * fl, w.fc2[le],
                          dact.data() + at * fl, g.fc2[le], nullptr, rows, fl,
                          sh_.hidden);
    }
    at += rows;
  }
  cpu::ExpertActivationBackward(sh_.swiglu, dact.data(), c->fc1_out.data(),
                                dfc1.data(), rows_total, fl);
  at = 0;
  for (size_t le = 0; le < w.fc1.size(); ++le) {
    const int64_t rows = c->plan.rows_per_local_expert[le];
    if (rows > 0) {
      cpu::LinearBackward(dfc1.data() + at * flg,
                          c->expert_in.data() + at * sh_.hidden, w.fc1[le],
                          dexpert_in.data() + at * sh_.hidden, g.fc1[le],
                          nullptr, rows, sh_.hidden, flg);
    }
    at += rows;
  }
  // The backward of Dispatch is a Combine (sums the etp partials).
  std::vector<float> dpermuted;
  dispatcher_.Combine(dexpert_in.data(), c->plan, &dpermuted);
  cpu::PermuteBackward(dpermuted.data(), c->permutation, sh_.nl, k, sh_.hidden,
                       dx);
  // The router: through the routing weights and the aux loss.
  std::vector<float> dlogits(sh_.nl * e_count), dx_router(sh_.nl * sh_.hidden);
  // The forward's routing, bias included (RouterBackward routes again).
  cpu::RouterBackward(
      dprobs.data(), c->logits.data(), c->experts.data(), sh_.nl, RouterOf(w),
      sh_.aux_loss_coeff * sh_.aux_grad_scale, c->aux_tokens.data(),
      sh_.nl * comms_.tp_cp->size(), sh_.aux_groups, dlogits.data());
  cpu::LinearBackward(dlogits.data(), x, w.router, dx_router.data(), g.router,
                      nullptr, sh_.nl, sh_.hidden, e_count);
  cpu::Add(dx_router.data(), dx, sh_.nl * sh_.hidden);
  if (w.shared_fc1 != nullptr) SharedBackward(dy, x, w, g, dx, c);
}

// A tensor-parallel MLP on every token: the sequence shards gathered under
// SP, column-parallel fc1, row-parallel fc2, the partial sums reduced
// (reduce-scattered under SP) and added to y.
void MoeBlock::SharedForward(const float* x, const MoeWeights& w, float* y,
                             MoeCache* c) {
  const int64_t sl = sh_.shared_ffn, slg = sl * gates_;
  std::vector<float> gathered;
  const float* xf = x;
  if (sh_.sp) {
    gathered.resize(sh_.n * sh_.hidden);
    comms_.tp->AllGather(x, gathered.data(), sh_.nl * sh_.hidden);
    xf = gathered.data();
  }
  c->shared_fc1.resize(sh_.n * slg);
  c->shared_act.resize(sh_.n * sl);
  cpu::LinearForward(xf, w.shared_fc1, nullptr, c->shared_fc1.data(), sh_.n,
                     sh_.hidden, slg);
  cpu::ExpertActivationForward(sh_.swiglu, c->shared_fc1.data(),
                               c->shared_act.data(), sh_.n, sl);
  std::vector<float> partial(sh_.n * sh_.hidden), out(sh_.nl * sh_.hidden);
  cpu::LinearForward(c->shared_act.data(), w.shared_fc2, nullptr,
                     partial.data(), sh_.n, sl, sh_.hidden);
  if (sh_.sp) {
    comms_.tp->ReduceScatterSum(partial.data(), out.data(),
                                sh_.nl * sh_.hidden);
  } else {
    if (comms_.tp->size() > 1)
      comms_.tp->AllReduceSum(partial.data(), sh_.n * sh_.hidden);
    out.swap(partial);
  }
  cpu::Add(out.data(), y, sh_.nl * sh_.hidden);
}

void MoeBlock::SharedBackward(const float* dy, const float* x,
                              const MoeWeights& w, const MoeGrads& g, float* dx,
                              MoeCache* c) {
  const int64_t sl = sh_.shared_ffn, slg = sl * gates_;
  std::vector<float> dy_full, x_full;
  const float* dyf = dy;
  const float* xf = x;
  if (sh_.sp) {
    dy_full.resize(sh_.n * sh_.hidden);
    comms_.tp->AllGather(dy, dy_full.data(), sh_.nl * sh_.hidden);
    dyf = dy_full.data();
    x_full.resize(sh_.n * sh_.hidden);
    comms_.tp->AllGather(x, x_full.data(), sh_.nl * sh_.hidden);
    xf = x_full.data();
  }
  std::vector<float> dact(sh_.n * sl), dfc1(sh_.n * slg),
      dx_full(sh_.n * sh_.hidden);
  cpu::LinearBackward(dyf, c->shared_act.data(), w.shared_fc2, dact.data(),
                      g.shared_fc2, nullptr, sh_.n, sl, sh_.hidden);
  cpu::ExpertActivationBackward(sh_.swiglu, dact.data(), c->shared_fc1.data(),
                                dfc1.data(), sh_.n, sl);
  cpu::LinearBackward(dfc1.data(), xf, w.shared_fc1, dx_full.data(),
                      g.shared_fc1, nullptr, sh_.n, sh_.hidden, slg);
  std::vector<float> dx_local(sh_.nl * sh_.hidden);
  if (sh_.sp) {
    comms_.tp->ReduceScatterSum(dx_full.data(), dx_local.data(),
                                sh_.nl * sh_.hidden);
  } else {
    if (comms_.tp->size() > 1)
      comms_.tp->AllReduceSum(dx_full.data(), sh_.n * sh_.hidden);
    dx_local.swap(dx_full);
  }
  cpu::Add(dx_local.data(), dx, sh_.nl * sh_.hidden);
}

}  // namespace meshtune::engine::moe
