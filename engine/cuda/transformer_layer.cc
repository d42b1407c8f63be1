// One tensor-parallel transformer layer on the GPU
// (engine/cuda/transformer_layer.h). Forward:
//   ln1 = Norm1(x); qkv = Gather(ln1)·Wqkvᵀ + b; RoPE; attn = Attention(qkv)
//   proj = Reduce(attn·Wprojᵀ (+ b on tp rank 0)); x2 = x + D(proj) and
//   ln2 = Norm2(x2) in one fused pass; fc1 = Gather(ln2)·W1ᵀ + b with GELU
//   fused (or SwiGLU after it); y = x2 + D(Reduce(act·W2ᵀ (+ b))).
// Backward mirrors it; Norm2's backward adds the residual gradient dy and
// Norm1's adds dx2, so the residual adds cost no extra pass.
#include "engine/cuda/transformer_layer.h"

#include <utility>

#include "engine/cuda/context_parallel/positions.h"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {

namespace {
constexpr size_t kBf = sizeof(Bf16), kF32 = sizeof(float);
}  // namespace

StatusOr<std::unique_ptr<LayerActivations>>
CudaTransformerLayer::AllocActivations(const LayerShape& sh,
                                       const AttentionKernels& kernels,
                                       bool keep_probs) {
  const size_t n = static_cast<size_t>(sh.rows());
  const size_t nl = static_cast<size_t>(sh.local_rows()), h = sh.h;
  auto a = std::make_unique<LayerActivations>();
  MESHTUNE_ASSIGN_BUFFER(a->input, nl * h * kBf);
  MESHTUNE_ASSIGN_BUFFER(a->mean1, nl * kF32);
  MESHTUNE_ASSIGN_BUFFER(a->rstd1, nl * kF32);
  MESHTUNE_ASSIGN_BUFFER(a->mean2, nl * kF32);
  MESHTUNE_ASSIGN_BUFFER(a->rstd2, nl * kF32);
  MESHTUNE_ASSIGN_BUFFER(a->ln1, nl * h * kBf);
  MESHTUNE_ASSIGN_BUFFER(a->qkv, n * sh.qkv_width() * kBf);
  if (kernels.ring != nullptr) {
    MESHTUNE_ASSIGN_BUFFER(
        a->lse, static_cast<size_t>(kernels.ring->lse_elements()) * kF32);
  } else if (kernels.flash != nullptr) {
    MESHTUNE_ASSIGN_BUFFER(
        a->lse, static_cast<size_t>(kernels.flash->lse_elements()) * kF32);
  } else if (keep_probs) {
    MESHTUNE_ASSIGN_BUFFER(
        a->probs, static_cast<size_t>(kernels.unfused->probs_elements()) * kBf);
  }
  MESHTUNE_ASSIGN_BUFFER(a->attn, n * sh.heads * sh.head_dim * kBf);
  MESHTUNE_ASSIGN_BUFFER(a->x2, nl * h * kBf);
  MESHTUNE_ASSIGN_BUFFER(a->ln2, nl * h * kBf);
  MESHTUNE_ASSIGN_BUFFER(a->fc1, n * sh.fc1_width() * kBf);
  MESHTUNE_ASSIGN_BUFFER(a->act, n * sh.ffn * kBf);
  return StatusOr<std::unique_ptr<LayerActivations>>(std::move(a));
}

StatusOr<std::unique_ptr<LayerScratch>> CudaTransformerLayer::AllocScratch(
    const LayerShape& sh, const AttentionKernels& kernels, bool selective,
    bool dropout) {
  const size_t n = static_cast<size_t>(sh.rows());
  const size_t nl = static_cast<size_t>(sh.local_rows()), h = sh.h;
  const size_t hd = static_cast<size_t>(sh.heads * sh.head_dim);
  auto s = std::make_unique<LayerScratch>();
  if (sh.sp) {
    MESHTUNE_ASSIGN_BUFFER(s->gathered, n * h * kBf);
    MESHTUNE_ASSIGN_BUFFER(s->reduced, nl * h * kBf);
  }
  MESHTUNE_ASSIGN_BUFFER(s->partial, n * h * kBf);
  if (selective && kernels.unfused != nullptr) {
    MESHTUNE_ASSIGN_BUFFER(
        s->probs, static_cast<size_t>(kernels.unfused->probs_elements()) * kBf);
    MESHTUNE_ASSIGN_BUFFER(s->attn, n * hd * kBf);
  }
  MESHTUNE_ASSIGN_BUFFER(s->dqkv, n * sh.qkv_width() * kBf);
  MESHTUNE_ASSIGN_BUFFER(s->dattn, n * hd * kBf);
  MESHTUNE_ASSIGN_BUFFER(s->dfc1, n * sh.fc1_width() * kBf);
  MESHTUNE_ASSIGN_BUFFER(s->dact, n * sh.ffn * kBf);
  MESHTUNE_ASSIGN_BUFFER(s->dln, nl * h * kBf);
  MESHTUNE_ASSIGN_BUFFER(s->dx2, nl * h * kBf);
  if (dropout) MESHTUNE_ASSIGN_BUFFER(s->drop, nl * h * kBf);
  return StatusOr<std::unique_ptr<LayerScratch>>(std::move(s));
}

CudaTransformerLayer::CudaTransformerLayer(
    const LayerShape& shape, const LayerParams& params, int64_t global_layer,
    const ParamStore* store, DeviceParams* device_params, GemmContext* gemm,
    AttentionKernels kernels, DeviceCommunicator* tp, LayerScratch* scratch)
    : sh_(shape),
      p_(params),
      layer_(global_layer),
      store_(store),
      params_(device_params),
      gemm_(gemm),
      kernels_(kernels),
      tp_(tp),
      tp_rank_(tp != nullptr ? tp->rank() : 0),
      scratch_(scratch) {}

const Bf16* CudaTransformerLayer::W(int i) const {
  return i >= 0 ? params_->weight(*store_, i) : nullptr;
}
float* CudaTransformerLayer::G(int i) const {
  return i >= 0 ? params_->grad(*store_, i) : nullptr;
}

CudaMoeWeights CudaTransformerLayer::MoeWeights() const {
  return CudaMoeWeightsOf(p_, [this](int i) { return W(i); });
}

CudaMoeGrads CudaTransformerLayer::MoeGrads() const {
  CudaMoeGrads g;
  g.router = G(p_.router);
  for (int i : p_.expert_fc1) g.fc1.push_back(G(i));
  for (int i : p_.expert_fc2) g.fc2.push_back(G(i));
  g.shared_fc1 = G(p_.shared_fc1);
  g.shared_fc2 = G(p_.shared_fc2);
  return g;
}

cpu::DropoutSpec CudaTransformerLayer::Hidden(cpu::DropoutSite site,
                                              int64_t first_sample) const {
  cpu::DropoutSpec d;
  d.p = sh_.hidden_dropout;
  d.key = cpu::DropoutKey(sh_.seed, layer_, site);
  d.first_sample = first_sample;
  // Under SP this rank holds rows [tp_rank·nl, (tp_rank + 1)·nl).
  d.first_row = sh_.sp ? tp_rank_ * sh_.local_rows() : 0;
  return d;
}

cpu::DropoutSpec CudaTransformerLayer::AttentionDropout(
    int64_t first_sample) const {
  cpu::DropoutSpec d;
  d.p = sh_.attention_dropout;
  d.key = cpu::DropoutKey(sh_.seed, layer_, cpu::DropoutSite::kAttentionProbs);
  d.first_sample = first_sample;
  d.first_head = static_cast<int64_t>(tp_rank_) * sh_.heads;
  return d;
}

// Position-wise ops at the rows' global positions under cp
// (engine/cuda/context_parallel/positions.h): the header says why these
// members share the ops.h names.
Status CudaTransformerLayer::HiddenDropout(Bf16* x, int64_t rows, int64_t h,
                                           int64_t b, const cpu::DropoutSpec& d,
                                           Stream stream) const {
  return HiddenDropoutAt(Chunks(), x, rows, h, b, d, stream);
}

Status CudaTransformerLayer::RopeForward(Bf16* qkv, int64_t s, int64_t b,
                                         int64_t heads, int64_t groups,
                                         int64_t head_dim, float base,
                                         int64_t pos_offset,
                                         Stream stream) const {
  MESHTUNE_CHECK(pos_offset == 0);  // the layer's rows start at position 0
  return RopeAt(Chunks(), true, qkv, s, b, heads, groups, head_dim, base,
                stream);
}

Status CudaTransformerLayer::RopeBackward(Bf16* dqkv, int64_t s, int64_t b,
                                          int64_t heads, int64_t groups,
                                          int64_t head_dim, float base,
                                          int64_t pos_offset,
                                          Stream stream) const {
  MESHTUNE_CHECK(pos_offset == 0);
  return RopeAt(Chunks(), false, dqkv, s, b, heads, groups, head_dim, base,
                stream);
}

const context_parallel::SequenceChunks* CudaTransformerLayer::Chunks() const {
  return kernels_.ring != nullptr ? &kernels_.ring->chunks() : nullptr;
}

Status CudaTransformerLayer::Norm(const Bf16* x, const Bf16* residual,
                                  Bf16* sum_out, int w, int b, Bf16* out,
                                  DeviceBuffer& mean, DeviceBuffer& rstd) {
  const int64_t nl = sh_.local_rows();
  if (sh_.rmsnorm) {
    return RmsNormForward(x, residual, sum_out, W(w), out, rstd.as<float>(), nl,
                          sh_.h, sh_.eps, nullptr);
  }
  return LayerNormForward(x, residual, sum_out, W(w), W(b), out,
                          mean.as<float>(), rstd.as<float>(), nl, sh_.h,
                          sh_.eps, nullptr);
}

Status CudaTransformerLayer::NormBackward(const Bf16* dout, const Bf16* y,
                                          int w, int b,
                                          const DeviceBuffer& mean,
                                          const DeviceBuffer& rstd,
                                          const Bf16* dresidual, Bf16* dx) {
  const int64_t nl = sh_.local_rows();
  if (sh_.rmsnorm) {
    return RmsNormBackward(dout, y, W(w), rstd.as<float>(), dresidual, dx, G(w),
                           nl, sh_.h, nullptr);
  }
  return LayerNormBackward(dout, y, W(w), mean.as<float>(), rstd.as<float>(),
                           dresidual, dx, G(w), G(b), nl, sh_.h, nullptr);
}

StatusOr<const Bf16*> GatherSequence(const LayerShape& sh,
                                     DeviceCommunicator* tp, const Bf16* in,
                                     Bf16* gathered) {
  if (!sh.sp) return in;  // already the full [n, h]
  // Rows are sequence-major, so rank r's shard is rows [r·nl, (r+1)·nl)
  // and a rank-major all-gather reassembles [n, h].
  MESHTUNE_RETURN_IF_ERROR(
      tp->AllGather(in, gathered, sh.local_rows() * sh.h, nullptr));
  return static_cast<const Bf16*>(gathered);
}

StatusOr<Bf16*> ReduceOverTp(const LayerShape& sh, DeviceCommunicator* tp,
                             Bf16* partial, Bf16* out) {
  const int64_t nl = sh.local_rows(), h = sh.h;
  if (sh.sp) {
    MESHTUNE_RETURN_IF_ERROR(
        tp->ReduceScatterSum(partial, out, nl * h, nullptr));
    return out;
  }
  if (sh.tp > 1) {
    MESHTUNE_RETURN_IF_ERROR(tp->AllReduceSum(partial, nl * h, nullptr));
  }
  return partial;
}

StatusOr<const Bf16*> CudaTransformerLayer::Gather(const Bf16* in) {
  return GatherSequence(sh_, tp_, in, scratch_->gathered.as<Bf16>());
}

StatusOr<Bf16*> CudaTransformerLayer::Reduce(Bf16* partial, Bf16* out) {
  return ReduceOverTp(sh_, tp_, partial, out);
}

StatusOr<const Bf16*> CudaTransformerLayer::DropGrad(const Bf16* d,
                                                     cpu::DropoutSite site,
                                                     int64_t first_sample) {
  const cpu::DropoutSpec spec = Hidden(site, first_sample);
  if (!spec.active()) return d;
  const int64_t nl = sh_.local_rows(), h = sh_.h;
  Bf16* masked = scratch_->drop.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(
      CopyDeviceToDevice(masked, d, kBf * nl * h, nullptr));
  MESHTUNE_RETURN_IF_ERROR(HiddenDropout(masked, nl, h, sh_.b, spec, nullptr));
  return static_cast<const Bf16*>(masked);
}

Status CudaTransformerLayer::Forward(const Bf16* x, Bf16* y,
                                     LayerActivations* a,
                                     int64_t first_sample) {
  const LayerShape& sh = sh_;
  const int64_t n = sh.rows(), nl = sh.local_rows(), h = sh.h;
  const int64_t hd = sh.heads * sh.head_dim;
  const LayerParams& p = p_;
  // Row-parallel biases ride on tp rank 0's partial sum (header).
  const bool add_row_bias = tp_rank_ == 0;
  // Attention block.
  MESHTUNE_RETURN_IF_ERROR(Norm(x, nullptr, nullptr, p.ln1_w, p.ln1_b,
                                a->ln1.as<Bf16>(), a->mean1, a->rstd1));
  const Bf16* ln1_full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(ln1_full, Gather(a->ln1.as<Bf16>()));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(ln1_full, W(p.qkv_w),
                                                W(p.qkv_b), a->qkv.as<Bf16>(),
                                                n, h, sh.qkv_width(), nullptr));
  if (sh.rope) {
    MESHTUNE_RETURN_IF_ERROR(RopeForward(a->qkv.as<Bf16>(), sh.s, sh.b,
                                         sh.heads, sh.groups, sh.head_dim,
                                         sh.rope_base, 0, nullptr));
  }
  const cpu::DropoutSpec attention_dropout = AttentionDropout(first_sample);
  if (kernels_.ring != nullptr) {  // context parallelism
    MESHTUNE_RETURN_IF_ERROR(
        kernels_.ring->Forward(a->qkv.as<Bf16>(), a->attn.as<Bf16>(),
                               a->lse.as<float>(), &attention_dropout));
  } else if (kernels_.flash != nullptr) {
    MESHTUNE_RETURN_IF_ERROR(kernels_.flash->Forward(
        a->qkv.as<Bf16>(), a->attn.as<Bf16>(), a->lse.as<float>(), nullptr,
        &attention_dropout));
  } else {
    Bf16* probs = a->probs.size_bytes() > 0 ? a->probs.as<Bf16>()
                                            : scratch_->probs.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(
        kernels_.unfused->Forward(a->qkv.as<Bf16>(), a->attn.as<Bf16>(), probs,
                                  nullptr, &attention_dropout));
  }
  Bf16* partial = scratch_->partial.as<Bf16>();  // [n, h]
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
      a->attn.as<Bf16>(), W(p.proj_w), add_row_bias ? W(p.proj_b) : nullptr,
      partial, n, hd, h, nullptr));
  Bf16* proj = nullptr;  // [nl, h]
  MESHTUNE_ASSIGN_OR_RETURN(proj,
                            Reduce(partial, scratch_->reduced.as<Bf16>()));
  // Megatron's bias-dropout-add: dropout(proj + bias), then the residual.
  MESHTUNE_RETURN_IF_ERROR(HiddenDropout(
      proj, nl, h, sh.b, Hidden(cpu::DropoutSite::kAttentionOut, first_sample),
      nullptr));
  // x2 = x + proj and ln2 = Norm2(x2), fused.
  MESHTUNE_RETURN_IF_ERROR(Norm(proj, x, a->x2.as<Bf16>(), p.ln2_w, p.ln2_b,
                                a->ln2.as<Bf16>(), a->mean2, a->rstd2));
  // MLP block.
  if (moe_ != nullptr) {
    // The MoE MLP on this rank's rows (it gathers for its shared expert).
    MESHTUNE_RETURN_IF_ERROR(
        moe_->Forward(a->ln2.as<Bf16>(), MoeWeights(), y, a->moe.get()));
    MESHTUNE_RETURN_IF_ERROR(HiddenDropout(
        y, nl, h, sh.b, Hidden(cpu::DropoutSite::kMlpOut, first_sample),
        nullptr));
    return Add(a->x2.as<Bf16>(), y, nl * h, nullptr);
  }
  const Bf16* ln2_full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(ln2_full, Gather(a->ln2.as<Bf16>()));
  if (sh.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(
        gemm_->LinearForward(ln2_full, W(p.fc1_w), W(p.fc1_b),
                             a->fc1.as<Bf16>(), n, h, sh.fc1_width(), nullptr));
    MESHTUNE_RETURN_IF_ERROR(SwigluForward(a->fc1.as<Bf16>(), a->act.as<Bf16>(),
                                           n, sh.ffn, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(gemm_->LinearGeluForward(
        ln2_full, W(p.fc1_w), W(p.fc1_b), a->fc1.as<Bf16>(), a->act.as<Bf16>(),
        n, h, sh.ffn, nullptr));
  }
  // Without SP the partial sums can be reduced in y itself ([n, h] = [nl,
  // h]); under SP they need the [n, h] scratch and reduce-scatter into y.
  Bf16* mlp_partial = sh.sp ? partial : y;
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
      a->act.as<Bf16>(), W(p.fc2_w), add_row_bias ? W(p.fc2_b) : nullptr,
      mlp_partial, n, sh.ffn, h, nullptr));
  // Reduced into y either way (in place without SP).
  MESHTUNE_RETURN_IF_ERROR(Reduce(mlp_partial, y).status());
  // y = x2 + dropout(fc2 + b)
  MESHTUNE_RETURN_IF_ERROR(
      HiddenDropout(y, nl, h, sh.b,
                    Hidden(cpu::DropoutSite::kMlpOut, first_sample), nullptr));
  return Add(a->x2.as<Bf16>(), y, nl * h, nullptr);
}

Status CudaTransformerLayer::Backward(const Bf16* x, const Bf16* dy, Bf16* dx,
                                      const LayerActivations& a,
                                      int64_t first_sample) {
  const LayerParams& p = p_;
  LayerScratch& s = *scratch_;
  // MLP block (dense or MoE), then Norm2's backward, then attention.
  const Bf16* dmlp = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(
      dmlp, DropGrad(dy, cpu::DropoutSite::kMlpOut, first_sample));
  Bf16* dln2 = nullptr;
  if (moe_ != nullptr) {
    dln2 = s.dln.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(moe_->Backward(
        dmlp, a.ln2.as<Bf16>(), MoeWeights(), MoeGrads(), dln2, *a.moe));
  } else {
    MESHTUNE_ASSIGN_OR_RETURN(dln2, DenseMlpBackward(dmlp, a));
  }
  // dx2 = Norm2'(dln2) + dy (the residual branch).
  Bf16* dx2 = s.dx2.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(NormBackward(dln2, a.x2.as<Bf16>(), p.ln2_w, p.ln2_b,
                                        a.mean2, a.rstd2, dy, dx2));
  return AttentionBackward(x, dx2, dx, a, first_sample);
}

StatusOr<Bf16*> CudaTransformerLayer::DenseMlpBackward(
    const Bf16* dmlp, const LayerActivations& a) {
  const LayerShape& sh = sh_;
  const int64_t n = sh.rows(), h = sh.h;
  const LayerParams& p = p_;
  LayerScratch& s = *scratch_;
  // Row-parallel bias gradients (header): every rank without SP; under SP
  // rank 0 from the full gradient, summed over tp by the trainer.
  const bool row_bias_grad = !sh.sp || tp_rank_ == 0;
  // dact = Gather(D(dy))·W2; dfc1 = act'(fc1)·dact; dln2 = Reduce(dfc1·W1).
  const Bf16* dmlp_full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(dmlp_full, Gather(dmlp));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dmlp_full, a.act.as<Bf16>(), W(p.fc2_w), s.dact.as<Bf16>(), G(p.fc2_w),
      row_bias_grad ? G(p.fc2_b) : nullptr, n, sh.ffn, h, nullptr));
  if (sh.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(SwigluBackward(s.dact.as<Bf16>(), a.fc1.as<Bf16>(),
                                            s.dfc1.as<Bf16>(), n, sh.ffn,
                                            nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(GeluBackward(s.dact.as<Bf16>(), a.fc1.as<Bf16>(),
                                          s.dfc1.as<Bf16>(), n * sh.ffn,
                                          nullptr));
  }
  // fc1's input again (Megatron keeps only the shard under SP).
  const Bf16* ln2_full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(ln2_full, Gather(a.ln2.as<Bf16>()));
  Bf16* partial = s.partial.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      s.dfc1.as<Bf16>(), ln2_full, W(p.fc1_w), partial, G(p.fc1_w), G(p.fc1_b),
      n, h, sh.fc1_width(), nullptr));
  return Reduce(partial, s.dln.as<Bf16>());
}

Status CudaTransformerLayer::AttentionBackward(const Bf16* x, Bf16* dx2,
                                               Bf16* dx,
                                               const LayerActivations& a,
                                               int64_t first_sample) {
  const LayerShape& sh = sh_;
  const int64_t n = sh.rows(), h = sh.h, hd = sh.heads * sh.head_dim;
  const LayerParams& p = p_;
  LayerScratch& s = *scratch_;
  const bool row_bias_grad = !sh.sp || tp_rank_ == 0;
  Bf16* partial = s.partial.as<Bf16>();
  // Attention block: dattn = Gather(D(dx2))·Wproj; dqkv = Attention'(dattn);
  // dln1 = Reduce(dqkv·Wqkv).
  const Bf16* dproj = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(
      dproj, DropGrad(dx2, cpu::DropoutSite::kAttentionOut, first_sample));
  const Bf16* dproj_full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(dproj_full, Gather(dproj));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dproj_full, a.attn.as<Bf16>(), W(p.proj_w), s.dattn.as<Bf16>(),
      G(p.proj_w), row_bias_grad ? G(p.proj_b) : nullptr, n, hd, h, nullptr));
  const cpu::DropoutSpec attention_dropout = AttentionDropout(first_sample);
  if (kernels_.ring != nullptr) {
    // The ring's backward, from the saved lse as the flash kernel's.
    MESHTUNE_RETURN_IF_ERROR(kernels_.ring->Backward(
        s.dattn.as<Bf16>(), a.qkv.as<Bf16>(), a.attn.as<Bf16>(),
        a.lse.as<float>(), s.dqkv.as<Bf16>(), &attention_dropout));
  } else if (kernels_.flash != nullptr) {
    // The flash backward recomputes P tile by tile from the saved
    // log-sum-exp whatever the recompute setting (Megatron's selective
    // recompute with flash attention saves nothing extra either).
    MESHTUNE_RETURN_IF_ERROR(kernels_.flash->Backward(
        s.dattn.as<Bf16>(), a.qkv.as<Bf16>(), a.attn.as<Bf16>(),
        a.lse.as<float>(), s.dqkv.as<Bf16>(), nullptr, &attention_dropout));
  } else {
    const Bf16* probs = a.probs.as<Bf16>();
    if (a.probs.size_bytes() == 0) {  // selective: recompute them
      MESHTUNE_RETURN_IF_ERROR(kernels_.unfused->Forward(
          a.qkv.as<Bf16>(), s.attn.as<Bf16>(), s.probs.as<Bf16>(), nullptr,
          &attention_dropout));
      probs = s.probs.as<Bf16>();
    }
    MESHTUNE_RETURN_IF_ERROR(kernels_.unfused->Backward(
        s.dattn.as<Bf16>(), a.qkv.as<Bf16>(), probs, s.dqkv.as<Bf16>(), nullptr,
        &attention_dropout));
  }
  if (sh.rope) {
    MESHTUNE_RETURN_IF_ERROR(RopeBackward(s.dqkv.as<Bf16>(), sh.s, sh.b,
                                          sh.heads, sh.groups, sh.head_dim,
                                          sh.rope_base, 0, nullptr));
  }
  const Bf16* ln1_full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(ln1_full, Gather(a.ln1.as<Bf16>()));
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      s.dqkv.as<Bf16>(), ln1_full, W(p.qkv_w), partial, G(p.qkv_w), G(p.qkv_b),
      n, h, sh.qkv_width(), nullptr));
  Bf16* dln1 = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(dln1, Reduce(partial, s.dln.as<Bf16>()));
  // dx = Norm1'(dln1) + dx2 (the residual branch).
  return NormBackward(dln1, x, p.ln1_w, p.ln1_b, a.mean1, a.rstd1, dx2, dx);
}

}  // namespace meshtune::engine::cuda
