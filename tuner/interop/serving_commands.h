// Serving plans as the engines' own command lines (`tune serve`,
// docs/serving.md §6): `vllm serve`, SGLang's `launch_server` and
// `trtllm-serve` with the plan's sizes, one command per replica, and the
// parsers that read each back into a ServingConfig (the round trips are
// tested).
//
// Flags written (each engine's documented CLI):
//   vLLM        --tensor-parallel-size tp --pipeline-parallel-size pp
//               [--data-parallel-size adp] [--enable-expert-parallel]
//               --max-num-seqs batch --max-model-len isl+osl
//               [--kv-cache-dtype fp8] [--quantization fp8|modelopt_fp4]
//               [--enable-prefix-caching]
//               [--speculative-config '{"method":"mtp",
//                                       "num_speculative_tokens":nextn}',
//                or with an EAGLE-3 head '{"method":"eagle3","model":head,
//                                          "num_speculative_tokens":nextn}']
//               vLLM runs the experts either tensor-parallel over tp
//               (ep 1, no attention DP) or expert-parallel over all
//               tp·dp ranks (--enable-expert-parallel: ep = tp·adp);
//               other MoE layouts have no vLLM form (an error).
//   SGLang      --tp tp·adp (SGLang's tp is the replica's GPUs) [--dp adp
//               --enable-dp-attention] [--ep-size ep] --pp-size pp
//               --max-running-requests batch --context-length isl+osl
//               [--kv-cache-dtype fp8_e4m3] [--quantization fp8|modelopt_fp4]
//               [--speculative-algorithm EAGLE --speculative-num-steps nextn
//                --speculative-eagle-topk 1
//                --speculative-num-draft-tokens nextn+1; with an EAGLE-3
//                head EAGLE3 and --speculative-draft-model-path head]
//               (its radix prefix cache is on unless disabled: no flag)
//   TensorRT-LLM  trtllm-serve --tp_size tp·adp --pp_size pp --ep_size ep
//               --max_batch_size batch --max_seq_len isl+osl
//               --kv_cache_free_gpu_memory_fraction 0.9, with
//               enable_attention_dp, the KV dtype, with a cached prefix
//               kv_cache_config.enable_block_reuse: true, for a model
//               with sliding windows the windows it keeps
//               (kv_cache_config.max_attention_window) and with drafts
//               speculative_config (decoding_type MTP,
//               num_nextn_predict_layers nextn; with an EAGLE-3 head
//               decoding_type Eagle3, max_draft_len nextn,
//               speculative_model head) in the
//               --extra_llm_api_options YAML it prints beside.
// The checkpoint is `model`: quoted for the shell, never interpreted.
#ifndef MESHTUNE_TUNER_INTEROP_SERVING_COMMANDS_H_
#define MESHTUNE_TUNER_INTEROP_SERVING_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/serving_spec.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

// A worker's role: aggregated (prefill and decode), or one side of a
// disaggregated deployment. A disaggregated worker's command adds its
// KV-transfer settings: vLLM --kv-transfer-config with the NixlConnector
// (kv_role kv_both), SGLang --disaggregation-mode prefill|decode,
// TensorRT-LLM cache_transceiver_config (backend DEFAULT) in its options,
// and for its context (prefill) servers disable_overlap_scheduler: true.
// The router in front (vLLM's vllm-router, SGLang's router, TensorRT-LLM's
// disaggregated server, NVIDIA Dynamo) is not part of the commands; the
// manifests (serving_manifest.h) write one.
enum class ServingRole { kAggregated, kPrefill, kDecode };

// What every command needs besides the layout.
struct ServingLaunch {
  std::string model;          // Hugging Face id or checkpoint path
  int64_t max_batch = 0;      // sequences per replica
  int64_t max_model_len = 0;  // isl + osl
  int64_t replicas = 1;
  ServingRole role = ServingRole::kAggregated;
  // Tokens each layer keeps, repeated over the layers, for a model with
  // sliding windows (costmodel::KeptAttentionWindows); empty without. vLLM
  // and SGLang read the windows from the checkpoint; TensorRT-LLM keeps
  // them only when told (kv_cache_config.max_attention_window).
  std::vector<int64_t> attention_windows;
  // The plan was priced with a cached prompt prefix
  // (ServingWorkload::prefix): the engine's prefix cache is switched on
  // explicitly where it has a switch (vLLM's --enable-prefix-caching,
  // TensorRT-LLM's kv_cache_config.enable_block_reuse; both defaults of
  // today's versions, which a later default must not undo).
  bool prefix_caching = false;
};

// The vLLM command of one replica; InvalidArgument for an MoE layout vLLM
// cannot express (ep neither 1 nor tp·attention_dp, or attention DP with
// ep 1).
StatusOr<std::string> VllmServeCommand(const search_spaces::ServingConfig& c,
                                       const ServingLaunch& launch);
std::string SglangServeCommand(const search_spaces::ServingConfig& c,
                               const ServingLaunch& launch);
// The trtllm-serve command; `options_yaml` receives the
// --extra_llm_api_options file's text. InvalidArgument for tp > 1 with
// attention DP: TensorRT-LLM's enable_attention_dp runs attention
// data-parallel over all tp_size ranks (attention tp 1), so a hybrid
// tp·adp plan has no trtllm-serve form.
StatusOr<std::string> TrtllmServeCommand(const search_spaces::ServingConfig& c,
                                         const ServingLaunch& launch,
                                         std::string* options_yaml);

// Reads a `vllm serve` command (as VllmServeCommand writes it, or typed by
// hand with the same flags; `--flag=value` accepted) back into the layout
// and launch sizes. Unknown flags are ignored (a flag followed by another
// flag is a switch); a non-numeric size or a missing `vllm serve` is
// InvalidArgument.
StatusOr<search_spaces::ServingConfig> ParseVllmServeCommand(
    const std::string& command, ServingLaunch* launch);
// Reads `python3 -m sglang.launch_server` (as SglangServeCommand writes it,
// or by hand): --tp is the replica's GPUs, divided by --dp into attention
// DP ranks with --enable-dp-attention (without it, --dp starts whole
// replicas: one is read); --ep-size, --pp-size, --max-running-requests,
// --context-length, the KV dtype, --quantization, --disaggregation-mode.
// Errors as ParseVllmServeCommand's, and a --tp that --dp does not divide.
StatusOr<search_spaces::ServingConfig> ParseSglangServeCommand(
    const std::string& command, ServingLaunch* launch);
// Reads `trtllm-serve` and its --extra_llm_api_options YAML text (may be
// empty): --tp_size GPUs are tensor-parallel, or all attention-DP ranks
// with enable_attention_dp (TensorRT-LLM has no hybrid of the two);
// --max_batch_size is per attention-DP rank; kv_cache_config.dtype and
// max_attention_window (into ServingLaunch::attention_windows); a
// cache_transceiver_config marks a disaggregated worker, a context
// (prefill) server with disable_overlap_scheduler: true, else decode. The
// weight precision is the checkpoint's and is not read (bf16 in the result).
// Errors as ParseVllmServeCommand's and a malformed YAML.
StatusOr<search_spaces::ServingConfig> ParseTrtllmServeCommand(
    const std::string& command, const std::string& options_yaml,
    ServingLaunch* launch);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_SERVING_COMMANDS_H_
