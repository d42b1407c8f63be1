// ModelStats: parameter counts and FLOPs of a transformer (ModelSpec).
//
// Parameter counts follow Megatron-LM's module layout (the per-layer formulas
// of docs/sources.md §4.2, validated there against the
// published totals of §1.6): attention (GQA with kv_channels independent of
// hidden/heads, QK norm, MLA), MLP (gated or not), MoE (routed, shared and
// latent experts, router), Mamba-2 mixers, norms, embeddings and MTP depths,
// plus linear biases when the model has them (ModelSpec::has_linear_biases).
// All counts are numbers of parameters (not bytes), as doubles: every count
// is an integer below 2^53, so sums are exact; FLOP products like B·s²·h do
// not fit comfortably in int64 for long contexts.
//
// FLOPs come in two conventions (FlopCount):
//   kMegatron: Megatron-LM's num_floating_point_operations
//     (megatron/training/training.py; docs/sources.md §3.1 GPT branch, §3.2
//     hybrid branch) with all its simplifications, for parity with the MFU
//     that published runs report. This is what ModelFlopsPerStep returns.
//   kTrue: the GEMM and attention work the model really does
//     (TrueModelFlopsPerStep), where Megatron's count differs (§3.3).
// Both count model FLOPs of one step: forward + dgrad + wgrad (every GEMM
// ×3), 2 FLOPs per multiply-add, causal core attention over half the
// (query, key) pairs, no recompute. Neither counts norms, activations,
// softmax or top-k, permutation, Mamba's conv1d, or capacity padding.
#ifndef MESHTUNE_COSTMODEL_MODEL_STATS_H_
#define MESHTUNE_COSTMODEL_MODEL_STATS_H_

#include <cstdint>

#include "search_spaces/model_spec.h"

namespace meshtune::costmodel {

// Megatron pads the vocabulary to a multiple of
// make_vocab_size_divisible_by (128) times the tensor-parallel size.
int64_t PaddedVocabSize(int64_t vocab_size, int64_t tp);

// The parameters of one layer, split the way parallelism shards them
// (docs/sources.md §4.2 placement table).
struct LayerParams {
  // Split over the TP ranks: QKV/O projections, MLA up-projections (and the
  // full query projection without q_lora_rank), dense MLP, shared experts,
  // Mamba in/out projections, conv1d and per-head parameters (dt bias, A, D,
  // gated norm), and the column-parallel biases of these linears.
  double tp_sharded = 0;
  // On every TP rank: the layer's norms, QK norms, the router, MLA
  // down-projections and latent norms, latent-MoE projections, and the
  // biases of row-parallel linears (added after the TP reduction).
  double replicated = 0;
  // All num_experts routed experts of the layer (with their biases); the
  // caller splits them over EP (whole experts) × ETP (each expert's FFN).
  double routed_experts = 0;

  double total() const { return tp_sharded + replicated + routed_experts; }
  LayerParams& operator+=(const LayerParams& o) {
    tp_sharded += o.tp_sharded;
    replicated += o.replicated;
    routed_experts += o.routed_experts;
    return *this;
  }
};

// Parameters of one layer of `kind` (see ModelSpec "Layers"): a GPT layer
// (mixer + MLP + its two norms) or a hybrid layer (one block + its norm).
// Only meaningful on a spec that passed Validate().
LayerParams ParamsOfLayer(const search_spaces::ModelSpec& model,
                          search_spaces::LayerKind kind);
// The glue of one MTP depth, without its layers (MtpDepthLayers()) and
// without the embedding and output layer it shares with the main model:
// the two input norms (enorm, hnorm), the 2h -> h projection eh_proj
// (column-parallel, TP-sharded) and the depth's final norm
// (megatron/core/transformer/multi_token_prediction.py).
LayerParams MtpGlueParams(const search_spaces::ModelSpec& model);

// Parameter counts of a whole model.
struct ModelStats {
  // One GPT transformer layer, split the way parallelism shards it. Filled
  // for every model; for hybrid models attention_params is a '*' layer's
  // mixer and norm_params assumes two norms. ParamsOfLayer is the exact
  // per-layer-kind split; these fields keep their meaning for dense GPT /
  // LLaMA and Mixtral-style MoE models.
  //
  // Mixer: QKV + output projection (+ QK norm, + biases), or all MLA
  // projections and latent norms. Mostly TP-sharded (see LayerParams for
  // the replicated parts).
  double attention_params = 0;
  double dense_mlp_params = 0;  // fc1 (+gate) + fc2 (+ biases); TP-sharded
  // ONE routed expert's MLP (at moe_latent_size width for latent MoE);
  // sharded by etp·ep. Shared experts and latent projections are not in it.
  double expert_params = 0;
  double router_params = 0;  // h·E; replicated
  double norm_params = 0;    // the layer's two norms; replicated
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

  // Everything in the main model, every routed expert, MTP excluded.
  double total_params = 0;
  // Parameters a token passes through (docs/sources.md §1.6 convention):
  // dense parts + k routed experts + shared experts + router per MoE layer,
  // both embedding matrices included, MTP excluded.
  double active_params = 0;
  // All MTP depths: glue + layers (the embedding and output layer are shared
  // with the main model and counted there). 0 without MTP.
  double mtp_params = 0;
};

// `padded_vocab`: the vocabulary the model is built with (PaddedVocabSize).
// `max_position_embeddings`: rows of the learned position table.
ModelStats ComputeModelStats(const search_spaces::ModelSpec& model,
                             int64_t padded_vocab,
                             int64_t max_position_embeddings);

// Which FLOP count (see the top of this file).
enum class FlopCount { kMegatron, kTrue };
const char* ToString(FlopCount count);  // "megatron", "true"

// Model FLOPs of one step of `gbs` sequences of `seq` tokens (BSHD, no
// packing), with `padded_vocab` the output layer's width.
//
// kMegatron (the default) reproduces Megatron-LM's
// num_floating_point_operations (training.py) term by term:
//   GPT models (§3.1): dense MLP 6·h·f·φ, MoE 6·h·(k·f_e·φ + f_s·φ) (latent:
//   k·f_e·φ·λ/h + 2λ for the routed part), GQA 6·[h·(n·d + 2·g·d) + n·d·h],
//   MLA projections with their latent-norm "+1" terms, core attention
//   6·n·d (MLA 3·n·(d_qk + d_rope + d_v)) per token and key with causal
//   halving, MTP depths as extra layers of the last layer's kind plus
//   6·(3h + 2h²) glue, logits 6·h·V·(D+1). φ = 3 only for SwiGLU
//   (Megatron's args.swiglu): GPT-OSS's gated quick-GELU counts 2, and
//   sliding-window layers count as full causal attention.
//   Hybrid models (§3.2): per-symbol counts including MTP depths, attention
//   always in the GQA form (also MLA), Mamba-2 at d_inner = 2h whatever
//   mamba_num_heads·mamba_head_dim is, MLP/MoE with ψ = 1.5 for SwiGLU,
//   logits 2·h·V·(1 + D) forward, everything ×3, no MTP glue, no router.
// kTrue counts what runs: attention of sliding-window layers over their
// window only, Mamba-2 at its real inner width mamba_heads()·head_dim, MLA
// and MTP glue in hybrid models too, the router GEMM h·E, φ = 3 for every
// gated MLP (gated_mlp()), GEMMs only (no latent-norm terms).
double ModelFlopsPerStep(const search_spaces::ModelSpec& model, int64_t gbs,
                         int64_t seq, int64_t padded_vocab,
                         FlopCount count = FlopCount::kMegatron);
// = ModelFlopsPerStep(..., FlopCount::kTrue).
double TrueModelFlopsPerStep(const search_spaces::ModelSpec& model, int64_t gbs,
                             int64_t seq, int64_t padded_vocab);

// Extra FLOPs executed by activation recompute in one step (for HFU), in the
// same convention as the model FLOPs they are added to:
// selective = forward core attention of every attention layer, MTP depths
// included (2·n·d per token and key for GQA, n·(d_qk + d_rope + d_v) for
// MLA, causal; kTrue: sliding-window layers over their window); full = one
// forward of every recomputed layer (`recomputed_fraction` of them): a
// third of the model FLOPs without the logits.
double SelectiveRecomputeFlopsPerStep(const search_spaces::ModelSpec& model,
                                      int64_t gbs, int64_t seq,
                                      FlopCount count = FlopCount::kMegatron);
double FullRecomputeFlopsPerStep(const search_spaces::ModelSpec& model,
                                 int64_t gbs, int64_t seq,
                                 double recomputed_fraction,
                                 FlopCount count = FlopCount::kMegatron);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_MODEL_STATS_H_
