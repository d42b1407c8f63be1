// Memory model: bytes per GPU on one pipeline stage (docs/costmodel.md
// "Memory"; docs/sources.md §4).
//
// Parameters. Each stage holds the parameters of its real layers
// (search_spaces::PipelineLayout, every chunk; ParamsOfLayer per LayerKind):
// TP-sharded ones / tp and replicated ones in full go to `dense` (gradients
// reduced and distributed-optimizer state sharded over dp·cp); routed experts
// / (ep · etp) to `expert` (sharded over the expert data-parallel group edp =
// world / (etp · ep · pp), Megatron's folded expert grid, §4.1-4.2). Stage 0
// adds the vocab-parallel embedding (/tp) and learned positions, the last
// stage the final norm, the output layer (/tp; with tied embeddings and pp >
// 1 its own copy of the embedding) and every MTP depth (its layers and glue,
// Megatron's default placement). Bytes per parameter follow Megatron's
// dist_optimizer.md table (§4.3): weight (2) + main grad (4) + 12 / d for
// fp32 master and Adam m, v with the distributed optimizer (12 without).
// FP8/FP4 recipes add Transformer Engine's quantised copy of every linear
// weight (§4.9); with --fp8-param-gather the quantised copy replaces the
// 16-bit linear weight.
//
// Activations per layer and micro-batch follow Korthikanti et al. 2022
// (arXiv:2205.05198 §4) with flash attention, which never stores the
// softmax: per token, a GQA layer with a dense MLP keeps
//   replicated = 2h (norm1 in) + l·h (QKV in) + 2h (norm2 in) + l·h (fc1 in)
//                + 2h (two 1-byte dropout masks, GPT only)   [÷t only with SP]
//   sharded    = 2q + 4kv (Q, K, V) + 2q (O) + 4a (LSE) + act + l·f (fc2 in)
//                [÷t]
// with q = a·d_h, kv = g·d_h, act = 4f (gated: gate and up) or 2f, l = the
// bytes of a saved linear input (2, or the quantised copy: FP8 1, MXFP8
// row+column 2.06, NVFP4 0.56; attention stays BF16 and the O projection
// keeps a quantised copy of O as well). For GPT (LayerNorm, GeLU, f = 4h,
// dropout) this is exactly s·b·h·(10 + 24/t) without SP and 34·s·b·h/t with
// SP, plus 4·a·s·b/t of log-sum-exp. MLA (§4.6), MoE (§4.5), Mamba-2 (§4.7)
// and hybrid single-block layers have their own terms (LayerActivationBytes).
// CP divides the sequence (s/cp tokens per rank); CP all-to-all (TE >= 2.8)
// also keeps O before its post-attention all-to-all.
//
// Pipeline: stage r holds PipelineSchedule::InFlightMicrobatches(r)
// micro-batches of its layers' activations (stage 0: min(m, p), ×(1 +
// (p−1)/(p·v)) interleaved). Full recompute keeps each checkpoint's 16-bit
// input and materialises one recompute chunk in backward.
//
// The allocated peak adds the largest transient of the step's backward:
// the output layer's (logits, its weight-gradient buffer and dgrad), the
// embedding's weight gradient, or the largest layer's gradient buffers;
// and Transformer Engine's persistent dummy weight gradients and cuBLAS
// workspaces (MemoryBreakdown::workspace_bytes). AddMemoryBesidesModel adds
// what is not allocated by PyTorch (fragmentation, CUDA context, NCCL).
#ifndef MESHTUNE_COSTMODEL_MEMORY_MODEL_H_
#define MESHTUNE_COSTMODEL_MEMORY_MODEL_H_

#include <cstdint>
#include <vector>

#include "costmodel/estimate.h"
#include "costmodel/model_layers.h"
#include "costmodel/model_stats.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/pipeline_schedule.h"
#include "search_spaces/training_spec.h"

namespace meshtune::costmodel {

// How the run keeps its state and which memory-relevant switches are on
// (Megatron flags; docs/sources.md §2.5, §4.3-4.5).
struct MemoryRecipe {
  // Bytes per parameter of the 16-bit model weights (2) and of the main-grad
  // buffer (4 fp32 by default; 2 with --grad-reduce-in-bf16).
  double weight_bytes_per_param = 2.0;
  double grad_bytes_per_param = 4.0;
  // --fp8-param-gather / --fp4-param-gather (quantised recipes only): the
  // linear weights live only as TE's quantised copy.
  bool quantized_param_gather = false;
  // --cross-entropy-loss-fusion: the fused kernel keeps the 16-bit logits
  // and writes their gradient in place; unfused, Megatron's
  // vocab_parallel_cross_entropy keeps fp32 logits.
  bool cross_entropy_fusion = false;
  // --cp-comm-type a2a (TE >= 2.8 saves O before the post-attention
  // all-to-all as well as after it); false = Megatron's default p2p ring.
  bool cp_all_to_all = false;
  // --overlap-moe-expert-parallel-comm: two micro-batches' MoE working sets
  // are live at once (§4.5).
  bool moe_ep_overlap = false;
  // Megatron --gradient-accumulation-fusion (on by default) with TE >= 2.3:
  // TE caches one dummy weight gradient per distinct linear weight shape.
  bool te_dummy_wgrad = true;
  // Megatron-FSDP with optim_grads_params (TrainingSpec::megatron_fsdp):
  // weights, main grads and optimizer state / dp·cp (experts / edp), plus
  // the working set of two gathered FSDP units (see StageMemory).
  bool megatron_fsdp = false;
  // --cpu-offloading-num-layers: the saved activations of this many layers
  // live in host memory (TrainingSpec::cpu_offloading_num_layers).
  int64_t cpu_offloading_num_layers = 0;
};
// The name this struct had before it carried more than the state bytes.
using StateBytes = MemoryRecipe;

// The recipe a TrainingSpec describes (weight/grad bytes, param gather, EP
// overlap, cross-entropy fusion, CP a2a, Megatron-FSDP, CPU offloading; the
// other switches keep their Megatron defaults).
MemoryRecipe MemoryRecipeFor(const search_spaces::TrainingSpec& training);

// Bytes per element of the quantised copy Transformer Engine keeps of a
// linear input or weight (docs/sources.md §4.9): FP8 delayed / tensorwise 1,
// FP8 blockwise 1 + 4/128 (fp32 scale per 128), MXFP8 2·(1 + 1/32) (row-
// and column-wise copies, one E8M0 scale per 32), NVFP4 0.5 + 1/16 (E2M1 and
// one E4M3 scale per 16); 2 for bf16/fp16 (no copy).
double QuantizedBytesPerElement(search_spaces::Precision precision);
// Bytes per element of a quantised linear input saved for backward: only
// the weight-gradient GEMM reads it, so Transformer Engine keeps only its
// column-wise data (transformer_engine/pytorch/module/linear.py and
// grouped_linear.py: update_usage(rowwise_usage=False,
// columnwise_usage=True) before saving). MXFP8 1 + 1/32 (one of its two
// copies); the other recipes keep one copy already
// (QuantizedBytesPerElement); 2 for bf16/fp16.
double SavedInputBytesPerElement(search_spaces::Precision precision);

// The real layers pipeline stage `stage` holds, all its virtual chunks
// (search_spaces::PipelineLayout), counted per LayerKind; `layers` and
// `moe` are the decoder-layer totals; MTP depths sit on the last stage.
struct KindCount {
  search_spaces::LayerKind kind;
  int64_t count = 0;
  bool operator==(const KindCount& o) const {
    return kind == o.kind && count == o.count;
  }
};
struct StageLayers {
  double layers = 0;             // decoder layers
  double moe = 0;                // of them with an MoE MLP
  std::vector<KindCount> kinds;  // decoder layers per kind
  int64_t mtp_depths = 0;        // MTP depths (last stage only)
  // Of them with weights of their own (ModelSpec::mtp_weight_depths).
  int64_t mtp_weight_depths = 0;
};
StageLayers LayersOnStage(const search_spaces::ModelSpec& model,
                          const search_spaces::ParallelConfig& config,
                          int64_t stage);
// The same from layers and a layout prepared once (the search's hot path).
StageLayers LayersOnStage(const search_spaces::ModelSpec& model,
                          const ModelLayers& layers,
                          const search_spaces::PipelineLayout& layout,
                          const search_spaces::ParallelConfig& config,
                          int64_t stage);

// Parameters held by one GPU of pipeline stage `stage` (counts, not bytes):
// dense ones (reduced over dp·cp) and expert ones (reduced over edp), and of
// them the weights of TE linear layers (GEMM weights that FP8/FP4 recipes
// quantise).
struct LocalParams {
  double dense = 0;
  double expert = 0;
  double linear = 0;
};
LocalParams StageLocalParams(const search_spaces::ModelSpec& model,
                             const ModelStats& stats,
                             const search_spaces::ParallelConfig& config,
                             int64_t stage);

// The stages that can be the most loaded or the slowest, with their layers:
// the first, the last, and of the middle stages the first of each distinct
// set of layers (a later middle stage with the same layers has the same
// work and fewer micro-batches in flight:
// PipelineSchedule::InFlightMicrobatches falls with the rank). Ascending.
// `count` is how many pipeline ranks hold these layers (1 for the first and
// the last stage): the pipeline bubble sums the work of every other rank.
struct StageClass {
  int64_t stage = 0;
  StageLayers layers;
  int64_t count = 1;
};
std::vector<StageClass> DistinctStages(
    const search_spaces::ModelSpec& model, const ModelLayers& layers,
    const search_spaces::PipelineLayout& layout,
    const search_spaces::ParallelConfig& config);
LocalParams StageLocalParams(const search_spaces::ModelSpec& model,
                             const ModelLayers& layers, const ModelStats& stats,
                             const search_spaces::ParallelConfig& config,
                             const StageClass& stage);
// What a stage's memory needs that depends only on its layers and on tp,
// ep and etp (not on micro-batching, recompute or dp): its parameters and
// Transformer Engine's dummy weight-gradient bytes. The search prepares it
// once per layout and expert grid.
struct StageStatics {
  LocalParams params;
  double te_dummy_wgrad_bytes = 0;
};
StageStatics StageStaticsOf(const search_spaces::ModelSpec& model,
                            const ModelLayers& layers, const ModelStats& stats,
                            const search_spaces::ParallelConfig& config,
                            const StageClass& stage);

// Expert data-parallel size world / (etp · ep · pp) (at least 1).
int64_t ExpertDataParallelSize(const search_spaces::ParallelConfig& config);

// Activation bytes one layer of `kind` stores for backward, per micro-batch
// of `config.mbs` sequences of `seq` tokens, on one GPU, without full
// recompute (none and selective core_attn store the same with flash
// attention; the other selective modules drop what they discard: mla_up_proj
// Q, K, V; moe_act the experts' activation output; mlp, moe and
// shared_experts all but their block's input; layernorm the MoE layer's
// norm output).
// With `flash_attention` false and no recompute, add Korthikanti's
// 5·a·s²·b/(t·cp) bytes of softmax output, its dropout mask and output.
double LayerActivationBytes(const search_spaces::ModelSpec& model,
                            const search_spaces::ParallelConfig& config,
                            int64_t seq, search_spaces::Precision precision,
                            search_spaces::LayerKind kind,
                            const MemoryRecipe& recipe,
                            bool flash_attention = true);
// The model's own GPT layer: its attention (GQA or MLA) with a dense
// (moe_layer false) or MoE MLP, Megatron's default switches.
double LayerActivationBytes(const search_spaces::ModelSpec& model,
                            const search_spaces::ParallelConfig& config,
                            int64_t seq, search_spaces::Precision precision,
                            bool moe_layer, bool flash_attention = true);

// Routed rows one GPU's experts process per MoE layer and micro-batch:
// (E/ep) local experts × TokensPerLocalExpert (capacity factor, padding and
// load imbalance included).
double RoutedRowsPerRank(const search_spaces::ModelSpec& model,
                         const search_spaces::ParallelConfig& config,
                         int64_t seq);

// Bytes a fully recomputed layer (or chunk) keeps: its 16-bit input.
double CheckpointBytes(const search_spaces::ModelSpec& model,
                       const search_spaces::ParallelConfig& config,
                       int64_t seq);

// Optimizer-state bytes per parameter: 12 (fp32 master + Adam m, v), divided
// by `shard` ranks with the distributed optimizer.
double OptimizerBytesPerParam(bool dist_opt, int64_t shard);

// Memory of one GPU on pipeline stage `stage` (0 .. pp−1): the allocated
// terms of MemoryBreakdown (the besides-terms stay 0).
MemoryBreakdown StageMemory(const search_spaces::ModelSpec& model,
                            const ModelStats& stats,
                            const search_spaces::ParallelConfig& config,
                            int64_t seq, search_spaces::Precision precision,
                            const search_spaces::PipelineSchedule& schedule,
                            int64_t stage, bool flash_attention = true,
                            const MemoryRecipe& recipe = MemoryRecipe());

// The stage whose allocated peak is largest (the most loaded rank; ties go
// to the lower stage) and its memory.
struct StagePeak {
  int64_t stage = 0;
  MemoryBreakdown memory;
};
StagePeak MostLoadedStage(const search_spaces::ModelSpec& model,
                          const ModelStats& stats,
                          const search_spaces::ParallelConfig& config,
                          int64_t seq, search_spaces::Precision precision,
                          const search_spaces::PipelineSchedule& schedule,
                          bool flash_attention = true,
                          const MemoryRecipe& recipe = MemoryRecipe());
// The same over DistinctStages and their StageStaticsOf (one per stage, same
// order) prepared once (the search's hot path).
StagePeak MostLoadedStage(const search_spaces::ModelSpec& model,
                          const ModelLayers& layers, const ModelStats& stats,
                          const search_spaces::ParallelConfig& config,
                          const std::vector<StageClass>& stages,
                          const std::vector<StageStatics>& statics, int64_t seq,
                          search_spaces::Precision precision,
                          const search_spaces::PipelineSchedule& schedule,
                          bool flash_attention, const MemoryRecipe& recipe);

// The memory a real run has besides PyTorch's allocated peak, each term
// stated in memory_model.cc with its source: allocator fragmentation (a
// fraction of the allocated peak), the CUDA context, and NCCL's buffers for
// each communicator of `config` with more than one rank. For callers that
// compare total_bytes() with the device's whole memory instead of
// subtracting the cluster's memory_reserve_gib.
void AddMemoryBesidesModel(const search_spaces::ParallelConfig& config,
                           MemoryBreakdown* memory);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_MEMORY_MODEL_H_
