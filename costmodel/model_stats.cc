#include "costmodel/model_stats.h"

namespace meshtune::costmodel {

using search_spaces::Activation;
using search_spaces::ModelSpec;
using search_spaces::Normalization;
using search_spaces::PositionEmbedding;

namespace {

// GEMM count multiplier of the MLP: SwiGLU has gate, up and down (3·h·f);
// GeLU has up and down (2·h·f). Megatron calls this the gated-linear factor.
double MlpGemms(const ModelSpec& m) {
  return m.activation == Activation::kSwiglu ? 3.0 : 2.0;
}

// GPT-style models (LayerNorm) carry linear biases (Megatron add_bias_linear
// default); LLaMA-style recipes (RMSNorm) turn them off.
bool HasBias(const ModelSpec& m) {
  return m.normalization == Normalization::kLayerNorm;
}

double HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0
             ? static_cast<double>(m.kv_channels)
             : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

}  // namespace

int64_t PaddedVocabSize(int64_t vocab_size, int64_t tp) {
  const int64_t multiple = 128 * (tp > 0 ? tp : 1);
  return (vocab_size + multiple - 1) / multiple * multiple;
}

ModelStats ComputeModelStats(const ModelSpec& m, int64_t padded_vocab,
                             int64_t max_position_embeddings) {
  ModelStats st;
  const double h = static_cast<double>(m.hidden_size);
  const double dh = HeadDim(m);
  const double q = m.num_attention_heads * dh;
  const double kv = m.num_query_groups * dh;
  const bool bias = HasBias(m);
  const double gemms = MlpGemms(m);
  // Megatron: LayerNorm has weight and bias (2h), RMSNorm only weight (h).
  const double norm_size =
      m.normalization == Normalization::kLayerNorm ? 2.0 : 1.0;

  st.attention_params = h * (q + 2 * kv) + q * h;
  if (bias) st.attention_params += (q + 2 * kv) + h;
  const double f = static_cast<double>(m.ffn_hidden_size);
  st.dense_mlp_params = gemms * h * f;
  if (bias) st.dense_mlp_params += (gemms - 1) * f + h;
  if (m.is_moe()) {
    const double fe = static_cast<double>(m.expert_ffn_hidden_size());
    st.expert_params = gemms * h * fe;
    if (bias) st.expert_params += (gemms - 1) * fe + h;
    st.router_params = h * m.num_experts;
  }
  st.norm_params = 2 * h * norm_size;
  if (bias) st.row_parallel_bias_params = 2 * h;
  st.padded_vocab = padded_vocab;
  st.word_embedding_params = static_cast<double>(padded_vocab) * h;
  st.position_params =
      m.position_embedding_type == PositionEmbedding::kLearnedAbsolute
          ? static_cast<double>(max_position_embeddings) * h
          : 0.0;
  st.final_norm_params = h * norm_size;
  st.output_params =
      m.untie_embeddings_and_output_weights ? st.word_embedding_params : 0.0;

  const double n_moe = static_cast<double>(m.num_moe_layers());
  const double n_dense = static_cast<double>(m.num_layers) - n_moe;
  const double shared = st.word_embedding_params + st.position_params +
                        st.final_norm_params + st.output_params;
  const double per_layer_common = st.attention_params + st.norm_params;
  st.total_params =
      m.num_layers * per_layer_common + n_dense * st.dense_mlp_params +
      n_moe * (st.expert_params * m.num_experts + st.router_params) + shared;
  st.active_params =
      m.num_layers * per_layer_common + n_dense * st.dense_mlp_params +
      n_moe * (st.expert_params * m.moe_router_topk + st.router_params) +
      shared;
  return st;
}

double ModelFlopsPerStep(const ModelSpec& m, int64_t gbs, int64_t seq,
                         int64_t padded_vocab) {
  const double tokens = static_cast<double>(gbs) * seq;
  const double seq_sq_sum = static_cast<double>(gbs) * seq * seq;
  const double h = static_cast<double>(m.hidden_size);
  const double dh = HeadDim(m);
  const double a = static_cast<double>(m.num_attention_heads);
  const double g = static_cast<double>(m.num_query_groups);
  const double gemms = MlpGemms(m);
  const double n_moe = static_cast<double>(m.num_moe_layers());
  const double n_dense = static_cast<double>(m.num_layers) - n_moe;
  const double L = static_cast<double>(m.num_layers);
  // training.py: 6·h·[f·F·L_d + f_e·k·F·L_moe] for the MLPs.
  const double mlp = 6 * h *
                     (m.ffn_hidden_size * gemms * n_dense +
                      (m.is_moe() ? m.expert_ffn_hidden_size() *
                                        m.moe_router_topk * gemms * n_moe
                                  : 0.0));
  // attn_lin = 6·[h·(a·d_h + 2·g·d_h) + a·d_h·h] per layer.
  const double attn_lin = 6 * (h * (a * dh + 2 * g * dh) + a * dh * h) * L;
  const double logits = 6 * h * static_cast<double>(padded_vocab);
  // Core attention 6·a·d_h per (token, key) pair: QKᵀ and PV, ×3 passes,
  // ×2 FLOPs per FMA, ×1/2 for the causal mask.
  const double core = 6 * a * dh * L;
  return tokens * (mlp + attn_lin + logits) + seq_sq_sum * core;
}

double SelectiveRecomputeFlopsPerStep(const ModelSpec& m, int64_t gbs,
                                      int64_t seq) {
  // Forward core attention only: 2 GEMMs × 2 FLOPs × ½ causal = 2·a·d_h per
  // (token, key) pair and layer.
  return static_cast<double>(gbs) * seq * seq * 2 * m.num_attention_heads *
         HeadDim(m) * m.num_layers;
}

double FullRecomputeFlopsPerStep(const ModelSpec& m, int64_t gbs, int64_t seq,
                                 double recomputed_fraction) {
  // One extra forward = a third of the transformer-layer model FLOPs (the
  // logits layer is not recomputed). Vocabulary 0 removes the logits term.
  return ModelFlopsPerStep(m, gbs, seq, 0) / 3.0 * recomputed_fraction;
}

}  // namespace meshtune::costmodel
