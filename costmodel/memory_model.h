// Memory model: bytes per GPU on one pipeline stage (docs/design.md §6).
//
// Weights, gradients and optimizer states follow Megatron's
// theoretical_memory_usage.py and dist_optimizer.md for bf16/fp16 training:
// 2 (16-bit param) + 4 (fp32 main grad) + 12 (fp32 master, Adam m, v) = 18
// bytes per parameter, or 6 + 12/d with the distributed optimizer, where d is
// the dp·cp group for dense parameters and the expert-data-parallel group
// (dp·cp/ep) for expert parameters.
//
// Activations per layer and micro-batch follow Korthikanti et al. 2022
// (arXiv:2205.05198 §4), with flash attention: the 5·a·s²·b softmax term is
// never stored (FlashAttention keeps only Q, K, V, O and the fp32 row
// log-sum-exp), so "none" stores what Korthikanti's "selective" stores. For a
// GPT layer (LayerNorm, GeLU, f = 4h, dropout) this is exactly
// s·b·h·(10 + 24/t) without SP and 34·s·b·h/t with SP, plus 4·a·s·b/t bytes of
// log-sum-exp. The general per-token form (bytes) is
//   replicated = 2h (norm1 in) + l·h (QKV in) + 2h (norm2 in) + l·h (fc1 in)
//                + 2h (two 1-byte dropout masks, GPT only)   [÷t only with SP]
//   sharded    = 2q + 4kv (Q, K, V) + 2q (O) + 4a (LSE) + act + l·f (fc2 in)
//                [÷t]
// with q = a·d_h, kv = g·d_h, act = 2f (GeLU input) or 4f (SwiGLU gate+up),
// l = 2 bytes (1 with fp8: Transformer Engine saves fp8 copies of linear
// inputs, and then also keeps O for flash next to its fp8 copy, + q). MoE
// layers replace the MLP by: norm2 input + router/permute input (4h, ÷t with
// SP) and, for each of the k routed copies, the expert fc1 input (l·h,
// replicated over expert-TP), expert act + fc2 input (÷t) and the
// dispatch/combine buffers (4h/t), plus fp32 router logits (4E/t). CP divides
// the sequence (s/c tokens per rank). Full recompute keeps only each
// checkpoint's input, 2·s·b·h (÷t with SP; Megatron's
// distribute_saved_activations is off by default).
//
// Pipeline: stage r holds PipelineSchedule::InFlightMicrobatches(r)
// micro-batches of its layers' activations (stage 0: min(m, p), ×(1 +
// (p−1)/(p·v)) interleaved). Full recompute additionally materialises one
// recompute chunk (num_layers layers for uniform) during backward.
// "other" = stage 0: embedding dropout masks and token ids of in-flight
// micro-batches; last stage: logits buffers 4·s·b·(h + V)/t (Korthikanti,
// fp32 cross-entropy); every stage: a backward workspace of one layer's
// activations. The cluster's memory_reserve_gib is not in `other`; it is
// subtracted from the capacity instead (Estimate::memory_capacity_bytes).
#ifndef MESHTUNE_COSTMODEL_MEMORY_MODEL_H_
#define MESHTUNE_COSTMODEL_MEMORY_MODEL_H_

#include <cstdint>

#include "costmodel/estimate.h"
#include "costmodel/model_stats.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/pipeline_schedule.h"

namespace meshtune::costmodel {

// Parameters held by one GPU of pipeline stage `stage` (counts, not bytes):
// dense ones (reduced over dp·cp) and expert ones (reduced over edp).
// Transformer layers on pipeline stage `stage` (search_spaces::
// PipelineLayout: with the embedding and loss counted as layers the first
// and last stage hold one fewer) and how many of them are MoE layers.
struct StageLayers {
  double layers = 0;
  double moe = 0;
};
StageLayers LayersOnStage(const search_spaces::ModelSpec& model,
                          const search_spaces::ParallelConfig& config,
                          int64_t stage);

struct LocalParams {
  double dense = 0;
  double expert = 0;
};
LocalParams StageLocalParams(const search_spaces::ModelSpec& model,
                             const ModelStats& stats,
                             const search_spaces::ParallelConfig& config,
                             int64_t stage);

// Activation bytes one transformer layer stores for backward, per
// micro-batch of `config.mbs` sequences of `seq` tokens, on one GPU, without
// full recompute (none and selective store the same with flash attention).
// With `flash_attention` false and recompute none, add Korthikanti's
// 5·a·s²·b/(t·cp) bytes of softmax output, its dropout mask and output.
double LayerActivationBytes(const search_spaces::ModelSpec& model,
                            const search_spaces::ParallelConfig& config,
                            int64_t seq, search_spaces::Precision precision,
                            bool moe_layer, bool flash_attention = true);

// Bytes a fully recomputed layer (or chunk) keeps: its 16-bit input.
double CheckpointBytes(const search_spaces::ModelSpec& model,
                       const search_spaces::ParallelConfig& config,
                       int64_t seq);

// Optimizer-state bytes per parameter: 12 (fp32 master + Adam m, v), divided
// by `shard` ranks with the distributed optimizer.
double OptimizerBytesPerParam(bool dist_opt, int64_t shard);

// Bytes per parameter of the model weights (2 for bf16/fp16; 1 with
// --fp8-param-gather) and of the main-grad buffer (4 fp32 by default; 2 with
// --grad-reduce-in-bf16). Megatron dist_optimizer.md table.
struct StateBytes {
  double weight_bytes_per_param = 2.0;
  double grad_bytes_per_param = 4.0;
};

// Memory of one GPU on pipeline stage `stage` (0 .. pp−1).
MemoryBreakdown StageMemory(const search_spaces::ModelSpec& model,
                            const ModelStats& stats,
                            const search_spaces::ParallelConfig& config,
                            int64_t seq, search_spaces::Precision precision,
                            const search_spaces::PipelineSchedule& schedule,
                            int64_t stage, bool flash_attention = true,
                            StateBytes state_bytes = StateBytes());

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_MEMORY_MODEL_H_
