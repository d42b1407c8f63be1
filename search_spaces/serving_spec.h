// The vocabulary of serving (`tune serve`, issue 22): what is asked of an
// inference deployment (ServingWorkload) and how one replica of the model is
// laid out over its GPUs (ServingConfig).
//
// Names follow the serving engines our users run: TensorRT-LLM
// (`--tp_size`, `--pp_size`, `--ep_size`, `enable_attention_dp`,
// `--kv_cache_dtype`, `--max_batch_size`), vLLM (`--tensor-parallel-size`,
// `--data-parallel-size` with `--enable-expert-parallel`,
// `--kv-cache-dtype`, `--max-num-seqs`) and SGLang (`--tp`, `--dp` with
// `--enable-dp-attention`, `--ep`). A replica holds one copy of the weights
// on tp·attention_dp·pp GPUs:
//   attention   tensor parallel over tp, data parallel over attention_dp
//               (each attention-DP rank serves its own sequences and holds
//               their KV cache; TensorRT-LLM "DEP8" = tp 1, attention_dp 8);
//   MoE         the same tp·attention_dp GPUs regrouped as ep × moe_tp
//               (aiconfigurator: tp·attention_dp = moe_tp·moe_ep), so
//               moe_tp = tp·attention_dp / ep;
//   dense MLP   tensor parallel over tp;
//   pipeline    pp stages of whole layers.
// Units: tokens, sequences, bytes per element.
#ifndef MESHTUNE_SEARCH_SPACES_SERVING_SPEC_H_
#define MESHTUNE_SEARCH_SPACES_SERVING_SPEC_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/status.h"

namespace meshtune::search_spaces {

// The element type of the KV cache (TensorRT-LLM --kv_cache_dtype, vLLM
// --kv-cache-dtype): 16-bit, FP8 (e4m3 with a per-tensor scale) or NVFP4
// (Blackwell; e2m1 with an e4m3 scale per 16 elements).
enum class KvCacheDtype { kBf16, kFp8, kNvfp4 };

// "bf16", "fp8", "nvfp4".
const char* ToString(KvCacheDtype dtype);
// Reads the spelling above, "fp16"/"auto" as bf16 and "fp8_e4m3" as fp8;
// InvalidArgument naming the value and the accepted ones otherwise.
StatusOr<KvCacheDtype> ParseKvCacheDtype(const std::string& text);

// Bytes one stored element takes, block scales included: bf16 2, fp8 1,
// nvfp4 0.5 + 1/16 (one byte of scale per 16 four-bit values).
double BytesPerElement(KvCacheDtype dtype);

// Bytes one weight takes when a checkpoint is quantised to `weights` for
// inference: bf16/fp16 2, the FP8 recipes 1 (per-tensor or 128x128 block
// scales: negligible), MXFP8 1 + 1/32 (an E8M0 scale per 32), NVFP4
// 0.5 + 1/16. Norms, the router and embeddings stay 16-bit (the callers
// count them apart).
double WeightBytesPerElement(Precision weights);

// How request lengths spread around the workload's isl and osl.
//   kFixed        every request exactly isl and osl: a synthetic benchmark's
//                 fixed lengths (trtllm-bench's and aiperf's datasets with
//                 no spread, random datasets at range ratio 1);
//   kExponential  a dataset of which only the mean lengths are known
//                 (conversations such as ShareGPT's): exponentially
//                 distributed around the means, the law of largest entropy
//                 for a positive length of known mean. The benchmark
//                 simulations give each request its own lengths
//                 (costmodel::ExponentialLengths); the steady-state
//                 estimates use the means.
enum class LengthSpread { kFixed, kExponential };

// What the deployment is asked to serve.
struct ServingWorkload {
  int64_t isl = 0;  // input (prompt) tokens per request, the mean
  int64_t osl = 0;  // output tokens per request, the first one included
  // Requests in flight over the whole deployment (a benchmark client's
  // --concurrency); 0 = offline maximum throughput: every request queued at
  // once, the batch bounded only by the KV cache and max_batch.
  int64_t concurrency = 0;
  LengthSpread lengths = LengthSpread::kFixed;
  // Tokens at the start of each prompt that the engine's prefix cache
  // already holds (aiconfigurator's --prefix; a shared system prompt or
  // few-shot header, a conversation's earlier turns), 0 <= prefix < isl:
  // a prefill computes the other isl - prefix tokens, which attend to the
  // cached ones (costmodel::PromptsPrefillTime_s).
  int64_t prefix = 0;
  // The distinct prefixes the requests share (aiperf's
  // --prefix-prompt-pool-size; 1, its default: one system prompt for all).
  // The engines keep one copy of a prefix's whole KV pages, so each
  // attention-DP rank's cache holds prefix_pool such copies and every
  // sequence its own isl + osl less them (costmodel::
  // EstimateServingMemory); a prefix of each request's own (a
  // conversation's earlier turns) is prefix_pool = the concurrency.
  int64_t prefix_pool = 1;
  // Draft tokens a decode step accepts per request on average under
  // speculative decoding (ServingConfig::nextn), 0 <= nextn_accepted <=
  // nextn: aiconfigurator's --nextn-accepted, the engines' reported mean
  // acceptance length minus 1. It depends on the traffic and the draft,
  // not on the hardware, so there is no default; a step then emits
  // 1 + nextn_accepted tokens per request (DecodeProgress below).
  double nextn_accepted = 0;
  // Instead of nextn_accepted: the acceptance rate of each draft position,
  // the share of steps whose k-th draft is accepted given the ones before
  // it were (vLLM's logged per-position acceptance rates; aiconfigurator's
  // former nextn_accept_rates), each in [0, 1], at most kMaxNextn of them.
  // A step of N drafts then accepts Σ_{k ≤ N} Π_{j ≤ k} rate_j on average,
  // so the draft length itself can be searched (tune serve). Empty: use
  // nextn_accepted.
  std::vector<double> nextn_accept_rates = {};
};

// Prompt tokens a request's prefill computes: isl - prefix.
inline int64_t PrefillTokens(const ServingWorkload& w) {
  return w.isl - w.prefix;
}

// The serving engines meshtune prices and writes commands for. The cost
// model derives from it the host time per step and how requests enter the
// KV cache (costmodel::StepOverhead_s, costmodel::KvAdmissionOf).
//   kTensorRtLlm     TensorRT-LLM's PyTorch flow (trtllm-serve, trtllm-bench
//                    from 1.0: a Python executor loop), what tune serve
//                    writes commands for;
//   kTensorRtLlmCpp  its C++ executor over built TensorRT engines (the 0.x
//                    engine flow, Triton's tensorrtllm_backend), which
//                    published runs before 1.0 measured.
enum class ServingEngine { kVllm, kSglang, kTensorRtLlm, kTensorRtLlmCpp };
// Either TensorRT-LLM flow: the same scheduler, KV admission and kernels.
inline bool IsTensorRtLlm(ServingEngine e) {
  return e == ServingEngine::kTensorRtLlm ||
         e == ServingEngine::kTensorRtLlmCpp;
}

// What drafts the tokens of speculative decoding (ServingConfig::nextn).
//   kMtp     the model's own multi-token-prediction layers (DeepSeek-V3,
//            Nemotron 3): vLLM's method "mtp", SGLang's EAGLE algorithm
//            over them, TensorRT-LLM's decoding_type MTP;
//   kEagle3  an EAGLE-3 head, a checkpoint of its own (DraftHead): vLLM's
//            method "eagle3", SGLang's EAGLE3 algorithm, TensorRT-LLM's
//            decoding_type Eagle3.
enum class Drafter { kMtp, kEagle3 };
// "mtp", "eagle3".
const char* ToString(Drafter drafter);
// Reads the spelling above; InvalidArgument naming the value otherwise.
StatusOr<Drafter> ParseDrafter(const std::string& text);

// An EAGLE-3 draft head (Li et al., "EAGLE-3: Scaling up Inference
// Acceleration of Large Language Models via Training-Time Test", arXiv
// 2503.01840; vLLM's and SGLang's llama_eagle3.py): one decoder layer of
// the target's attention shape (its heads, query groups and head
// dimension), whose query, key and value projections read 2h (the token's
// embedding beside the fused hidden state), a gated MLP of
// `intermediate_size`, an fc (3h -> h, replicated on every rank) fusing
// three of the target's hidden states, and an output layer over
// `vocab_size` draft tokens mapped onto the target's; the embedding is the
// target's. The engines serve it in 16-bit with the target's tensor
// parallelism, on the last pipeline stage.
struct DraftHead {
  // Its Hugging Face id or path (the engines' draft model), written into
  // the commands as given: letters, digits and . _ - / : @ + ~ only.
  std::string checkpoint;
  // Its MLP width (config.json intermediate_size); 0 = the target's
  // ffn_hidden_size, which the dense targets' heads keep.
  int64_t intermediate_size = 0;
  // Its draft vocabulary (config.json draft_vocab_size): 32000 in SpecForge
  // and the EAGLE-3 authors' heads.
  int64_t vocab_size = 32000;
};

// The head as a one-layer dense model for the cost model: the target's
// hidden size, heads, query groups, head dimension, normalization and
// RoPE, no window; the head's MLP (gated SiLU) and draft vocabulary.
ModelSpec Eagle3HeadModel(const ModelSpec& target, const DraftHead& head);

// One replica's layout. Every replica of a deployment is the same.
struct ServingConfig {
  int64_t tp = 1;            // attention (and dense MLP) tensor parallel
  int64_t pp = 1;            // pipeline stages
  int64_t attention_dp = 1;  // attention data-parallel ranks
  int64_t ep = 1;            // expert parallel (MoE models; 1 otherwise)
  // Sequences in flight per replica at most (TensorRT-LLM --max_batch_size,
  // vLLM --max-num-seqs); 0 = as many as the KV cache holds.
  int64_t max_batch = 0;
  // Tokens one engine step processes at most per attention-DP rank
  // (TensorRT-LLM --max_num_tokens, vLLM --max-num-batched-tokens, SGLang
  // --max-prefill-tokens): the prefill chunk; 0 = the engines' default
  // (costmodel::kMaxNumTokens).
  int64_t max_num_tokens = 0;
  // The serving engine priced; tune serve prices vLLM.
  ServingEngine engine = ServingEngine::kVllm;
  Precision weights = Precision::kBf16;
  KvCacheDtype kv_cache = KvCacheDtype::kBf16;
  // Share of the memory left after weights and runtime buffers that the
  // engine gives the KV cache (TensorRT-LLM --kv_cache_free_gpu_memory_
  // fraction, default 0.9; its perf-overview runs set 0.95).
  double kv_cache_memory_fraction = 0.9;
  // TensorRT-LLM 1.0's pipeline loop, which updates each micro-batch's
  // requests on the host before it schedules the next
  // (costmodel::HostAfterGpu); later versions overlap the two.
  bool trtllm_sync_pipeline = false;
  // TensorRT-LLM's attention-DP balance (attention_dp_config:
  // enable_balance, off by default): the ranks hold new prompts back until
  // every rank has one, so the ranks prefill side by side instead of one
  // rank's prompt stalling the others' decodes in its own steps
  // (costmodel::EstimateServing).
  bool attention_dp_balance = false;
  // Speculative decoding: draft tokens proposed per decode step
  // (TensorRT-LLM speculative_config num_nextn_predict_layers or
  // max_draft_len, vLLM num_speculative_tokens, SGLang
  // --speculative-num-steps; aiconfigurator's --nextn). Each step runs the
  // drafter nextn times (one draft after the other: the model's MTP layers,
  // reused past its MTP depth, or the EAGLE-3 head) and verifies its drafts
  // in one forward (VerifiedTokens; costmodel::DecodeStep). 0 = off.
  int64_t nextn = 0;
  Drafter drafter = Drafter::kMtp;
  DraftHead draft_head;  // drafter kEagle3 only
  // Tree drafts (SGLang's EAGLE tree, over either drafter): every draft
  // pass after the first runs draft_topk candidates per request
  // (--speculative-eagle-topk), and the verify checks draft_tokens tokens
  // per request: the tree's best draft_tokens − 1 candidates after the
  // last verified token (--speculative-num-draft-tokens). 1 and 0: a chain
  // of nextn drafts, verified as nextn + 1 tokens (VerifiedTokens).
  int64_t draft_topk = 1;
  int64_t draft_tokens = 0;

  int64_t gpus() const { return tp * attention_dp * pp; }
  // Expert tensor parallel size: the attention GPUs of a stage regrouped.
  int64_t moe_tp() const { return tp * attention_dp / ep; }
};

// The MTP depths a deployment loads and runs (speculative decoding): the
// model's first min(nextn, its depths with weights of their own), reused
// past them (TensorRT-LLM's MTP with more draft tokens than layers, vLLM's
// and SGLang's MTP drafters run DeepSeek's one layer N times, and a
// repeated layer is one block: ModelSpec::mtp_weight_depths); 0 when nextn
// is 0.
inline int64_t ServedMtpDepths(const ModelSpec& model,
                               const ServingConfig& config) {
  if (config.drafter != Drafter::kMtp) return 0;
  const int64_t depths = model.mtp_weight_depths();
  if (config.nextn <= 0 || depths <= 0) return 0;
  return config.nextn < depths ? config.nextn : depths;
}

// The drafts a decode step of `config` runs on `model`: nextn with an
// EAGLE-3 head, or where the model has MTP layers to draft with
// (ServedMtpDepths), else none. The one home of that rule for the step's
// cost, its token budget and its output.
inline int64_t ServedDrafts(const ModelSpec& model,
                            const ServingConfig& config) {
  if (config.drafter == Drafter::kEagle3) {
    return std::max<int64_t>(0, config.nextn);
  }
  return ServedMtpDepths(model, config) > 0 ? config.nextn : 0;
}

// Whether the deployment loads and runs an EAGLE-3 head: its drafter, with
// drafts to make. The one home of that rule for the head's weights, cache
// and passes.
inline bool ServedEagle3Head(const ModelSpec& model,
                             const ServingConfig& config) {
  return config.drafter == Drafter::kEagle3 && ServedDrafts(model, config) > 0;
}

// Whether `config` drafts a tree (draft_topk above 1) rather than a chain.
inline bool DraftsTree(const ServingConfig& config) {
  return config.nextn > 0 && config.draft_topk > 1;
}

// Tokens per request a drafting step of `config` verifies: draft_tokens,
// or nextn + 1 for a chain (SGLang's --speculative-num-draft-tokens).
inline int64_t DraftTokens(const ServingConfig& config) {
  return config.draft_tokens > 0 ? config.draft_tokens : config.nextn + 1;
}

// Tokens a decode step of `config` runs per request in its verify: 1
// without drafts (ServedDrafts), else DraftTokens. The one home of that
// rule for the step's rows and its budget.
inline int64_t VerifiedTokens(const ModelSpec& model,
                              const ServingConfig& config) {
  return ServedDrafts(model, config) > 0 ? DraftTokens(config) : 1;
}

// The most candidates per request a draft pass of a tree expands and the
// most tokens its verify checks that meshtune prices (SGLang's documented
// tree configurations use top-k up to 10 and up to 64 draft tokens).
inline constexpr int64_t kMaxDraftTopk = 16;
inline constexpr int64_t kMaxDraftTokens = 256;

// Checks a draft tree: draft_topk in [1, kMaxDraftTopk]; with a top-k of 1
// draft_tokens 0 or nextn + 1 (a chain); above 1, nextn given (not searched
// from per-position rates, `searched_lengths`) and draft_tokens from
// nextn + 1 to what the tree holds, 1 + topk + (nextn − 1)·topk² (SGLang
// keeps the best of its candidates), at most kMaxDraftTokens.
// InvalidArgument naming --draft-topk or --draft-tokens.
Status ValidateDraftTree(int64_t nextn, int64_t draft_topk,
                         int64_t draft_tokens, bool searched_lengths);

// Output tokens one decode step of `nextn` drafts emits per request on
// average: 1 without drafts, else 1 plus the accepted drafts,
// nextn_accepted, or from the per-position rates Σ_{k ≤ nextn} Π_{j ≤ k}
// rate_j (positions past the rates given accept none).
double DecodeProgress(const ServingWorkload& workload, int64_t nextn);

// Checks `config` against `model` and `gpu`: sizes positive; tp divides the
// attention heads and the query groups divide or are divided by tp (a KV
// head is then replicated, as vLLM and TensorRT-LLM do); pp at most the
// layers; ep divides num_experts and tp·attention_dp (ep 1 on dense
// models); the weight and KV precisions exist on the GPU (FP8 needs FP8
// tensor cores, NVFP4 Blackwell's FP4); nextn in [0, kMaxNextn], above 0
// only with a drafter the model can run (ValidateSpeculation). `where`
// prefixes messages.
Status ValidateServingConfig(const ModelSpec& model, const GpuSpec& gpu,
                             const ServingConfig& config,
                             const std::string& where = "");

// The most draft tokens per step meshtune prices (the engines' MTP
// examples use 1 to 3; acceptance falls with every further position).
inline constexpr int64_t kMaxNextn = 8;

// Checks a workload: isl and osl at least 1, concurrency at least 0,
// isl + osl within 2^31 tokens, prefix in [0, isl - 1] (a prefill
// computes at least the prompt's last token) and prefix_pool in [1, 2^20].
Status ValidateServingWorkload(const ServingWorkload& workload);

// Checks speculative decoding's inputs together: nextn in [0, kMaxNextn];
// with the MTP drafter, nextn or rates only on a model with MTP layers;
// with an EAGLE-3 head, a target with standard (not MLA) attention, a
// checkpoint of safe characters, the head's MLP width given where the
// target is MoE, its sizes in range, and nextn or rates to draft with; the
// workload's nextn_accepted a finite number in [0, nextn] (0 when nextn is
// 0), or its per-position rates each in [0, 1], at most kMaxNextn, without
// nextn_accepted. InvalidArgument naming --nextn, --nextn-accepted,
// --nextn-accept-rates, --spec-method or the --draft- flag.
Status ValidateSpeculation(const ModelSpec& model,
                           const ServingWorkload& workload, int64_t nextn,
                           Drafter drafter = Drafter::kMtp,
                           const DraftHead& head = DraftHead());

// Compact form for reports: "tp4 pp1 adp2 ep8 fp8 kv:fp8 batch:256
// nextn:3" (batch and nextn omitted when 0; "eagle3:3" for an EAGLE-3
// head's drafts).
std::string ToString(const ServingConfig& config);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_SERVING_SPEC_H_
