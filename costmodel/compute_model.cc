#include "costmodel/compute_model.h"

#include <cmath>

namespace meshtune::costmodel {

using search_spaces::Activation;
using search_spaces::ModelSpec;
using search_spaces::Normalization;
using search_spaces::ParallelConfig;
using search_spaces::PositionEmbedding;
using search_spaces::Precision;

namespace {

// Adds fwd, dgrad and wgrad of [m, k]·[k, n] to `lc`; returns (dgrad, wgrad)
// through the out-parameters for the overlap bookkeeping. fp8 adds the
// input casts (3 bytes per element: read 16-bit, write 8-bit).
void AddGemm(int64_t m, int64_t n, int64_t k, Precision p, double multiplicity,
             const Calibration& cal, LayerCompute* lc, double* dgrad_s,
             double* wgrad_s, const ModelOptions& o) {
  if (m <= 0 || n <= 0 || k <= 0 || multiplicity <= 0) return;
  // fp8 backward GEMMs run with TE's split accumulator (slower on Hopper).
  const double bwd_x =
      search_spaces::IsQuantized(p) ? cal.Fp8BackwardGemmSlowdown(o) : 1.0;
  const double fwd = cal.GemmTime_s(m, n, k, p, o);
  const double dgrad = bwd_x * cal.GemmTime_s(m, k, n, p, o);
  const double wgrad = bwd_x * cal.GemmTime_s(k, n, m, p, o);
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

int64_t HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0 ? m.kv_channels
                           : m.hidden_size / m.num_attention_heads;
}

}  // namespace

LayerCompute LayerComputeTime(const ModelSpec& m, const ParallelConfig& c,
                              int64_t seq, Precision p, bool moe_layer,
                              const Calibration& cal, const ModelOptions& o) {
  LayerCompute lc;
  const int64_t t = c.tp;
  const int64_t T = c.mbs * seq / c.cp;  // tokens per GPU in the GEMMs
  const int64_t h = m.hidden_size;
  const int64_t dh = HeadDim(m);
  const int64_t q = m.num_attention_heads * dh;
  const int64_t kv = m.num_query_groups * dh;
  const bool swiglu = m.activation == Activation::kSwiglu;
  const bool gpt = m.normalization == Normalization::kLayerNorm;

  // Attention linears.
  AddGemm(T, (q + 2 * kv) / t, h, p, 1, cal, &lc, &lc.column_dgrad_s,
          &lc.column_wgrad_s, o);
  AddGemm(T, h, q / t, p, 1, cal, &lc, nullptr, nullptr, o);
  // Core attention: local heads a/t, local queries s/cp against all s keys
  // (CP ring attention visits every KV chunk; causal balancing halves it).
  lc.attn_fwd_s = cal.AttentionForwardTime_s(
      c.mbs * (m.num_attention_heads / t), seq / c.cp, seq, dh, true, o);
  lc.attn_bwd_s = cal.AttentionBackwardTime_s(
      c.mbs * (m.num_attention_heads / t), seq / c.cp, seq, dh, true, o);

  // Elementwise work (element counts; the calibration prices them, see
  // ElementwiseOp). Tensors replicated across tp ranks are split by SP.
  LayerCompute elem;
  const double tsp = c.sp ? static_cast<double>(t) : 1.0;
  const double e_repl = static_cast<double>(T) * h / tsp;
  const ElementwiseOp act =
      swiglu ? ElementwiseOp::kSwiglu : ElementwiseOp::kGelu;
  AddElementwise(ElementwiseOp::kNorm, 2 * e_repl, cal, &elem, o);  // two
  AddElementwise(
      gpt ? ElementwiseOp::kBiasDropoutAdd : ElementwiseOp::kResidualAdd,
      2 * e_repl, cal, &elem, o);  // after attention and after the MLP
  if (m.position_embedding_type == PositionEmbedding::kRope) {
    AddElementwise(ElementwiseOp::kRope,
                   static_cast<double>(T) * static_cast<double>(q + kv) / t,
                   cal, &elem, o);
  }

  if (!moe_layer) {
    const int64_t f = m.ffn_hidden_size;
    AddGemm(T, (swiglu ? 2 : 1) * f / t, h, p, 1, cal, &lc, &lc.column_dgrad_s,
            &lc.column_wgrad_s, o);
    AddGemm(T, h, f / t, p, 1, cal, &lc, nullptr, nullptr, o);
    AddElementwise(act, static_cast<double>(T) * static_cast<double>(f) / t,
                   cal, &elem, o);
  } else {
    const int64_t fe = m.expert_ffn_hidden_size();
    const int64_t E = m.num_experts;
    const int64_t k = m.moe_router_topk;
    const int64_t local_experts = E / c.ep;
    const double imbalance =
        o.enabled(Refinement::kMoeImbalance) ? kMoeLoadImbalance : 1.0;
    const int64_t tokens_per_expert = static_cast<int64_t>(
        std::ceil(imbalance * static_cast<double>(k * T * c.ep) / E));
    AddGemm(T, E, h, p, 1, cal, &lc, nullptr, nullptr, o);  // router
    AddGemm(tokens_per_expert, (swiglu ? 2 : 1) * fe / t, h, p,
            static_cast<double>(local_experts), cal, &lc, nullptr, nullptr, o);
    AddGemm(tokens_per_expert, h, fe / t, p, static_cast<double>(local_experts),
            cal, &lc, nullptr, nullptr, o);
    const double routed = static_cast<double>(k) * T;
    AddElementwise(act, routed * static_cast<double>(fe) / t, cal, &elem, o);
    // Permute + unpermute of the routed tokens: 8 B per element streamed,
    // twice that backward.
    const double permute_bytes = 8.0 * routed * h / tsp;
    elem.elem_fwd_s += cal.MemoryTime_s(permute_bytes, o);
    elem.elem_bwd_s += cal.MemoryTime_s(2.0 * permute_bytes, o);
  }
  if (o.enabled(Refinement::kElementwise)) {
    lc.elem_fwd_s += elem.elem_fwd_s;
    lc.elem_bwd_s += elem.elem_bwd_s;
  }
  return lc;
}

LayerCompute LogitsComputeTime(const ModelSpec& m, const ParallelConfig& c,
                               int64_t seq, int64_t padded_vocab, Precision p,
                               const Calibration& cal, const ModelOptions& o) {
  LayerCompute lc;
  if (!o.enabled(Refinement::kOutputLayer)) return lc;
  const int64_t T = c.mbs * seq / c.cp;
  const int64_t v_local = padded_vocab / c.tp;
  // Megatron keeps the output layer in 16-bit even in fp8 recipes.
  const Precision out_p = search_spaces::IsQuantized(p) ? Precision::kBf16 : p;
  AddGemm(T, v_local, m.hidden_size, out_p, 1, cal, &lc, nullptr, nullptr, o);
  // Final norm + the vocab-parallel cross-entropy over the local logits
  // (ElementwiseOp::kCrossEntropy).
  const double tsp = c.sp ? static_cast<double>(c.tp) : 1.0;
  const double logits = static_cast<double>(T) * v_local;
  AddElementwise(ElementwiseOp::kCrossEntropy, logits, cal, &lc, o);
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
