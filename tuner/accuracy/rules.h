// The rules that turn one published-runs CSV row into cost-model inputs
// (`tune accuracy`, tuner/accuracy/cases.h): model preset by normalised name
// and the variants written after it, GPU and precision spellings, recompute
// text, the attention kernel and optimizer of the source's software, the kind
// of each published metric, and the conversion of step-time metrics to seconds
// per step in the source's own FLOP convention.
//
// Precision spellings (PrecisionForRow; every spelling in
// the development CSVs, docs/accuracy.md "The development data"):
//   "NVFP4", "fp4..."                                      -> nvfp4
//   "MXFP8", "FP8-MX", "mxfp8 (fp8-recipe mxfp8, e4m3)",
//   "fp8 block-scaled MXFP8 (page note: 32x32 ...)"        -> mxfp8
//   "fp8 block-scaled: 128x128 weights / 1x128 ...",
//   "blockwise", "FP8-SC" (subchannel)                    -> fp8-blockwise
//   "FP8-CS", "fp8 current scaling (FP8-CS) [...]",
//   "fp8 (per-tensor, current scaling)", "tensorwise"      -> fp8-tensorwise
//   "fp8 ... delayed"                                      -> fp8 (delayed)
//   plain "fp8", "FP8", "fp8 (hybrid format)"              -> fp8 (delayed),
//       except Megatron-Bridge 25.09+ sources: fp8-tensorwise (see
//       PrecisionForRow for the evidence)
//   the NeMo 25.07 "fp8 alternative (...) UNCERTAIN" rows  -> mxfp8 (ditto)
//   "bf16", "mixed (16-bit)"                               -> bf16
//   "fp16 ..."                                             -> fp16
#ifndef MESHTUNE_TUNER_ACCURACY_RULES_H_
#define MESHTUNE_TUNER_ACCURACY_RULES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

// Lower case without spaces, dots, dashes and underscores: "LLAMA3-70B" and
// "llama3 70b" -> "llama370b".
std::string NormalizeModelName(const std::string& name);
// The model preset whose name or an alias normalises like `name`.
std::optional<search_spaces::ModelSpec> FindModelPreset(
    const std::string& name);
// A model column split into the model's name and the variants written after
// it in parentheses ("DeepSeekV3 (w/o MTP)", "Llama3-70B (12-layer)"). The
// variants are part of the row's configuration:
//   (tokendrop)   moe_expert_capacity_factor 1.0 with
//                 moe_pad_expert_input_to_capacity (Megatron-Bridge's
//                 DeepSeek-V3 / Qwen3 token-drop recipes)
//   (dropless)    capacity factor 0 (no dropping, no padding)
//   (w/o MTP)     mtp_num_layers 0;  (w/ MTP): the preset's MTP depths
//                 (stated either way, a row with megatron_args keeps it;
//                 unstated, such a row trains MTP only with
//                 --mtp-num-layers, as Megatron does)
//   (alt)         an alternate recipe of the same model: no change
//   (12-layer), (4-layer)       num_layers N (a non-blank layers column
//                               wins)
//   (single transformer layer)  no change (per-layer timing rows)
// Several variants go in one pair of parentheses separated by commas
// ("DeepSeek-V3 (4-layer, w/o MTP)") or in several pairs.
struct ModelVariant {
  std::string base_name;  // the name without the variants, trimmed
  std::optional<double> moe_expert_capacity_factor;
  bool moe_pad_expert_input_to_capacity = false;
  std::optional<int64_t> mtp_num_layers;
  bool mtp_stated = false;  // "(w/ MTP)" or "(w/o MTP)" was written
  std::optional<int64_t> num_layers;
  // A parenthesised part that is none of the above, as written ("" = none).
  std::string unknown;
};
ModelVariant ParseModelVariant(const std::string& model_column);

// The recipe a precision cell spells out (the table in the header comment,
// without the per-source rule): plain "fp8" is delayed scaling, Megatron's
// default recipe. nullopt when the text names no precision we model.
std::optional<search_spaces::Precision> PrecisionFromText(
    const std::string& text);
// The precision of a row: PrecisionFromText with the per-source rule for
// Megatron-Bridge's unqualified "FP8" column (see the header comment).
std::optional<search_spaces::Precision> PrecisionForRow(
    const std::string& text, const std::string& source);
// Megatron-LM 2021-22 (sources dated up to 2022, e.g. Narayanan2021,
// Korthikanti2022) ran the unfused softmax attention; later sources and
// undated ones (NeMo containers) run flash attention.
costmodel::AttentionKernel AttentionKernelForSource(const std::string& source);
// The NeMo container a row ran, as yymm00 (24.03 -> 240300), from a
// "NeMo_YY.MM_..." source or "NeMo YY.MM" in the notes; 0 when neither.
int NemoContainerVersion(const std::string& source, const std::string& notes);
// AttentionKernelForSource, and FlashAttention-2's kernels (kFlash2) for
// NeMo containers up to 24.03: the long-sequence table's 24.03.01 ran them
// on Hopper (its error grows with the attention share to 1.46x with
// Hopper-native kernels; docs/costmodel.md §4). FlashAttention-3 appeared
// in July 2024; the NeMo 24.07 rows of the calibration set fit with native
// kernels, so the boundary is put at the last container known to differ.
costmodel::AttentionKernel AttentionKernelForRow(const std::string& source,
                                                 const std::string& notes);
// Sources whose runs used NeMo recipes (NeMo 24.07-25.x performance tables):
// the FLOP convention of their model_tflops_per_gpu.
bool IsNemoSource(const std::string& source);
// Sources that ran NVIDIA's tuned performance recipes (NeMo, Megatron-Bridge,
// DGX Cloud benchmarking, which runs NeMo; Megatron-LM's examples/llama,
// whose README table "follows NeMo Framework's performance scripts" and whose
// train_llama3_8b_h100_fp8.sh sets --use-distributed-optimizer,
// --fp8-param-gather and --grad-reduce-in-bf16, Megatron-LM commit
// bf6e99859f): distributed optimizer, and in fp8 the fp8 weights, bf16
// gradient reduction and TP comm overlap.
bool IsNvidiaRecipeSource(const std::string& source);
// The Megatron-FSDP sharding group size a row's notes state ("FSDP=64",
// "FSDP=1 (Megatron FSDP)"; the dev set's convention: "0=DDP; >0
// Megatron-FSDP sharding group size, older pages used 1=on"), nullopt when
// the notes say nothing. Any value > 0 means Megatron-FSDP over the whole
// data-parallel group (the only sharding group size the rows use: 64 on
// 64 GPUs at tp·pp·cp 1, and the older pages' 1 = on).
std::optional<int64_t> FsdpSizeFromNotes(const std::string& notes);

// The gradient-accumulation steps a row's notes state ("GA=16", the
// Megatron-Bridge tables' GA column: Megatron's number of micro-batches per
// step), nullopt when the notes say nothing.
std::optional<int64_t> GradientAccumulationFromNotes(const std::string& notes);

// The micro-batch size a row ran: gbs = dp · mbs · GA is an identity of
// Megatron's schedule, so where a row's stated GA contradicts its mbs
// column the GA's mbs, gbs / (dp · GA), is taken (when whole). The dev set
// has one such pair: Megatron-Bridge 25.09's LLaMA-3 70B on 64 GB200,
// tp2 pp4 dp8 gbs 128 with "mbs 2" and GA=16, i.e. mbs 1, what every later
// release of that recipe runs; at mbs 2 it would need 220 GiB of a GB200's
// 186. Returns `mbs` when GA is absent, agrees, or gives no whole mbs.
int64_t MicroBatchFromAccumulation(int64_t gbs, int64_t dp, int64_t mbs,
                                   std::optional<int64_t> ga);

// True when the notes say the benchmark forced a balanced routing ("force-
// balance tokens across experts", the footnote of Megatron-Bridge's MoE
// performance tables; case-insensitive).
bool ForceBalancedFromNotes(const std::string& notes);

// What NVIDIA's performance recipes set that a row of `source` does not
// state, applied to `training` (docs/costmodel.md "Memory"):
//   Megatron-Bridge sources: --cross-entropy-loss-fusion
//     (src/megatron/bridge/models/gpt_provider.py: cross_entropy_loss_fusion
//     defaults to True) with --cross-entropy-fusion-impl te in every table
//     (cross_entropy_fusion_impl: "te" in the 0.1.0rc3 YAML files = 25.09,
//     scripts/performance/utils/helpers.py in 0.2.0 = 25.11, utils/
//     overrides.py from 0.3.0 = 26.02; native, Megatron's default,
//     everywhere else); Megatron-LM
//     examples/llama sources likewise (native)
//     (train_llama3_8b_h100_fp8.sh passes --cross-entropy-loss-fusion);
//     NeMo 2.0 sources (the NeMo_YY.MM performance summaries from 24.09 on
//     and DGXC_benchmarking_vYY.MM from 24.11, which ran NeMo 24.09+)
//     likewise: nemo/collections/llm/gpt/model/base.py GPTConfig sets
//     cross_entropy_loss_fusion = True (NeMo 1.0 sources, e.g. 24.07 and
//     the 24.03 long-sequence table, did not);
//   Megatron-FSDP runs of the Megatron-Bridge (25.09+) LLaMA-3 70B
//     recipes: --cpu-offloading-num-layers as the recipe sets it per GPU and
//     precision (scripts/performance/configs/llama/
//     llama3_workload_base_configs.py, LLAMA3_70B_PRETRAIN_CONFIG_<GPU>_
//     <PRECISION>: GB200 bf16 20, fp8-cs 40; GB300 bf16 30, fp8-cs 20;
//     unchanged from 2025-12 to 2026-07).
// REQUIRES: training->megatron_fsdp already set from the row.
void ApplyRecipeDefaults(const std::string& source,
                         const search_spaces::ModelSpec& model,
                         const std::string& cluster_name,
                         search_spaces::TrainingSpec* training);

// The layout NVIDIA's Megatron-Bridge recipe ran where the published table
// prints another (scripts/performance/configs/{qwen3,qwen,llama}/
// *workload_base_configs.py at the release tag, mapped as in
// ApplyRecipeMoeSoftware). The printed columns come from another release or
// another row; the throughput matches the recipe's layout:
//   Qwen3-30B-A3B H100, 25.11 (0.2.0): prints 25.09's pp2 vpp24 ep8 mbs2
//     GA=32; the recipe sets pp2 vpp12 ep8 and no micro-batch (mbs 1), as
//     26.02 does, whose rows run the same time per sequence (25.6 s per
//     512 against 25.11's 24.8 s).
//   Qwen3-30B-A3B H100, 26.02.01 (0.3.1): prints 26.02's pp2 vpp12 ep8;
//     Megatron-Bridge PR #2477 (in 0.3.1) moved the recipe to pp1 ep16 with
//     HybridEP and no EP overlap, the layout the 26.04 tables print for the
//     same throughput (9058 against 8901-8960 tokens/s/GPU).
//   LLaMA-3 70B GB300 NVFP4 and MXFP8, 26.02.01 (0.3.1): print tp1 pp1 dp64
//     mbs2 (the FP8-CS Megatron-FSDP row's) and tp1 pp4 mbs2 with FSDP=0;
//     the recipe (LLAMA3_70B_PRETRAIN_CONFIG_GB300_{NVFP4,FP8_MX}) runs pp4
//     vpp5 mbs1, which 26.02 and 26.04 print, and its throughput lies
//     between theirs (NVFP4 6798 < 7002 < 7397, MXFP8 4596 < 4798 < 4742-
//     4864 tokens/s/GPU). As printed, both need more than a GB300 holds.
// Applied only to the printed layout (dp follows from the GPU count);
// true if `config` changed.
bool ApplyRecipeLayout(const std::string& source,
                       const search_spaces::ModelSpec& model,
                       const std::string& cluster_name,
                       search_spaces::Precision precision,
                       search_spaces::ParallelConfig* config);

// The MoE software of NVIDIA's Megatron-Bridge performance recipes for a
// row of the deepseek-v3, qwen3-30b-a3b or nemotron3-nano preset: the token
// dispatcher (flex with the DeepEP or HybridEP backend, else Megatron's
// alltoall) and --overlap-moe-expert-parallel-comm with
// --delay-wgrad-compute (the recipes' moe_a2a_overlap). Read from
// scripts/performance/configs/{deepseek,qwen,nemotronh}/*_workload_base_
// configs.py at the release tag of each NeMo container (25.09 = Megatron-
// Bridge 0.1.0rc3, 25.11 = 0.2.0, 26.02 = 0.3.0, 26.02.01 = 0.3.1, 26.04 =
// 0.4.0, 26.04.01 = 0.4.2, 26.06 = 0.5.0, 26.06.01 = 0.5.1, 26.08 = 0.6.0):
//   DeepSeek-V3  flex: H100 from 25.09 (DeepEP; HybridEP from 26.02),
//                GB200/GB300 from 25.11 (the 25.11 GB300 table ran the
//                pp2 vpp4 ep32 recipe of Megatron-Bridge d19cb73c8,
//                2025-12-05, after the 0.2.0 tag), B200/B300 from 26.02.
//                EP overlap: H100
//                25.09-25.11; B200 mxfp8 pp8 vpp2 ep32 from 26.04.01;
//                GB200/GB300 mxfp8 from 26.06; B300 mxfp8 from 26.06.01.
//   Qwen3-30B    flex (HybridEP) except B200 before 26.02.01 and H100
//                before 26.02 (alltoall); H100 26.02 DeepEP. EP overlap:
//                H100 25.11-26.02 (pp2 vpp12); GB200/GB300/B300 mxfp8 from
//                26.06; B200 mxfp8 from 26.06.01.
//   Nemotron 3   flex (HybridEP) in every table (from 26.02.01), no overlap.
//   Nano
// The overlap is set only where its preconditions hold for the row's
// layout (virtual stages when pp > 1; search_spaces CheckEpOverlap).
// Other sources and models are left as they are.
void ApplyRecipeMoeSoftware(const std::string& source,
                            const std::string& cluster_name,
                            const search_spaces::ParallelConfig& config,
                            search_spaces::ModelSpec* model,
                            search_spaces::TrainingSpec* training);

// The expert tensor parallelism of NVIDIA's Megatron-Bridge MoE performance
// recipes: 1 for every MoE row of a Megatron-Bridge source (the
// WorkloadBaseConfig of each MoE family sets expert_tensor_parallel_size=1:
// scripts/performance/configs/{deepseek,qwen,qwen3,nemotronh,gpt_oss}/ from
// 0.2.0 = 25.11; 0.1.0rc3's YAML files, 25.09, say etp: 1), else 0 (the
// row's own, Megatron's default: the tensor-parallel size).
int64_t RecipeExpertTensorParallel(const std::string& source,
                                   const search_spaces::ModelSpec& model);

// The CUDA graphs of NVIDIA's Megatron-Bridge performance recipes for a row
// of the qwen3-30b-a3b, deepseek-v3 or nemotron3-nano preset (the host-
// launch term, costmodel/host_launch.h), read from the same files as
// ApplyRecipeMoeSoftware at each release tag (docs/accuracy.md has the
// table). "TE" = --cuda-graph-impl transformer_engine with the scope
// listed; "full" = --cuda-graph-impl local --cuda-graph-scope
// full_iteration; router = moe_router moe_preprocess:
//   Qwen3-30B   H100: bf16 TE router, FP8-CS none. 25.09: one switch, on
//               for Blackwell (modelled as TE attn router). B200: TE router,
//               from 26.02.01 attn too. GB200: mxfp8 TE router, other
//               precisions attn too. GB300/B300: TE router. mxfp8 from
//               26.06 (B200 26.06.01): full.
//   DeepSeek-V3 GB200: TE attn router (25.11: router only). GB300: bf16
//               TE attn router, mxfp8 none from 26.02 (25.11: one recipe,
//               TE attn router, for every precision). B300 from 26.04.01
//               and B200 mxfp8 from 26.04.01: TE attn router. H100 and the
//               rest: none. mxfp8 GB200/GB300 from 26.06, B300 from
//               26.06.01: full.
//   Nemotron 3  Blackwell: TE attn mamba router; H100: bf16 TE attn mamba,
//   Nano        FP8-CS TE mamba.
// Other sources and models are left as they are (Megatron's default: no
// graphs).
void ApplyRecipeCudaGraphs(const std::string& source,
                           const search_spaces::ModelSpec& model,
                           const std::string& cluster_name,
                           search_spaces::TrainingSpec* training);

// The FP8 core attention (--fp8-dot-product-attention, Megatron-Bridge's
// mixed_precision.fp8_dot_product_attention) of NVIDIA's Megatron-Bridge
// MXFP8 recipes for a row of the qwen3-30b-a3b or deepseek-v3 preset, set
// with the full-iteration graphs and the CuTeDSL fused grouped MLP
// (qwen3_workload_base_configs.py and deepseek_workload_base_configs.py at
// 0.5.0 = 26.06 and 0.5.1 = 26.06.01; perf_recipes/{qwen,deepseek}/ at
// 0.6.0 = 26.08):
//   Qwen3-30B    GB200, GB300 and B300 from 26.06, B200 from 26.06.01.
//   DeepSeek-V3  GB300 from 26.06, B300 from 26.06.01 (GB200 runs the
//                fused MLP with 16-bit attention).
// Every other row is left as it is (Megatron's default: 16-bit attention).
void ApplyRecipeFp8Attention(const std::string& source,
                             const search_spaces::ModelSpec& model,
                             const std::string& cluster_name,
                             search_spaces::TrainingSpec* training);

// The selective recompute NVIDIA's Megatron-Bridge DeepSeek-V3 performance
// recipes set, for a Megatron-Bridge row of the deepseek-v3 preset whose
// recompute cell is blank: recompute_granularity "selective"
// (scripts/performance/configs/deepseek/: _deepseek_v3_common) with the
// recompute_modules of the DEEPSEEK_V3_PRETRAIN_CONFIG_<GPU>_<PRECISION>[_V1|
// _V2] of the row's layout in deepseek_workload_base_configs.py
// (workload_base_configs.py before 2025-12). The recipe is recognised by the
// row's layout (cluster, tp, pp, vpp, ep, mbs) and precision; only layouts
// whose modules are the same in every version of the file (2025-11-08 to
// 2026-06-30, both variants) are mapped:
//   GB300 tp1 pp2 vpp8 ep32 mbs2, any precision   mla_up_proj
//   GB300 tp1 pp4 vpp4 ep64 mbs1, bf16            moe_act
//   GB200 tp1 pp4 vpp4 ep64 mbs1, bf16            mla_up_proj (the fp8
//       recipes of this layout switched between mla_up_proj and mlp)
//   B200/B300 tp1 pp16 ep8 mbs1, any              mla_up_proj
//   B200 tp1 pp8 vpp2 ep32 mbs1, mxfp8            mla_up_proj, mlp
//   B300 tp1 pp8 ep8 mbs2, any                    mla_up_proj
//   H100 tp2 pp8 vpp4 or vpp2 ep64 mbs1, any      mla_up_proj, mlp
// Nemotron 3 Nano (nemotronh/nemotron_3_nano_workload_base_configs.py,
// 26.02.01 on; nemotron_3_workload_base_configs.py from 26.04) recomputes
// on H100 only: bf16 moe, layernorm; FP8-CS moe, layernorm, core_attn,
// moe_act.
// nullopt for every other row (the caller keeps the row's recompute).
std::optional<search_spaces::Recompute> RecipeRecompute(
    const std::string& source, const search_spaces::ModelSpec& model,
    const std::string& cluster_name, search_spaces::Precision precision,
    const search_spaces::ParallelConfig& config);

// Recompute column: blank or "none" -> none; "full..." -> full, uniform,
// every layer (what the published scripts set); "selective..." -> selective
// of Megatron's default module core_attn ("selective (attention core)";
// also Korthikanti's App. C microbatch-level variant, modelled as plain
// selective), or of the --recompute-modules listed in parentheses
// ("selective (moe_act, mlp)"); nullopt otherwise.
std::optional<search_spaces::Recompute> RecomputeFromText(
    const std::string& text);

// What a published metric measures, and so what it is compared with.
enum class MetricKind {
  kStepTime,              // every metric PublishedStepTime converts
  kLayerForward,          // layer_fwd_ms: one transformer layer's forward
  kLayerBackward,         // layer_bwd_ms: its backward (+ recompute)
  kLayerForwardBackward,  // layer_fwd_bwd_ms
  kAllocatedMemory,       // allocated_memory_gib: the largest
                          // torch.cuda.max_memory_allocated over the ranks
  kUnknown,
};
MetricKind MetricKindOf(const std::string& metric);
// The unit rows of a kind are compared in: "s", "ms", "GiB" ("" unknown).
const char* MetricUnit(MetricKind kind);

// Seconds per step from a published `metric` of `value` for a run of
// `training.num_gpus` GPUs, or nullopt with `reason` set:
//   iteration_time_s, step_time_s   the value
//   tokens_per_sec_per_gpu          gbs·seq/(value·gpus)
//   tflops_per_gpu                  source's FLOPs/(value·1e12·gpus):
//                                   Narayanan2021 (SC21 eq. 3), or Megatron's
//                                   logged model FLOPs for Megatron-LM /
//                                   Megatron-Core sources
//   model_tflops_per_gpu            Megatron model FLOPs (NeMo sources and
//                                   Megatron-LM's examples/llama: causal
//                                   attention counted in
//                                   full)/(value·1e12·gpus)
//   mfu_pct, hfu_pct                model/hardware FLOPs over value % of the
//                                   dense bf16 peak (Korthikanti2022 rows:
//                                   the paper's eq. 7/8)
std::optional<double> PublishedStepTime(
    const std::string& source, const std::string& metric, double value,
    const search_spaces::ModelSpec& model,
    const search_spaces::TrainingSpec& training,
    const search_spaces::ParallelConfig& config,
    const search_spaces::ClusterSpec& cluster, std::string* reason);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_RULES_H_
