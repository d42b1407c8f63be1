#include "costmodel/model_stats.h"

#include <algorithm>
#include <vector>

namespace meshtune::costmodel {

using search_spaces::Activation;
using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::Normalization;
using search_spaces::PositionEmbedding;

namespace {

// Megatron: LayerNorm has weight and bias (2 per element), RMSNorm only a
// weight (1).
double NormSize(const ModelSpec& m) {
  return m.normalization == Normalization::kLayerNorm ? 2.0 : 1.0;
}

double HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0
             ? static_cast<double>(m.kv_channels)
             : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

// GEMMs of an MLP in units of h·f: gated activations (SwiGLU, GPT-OSS's
// quick-GEGLU) have gate, up and down (3), the others up and down (2). This
// is the real shape, used for parameters and the true FLOP count.
double MlpGemms(const ModelSpec& m) { return m.gated_mlp() ? 3.0 : 2.0; }

// Megatron's FLOP formula keys the factor on args.swiglu only
// (training.py: ffn_expansion_factor = 3 if args.swiglu else 2; the hybrid
// branch's scale_factor 1.5 likewise), so --quick-geglu counts 2.
double MegatronMlpGemms(const ModelSpec& m) {
  return m.activation == Activation::kSwiglu ? 3.0 : 2.0;
}

Mixer GptMixer(const ModelSpec& m) {
  return m.multi_latent_attention ? Mixer::kMla : Mixer::kAttention;
}

bool IsAttention(Mixer x) { return x == Mixer::kAttention || x == Mixer::kMla; }

// The mixer's parameters (docs/sources.md §4.2).
LayerParams MixerParams(const ModelSpec& m, Mixer mixer) {
  LayerParams p;
  const double h = static_cast<double>(m.hidden_size);
  const double n = static_cast<double>(m.num_attention_heads);
  const bool bias = m.has_linear_biases();
  switch (mixer) {
    case Mixer::kNone:
      break;
    case Mixer::kAttention: {
      const double d = HeadDim(m);
      const double q = n * d;
      const double kv = static_cast<double>(m.num_query_groups) * d;
      // linear_qkv (column-parallel) and linear_proj (row-parallel).
      p.tp_sharded = h * (q + 2 * kv) + q * h;
      if (bias) {
        p.tp_sharded += q + 2 * kv;
        p.replicated += h;  // linear_proj bias, added after the reduction
      }
      // q_layernorm / k_layernorm over one head (not split by TP).
      if (m.qk_layernorm) p.replicated += 2 * d * NormSize(m);
      break;
    }
    case Mixer::kMla: {
      // megatron/core/transformer/multi_latent_attention.py: the down
      // projections run "duplicated" on every TP rank, the up projections
      // and linear_proj are split over heads.
      const double qk = static_cast<double>(m.mla_qk_head_dim());
      const double rope = static_cast<double>(m.qk_pos_emb_head_dim);
      const double dv = static_cast<double>(m.v_head_dim);
      const double ql = static_cast<double>(m.q_lora_rank);
      const double kl = static_cast<double>(m.kv_lora_rank);
      if (m.q_lora_rank > 0) {
        p.replicated += h * ql + ql * NormSize(m);  // q down-proj + q norm
        p.tp_sharded += ql * n * qk;                // q up-proj
        if (bias) {
          p.replicated += ql;
          p.tp_sharded += n * qk;
        }
      } else {
        p.tp_sharded += h * n * qk;  // full query projection (V2-Lite)
        if (bias) p.tp_sharded += n * qk;
      }
      // kv down-proj (latent + the shared RoPE key part) + kv norm, kv
      // up-proj to the non-RoPE key and the value heads, output projection.
      // The latent norms are counted always: every MLA model has them
      // (DeepSeek-V2/V3, Kimi-K2), and Megatron's FLOP formula assumes them.
      p.replicated += h * (kl + rope) + kl * NormSize(m);
      p.tp_sharded += kl * n * (m.qk_head_dim + dv) + n * dv * h;
      if (bias) {
        p.replicated += kl + rope + h;
        p.tp_sharded += n * (m.qk_head_dim + dv);
      }
      break;
    }
    case Mixer::kMamba: {
      // megatron/core/ssm/mamba_mixer.py: in_proj h -> (z, x, B, C, dt) =
      // 2·d_inner + 2·G·N + H, depthwise conv1d over x, B, C with a bias,
      // dt_bias, A_log and D per head, the gated RMSNorm over d_inner and
      // out_proj d_inner -> h; all split over TP (heads and groups), no
      // linear biases (MambaMixer bias=False whatever add_bias_linear).
      const double heads = static_cast<double>(m.mamba_heads());
      const double d_inner = heads * m.mamba_head_dim;
      const double gn =
          static_cast<double>(m.mamba_num_groups) * m.mamba_state_dim;
      p.tp_sharded = h * (2 * d_inner + 2 * gn + heads) +
                     (d_inner + 2 * gn) * (m.mamba_conv_kernel + 1) +
                     3 * heads + d_inner + d_inner * h;
      break;
    }
  }
  return p;
}

// The MLP's parameters (§4.2): a dense MLP, or an MoE block with its
// router, routed experts, shared experts and latent projections.
LayerParams MlpParams(const ModelSpec& m, Mlp mlp) {
  LayerParams p;
  const double h = static_cast<double>(m.hidden_size);
  const double gemms = MlpGemms(m);
  const bool bias = m.has_linear_biases();
  if (mlp == Mlp::kDense) {
    const double f = static_cast<double>(m.ffn_hidden_size);
    p.tp_sharded = gemms * h * f;
    if (bias) {
      p.tp_sharded += (gemms - 1) * f;  // fc1 (and gate) bias
      p.replicated += h;                // fc2 bias (row-parallel)
    }
  } else if (mlp == Mlp::kMoe && m.is_moe()) {
    const double e = static_cast<double>(m.num_experts);
    const double fe = static_cast<double>(m.expert_ffn_hidden_size());
    const double latent = static_cast<double>(m.moe_latent_size);
    // Latent MoE: experts read and write moe_latent_size wide vectors.
    const double h_in = latent > 0 ? latent : h;
    double one_expert = gemms * h_in * fe;
    if (bias) one_expert += (gemms - 1) * fe + h_in;
    p.routed_experts = e * one_expert;
    p.replicated += h * e;  // router weight [E, h] (router.py)
    const double fs =
        static_cast<double>(m.moe_shared_expert_intermediate_size);
    if (fs > 0) {
      // Shared experts run on the dense TP group (shared_experts.py).
      p.tp_sharded += gemms * h * fs;
      if (bias) {
        p.tp_sharded += (gemms - 1) * fs;
        p.replicated += h;
      }
    }
    if (latent > 0) {
      // fc1_latent_proj h -> latent and fc2_latent_proj latent -> h.
      p.replicated += 2 * h * latent;
      if (bias) p.replicated += latent + h;
    }
  }
  return p;
}

// Every layer that runs in one step: the decoder layers, then each MTP
// depth's layers (Megatron's FLOP count treats them the same way).
std::vector<LayerKind> AllLayers(const ModelSpec& m) {
  std::vector<LayerKind> layers = m.DecoderLayers();
  const std::vector<LayerKind> depth = m.MtpDepthLayers();
  for (int64_t d = 0; d < m.mtp_num_layers; ++d) {
    layers.insert(layers.end(), depth.begin(), depth.end());
  }
  return layers;
}

// (query, key) pairs of one causal sequence of `seq` tokens in the layer
// with 1-based number `layer_number`. Full attention: s²/2, as Megatron
// counts it. A sliding-window layer (window_size W >= 0: each query sees
// itself and W keys back, Megatron --window-size W,0) sees
// Σ_i min(i+1, W+1) = (W+1)·(s − W/2) pairs when s > W; which layers are
// windowed is ModelSpec::IsWindowLayer's rule.
double CausalPairs(const ModelSpec& m, int64_t layer_number, double seq) {
  const double full = seq * seq / 2;
  if (!m.IsWindowLayer(layer_number)) return full;
  const double w = static_cast<double>(m.window_size);
  return std::min(full, (w + 1) * (seq - w / 2));
}

// Forward core-attention FLOPs per (query, key) pair: QKᵀ and PV, 2 FLOPs
// per multiply-add.
double CoreFwdFlopsPerPair(const ModelSpec& m, Mixer mixer) {
  const double n = static_cast<double>(m.num_attention_heads);
  if (mixer == Mixer::kMla) {
    return 2 * n * (m.mla_qk_head_dim() + m.v_head_dim);
  }
  return 4 * n * HeadDim(m);
}

// ---- Megatron's num_floating_point_operations (training.py).

// transformer_flops(): the GPT branch (§3.1). `tokens` = Σ s_i, `seq_sq` =
// Σ s_i².
double MegatronGptFlops(const ModelSpec& m, double tokens, double seq_sq,
                        double vocab) {
  const double h = static_cast<double>(m.hidden_size);
  const double n = static_cast<double>(m.num_attention_heads);
  const double mtp =
      static_cast<double>(std::max<int64_t>(0, m.mtp_num_layers));
  double n_moe = static_cast<double>(m.num_moe_layers());
  double n_dense = static_cast<double>(m.num_layers) - n_moe;
  // MTP depths are layers of the last decoder layer's kind.
  if (m.IsMoeLayer(m.num_layers - 1)) {
    n_moe += mtp;
  } else {
    n_dense += mtp;
  }
  const double layers = static_cast<double>(m.num_layers) + mtp;
  const double gemms = MegatronMlpGemms(m);
  double routed = 0;
  if (m.is_moe()) {
    const double fe = static_cast<double>(m.expert_ffn_hidden_size());
    const double k = static_cast<double>(m.moe_router_topk);
    const double latent = static_cast<double>(m.moe_latent_size);
    routed =
        latent > 0 ? fe * k * gemms * latent / h + 2 * latent : fe * k * gemms;
  }
  const double shared =
      static_cast<double>(m.moe_shared_expert_intermediate_size) * gemms;
  const double mlp = 6 * h *
                     (static_cast<double>(m.ffn_hidden_size) * gemms * n_dense +
                      (routed + shared) * n_moe);
  double attn_linear = 0;     // per token and layer
  double attn_quadratic = 0;  // per (token, key) and layer, before ×6
  if (m.multi_latent_attention) {
    const double qk = static_cast<double>(m.mla_qk_head_dim());
    const double dv = static_cast<double>(m.v_head_dim);
    const double ql = static_cast<double>(m.q_lora_rank);
    const double kl = static_cast<double>(m.kv_lora_rank);
    // The "+1" terms are Megatron's latent RMSNorms.
    const double q_term =
        m.q_lora_rank > 0 ? ql * (h + n * qk + 1) : h * n * qk;
    attn_linear = q_term + kl * (h + n * (m.qk_head_dim + dv) + 1) +
                  h * m.qk_pos_emb_head_dim + n * dv * h;
    attn_quadratic = n * qk / 2 + n * dv / 2;
  } else {
    const double d = HeadDim(m);
    const double q = n * d;
    const double kv = static_cast<double>(m.num_query_groups) * d;
    attn_linear = h * (q + 2 * kv) + q * h;
    attn_quadratic = q;  // q·s/2 (causal) × 2 (QKᵀ and PV)
  }
  const double mtp_glue = 6 * mtp * (3 * h + 2 * h * h);
  const double logits = 6 * h * vocab * (mtp + 1);
  return tokens * (mlp + 6 * attn_linear * layers + mtp_glue + logits) +
         seq_sq * 6 * attn_quadratic * layers;
}

// hybrid_flops(): the hybrid branch (§3.2), forward FLOPs × 3.
double MegatronHybridFlops(const ModelSpec& m, double tokens, double seq_sq,
                           double vocab) {
  double n_attn = 0, n_mamba = 0, n_mlp = 0, n_moe = 0;
  for (const LayerKind& k : AllLayers(m)) {
    n_attn += IsAttention(k.mixer);
    n_mamba += k.mixer == Mixer::kMamba;
    n_mlp += k.mlp == Mlp::kDense;
    n_moe += k.mlp == Mlp::kMoe;
  }
  const double h = static_cast<double>(m.hidden_size);
  const double n = static_cast<double>(m.num_attention_heads);
  const double g = static_cast<double>(m.num_query_groups);
  const double psi = m.activation == Activation::kSwiglu ? 1.5 : 1.0;
  // attn_layer_flops: p = kv_channels·n/h; MLA layers use this GQA form too.
  const double p = HeadDim(m) * n / h;
  const double attn = 4 * tokens * h * p * (h + h * g / n) + 2 * seq_sq * h * p;
  const double mlp =
      4 * (static_cast<double>(m.ffn_hidden_size) / h) * psi * tokens * h * h;
  // mamba_layer_flops: d_in = 2h regardless of the heads; the heads are
  // mamba_num_heads or d_in / head_dim (= mamba_heads()).
  const double d_in = 2 * h;
  const double heads = static_cast<double>(m.mamba_heads());
  const double state = static_cast<double>(m.mamba_state_dim);
  const double mamba =
      2 * tokens * h * (2 * d_in + 2 * m.mamba_num_groups * state + heads) +
      7 * tokens * d_in * state + 2 * tokens * d_in * h;
  double moe = 0;
  if (m.is_moe()) {
    const double fe = static_cast<double>(m.expert_ffn_hidden_size());
    const double k = static_cast<double>(m.moe_router_topk);
    const double latent = static_cast<double>(m.moe_latent_size);
    moe = latent > 0
              ? 4 * tokens * latent * fe * k * psi + 4 * tokens * h * latent
              : 4 * tokens * h * fe * k * psi;
    moe += 4 * tokens * h *
           static_cast<double>(m.moe_shared_expert_intermediate_size) * psi;
  }
  const double mtp =
      static_cast<double>(std::max<int64_t>(0, m.mtp_num_layers));
  const double logits = 2 * tokens * h * vocab * (1 + mtp);
  return 3 *
         (n_attn * attn + n_mlp * mlp + n_mamba * mamba + n_moe * moe + logits);
}

// ---- The true count.

// Forward GEMM (and Mamba scan) FLOPs per token of one layer, attention's
// quadratic part excluded.
double TrueLayerLinearFwdFlops(const ModelSpec& m, LayerKind kind) {
  const double h = static_cast<double>(m.hidden_size);
  const double n = static_cast<double>(m.num_attention_heads);
  double macs = 0;
  double extra_flops = 0;
  switch (kind.mixer) {
    case Mixer::kNone:
      break;
    case Mixer::kAttention: {
      const double d = HeadDim(m);
      macs += h * (n * d + 2 * m.num_query_groups * d) + n * d * h;
      break;
    }
    case Mixer::kMla: {
      const double qk = static_cast<double>(m.mla_qk_head_dim());
      const double dv = static_cast<double>(m.v_head_dim);
      const double ql = static_cast<double>(m.q_lora_rank);
      const double kl = static_cast<double>(m.kv_lora_rank);
      macs += m.q_lora_rank > 0 ? h * ql + ql * n * qk : h * n * qk;
      macs += h * (kl + m.qk_pos_emb_head_dim) + kl * n * (m.qk_head_dim + dv) +
              n * dv * h;
      break;
    }
    case Mixer::kMamba: {
      // In/out projections at the real inner width H·P, and Megatron's
      // 7·d_inner·N estimate of the chunked scan (forward FLOPs).
      const double heads = static_cast<double>(m.mamba_heads());
      const double d_inner = heads * m.mamba_head_dim;
      const double state = static_cast<double>(m.mamba_state_dim);
      macs += h * (2 * d_inner + 2 * m.mamba_num_groups * state + heads) +
              d_inner * h;
      extra_flops += 7 * d_inner * state;
      break;
    }
  }
  const double gemms = MlpGemms(m);
  if (kind.mlp == Mlp::kDense) {
    macs += gemms * h * m.ffn_hidden_size;
  } else if (kind.mlp == Mlp::kMoe && m.is_moe()) {
    const double latent = static_cast<double>(m.moe_latent_size);
    const double h_in = latent > 0 ? latent : h;
    macs += h * m.num_experts;  // router GEMM
    macs += m.moe_router_topk * gemms * h_in *
            static_cast<double>(m.expert_ffn_hidden_size());
    if (latent > 0) macs += 2 * h * latent;
    macs += gemms * h * m.moe_shared_expert_intermediate_size;
  }
  return 2 * macs + extra_flops;
}

double TrueFlops(const ModelSpec& m, double gbs, double seq, double vocab) {
  const double tokens = gbs * seq;
  const double h = static_cast<double>(m.hidden_size);
  double linear = 0;     // forward FLOPs per token
  double quadratic = 0;  // forward FLOPs per sequence
  int64_t number = 0;
  for (const LayerKind& k : AllLayers(m)) {
    ++number;
    linear += TrueLayerLinearFwdFlops(m, k);
    if (IsAttention(k.mixer)) {
      quadratic +=
          CausalPairs(m, number, seq) * CoreFwdFlopsPerPair(m, k.mixer);
    }
  }
  const double mtp =
      static_cast<double>(std::max<int64_t>(0, m.mtp_num_layers));
  linear += mtp * 2 * (2 * h * h);      // eh_proj 2h -> h per depth
  linear += 2 * h * vocab * (mtp + 1);  // output layer per head
  return 3 * (tokens * linear + gbs * quadratic);
}

}  // namespace

int64_t PaddedVocabSize(int64_t vocab_size, int64_t tp) {
  const int64_t multiple = 128 * (tp > 0 ? tp : 1);
  return (vocab_size + multiple - 1) / multiple * multiple;
}

LayerParams ParamsOfLayer(const ModelSpec& m, LayerKind kind) {
  LayerParams p = MixerParams(m, kind.mixer);
  p += MlpParams(m, kind.mlp);
  // One pre-norm per block (input_layernorm before the mixer,
  // pre_mlp_layernorm before the MLP; TE fuses them into the next linear but
  // they keep their weights).
  const double blocks = (kind.mixer != Mixer::kNone ? 1.0 : 0.0) +
                        (kind.mlp != Mlp::kNone ? 1.0 : 0.0);
  p.replicated += blocks * static_cast<double>(m.hidden_size) * NormSize(m);
  return p;
}

LayerParams MtpGlueParams(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  LayerParams p;
  p.replicated = 3 * h * NormSize(m);  // enorm, hnorm, final_layernorm
  p.tp_sharded = 2 * h * h;            // eh_proj, no bias
  return p;
}

ModelStats ComputeModelStats(const ModelSpec& m, int64_t padded_vocab,
                             int64_t max_position_embeddings) {
  ModelStats st;
  const double h = static_cast<double>(m.hidden_size);
  const double norm_size = NormSize(m);

  // The per-layer fields of a GPT layer.
  st.attention_params = MixerParams(m, GptMixer(m)).total();
  st.dense_mlp_params = MlpParams(m, Mlp::kDense).total();
  if (m.is_moe()) {
    st.expert_params = MlpParams(m, Mlp::kMoe).routed_experts /
                       static_cast<double>(m.num_experts);
    st.router_params = h * m.num_experts;
  }
  st.norm_params = 2 * h * norm_size;
  if (m.has_linear_biases()) st.row_parallel_bias_params = 2 * h;

  st.padded_vocab = padded_vocab;
  st.word_embedding_params = static_cast<double>(padded_vocab) * h;
  st.position_params =
      m.position_embedding_type == PositionEmbedding::kLearnedAbsolute
          ? static_cast<double>(max_position_embeddings) * h
          : 0.0;
  st.final_norm_params = h * norm_size;
  st.output_params =
      m.untie_embeddings_and_output_weights ? st.word_embedding_params : 0.0;

  // Active share of the routed experts: k of E per token.
  const double active_share =
      m.is_moe() ? static_cast<double>(m.moe_router_topk) / m.num_experts : 0.0;
  const double whole_model = st.word_embedding_params + st.position_params +
                             st.final_norm_params + st.output_params;
  st.total_params = whole_model;
  st.active_params = whole_model;
  for (const LayerKind& kind : m.DecoderLayers()) {
    const LayerParams p = ParamsOfLayer(m, kind);
    st.total_params += p.total();
    st.active_params +=
        p.tp_sharded + p.replicated + p.routed_experts * active_share;
  }
  if (m.mtp_num_layers > 0) {
    double depth = MtpGlueParams(m).total();
    for (const LayerKind& kind : m.MtpDepthLayers()) {
      depth += ParamsOfLayer(m, kind).total();
    }
    // A repeated layer's depths share one block (mtp_weight_depths).
    st.mtp_params = static_cast<double>(m.mtp_weight_depths()) * depth;
  }
  return st;
}

const char* ToString(FlopCount count) {
  switch (count) {
    case FlopCount::kMegatron:
      return "megatron";
    case FlopCount::kTrue:
      return "true";
  }
  return "?";
}

double ModelFlopsPerStep(const ModelSpec& m, int64_t gbs, int64_t seq,
                         int64_t padded_vocab, FlopCount count) {
  const double b = static_cast<double>(gbs);
  const double s = static_cast<double>(seq);
  const double vocab = static_cast<double>(padded_vocab);
  if (count == FlopCount::kTrue) return TrueFlops(m, b, s, vocab);
  // Megatron picks the branch by the model class: a hybrid pattern makes a
  // HybridModel (is_hybrid_model), everything else a GPTModel.
  return m.is_hybrid() ? MegatronHybridFlops(m, b * s, b * s * s, vocab)
                       : MegatronGptFlops(m, b * s, b * s * s, vocab);
}

double TrueModelFlopsPerStep(const ModelSpec& m, int64_t gbs, int64_t seq,
                             int64_t padded_vocab) {
  return ModelFlopsPerStep(m, gbs, seq, padded_vocab, FlopCount::kTrue);
}

double SelectiveRecomputeFlopsPerStep(const ModelSpec& m, int64_t gbs,
                                      int64_t seq, FlopCount count) {
  const double s = static_cast<double>(seq);
  double per_sequence = 0;
  int64_t number = 0;
  for (const LayerKind& k : AllLayers(m)) {
    ++number;
    if (!IsAttention(k.mixer)) continue;
    if (count == FlopCount::kTrue) {
      per_sequence +=
          CausalPairs(m, number, s) * CoreFwdFlopsPerPair(m, k.mixer);
    } else {
      // Megatron's conventions: full causal attention everywhere; the
      // hybrid branch counts every attention layer in the GQA form.
      const Mixer as = m.is_hybrid() ? Mixer::kAttention : k.mixer;
      per_sequence += s * s / 2 * CoreFwdFlopsPerPair(m, as);
    }
  }
  return static_cast<double>(gbs) * per_sequence;
}

double FullRecomputeFlopsPerStep(const ModelSpec& m, int64_t gbs, int64_t seq,
                                 double recomputed_fraction, FlopCount count) {
  // One extra forward = a third of the layer model FLOPs (the output layer
  // is not recomputed). Vocabulary 0 removes the logits term.
  return ModelFlopsPerStep(m, gbs, seq, 0, count) / 3.0 * recomputed_fraction;
}

}  // namespace meshtune::costmodel
