#include "costmodel/memory_model.h"

#include <algorithm>

#include "search_spaces/pipeline_layout.h"

namespace meshtune::costmodel {

using search_spaces::Activation;
using search_spaces::ModelSpec;
using search_spaces::Normalization;
using search_spaces::ParallelConfig;
using search_spaces::PipelineSchedule;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;

namespace {

double HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0
             ? static_cast<double>(m.kv_channels)
             : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

// GPT-style recipes train with hidden dropout (1-byte masks are stored);
// LLaMA-style recipes (RMSNorm) use none.
bool HasDropout(const ModelSpec& m) {
  return m.normalization == Normalization::kLayerNorm;
}

}  // namespace

StageLayers LayersOnStage(const ModelSpec& m, const ParallelConfig& c,
                          int64_t stage) {
  const search_spaces::PipelineLayout layout(m.num_layers, c.pp, c.vpp);
  StageLayers sl;
  sl.layers = static_cast<double>(layout.LayersOnStage(stage));
  // MoE layers are spread evenly (moe_layer_freq), so each stage holds its
  // share of them.
  sl.moe = sl.layers * static_cast<double>(m.num_moe_layers()) / m.num_layers;
  return sl;
}

LocalParams StageLocalParams(const ModelSpec& m, const ModelStats& st,
                             const ParallelConfig& c, int64_t stage) {
  const double t = static_cast<double>(c.tp);
  const StageLayers sl = LayersOnStage(m, c, stage);
  const double layers = sl.layers;
  const double moe_layers = sl.moe;
  const double dense_layers = layers - moe_layers;
  LocalParams lp;
  // The two row-parallel biases of a dense layer are replicated over tp
  // (counted once per rank, not divided); MoE layers keep the attention one.
  const double row_bias = st.row_parallel_bias_params;
  lp.dense =
      (layers * st.attention_params + dense_layers * st.dense_mlp_params -
       (layers + dense_layers) * row_bias / 2) /
          t +
      (layers + dense_layers) * row_bias / 2 + layers * st.norm_params +
      moe_layers * st.router_params;
  lp.expert = moe_layers * st.expert_params * m.num_experts /
              (t * static_cast<double>(c.ep));
  const bool first = stage == 0;
  const bool last = stage == c.pp - 1;
  if (first) lp.dense += st.word_embedding_params / t + st.position_params;
  if (last) {
    lp.dense += st.final_norm_params;
    if (st.output_params > 0) {
      lp.dense += st.output_params / t;
    } else if (!first) {
      // Tied embeddings with pp > 1: the last stage keeps its own copy of
      // the word embeddings for the output layer (Megatron).
      lp.dense += st.word_embedding_params / t;
    }
  }
  return lp;
}

double LayerActivationBytes(const ModelSpec& m, const ParallelConfig& c,
                            int64_t seq, Precision precision, bool moe_layer,
                            bool flash_attention) {
  const double t = static_cast<double>(c.tp);
  const double tsp = c.sp ? t : 1.0;  // divisor of the replicated region
  const double tokens = static_cast<double>(c.mbs) * seq / c.cp;
  const double h = static_cast<double>(m.hidden_size);
  const double dh = HeadDim(m);
  const double q = m.num_attention_heads * dh;
  const double kv = m.num_query_groups * dh;
  const bool fp8 = search_spaces::IsQuantized(precision);
  const double l = fp8 ? 1.0 : 2.0;  // bytes of a saved linear input
  const bool swiglu = m.activation == Activation::kSwiglu;
  const double drop = HasDropout(m) ? 1.0 : 0.0;

  // Attention block (norm1 in, QKV in, attention dropout mask | Q, K, V, O,
  // fp8 copy of O, LSE).
  double repl = 2 * h + l * h + drop * h;
  double shard =
      2 * q + 4 * kv + 2 * q + (fp8 ? q : 0.0) + 4.0 * m.num_attention_heads;
  double unsharded = 0;  // replicated over the tp group even with SP
  if (!moe_layer) {
    const double f = static_cast<double>(m.ffn_hidden_size);
    repl += 2 * h + l * h + drop * h;
    shard += (swiglu ? 4 * f : 2 * f) + l * f;
  } else {
    const double fe = static_cast<double>(m.expert_ffn_hidden_size());
    const double k = static_cast<double>(m.moe_router_topk);
    repl += 2 * h + 2 * h;  // norm2 input, router / permutation input
    // Routed copies: expert-TP all-gathers the tokens, so the expert fc1
    // input is replicated over etp = tp; activation, fc2 input and the
    // dispatch/combine buffers are sharded; fp32 router logits.
    unsharded += k * l * h;
    shard +=
        k * ((swiglu ? 4 * fe : 2 * fe) + l * fe + 4 * h) + 4.0 * m.num_experts;
  }
  double scores = 0;
  if (!flash_attention &&
      c.recompute.granularity == RecomputeGranularity::kNone) {
    scores = 5.0 * m.num_attention_heads * static_cast<double>(seq);
  }
  return tokens * (repl / tsp + (shard + scores) / t + unsharded);
}

double CheckpointBytes(const ModelSpec& m, const ParallelConfig& c,
                       int64_t seq) {
  const double tokens = static_cast<double>(c.mbs) * seq / c.cp;
  return 2.0 * tokens * m.hidden_size / (c.sp ? c.tp : 1);
}

double OptimizerBytesPerParam(bool dist_opt, int64_t shard) {
  return dist_opt ? 12.0 / static_cast<double>(std::max<int64_t>(1, shard))
                  : 12.0;
}

MemoryBreakdown StageMemory(const ModelSpec& m, const ModelStats& st,
                            const ParallelConfig& c, int64_t seq,
                            Precision precision,
                            const PipelineSchedule& schedule, int64_t stage,
                            bool flash_attention, StateBytes state_bytes) {
  MemoryBreakdown mem;
  const LocalParams lp = StageLocalParams(m, st, c, stage);
  const int64_t dpcp = c.dp * c.cp;
  const int64_t edp = std::max<int64_t>(1, dpcp / c.ep);
  mem.weights_bytes =
      state_bytes.weight_bytes_per_param * (lp.dense + lp.expert);
  mem.gradients_bytes =
      state_bytes.grad_bytes_per_param * (lp.dense + lp.expert);
  mem.optimizer_bytes = lp.dense * OptimizerBytesPerParam(c.dist_opt, dpcp) +
                        lp.expert * OptimizerBytesPerParam(c.dist_opt, edp);

  // Activations of one micro-batch through all of this stage's layers.
  const StageLayers sl = LayersOnStage(m, c, stage);
  const double layers = sl.layers;
  const double moe_layers = sl.moe;
  const double dense_layers = layers - moe_layers;
  const double a_dense =
      LayerActivationBytes(m, c, seq, precision, false, flash_attention);
  const double a_moe =
      moe_layers > 0
          ? LayerActivationBytes(m, c, seq, precision, true, flash_attention)
          : 0.0;
  const double a_full = dense_layers * a_dense + moe_layers * a_moe;
  const double a_max = std::max(a_dense, a_moe);
  const double a_avg = layers > 0 ? a_full / layers : 0.0;
  const double ckpt = CheckpointBytes(m, c, seq);
  const double in_flight = schedule.InFlightMicrobatches(stage);

  double stored = a_full;  // per in-flight micro-batch
  double working = 0;      // one recompute chunk materialised in backward
  if (c.recompute.granularity == RecomputeGranularity::kFull) {
    const double n =
        static_cast<double>(std::max<int64_t>(1, c.recompute.num_layers));
    if (c.recompute.method == RecomputeMethod::kUniform) {
      stored = layers / n * ckpt;
      working = std::min(n, layers) * a_max;
    } else {
      const double per_chunk = layers / static_cast<double>(c.vpp);
      const double r = std::min(n, per_chunk);
      stored = c.vpp * (r * ckpt + (per_chunk - r) * a_avg);
      working = a_max;
    }
  }
  mem.activations_bytes = in_flight * stored + working;

  // Other: backward workspace of one layer, first/last-stage buffers.
  const double tokens = static_cast<double>(c.mbs) * seq / c.cp;
  const double tsp = c.sp ? static_cast<double>(c.tp) : 1.0;
  double other = a_max;
  if (stage == 0) {
    const double drop =
        m.normalization == search_spaces::Normalization::kLayerNorm ? 1.0 : 0.0;
    other += in_flight * tokens * (8.0 + drop * m.hidden_size / tsp);
  }
  if (stage == c.pp - 1) {
    other += 4.0 * tokens * st.padded_vocab / c.tp +
             4.0 * tokens * m.hidden_size / tsp;
  }
  mem.other_bytes = other;
  return mem;
}

}  // namespace meshtune::costmodel
