// Compute model: time of the work inside one transformer layer (and the
// embedding / logits layers) for one micro-batch on one GPU.
//
// Every GEMM is timed separately through Calibration::GemmTime_s (shape- and
// size-dependent efficiency); forward is one GEMM [T, k]·[k, n], backward
// is dgrad [T, n]·[n, k] plus wgrad [k, T]·[T, n]. T = mbs·seq/cp tokens
// (with SP the GEMM input is the all-gathered sequence, so T is the same).
// Per dense layer (Megatron column/row-parallel split over t):
//   QKV [T,h]·[h,(a+2g)·d_h/t], out-proj [T,a·d_h/t]·[a·d_h/t,h],
//   fc1 [T,h]·[h,(F−1)·f/t] (F−1 = 2 for SwiGLU gate+up), fc2 [T,f/t]·[f/t,h].
// MoE layers: router [T,h]·[h,E], then each of the E/ep local experts gets
// ι·k·T·ep/E tokens (expert-TP = tp) for fc1/fc2 of size f_e, where ι =
// kMoeLoadImbalance is the busiest expert's load over the mean (the step
// waits for it; Refinement::kMoeImbalance).
// Core attention: Calibration::Attention{Forward,Backward}Time_s (flash or
// the unfused 2021-22 path). Memory-bound elementwise work streams bytes
// through HBM (backward = 2× forward bytes):
//   norms 4 B/elem each (read + write 16-bit), bias-dropout-add 7 B/elem
//   (GPT) or residual add 6 B/elem, GeLU 4 B per f-element, SwiGLU 6 B per
//   f-element, RoPE 4 B per q/k element, MoE permute/unpermute 8 B per routed
//   element; norms and residuals run on h/t elements per token with SP and
//   on all h without (the redundancy SP removes).
// fp8: GEMMs at the fp8 rate; each GEMM input is cast-transposed (read 2 B,
// write 1 B + 1 B transposed, amax fused) in forward, and each output
// gradient in backward.
#ifndef MESHTUNE_COSTMODEL_COMPUTE_MODEL_H_
#define MESHTUNE_COSTMODEL_COMPUTE_MODEL_H_

#include <cstdint>

#include "costmodel/calibration.h"
#include "costmodel/model_options.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"

namespace meshtune::costmodel {

// Seconds for one micro-batch on one GPU, split the way the estimator needs.
struct LayerCompute {
  double gemm_fwd_s = 0;
  double gemm_bwd_s = 0;
  double attn_fwd_s = 0;  // core attention (flash) forward
  double attn_bwd_s = 0;
  double elem_fwd_s = 0;  // memory-bound work (norms, activation, casts...)
  double elem_bwd_s = 0;
  // Backward GEMMs that TP communication can hide behind (Megatron's async
  // grad-input all-reduce / reduce-scatter runs during the wgrad GEMM of
  // the column-parallel linears; the SP input re-gather during their dgrad).
  double column_dgrad_s = 0;  // QKV + fc1 dgrad
  double column_wgrad_s = 0;  // QKV + fc1 wgrad

  // Forward seconds of the parts Megatron's --recompute-modules re-run
  // (already counted in the totals above; SelectiveRecomputeTime_s sums the
  // chosen ones). core_attn is attn_fwd_s.
  double mlp_fwd_s = 0;             // mlp: a dense MLP (fc1, act, fc2)
  double moe_fwd_s = 0;             // moe: router, permutes, experts, act,
                                    // shared experts (not the all-to-alls)
  double moe_act_fwd_s = 0;         // moe_act: the experts' activation
  double norm_fwd_s = 0;            // layernorm: the blocks' input norms
  double mla_up_proj_fwd_s = 0;     // mla_up_proj: MLA q/kv up-projections
  double shared_experts_fwd_s = 0;  // shared_experts

  double fwd_s() const { return gemm_fwd_s + attn_fwd_s + elem_fwd_s; }
  double bwd_s() const { return gemm_bwd_s + attn_bwd_s + elem_bwd_s; }
};

// Forward seconds selective recompute re-runs per micro-batch for the
// --recompute-modules bits `modules` (search_spaces::kRecompute*): the sum
// of the matching parts of `lc` (Megatron-LM transformer_layer.py and
// moe_layer.py checkpoint each module's forward; mla_up_proj re-runs the
// up-projections, moe the whole MoE block but its all-to-alls, which the
// caller prices).
double SelectiveRecomputeTime_s(const LayerCompute& lc, uint32_t modules);

// Busiest expert's token load over the mean k·T/E under Megatron's aux-loss
// balanced dropless routing. Switch Transformer (Fedus et al. 2021, §2.2)
// trains at capacity factor 1.25 and drops < 1 % of tokens, so the busiest
// expert stays just under 1.25× the mean; we take 1.2.
inline constexpr double kMoeLoadImbalance = 1.2;

// The busiest expert's (and EP rank's) load over the mean for `model`:
// 1 with forced load balancing (ModelSpec::moe_router_force_load_balancing)
// or the kMoeImbalance refinement off, else kMoeLoadImbalance.
double MoeLoadImbalance(const search_spaces::ModelSpec& model,
                        const ModelOptions& options);

// Megatron --fp8-dot-product-attention runs the core attention (Transformer
// Engine's cuDNN fused attention, forward and backward) on the FP8 tensor
// cores. Their rate is twice the 16-bit one, the softmax's exponentials
// are not: FlashAttention-3 reaches 740 TFLOP/s in BF16 and close to 1.2
// PFLOP/s in FP8 on an H100 (Shah et al. 2024, abstract), 1.6x. The
// backward is taken at the same ratio (no published FP8 backward figure).
inline constexpr double kFp8AttentionSpeedup = 1.6;

// Divides the core attention of an attention or MLA layer `kind` by
// kFp8AttentionSpeedup; a Mamba mixer's scan (also in attn_*_s) is left.
void UseFp8CoreAttention(search_spaces::LayerKind kind, LayerCompute* lc);

// One decoder layer of `kind` (search_spaces::LayerKind: a GQA, MLA or Mamba
// mixer and/or a dense or MoE MLP). MoE layers with shared experts add a
// dense MLP of moe_shared_expert_intermediate_size; latent MoE adds the
// h <-> moe_latent_size projections and runs the experts at that width;
// expert GEMMs split fe over expert_tp() and hold TokensPerLocalExpert rows.
LayerCompute LayerComputeTime(const search_spaces::ModelSpec& model,
                              const search_spaces::ParallelConfig& config,
                              int64_t seq, search_spaces::Precision precision,
                              search_spaces::LayerKind kind,
                              const Calibration& calibration,
                              const ModelOptions& options);
// The model's own GPT layer kind: its attention (GQA or MLA) with a dense
// (moe_layer false) or MoE MLP.
LayerCompute LayerComputeTime(const search_spaces::ModelSpec& model,
                              const search_spaces::ParallelConfig& config,
                              int64_t seq, search_spaces::Precision precision,
                              bool moe_layer, const Calibration& calibration,
                              const ModelOptions& options);

// Rows of each local expert's GEMMs for one micro-batch: the mean k·T·etp·ep
// / (tp·E) routed tokens times the busiest expert's load (kMoeLoadImbalance
// when dropless; the capacity factor caps it, and padding fills every expert
// to capacity).
double TokensPerLocalExpert(const search_spaces::ModelSpec& model,
                            const search_spaces::ParallelConfig& config,
                            int64_t seq, const ModelOptions& options);

// Output layer + vocab-parallel cross-entropy (last stage), with
// `padded_vocab` rows, and the embedding lookup (first stage).
// `cross_entropy` is the kernel the run uses (CrossEntropyOp).
LayerCompute LogitsComputeTime(
    const search_spaces::ModelSpec& model,
    const search_spaces::ParallelConfig& config, int64_t seq,
    int64_t padded_vocab, search_spaces::Precision precision,
    const Calibration& calibration, const ModelOptions& options,
    ElementwiseOp cross_entropy = ElementwiseOp::kCrossEntropy);

// The cross-entropy kernel of a run: Megatron's unfused vocab-parallel
// cross-entropy, or the fused impl --cross-entropy-loss-fusion selects.
ElementwiseOp CrossEntropyOp(const search_spaces::TrainingSpec& training);
LayerCompute EmbeddingComputeTime(const search_spaces::ModelSpec& model,
                                  const search_spaces::ParallelConfig& config,
                                  int64_t seq, const Calibration& calibration,
                                  const ModelOptions& options);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_COMPUTE_MODEL_H_
