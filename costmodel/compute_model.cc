#include "costmodel/compute_model.h"

#include <algorithm>
#include <cmath>

namespace meshtune::costmodel {

using search_spaces::Activation;
using search_spaces::ModelSpec;
using search_spaces::Normalization;
using search_spaces::ParallelConfig;
using search_spaces::PositionEmbedding;
using search_spaces::Precision;

namespace {

// Which kernel runs a GEMM: a dense cuBLASLt GEMM, one expert's GEMM of
// Transformer Engine's GroupedLinear, or of the fused grouped MLP
// (Calibration::GroupedGemmTime_s).
enum class GemmKernel { kDense, kGrouped, kGroupedFused };

// Adds fwd, dgrad and wgrad of [m, k]·[k, n] to `lc`, timed as `kernel`
// runs it; returns (dgrad, wgrad) through the out-parameters for the
// overlap bookkeeping. fp8 adds the input casts (3 bytes per element: read
// 16-bit, write 8-bit).
void AddGemm(int64_t m, int64_t n, int64_t k, Precision p, double multiplicity,
             const Calibration& cal, LayerCompute* lc, double* dgrad_s,
             double* wgrad_s, const ModelOptions& o,
             GemmKernel kernel = GemmKernel::kDense) {
  if (m <= 0 || n <= 0 || k <= 0 || multiplicity <= 0) return;
  auto time = [&](int64_t gm, int64_t gn, int64_t gk) {
    return kernel == GemmKernel::kDense
               ? cal.GemmTime_s(gm, gn, gk, p, o)
               : cal.GroupedGemmTime_s(gm, gn, gk, p,
                                       kernel == GemmKernel::kGroupedFused, o);
  };
  // fp8 backward GEMMs run with TE's split accumulator (slower on Hopper).
  const double bwd_x =
      search_spaces::IsQuantized(p) ? cal.Fp8BackwardGemmSlowdown(o) : 1.0;
  const double fwd = time(m, n, k);
  const double dgrad = bwd_x * time(m, k, n);
  const double wgrad = bwd_x * time(k, n, m);
  lc->gemm_fwd_s += multiplicity * fwd;
  lc->gemm_bwd_s += multiplicity * (dgrad + wgrad);
  if (search_spaces::IsQuantized(p) &&
      o.enabled(Refinement::kFp8CastOverhead)) {
    // Transformer Engine cast-transpose: read 16-bit, write the fp8 tensor
    // and its transpose (for wgrad / dgrad): 4 B per element, for the
    // input in forward and the output gradient in backward.
    lc->elem_fwd_s += multiplicity * cal.MemoryTime_s(4.0 * m * k, o);
    lc->elem_bwd_s += multiplicity * cal.MemoryTime_s(4.0 * m * n, o);
  }
  if (dgrad_s != nullptr) *dgrad_s += multiplicity * dgrad;
  if (wgrad_s != nullptr) *wgrad_s += multiplicity * wgrad;
}

// Adds the forward and backward time of `elements` of `op` to `lc`.
void AddElementwise(ElementwiseOp op, double elements, const Calibration& cal,
                    LayerCompute* lc, const ModelOptions& o) {
  lc->elem_fwd_s += cal.ElementwiseTime_s(op, elements, false, o);
  lc->elem_bwd_s += cal.ElementwiseTime_s(op, elements, true, o);
}

// Forward seconds accumulated in `lc` and, when the elementwise refinement
// is on, in `elem` (what a block adds is the difference of two calls).
double ForwardSoFar(const LayerCompute& lc, const LayerCompute& elem,
                    const ModelOptions& o) {
  return lc.fwd_s() +
         (o.enabled(Refinement::kElementwise) ? elem.elem_fwd_s : 0.0);
}

int64_t HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0 ? m.kv_channels
                           : m.hidden_size / m.num_attention_heads;
}

}  // namespace

namespace {

// Seconds of core attention for one micro-batch: `heads` local heads, local
// queries s/cp against all s keys (CP ring attention visits every KV chunk;
// causal balancing halves it). Sliding-window layers
// (ModelSpec::IsWindowLayer: every window_attn_skip_freq-th layer at full
// attention) attend to at most window keys per query; the kind-level time
// averages full and windowed layers in their proportion, 1/N full.
void AddCoreAttention(const ModelSpec& m, const ParallelConfig& c, int64_t seq,
                      int64_t heads, int64_t head_dim, const Calibration& cal,
                      LayerCompute* lc, const ModelOptions& o) {
  const int64_t bh = c.mbs * heads;
  double fwd =
      cal.AttentionForwardTime_s(bh, seq / c.cp, seq, head_dim, true, o);
  double bwd =
      cal.AttentionBackwardTime_s(bh, seq / c.cp, seq, head_dim, true, o);
  if (m.window_size >= 0 && m.window_size < seq) {
    const double full_share =
        m.window_attn_skip_freq > 0 ? 1.0 / m.window_attn_skip_freq : 0.0;
    const int64_t window = std::max<int64_t>(1, m.window_size + 1);
    const double wfwd =
        cal.AttentionForwardTime_s(bh, seq / c.cp, window, head_dim, false, o);
    const double wbwd =
        cal.AttentionBackwardTime_s(bh, seq / c.cp, window, head_dim, false, o);
    fwd = full_share * fwd + (1 - full_share) * wfwd;
    bwd = full_share * bwd + (1 - full_share) * wbwd;
  }
  lc->attn_fwd_s += fwd;
  lc->attn_bwd_s += bwd;
}

// GQA/MHA self-attention: QKV and output projections split over tp.
void AddAttention(const ModelSpec& m, const ParallelConfig& c, int64_t seq,
                  Precision p, const Calibration& cal, LayerCompute* lc,
                  LayerCompute* elem, const ModelOptions& o) {
  const int64_t t = c.tp;
  const int64_t T = c.mbs * seq / c.cp;
  const int64_t h = m.hidden_size;
  const int64_t dh = HeadDim(m);
  const int64_t q = m.num_attention_heads * dh;
  const int64_t kv = m.num_query_groups * dh;
  AddGemm(T, (q + 2 * kv) / t, h, p, 1, cal, lc, &lc->column_dgrad_s,
          &lc->column_wgrad_s, o);
  AddGemm(T, h, q / t, p, 1, cal, lc, nullptr, nullptr, o);
  AddCoreAttention(m, c, seq, m.num_attention_heads / t, dh, cal, lc, o);
  if (m.qk_layernorm) {
    // --qk-layernorm: a norm over every local query and key head
    // (attention.py q_layernorm / k_layernorm).
    AddElementwise(ElementwiseOp::kNorm,
                   static_cast<double>(T) * static_cast<double>(q + kv) / t,
                   cal, elem, o);
  }
  if (m.position_embedding_type == PositionEmbedding::kRope) {
    AddElementwise(ElementwiseOp::kRope,
                   static_cast<double>(T) * static_cast<double>(q + kv) / t,
                   cal, elem, o);
  }
}

// Multi-latent attention (multi_latent_attention.py): the q and kv
// down-projections run replicated on the sequence-parallel shard, the
// up-projections and the output projection split heads over tp; core
// attention has q/k heads of qk_head_dim + qk_pos_emb_head_dim and v heads of
// v_head_dim (FLOPs ∝ their mean).
void AddMla(const ModelSpec& m, const ParallelConfig& c, int64_t seq,
            Precision p, const Calibration& cal, LayerCompute* lc,
            LayerCompute* elem, const ModelOptions& o) {
  const int64_t t = c.tp;
  const int64_t T = c.mbs * seq / c.cp;
  const int64_t T_sp = c.sp ? T / t : T;
  const int64_t h = m.hidden_size;
  const int64_t n = m.num_attention_heads;
  const int64_t dqk = m.mla_qk_head_dim();
  if (m.q_lora_rank > 0) {
    AddGemm(T_sp, m.q_lora_rank, h, p, 1, cal, lc, nullptr, nullptr, o);
    const double q_up_before = lc->fwd_s();
    AddGemm(T, n * dqk / t, m.q_lora_rank, p, 1, cal, lc, &lc->column_dgrad_s,
            &lc->column_wgrad_s, o);
    lc->mla_up_proj_fwd_s += lc->fwd_s() - q_up_before;
    AddElementwise(ElementwiseOp::kNorm,
                   static_cast<double>(T_sp) * m.q_lora_rank, cal, elem, o);
  } else {
    AddGemm(T, n * dqk / t, h, p, 1, cal, lc, &lc->column_dgrad_s,
            &lc->column_wgrad_s, o);
  }
  AddGemm(T_sp, m.kv_lora_rank + m.qk_pos_emb_head_dim, h, p, 1, cal, lc,
          nullptr, nullptr, o);
  AddElementwise(ElementwiseOp::kNorm,
                 static_cast<double>(T_sp) * m.kv_lora_rank, cal, elem, o);
  const double kv_up_before = lc->fwd_s();
  AddGemm(T, n * (m.qk_head_dim + m.v_head_dim) / t, m.kv_lora_rank, p, 1, cal,
          lc, &lc->column_dgrad_s, &lc->column_wgrad_s, o);
  lc->mla_up_proj_fwd_s += lc->fwd_s() - kv_up_before;
  AddGemm(T, h, n * m.v_head_dim / t, p, 1, cal, lc, nullptr, nullptr, o);
  AddCoreAttention(m, c, seq, n / t, (dqk + m.v_head_dim) / 2, cal, lc, o);
  AddElementwise(ElementwiseOp::kRope,
                 static_cast<double>(T) * (n / t + 1) * m.qk_pos_emb_head_dim,
                 cal, elem, o);
}

// Mamba-2 mixer (megatron/core/ssm/mamba_mixer.py): in-projection to
// z, x, B, C, dt (2·d_in + 2·G·N + H columns) and out-projection split over
// tp by heads; the causal conv1d and the gated RMSNorm are memory bound; the
// chunked SSD scan does about 7·d_in·N FLOPs per token forward (Megatron's
// hybrid FLOP count, docs/sources.md §3.2), on the CUDA cores
// (Calibration::ScanTime_s; backward 2×).
void AddMamba(const ModelSpec& m, const ParallelConfig& c, int64_t seq,
              Precision p, const Calibration& cal, LayerCompute* lc,
              LayerCompute* elem, const ModelOptions& o) {
  const int64_t t = c.tp;
  const int64_t T = c.mbs * seq / c.cp;
  const int64_t h = m.hidden_size;
  const int64_t heads = m.mamba_heads();
  const int64_t d_in = heads * m.mamba_head_dim;
  const int64_t gn = m.mamba_num_groups * m.mamba_state_dim;
  AddGemm(T, (2 * d_in + 2 * gn + heads) / t, h, p, 1, cal, lc,
          &lc->column_dgrad_s, &lc->column_wgrad_s, o);
  AddGemm(T, h, d_in / t, p, 1, cal, lc, nullptr, nullptr, o);
  double fwd = 0;
  if (o.enabled(Refinement::kMambaScanCudaCores)) {
    const double scan_flops = 7.0 * static_cast<double>(T) *
                              static_cast<double>(d_in / t) *
                              static_cast<double>(m.mamba_state_dim);
    fwd = cal.ScanTime_s(scan_flops, o);
  } else {
    // The same FLOPs as a 16-bit GEMM [T, 3.5·N]·[3.5·N, d_in/t].
    const Precision scan_p =
        search_spaces::IsQuantized(p) ? Precision::kBf16 : p;
    const int64_t scan_k = std::max<int64_t>(1, 7 * m.mamba_state_dim / 2);
    fwd = cal.GemmTime_s(T, d_in / t, scan_k, scan_p, o);
  }
  lc->attn_fwd_s += fwd;
  lc->attn_bwd_s += 2 * fwd;
  const double conv = static_cast<double>(T) * (d_in + 2 * gn) / t;
  AddElementwise(ElementwiseOp::kNorm, conv, cal, elem, o);  // conv1d + act
  AddElementwise(ElementwiseOp::kNorm, static_cast<double>(T) * d_in / t, cal,
                 elem, o);  // gated RMSNorm
}

ElementwiseOp ActivationOp(const ModelSpec& m) {
  return m.gated_mlp() ? ElementwiseOp::kSwiglu : ElementwiseOp::kGelu;
}

// Dense MLP of width f split over tp (gated: gate and up in one fc1).
void AddDenseMlp(const ModelSpec& m, const ParallelConfig& c, int64_t seq,
                 int64_t f, Precision p, const Calibration& cal,
                 LayerCompute* lc, LayerCompute* elem, const ModelOptions& o) {
  const int64_t t = c.tp;
  const int64_t T = c.mbs * seq / c.cp;
  const int64_t h = m.hidden_size;
  AddGemm(T, (m.gated_mlp() ? 2 : 1) * f / t, h, p, 1, cal, lc,
          &lc->column_dgrad_s, &lc->column_wgrad_s, o);
  AddGemm(T, h, f / t, p, 1, cal, lc, nullptr, nullptr, o);
  AddElementwise(ActivationOp(m),
                 static_cast<double>(T) * static_cast<double>(f) / t, cal, elem,
                 o);
}

}  // namespace

double SelectiveRecomputeTime_s(const LayerCompute& lc, uint32_t modules) {
  namespace ss = search_spaces;
  double s = 0;
  if (modules & ss::kRecomputeCoreAttn) s += lc.attn_fwd_s;
  if (modules & ss::kRecomputeMlp) s += lc.mlp_fwd_s;
  if (modules & ss::kRecomputeLayernorm) s += lc.norm_fwd_s;
  if (modules & ss::kRecomputeMlaUpProj) s += lc.mla_up_proj_fwd_s;
  if (modules & ss::kRecomputeMoe) {
    s += lc.moe_fwd_s;  // contains the activation and the shared experts
  } else {
    if (modules & ss::kRecomputeMoeAct) s += lc.moe_act_fwd_s;
    if (modules & ss::kRecomputeSharedExperts) s += lc.shared_experts_fwd_s;
  }
  return s;
}

double MoeLoadImbalance(const ModelSpec& m, const ModelOptions& o) {
  if (m.moe_router_force_load_balancing) return 1.0;
  return o.enabled(Refinement::kMoeImbalance) ? kMoeLoadImbalance : 1.0;
}

double TokensPerLocalExpert(const ModelSpec& m, const ParallelConfig& c,
                            int64_t seq, const ModelOptions& o) {
  // Each rank of an expert model replica (etp·ep ranks) routes k copies of
  // its T/tp tokens; the E experts share them, and each of an expert's etp
  // ranks sees all its tokens (on fe/etp columns). With etp = tp this is
  // k·T·ep/E.
  const double T = static_cast<double>(c.mbs) * seq / c.cp;
  const double mean = static_cast<double>(m.moe_router_topk) * T *
                      c.expert_tp() * c.ep / (c.tp * m.num_experts);
  double load = MoeLoadImbalance(m, o);
  if (m.moe_expert_capacity_factor > 0) {
    // Token dropping caps the busiest expert at the capacity; padding fills
    // every expert to it (static shapes).
    load = m.moe_pad_expert_input_to_capacity
               ? m.moe_expert_capacity_factor
               : std::min(load, m.moe_expert_capacity_factor);
  }
  return std::ceil(load * mean);
}

void UseFp8CoreAttention(search_spaces::LayerKind kind, LayerCompute* lc) {
  if (kind.mixer != search_spaces::Mixer::kAttention &&
      kind.mixer != search_spaces::Mixer::kMla) {
    return;
  }
  lc->attn_fwd_s /= kFp8AttentionSpeedup;
  lc->attn_bwd_s /= kFp8AttentionSpeedup;
}

LayerCompute LayerComputeTime(const ModelSpec& m, const ParallelConfig& c,
                              int64_t seq, Precision p,
                              search_spaces::LayerKind kind,
                              const Calibration& cal, const ModelOptions& o) {
  using search_spaces::Mixer;
  using search_spaces::Mlp;
  LayerCompute lc;
  const int64_t t = c.tp;
  const int64_t T = c.mbs * seq / c.cp;  // tokens per GPU in the GEMMs
  const int64_t h = m.hidden_size;
  const bool gpt = m.normalization == Normalization::kLayerNorm;

  // Elementwise work (element counts; the calibration prices them, see
  // ElementwiseOp). Tensors replicated across tp ranks are split by SP.
  LayerCompute elem;
  const double tsp = c.sp ? static_cast<double>(t) : 1.0;
  const double e_repl = static_cast<double>(T) * h / tsp;
  // One norm and one residual add per block (GPT layers have two blocks).
  const double blocks = (kind.mixer != Mixer::kNone) + (kind.mlp != Mlp::kNone);
  AddElementwise(ElementwiseOp::kNorm, blocks * e_repl, cal, &elem, o);
  if (o.enabled(Refinement::kElementwise)) lc.norm_fwd_s = elem.elem_fwd_s;
  AddElementwise(
      gpt ? ElementwiseOp::kBiasDropoutAdd : ElementwiseOp::kResidualAdd,
      blocks * e_repl, cal, &elem, o);

  switch (kind.mixer) {
    case Mixer::kAttention:
      AddAttention(m, c, seq, p, cal, &lc, &elem, o);
      break;
    case Mixer::kMla:
      AddMla(m, c, seq, p, cal, &lc, &elem, o);
      break;
    case Mixer::kMamba:
      AddMamba(m, c, seq, p, cal, &lc, &elem, o);
      break;
    case Mixer::kNone:
      break;
  }

  const double mlp_before = ForwardSoFar(lc, elem, o);
  if (kind.mlp == Mlp::kDense) {
    AddDenseMlp(m, c, seq, m.ffn_hidden_size, p, cal, &lc, &elem, o);
    lc.mlp_fwd_s = ForwardSoFar(lc, elem, o) - mlp_before;
  } else if (kind.mlp == Mlp::kMoe) {
    const int64_t fe = m.expert_ffn_hidden_size();
    const int64_t E = m.num_experts;
    const int64_t k = m.moe_router_topk;
    const int64_t etp = c.expert_tp();
    const int64_t local_experts = E / c.ep;
    // Latent MoE: tokens go h -> latent before dispatch and back after
    // combine (replicated projections on the SP shard); experts then work
    // at the latent width.
    const int64_t h_in = m.moe_latent_size > 0 ? m.moe_latent_size : h;
    const int64_t T_sp = c.sp ? T / t : T;
    if (m.moe_latent_size > 0) {
      AddGemm(T_sp, h_in, h, p, 1, cal, &lc, nullptr, nullptr, o);
      AddGemm(T_sp, h, h_in, p, 1, cal, &lc, nullptr, nullptr, o);
    }
    const int64_t tokens_per_expert =
        static_cast<int64_t>(TokensPerLocalExpert(m, c, seq, o));
    // Router: [T, h]·[h, E], in 16-bit (Megatron casts it up to fp32 only
    // with --moe-router-dtype; the GEMM is small either way).
    AddGemm(T, E, h, Precision::kBf16, 1, cal, &lc, nullptr, nullptr, o);
    // The CuTeDSL fused grouped MLP runs MXFP8 grouped GEMMs only.
    const GemmKernel experts = m.use_transformer_engine_op_fuser &&
                                       m.moe_grouped_gemm &&
                                       p == Precision::kMxfp8
                                   ? GemmKernel::kGroupedFused
                                   : GemmKernel::kGrouped;
    AddGemm(tokens_per_expert, (m.gated_mlp() ? 2 : 1) * fe / etp, h_in, p,
            static_cast<double>(local_experts), cal, &lc, nullptr, nullptr, o,
            experts);
    AddGemm(tokens_per_expert, h_in, fe / etp, p,
            static_cast<double>(local_experts), cal, &lc, nullptr, nullptr, o,
            experts);
    const double routed =
        static_cast<double>(tokens_per_expert) * local_experts;
    const double act_before = ForwardSoFar(lc, elem, o);
    AddElementwise(ActivationOp(m), routed * static_cast<double>(fe) / etp, cal,
                   &elem, o);
    lc.moe_act_fwd_s = ForwardSoFar(lc, elem, o) - act_before;
    // Permute + unpermute of the routed tokens: 8 B per element streamed,
    // twice that backward.
    const double permute_bytes = 8.0 * k * static_cast<double>(T) * h_in / tsp;
    elem.elem_fwd_s += cal.MemoryTime_s(permute_bytes, o);
    elem.elem_bwd_s += cal.MemoryTime_s(2.0 * permute_bytes, o);
    if (m.moe_shared_expert_intermediate_size > 0) {
      const double shared_before = ForwardSoFar(lc, elem, o);
      AddDenseMlp(m, c, seq, m.moe_shared_expert_intermediate_size, p, cal, &lc,
                  &elem, o);
      lc.shared_experts_fwd_s = ForwardSoFar(lc, elem, o) - shared_before;
    }
    lc.moe_fwd_s = ForwardSoFar(lc, elem, o) - mlp_before;
  }
  if (o.enabled(Refinement::kElementwise)) {
    lc.elem_fwd_s += elem.elem_fwd_s;
    lc.elem_bwd_s += elem.elem_bwd_s;
  }
  return lc;
}

LayerCompute LayerComputeTime(const ModelSpec& m, const ParallelConfig& c,
                              int64_t seq, Precision p, bool moe_layer,
                              const Calibration& cal, const ModelOptions& o) {
  using search_spaces::Mixer;
  using search_spaces::Mlp;
  return LayerComputeTime(
      m, c, seq, p,
      {m.multi_latent_attention ? Mixer::kMla : Mixer::kAttention,
       moe_layer ? Mlp::kMoe : Mlp::kDense},
      cal, o);
}

ElementwiseOp CrossEntropyOp(const search_spaces::TrainingSpec& training) {
  if (!training.cross_entropy_loss_fusion) return ElementwiseOp::kCrossEntropy;
  return training.cross_entropy_fusion_impl ==
                 search_spaces::CrossEntropyFusionImpl::kTe
             ? ElementwiseOp::kCrossEntropyTe
             : ElementwiseOp::kCrossEntropyNative;
}

LayerCompute LogitsComputeTime(const ModelSpec& m, const ParallelConfig& c,
                               int64_t seq, int64_t padded_vocab, Precision p,
                               const Calibration& cal, const ModelOptions& o,
                               ElementwiseOp cross_entropy) {
  LayerCompute lc;
  if (!o.enabled(Refinement::kOutputLayer)) return lc;
  const int64_t T = c.mbs * seq / c.cp;
  const int64_t v_local = padded_vocab / c.tp;
  // Megatron keeps the output layer in 16-bit even in fp8 recipes.
  const Precision out_p = search_spaces::IsQuantized(p) ? Precision::kBf16 : p;
  AddGemm(T, v_local, m.hidden_size, out_p, 1, cal, &lc, nullptr, nullptr, o);
  // Final norm + the vocab-parallel cross-entropy over the local logits,
  // by the run's kernel (calibration.h has the bytes per logit).
  const double tsp = c.sp ? static_cast<double>(c.tp) : 1.0;
  const double logits = static_cast<double>(T) * v_local;
  AddElementwise(cross_entropy, logits, cal, &lc, o);
  AddElementwise(ElementwiseOp::kNorm,
                 static_cast<double>(T) * m.hidden_size / tsp, cal, &lc, o);
  return lc;
}

LayerCompute EmbeddingComputeTime(const ModelSpec& m, const ParallelConfig& c,
                                  int64_t seq, const Calibration& cal,
                                  const ModelOptions& o) {
  LayerCompute lc;
  if (!o.enabled(Refinement::kElementwise)) return lc;
  const double tokens = static_cast<double>(c.mbs) * seq / c.cp;
  // Gather rows (+ positions, dropout) forward; scatter-add of the gradient
  // into the embedding table backward.
  AddElementwise(ElementwiseOp::kEmbedding, tokens * m.hidden_size, cal, &lc,
                 o);
  return lc;
}

}  // namespace meshtune::costmodel
