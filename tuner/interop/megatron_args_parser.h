// ParseMegatronArgs: Megatron-LM pretrain_gpt.py arguments back into the
// meshtune vocabulary, the inverse of MegatronArgs
// (tuner/interop/megatron_args.h).
//
// Accepts the text as FormatMegatronArgs prints it and as people paste it from
// launch scripts: backslash-newline continuations, any whitespace, '#'
// comments, single or double quotes, "--flag=value", and a launcher prefix
// ("torchrun --nproc_per_node 8 pretrain_gpt.py ...": everything up to the
// last word ending in ".py" is dropped).
//
// Every flag MegatronArgs can emit is read (model shape, GQA, MLA, QK norm,
// sliding windows, MTP, biases, RoPE base, hybrid patterns and Mamba sizes,
// MoE with shared/latent experts, router, capacity, dispatcher and grouped
// GEMM, tp/pp/vpp either as --virtual-pipeline-model-parallel-size, as
// --num-layers-per-virtual-pipeline-stage or as a layout, cp, ep, etp, sp,
// dist-opt, recompute, micro and global batch, the precision recipes, the
// fp8 and overlap switches and the attention backend). An absent flag takes
// Megatron's default, not meshtune's: allgather dispatcher, no grouped GEMM,
// linear biases on, MLA ranks 0/32/128/64/128.
// Flags that do not change the parallel plan (--lr, --train-iters,
// --data-path, ...; IgnoredMegatronFlags()) are skipped with their values and
// listed in `ignored`. Any other flag is an InvalidArgument naming it; so are
// a missing or non-integer value, a flag given twice, and combinations
// Megatron itself rejects (--fp16 with --bf16, full recompute without a
// method, --tp-comm-overlap without --sequence-parallel, ...).
#ifndef MESHTUNE_TUNER_INTEROP_MEGATRON_ARGS_PARSER_H_
#define MESHTUNE_TUNER_INTEROP_MEGATRON_ARGS_PARSER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

struct ParsedMegatronArgs {
  // Architecture: num_layers, hidden_size, num_attention_heads,
  // num_query_groups (= heads without --group-query-attention), kv_channels
  // (hidden / heads unless --kv-channels), ffn_hidden_size (Megatron's
  // default when absent), seq_length (= --max-position-embeddings, else
  // --seq-length), normalization, activation, position_embedding_type,
  // untie_embeddings_and_output_weights, add_bias_linear, rotary_base,
  // qk_layernorm, window_size / window_attn_skip_freq, the MLA ranks,
  // mtp_num_layers, the hybrid pattern and Mamba sizes, the MoE fields
  // (experts, top-k, sizes, layer pattern, shared and latent sizes, router,
  // capacity, dispatcher, grouped GEMM), and vocab_size when
  // --vocab-size is given (NullTokenizer runs: with --tokenizer-type
  // NullTokenizer the value plus its EOD token, as Megatron builds it; else
  // the tokenizer has it and it stays 0). name and global_batch_size stay
  // empty/0.
  search_spaces::ModelSpec model;
  // global_batch_size, seq_length, precision, fp8_param_gather,
  // fp8_dot_product_attention, grad_reduce_in_bf16, tp_comm_overlap,
  // moe_ep_overlap, cuda_graphs; num_gpus as passed to the parser.
  search_spaces::TrainingSpec training;
  // Every axis but dp comes from the flags; dp = num_gpus / (tp·pp·cp) when
  // the parser was given the world size, else 0 (the arguments do not carry
  // it: torchrun does).
  search_spaces::ParallelConfig config;
  // --overlap-grad-reduce / --overlap-param-gather were given (the cost model
  // assumes both; MegatronArgs always emits them).
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // --attention-backend as written (flash, fused, unfused, local, auto);
  // "" when absent (Megatron's auto).
  std::string attention_backend;
  // Allow-listed flags that were skipped, in order of appearance, and their
  // values as written (joined by spaces; "" for a switch): a launch script's
  // --tokenizer-type, --train-iters, --save, ... read back.
  std::vector<std::string> ignored;
  std::map<std::string, std::string> ignored_values;
  // Adjustments Megatron itself would make, one sentence each (e.g.
  // "--sequence-parallel is off with --tensor-model-parallel-size 1").
  std::vector<std::string> notes;
};

// `num_gpus` > 0 is the world size the arguments run on; it must be a
// multiple of tp·pp·cp.
StatusOr<ParsedMegatronArgs> ParseMegatronArgs(const std::string& text,
                                               int64_t num_gpus = 0);

// What ApplyMegatronFlags did besides changing the specs.
struct AppliedMegatronFlags {
  // Accepted flags that do not change the cost model's inputs, in order of
  // appearance (the allow-list of IgnoredMegatronFlags() and the kernel
  // switches listed at ApplyMegatronFlags).
  std::vector<std::string> without_effect;
};

// Applies one run's Megatron flags (the megatron_args column of a `tune
// accuracy` CSV) on top of a model, training and configuration that already
// hold what the row's columns say, instead of requiring a full command line.
// The flags read, and what they set:
//   --use-distributed-optimizer           config.dist_opt
//   --tp-comm-overlap                     training.tp_comm_overlap (needs sp)
//   --overlap-moe-expert-parallel-comm    training.moe_ep_overlap
//   --delay-wgrad-compute                 (needs the flag above)
//   --grad-reduce-in-bf16                 training.grad_reduce_in_bf16
//   --fp8-param-gather                    training.fp8_param_gather (fp8/fp4
//                                         runs with the distributed optimizer)
//   --fp8-dot-product-attention           training.fp8_dot_product_attention
//                                         (fp8 runs)
//   --moe-layer-freq N | LIST             model.moe_layer_freq, or
//                                         moe_layer_pattern from Megatron's
//                                         list (search_spaces::
//                                         ParseMoeLayerFreq; one entry per
//                                         layer)
//   --moe-token-dispatcher-type T         allgather, alltoall or flex
//   --moe-expert-capacity-factor F        model.moe_expert_capacity_factor
//   --moe-pad-expert-input-to-capacity    (needs a capacity factor)
//   --moe-grouped-gemm                    model.moe_grouped_gemm
//   --use-transformer-engine-op-fuser     model.use_transformer_engine_op_
//                                         fuser (the fused grouped MLP)
//   --moe-router-pre-softmax              model.moe_router_pre_softmax
//   --moe-router-num-groups G, --moe-router-group-topk K
//                                         group-limited routing (G divides
//                                         the experts, K <= G)
//   --qk-layernorm                        model.qk_layernorm
//   --mtp-num-layers N                    model.mtp_num_layers (a hybrid
//                                         pattern's '/' parts must agree);
//                                         `tune accuracy` trains no MTP
//                                         without it
//   --disable-bias-linear                 model.add_bias_linear = false
//   --rotary-base B                       model.rotary_base
//   --overlap-grad-reduce, --overlap-param-gather
//                                         training.overlap_grad_reduce /
//                                         overlap_param_gather; off unless
//                                         given (Megatron's default)
//   --cross-entropy-loss-fusion           training.cross_entropy_loss_fusion
//   --cross-entropy-fusion-impl native|te training.cross_entropy_fusion_impl
//   --cp-comm-type p2p|a2a                training.cp_comm_a2a
//   --cuda-graph-impl I, --cuda-graph-scope S...
//                                         training.cuda_graphs (the scope's
//                                         words or a comma list)
// Accepted without effect on the cost model (listed in `without_effect`):
//   --transformer-impl transformer_engine|local (the cost model prices
//   Transformer Engine kernels), --moe-permute-fusion (permutation is priced
//   as memory traffic either way), --moe-router-topk-scaling-factor (scales
//   the routing weights, not the work), --attention-backend (checked against
//   Megatron's choices; the row's software generation picks the kernel the
//   cost model prices), and every flag of
//   IgnoredMegatronFlags().
// A MoE flag on a dense model, an unknown flag, a bad value, a flag given
// twice or a combination Megatron rejects is an InvalidArgument naming the
// flag; the specs may then be partly changed.
StatusOr<AppliedMegatronFlags> ApplyMegatronFlags(
    const std::string& text, search_spaces::ModelSpec* model,
    search_spaces::TrainingSpec* training,
    search_spaces::ParallelConfig* config);

// The flags ParseMegatronArgs skips because they do not affect the parallel
// plan (optimizer, schedule, data, tokenizer, checkpointing, logging,
// kernels), sorted.
const std::vector<std::string>& IgnoredMegatronFlags();

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_MEGATRON_ARGS_PARSER_H_
