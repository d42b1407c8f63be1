#include "engine/cuda/moe/moe_block.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr size_t kBf = sizeof(Bf16), kF32 = sizeof(float),
                 kI32 = sizeof(int32_t);

size_t Bytes(int64_t count, size_t element) {
  return static_cast<size_t>(count) * element;
}

}  // namespace

CudaMoeBlock::CudaMoeBlock(const moe::MoeShape& shape,
                           const CudaMoeComms& comms, GemmContext* gemm,
                           DeviceTokenDispatcher* dispatcher)
    : sh_(shape),
      comms_(comms),
      gemm_(gemm),
      dispatcher_(dispatcher),
      planner_(comms.ep, comms.etp, shape.router.num_experts, shape.hidden),
      gates_(shape.swiglu ? 2 : 1) {
  MESHTUNE_CHECK(comms.tp_cp != nullptr && gemm != nullptr &&
                 dispatcher != nullptr);
  MESHTUNE_CHECK(!shape.sp || comms.tp != nullptr);
}

cpu::RouterOptions CudaMoeBlock::RouterOf() const {
  cpu::RouterOptions router = sh_.router;
  router.expert_bias = bias_;
  return router;
}

void CudaMoeBlock::UpdateExpertBias(const std::vector<Communicator*>& sum_over,
                                    float rate, float* bias) {
  const int64_t e = sh_.router.num_experts;
  routed_tokens_.resize(e, 0.0);  // a rank may have run no backward yet
  for (Communicator* comm : sum_over) {
    if (comm != nullptr && comm->size() > 1) {
      comm->AllReduceSum(routed_tokens_.data(), e);
    }
  }
  cpu::UpdateExpertBias(routed_tokens_.data(), e, rate, bias);
  std::fill(routed_tokens_.begin(), routed_tokens_.end(), 0.0);
}

StatusOr<const Bf16*> CudaMoeBlock::GatherTp(const Bf16* in,
                                             DeviceBuffer* full) {
  if (!sh_.sp) return in;
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(full, Bytes(sh_.n * sh_.hidden, kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      comms_.tp->AllGather(in, full->as<Bf16>(), sh_.nl * sh_.hidden, nullptr));
  return static_cast<const Bf16*>(full->as<Bf16>());
}

// The router GEMM on the GPU, then engine/moe/moe_block.cc's routing on
// the host, then the index arrays the row kernels read.
Status CudaMoeBlock::Route(const Bf16* x, const CudaMoeWeights& w,
                           MoeActivations* a) {
  const int64_t nl = sh_.nl, h = sh_.hidden;
  const int64_t e_count = sh_.router.num_experts, k = sh_.router.topk;
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&logits_, Bytes(nl * e_count, kBf)));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
      x, w.router, nullptr, logits_.as<Bf16>(), nl, h, e_count, nullptr));
  host_bf16_.resize(nl * e_count);
  MESHTUNE_RETURN_IF_ERROR(CopyDeviceToHost(host_bf16_.data(), logits_.data(),
                                            Bytes(nl * e_count, kBf)));
  a->logits.resize(nl * e_count);
  for (int64_t i = 0; i < nl * e_count; ++i) {
    a->logits[i] = Bf16ToFloat(host_bf16_[i]);
  }
  a->probs.resize(nl * k);
  a->experts.resize(nl * k);
  std::vector<float> aux_scores(nl * e_count);
  cpu::RouterForward(a->logits.data(), nl, RouterOf(), a->probs.data(),
                     a->experts.data(), aux_scores.data());
  // The aux loss over whole sequences: counts summed over tp·cp.
  const int64_t groups = sh_.aux_groups;
  a->aux_tokens.resize(groups * e_count);
  cpu::CountTokensPerGroupExpert(a->experts.data(), nl, k, e_count, groups,
                                 a->aux_tokens.data());
  Communicator* seq = comms_.tp_cp;
  if (sh_.aux_loss_coeff > 0 && seq->size() > 1) {
    std::vector<double> counts(a->aux_tokens.begin(), a->aux_tokens.end());
    seq->AllReduceSum(counts.data(), groups * e_count);
    for (int64_t i = 0; i < groups * e_count; ++i) {
      a->aux_tokens[i] = static_cast<int64_t>(std::llround(counts[i]));
    }
  }
  a->aux_loss =
      sh_.aux_loss_coeff > 0
          ? cpu::SwitchAuxLoss(aux_scores.data(), a->aux_tokens.data(), nl,
                               nl * seq->size(), groups, e_count, k,
                               sh_.aux_loss_coeff)
          : 0.0;
  if (sh_.capacity_factor > 0) {
    cpu::DropOverCapacity(
        a->probs.data(), a->experts.data(), nl, k, e_count,
        cpu::ExpertCapacity(nl, k, e_count, sh_.capacity_factor));
  }
  a->permutation = cpu::PermutationOf(a->experts.data(), nl, k, e_count);
  // Index arrays: each permuted row's choice and token, each choice's row.
  const std::vector<int64_t>& source = a->permutation.source;
  const int64_t m = static_cast<int64_t>(source.size());
  std::vector<int32_t> choice(m), token(m), row_of(nl * k, -1);
  for (int64_t r = 0; r < m; ++r) {
    choice[r] = static_cast<int32_t>(source[r]);
    token[r] = static_cast<int32_t>(source[r] / k);
    row_of[source[r]] = static_cast<int32_t>(r);
  }
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&a->probs_dev, Bytes(nl * k, kF32)));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&a->row_of, Bytes(nl * k, kI32)));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&a->choice, Bytes(m + 1, kI32)));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&token_, Bytes(m + 1, kI32)));
  MESHTUNE_RETURN_IF_ERROR(CopyHostToDevice(
      a->probs_dev.data(), a->probs.data(), Bytes(nl * k, kF32)));
  MESHTUNE_RETURN_IF_ERROR(
      CopyHostToDevice(a->row_of.data(), row_of.data(), Bytes(nl * k, kI32)));
  MESHTUNE_RETURN_IF_ERROR(
      CopyHostToDevice(a->choice.data(), choice.data(), Bytes(m, kI32)));
  return CopyHostToDevice(token_.data(), token.data(), Bytes(m, kI32));
}

Status CudaMoeBlock::Forward(const Bf16* x, const CudaMoeWeights& w, Bf16* y,
                             MoeActivations* a) {
  const int64_t h = sh_.hidden, k = sh_.router.topk;
  MESHTUNE_RETURN_IF_ERROR(Route(x, w, a));
  const int64_t m = static_cast<int64_t>(a->permutation.source.size());
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&permuted_, Bytes(m + 1, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      GatherRows(x, token_.as<int32_t>(), permuted_.as<Bf16>(), m, h, nullptr));
  planner_.Plan(a->permutation.tokens_per_expert.data(), &a->plan);
  MESHTUNE_RETURN_IF_ERROR(ExpertsForward(w, a));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&a->routed, Bytes(m + 1, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(dispatcher_->Combine(expert_out_.as<Bf16>(), a->plan,
                                                a->routed.as<Bf16>()));
  MESHTUNE_RETURN_IF_ERROR(
      CombineRows(a->routed.as<Bf16>(), a->row_of.as<int32_t>(),
                  a->probs_dev.as<float>(), y, sh_.nl, k, h, nullptr));
  if (w.shared_fc1 != nullptr) return SharedForward(x, w, y, a);
  return Status::Ok();
}

// Dispatch, then one fc1 GEMM per local expert over its rows, the
// activation over all rows at once, one fc2 GEMM per expert.
Status CudaMoeBlock::ExpertsForward(const CudaMoeWeights& w,
                                    MoeActivations* a) {
  const int64_t h = sh_.hidden, fl = sh_.expert_ffn, flg = fl * gates_;
  const int64_t rows_total = a->plan.expert_rows();
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&a->expert_in, Bytes(rows_total + 1, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&a->fc1_out, Bytes(rows_total + 1, flg * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&a->act, Bytes(rows_total + 1, fl * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&expert_out_, Bytes(rows_total + 1, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(dispatcher_->Dispatch(permuted_.as<Bf16>(), a->plan,
                                                 a->expert_in.as<Bf16>()));
  const std::vector<int64_t>& rows = a->plan.rows_per_local_expert;
  int64_t at = 0;
  for (size_t le = 0; le < w.fc1.size(); ++le) {
    if (rows[le] > 0) {
      MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
          a->expert_in.as<Bf16>() + at * h, w.fc1[le], nullptr,
          a->fc1_out.as<Bf16>() + at * flg, rows[le], h, flg, nullptr));
    }
    at += rows[le];
  }
  if (sh_.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(SwigluForward(
        a->fc1_out.as<Bf16>(), a->act.as<Bf16>(), rows_total, fl, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(GeluForward(
        a->fc1_out.as<Bf16>(), a->act.as<Bf16>(), rows_total * fl, nullptr));
  }
  at = 0;
  for (size_t le = 0; le < w.fc2.size(); ++le) {
    if (rows[le] > 0) {
      MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
          a->act.as<Bf16>() + at * fl, w.fc2[le], nullptr,
          expert_out_.as<Bf16>() + at * h, rows[le], fl, h, nullptr));
    }
    at += rows[le];
  }
  return Status::Ok();
}

// A tensor-parallel MLP on every token, added to y: the shards gathered
// under SP, column-parallel fc1, row-parallel fc2, the partial sums
// reduce-scattered (SP) or all-reduced.
Status CudaMoeBlock::SharedForward(const Bf16* x, const CudaMoeWeights& w,
                                   Bf16* y, MoeActivations* a) {
  const int64_t n = sh_.n, h = sh_.hidden;
  const int64_t sl = sh_.shared_ffn, slg = sl * gates_;
  const Bf16* xf = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(xf, GatherTp(x, &gathered_));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&a->shared_fc1, Bytes(n, slg * kBf)));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&a->shared_act, Bytes(n, sl * kBf)));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
      xf, w.shared_fc1, nullptr, a->shared_fc1.as<Bf16>(), n, h, slg, nullptr));
  if (sh_.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(SwigluForward(
        a->shared_fc1.as<Bf16>(), a->shared_act.as<Bf16>(), n, sl, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(GeluForward(
        a->shared_fc1.as<Bf16>(), a->shared_act.as<Bf16>(), n * sl, nullptr));
  }
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&partial_, Bytes(n, h * kBf)));
  Bf16* partial = partial_.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(a->shared_act.as<Bf16>(),
                                                w.shared_fc2, nullptr, partial,
                                                n, sl, h, nullptr));
  return ReduceTpInto(partial, y);
}

Status CudaMoeBlock::ReduceTpInto(Bf16* partial, Bf16* dst) {
  const int64_t n = sh_.n, nl = sh_.nl, h = sh_.hidden;
  if (sh_.sp) {
    MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&reduced_, Bytes(nl, h * kBf)));
    MESHTUNE_RETURN_IF_ERROR(comms_.tp->ReduceScatterSum(
        partial, reduced_.as<Bf16>(), nl * h, nullptr));
    partial = reduced_.as<Bf16>();
  } else if (comms_.tp != nullptr && comms_.tp->size() > 1) {
    MESHTUNE_RETURN_IF_ERROR(comms_.tp->AllReduceSum(partial, n * h, nullptr));
  }
  return Add(partial, dst, nl * h, nullptr);
}

Status CudaMoeBlock::Backward(const Bf16* dy, const Bf16* x,
                              const CudaMoeWeights& w, const CudaMoeGrads& g,
                              Bf16* dx, const MoeActivations& a) {
  const int64_t nl = sh_.nl, h = sh_.hidden, k = sh_.router.topk;
  const int64_t e_count = sh_.router.num_experts;
  const int64_t m = static_cast<int64_t>(a.permutation.source.size());
  if (bias_ != nullptr) {
    const std::vector<int64_t>& routed = a.permutation.tokens_per_expert;
    routed_tokens_.resize(routed.size(), 0.0);
    for (size_t i = 0; i < routed.size(); ++i) routed_tokens_[i] += routed[i];
  }
  // Through the combine: each row's gradient and each prob's.
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&permuted_, Bytes(m + 1, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&dprobs_, Bytes(nl * k, kF32)));
  MESHTUNE_RETURN_IF_ERROR(dprobs_.Zero());
  MESHTUNE_RETURN_IF_ERROR(CombineRowsBackward(
      dy, a.routed.as<Bf16>(), a.choice.as<int32_t>(), a.probs_dev.as<float>(),
      permuted_.as<Bf16>(), dprobs_.as<float>(), m, k, h, nullptr));
  MESHTUNE_RETURN_IF_ERROR(ExpertsBackward(w, g, a));
  // Through the permutation: a token's rows summed (into dx).
  MESHTUNE_RETURN_IF_ERROR(CombineRows(permuted_.as<Bf16>(),
                                       a.row_of.as<int32_t>(), nullptr, dx, nl,
                                       k, h, nullptr));
  // The router, on the host as in the forward: through the routing weights
  // and the aux loss, then the router GEMM's backward on the GPU.
  std::vector<float> dprobs(nl * k), dlogits(nl * e_count);
  MESHTUNE_RETURN_IF_ERROR(
      CopyDeviceToHost(dprobs.data(), dprobs_.data(), Bytes(nl * k, kF32)));
  cpu::RouterBackward(dprobs.data(), a.logits.data(), a.experts.data(), nl,
                      RouterOf(), sh_.aux_loss_coeff * sh_.aux_grad_scale,
                      a.aux_tokens.data(), nl * comms_.tp_cp->size(),
                      sh_.aux_groups, dlogits.data());
  host_bf16_.resize(nl * e_count);
  for (int64_t i = 0; i < nl * e_count; ++i) {
    host_bf16_[i] = FloatToBf16(dlogits[i]);
  }
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&dlogits_, Bytes(nl * e_count, kBf)));
  MESHTUNE_RETURN_IF_ERROR(CopyHostToDevice(dlogits_.data(), host_bf16_.data(),
                                            Bytes(nl * e_count, kBf)));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&dx_router_, Bytes(nl, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dlogits_.as<Bf16>(), x, w.router, dx_router_.as<Bf16>(), g.router,
      nullptr, nl, h, e_count, nullptr));
  MESHTUNE_RETURN_IF_ERROR(Add(dx_router_.as<Bf16>(), dx, nl * h, nullptr));
  if (w.shared_fc1 != nullptr) return SharedBackward(dy, x, w, g, dx, a);
  return Status::Ok();
}

// permuted_ [m, h] holds the rows' gradient on entry and the permuted
// rows' input gradient on return (Dispatch of the gradient, the experts'
// backward, Combine of the input gradients: the transposes of the forward).
Status CudaMoeBlock::ExpertsBackward(const CudaMoeWeights& w,
                                     const CudaMoeGrads& g,
                                     const MoeActivations& a) {
  const int64_t h = sh_.hidden, fl = sh_.expert_ffn, flg = fl * gates_;
  const int64_t rows_total = a.plan.expert_rows();
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&dexpert_, Bytes(rows_total + 1, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&dact_, Bytes(rows_total + 1, fl * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&dfc1_, Bytes(rows_total + 1, flg * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&dexpert_in_, Bytes(rows_total + 1, h * kBf)));
  MESHTUNE_RETURN_IF_ERROR(
      dispatcher_->Dispatch(permuted_.as<Bf16>(), a.plan, dexpert_.as<Bf16>()));
  const std::vector<int64_t>& rows = a.plan.rows_per_local_expert;
  int64_t at = 0;
  for (size_t le = 0; le < w.fc2.size(); ++le) {
    if (rows[le] > 0) {
      MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
          dexpert_.as<Bf16>() + at * h, a.act.as<Bf16>() + at * fl, w.fc2[le],
          dact_.as<Bf16>() + at * fl, g.fc2[le], nullptr, rows[le], fl, h,
          nullptr));
    }
    at += rows[le];
  }
  if (sh_.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(
        SwigluBackward(dact_.as<Bf16>(), a.fc1_out.as<Bf16>(), dfc1_.as<Bf16>(),
                       rows_total, fl, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(
        GeluBackward(dact_.as<Bf16>(), a.fc1_out.as<Bf16>(), dfc1_.as<Bf16>(),
                     rows_total * fl, nullptr));
  }
  at = 0;
  for (size_t le = 0; le < w.fc1.size(); ++le) {
    if (rows[le] > 0) {
      MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
          dfc1_.as<Bf16>() + at * flg, a.expert_in.as<Bf16>() + at * h,
          w.fc1[le], dexpert_in_.as<Bf16>() + at * h, g.fc1[le], nullptr,
          rows[le], h, flg, nullptr));
    }
    at += rows[le];
  }
  // The backward of Dispatch is a Combine (it sums the etp partials).
  return dispatcher_->Combine(dexpert_in_.as<Bf16>(), a.plan,
                              permuted_.as<Bf16>());
}

Status CudaMoeBlock::SharedBackward(const Bf16* dy, const Bf16* x,
                                    const CudaMoeWeights& w,
                                    const CudaMoeGrads& g, Bf16* dx,
                                    const MoeActivations& a) {
  const int64_t n = sh_.n, h = sh_.hidden;
  const int64_t sl = sh_.shared_ffn, slg = sl * gates_;
  const Bf16* dyf = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(dyf, GatherTp(dy, &gathered_dy_));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&dact_, Bytes(n, sl * kBf)));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&dfc1_, Bytes(n, slg * kBf)));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dyf, a.shared_act.as<Bf16>(), w.shared_fc2, dact_.as<Bf16>(),
      g.shared_fc2, nullptr, n, sl, h, nullptr));
  if (sh_.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(SwigluBackward(dact_.as<Bf16>(),
                                            a.shared_fc1.as<Bf16>(),
                                            dfc1_.as<Bf16>(), n, sl, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(GeluBackward(dact_.as<Bf16>(),
                                          a.shared_fc1.as<Bf16>(),
                                          dfc1_.as<Bf16>(), n * sl, nullptr));
  }
  const Bf16* xf = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(xf, GatherTp(x, &gathered_));
  MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(&partial_, Bytes(n, h * kBf)));
  Bf16* partial = partial_.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(
      gemm_->LinearBackward(dfc1_.as<Bf16>(), xf, w.shared_fc1, partial,
                            g.shared_fc1, nullptr, n, h, slg, nullptr));
  return ReduceTpInto(partial, dx);
}

}  // namespace meshtune::engine::cuda
