// ModelStats: parameter counts and FLOPs of a transformer (ModelSpec).
//
// Parameter counts follow Megatron-LM's theoretical_memory_usage.py (per-layer
// attention, MLP, experts, norms, embeddings), plus the linear biases that
// GPT-style models have (we take "GPT-style" = LayerNorm; LLaMA-style models
// with RMSNorm have no biases). FLOPs follow Megatron-LM's current
// num_floating_point_operations (training.py): model FLOPs, causal attention
// counted once, no recompute. All counts are doubles (175B overflows nothing,
// but products like B·s²·h do not fit comfortably in int64 for long contexts).
#ifndef MESHTUNE_COSTMODEL_MODEL_STATS_H_
#define MESHTUNE_COSTMODEL_MODEL_STATS_H_

#include <cstdint>

#include "search_spaces/model_spec.h"

namespace meshtune::costmodel {

// Megatron pads the vocabulary to a multiple of
// make_vocab_size_divisible_by (128) times the tensor-parallel size.
int64_t PaddedVocabSize(int64_t vocab_size, int64_t tp);

// Parameter counts (number of parameters, not bytes).
struct ModelStats {
  // One transformer layer, split the way parallelism shards it.
  double attention_params =
      0;  // QKV + output projection (+ biases); TP-sharded
  double dense_mlp_params = 0;  // fc1 (+gate) + fc2 (+ biases); TP-sharded
  double expert_params = 0;     // ONE routed expert's MLP; sharded by etp·ep
  double router_params = 0;     // h·E; replicated
  double norm_params = 0;       // the layer's two norms; replicated
  // Biases of the row-parallel linears (attention projection, fc2): added
  // after the tp reduction, so replicated, not sharded (Megatron
  // RowParallelLinear). Included in attention_params / dense_mlp_params.
  double row_parallel_bias_params = 0;
  // Whole model.
  double word_embedding_params = 0;  // V_padded·h (one copy)
  double position_params = 0;  // learned absolute positions s·h (0 for RoPE)
  double final_norm_params = 0;
  double output_params = 0;  // V_padded·h when untied, else 0
  int64_t padded_vocab = 0;

  double total_params = 0;   // everything, every expert
  double active_params = 0;  // top-k experts per MoE layer instead of all
};

// `padded_vocab`: the vocabulary the model is built with (PaddedVocabSize).
// `max_position_embeddings`: rows of the learned position table.
ModelStats ComputeModelStats(const search_spaces::ModelSpec& model,
                             int64_t padded_vocab,
                             int64_t max_position_embeddings);

// Megatron num_floating_point_operations for one step of `gbs` sequences of
// `seq` tokens (BSHD, no packing). Counts fwd + dgrad + wgrad (×3) of every
// GEMM, 2 FLOPs per multiply-add, causal core attention counted once.
double ModelFlopsPerStep(const search_spaces::ModelSpec& model, int64_t gbs,
                         int64_t seq, int64_t padded_vocab);

// Extra FLOPs executed by activation recompute in one step (for HFU):
// selective = forward core attention of every layer (2·B·s²·a·d_h per layer,
// causal); full = one forward of every recomputed transformer layer
// (`recomputed_fraction` of the layers), logits excluded.
double SelectiveRecomputeFlopsPerStep(const search_spaces::ModelSpec& model,
                                      int64_t gbs, int64_t seq);
double FullRecomputeFlopsPerStep(const search_spaces::ModelSpec& model,
                                 int64_t gbs, int64_t seq,
                                 double recomputed_fraction);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_MODEL_STATS_H_
