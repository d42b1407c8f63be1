// The serving cost model (issue 22; docs/serving.md): memory, prefill and
// decode times of one replica of a model served with continuous (in-flight)
// batching, on the hardware description and calibration training uses.
// serving_loads.h builds the load models (a concurrency, a request rate,
// benchmarks pass by pass, disaggregated workers) on these times.
//
// Memory per GPU (the most loaded pipeline stage):
//   weights   every layer's local share at WeightBytesPerElement(weights):
//             mixer and dense MLP / tp, shared experts / tp, the local
//             E/ep routed experts / moe_tp; norms and the router 16-bit;
//             the embedding (first stage) and the output layer (last) 16-bit
//             / tp, as FP8/FP4 checkpoints keep them;
//   runtime   activations of one forward of max_num_tokens tokens (the
//             largest prefill chunk) and the logits of a batch;
//   KV cache  what is left, times config.kv_cache_memory_fraction
//             (TensorRT-LLM's kv_cache_free_gpu_mem_fraction; vLLM's
//             gpu_memory_utilization plays the same role), in whole
//             sequences of isl + osl tokens, each in whole pages of the
//             engine's (kv_cache.h, KvBlockTokens); a cached prefix's
//             whole pages are held once per distinct prefix
//             (prefix_pool copies) and not by each sequence.
// Time: every GEMM of a layer (QKV, out-projection, fc1, fc2, each expert's
// pair, at its own shape) is a roofline, max(its GEMM time from the
// calibration, streaming its local weights from HBM once at
// kServingHbmFraction of the datasheet bandwidth), so a decode step
// at a small batch reads weights and a prefill computes; collectives are
// the calibration's bandwidth time plus a one-shot latency of two link hops
// (serving engines' custom all-reduce, not NCCL's ring), all-reduces above
// kCustomAllReduceMaxBytes NCCL's time:
//   prefill of T tokens  Σ layers: GEMMs with m = T (the routed experts as
//                        one grouped GEMM per projection, as in decode),
//                        causal flash attention, the elementwise kernels'
//                        bytes (fused residual add and RMSNorm, RoPE,
//                        the MLP's activation, MoE permutes; ElementwiseBytes
//                        in serving_model.cc), the tp all-reduces of T·h
//                        16-bit activations (two per GPT layer), with
//                        attention DP the MoE exchange (MoeExchangeOf: an
//                        all-gather and a reduce-scatter, or the dispatch
//                        and combine all-to-alls);
//   decode step, batch B Σ layers: the same GEMMs with m = B (attention and
//                        dense MLP m = B / attention_dp per rank; routed
//                        experts get B·k/E tokens each, and only the local
//                        experts some token picked are read: E/ep ·
//                        (1 − (1 − k/E)^B) of them), the KV cache of the
//                        rank's B / attention_dp sequences at the mean
//                        context read once, the elementwise kernels of B
//                        tokens, the same collectives at m = B,
//                        plus the engine's StepOverhead_s (scheduling,
//                        sampling, launching the step's CUDA graph).
//   pipeline             pp stages each take B/pp sequences per micro-batch:
//                        a token every pp stage times (+ the p2p hops).
//   speculative decoding (ServingConfig::nextn = N > 0) a step
//                        verifies 1 + N tokens per sequence in one forward:
//                        the GEMMs, experts, collectives and output layer
//                        at m = B·(1 + N), the KV cache still read once per
//                        sequence (attention FLOPs × (1 + N)); then drafts
//                        N tokens by N passes of one MTP depth at m = B,
//                        or of an EAGLE-3 head's layer and output layer at
//                        m = B after its fc over the B·(1 + N) verified
//                        tokens, 16-bit (draft_s). A draft tree verifies
//                        draft_tokens instead of 1 + N per sequence and
//                        runs its passes after the first on draft_topk
//                        candidates per sequence (VerifiedTokens). A
//                        prefill also runs the drafter over the prompt,
//                        and memory holds its weights and KV cache
//                        (ServedMtpDepths, search_spaces::Eagle3HeadModel).
//                        The step emits
//                        1 + nextn_accepted tokens per sequence on average
//                        (search_spaces::DecodeProgress; serving_loads.h).
// Units: seconds, bytes, tokens.
#ifndef MESHTUNE_COSTMODEL_SERVING_MODEL_H_
#define MESHTUNE_COSTMODEL_SERVING_MODEL_H_

#include <cstdint>
#include <string>

#include "costmodel/calibration.h"
#include "costmodel/closed_loop.h"
#include "costmodel/model_options.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/serving_spec.h"

namespace meshtune::costmodel {

// Sequences in flight per attention-DP rank when the config sets no
// max_batch (TensorRT-LLM's default max_batch_size).
inline constexpr int64_t kDefaultMaxBatch = 2048;
// Tokens one engine step processes at most (TensorRT-LLM's default
// max_num_tokens): the prefill chunk, and so the runtime activations.
inline constexpr int64_t kMaxNumTokens = 8192;
// Sequences a replica runs at most: the config's max_batch, or
// kDefaultMaxBatch per attention-DP rank.
int64_t MaxBatch(const search_spaces::ServingConfig& c);
// A step's token budget per attention-DP rank and pipeline micro-batch:
// the config's max_num_tokens, or kMaxNumTokens.
int64_t MaxNumTokens(const search_spaces::ServingConfig& c);
// Host time of one engine step that the GPU waits for: the scheduler,
// sampling and launching the step (a CUDA graph). TensorRT-LLM's C++
// runtime: an assumed millisecond, which its aiconfigurator TPOTs at up to
// 8 clients leave in place (median residual 0.0 ms); vLLM and SGLang pay
// more, fitted as the median TPOT residual of their aiconfigurator rows at
// up to 8 clients over TensorRT-LLM's (vLLM +1.5 ms on LLaMA-3.1 70B,
// SGLang +2.4 and +3.0 ms on DeepSeek-R1 and -V3; docs/serving.md §5).
inline constexpr double kTensorRtLlmStepOverhead_s = 1.0e-3;
inline constexpr double kVllmStepOverhead_s = 2.5e-3;
inline constexpr double kSglangStepOverhead_s = 3.5e-3;
double StepOverhead_s(search_spaces::ServingEngine engine);
// Host work of one engine step per running request in TensorRT-LLM's
// PyTorch executor loop (preparing the request's inputs, the sampler's
// bookkeeping, updating and checking it), on an x86 host: 35 us, fitted on
// the throughput tables of TensorRT-LLM 1.0 to 1.2 (perf-overview.md), whose
// Qwen3-30B-A3B runs on B200, B300, GB200 and GB300 at 700 to 2 048
// running requests the host bounds (docs/serving.md §5: 20 to 45 us fit
// them one by one; 35 us minimises their tables' throughput error). A
// profile measured less: TensorRT-LLM PR 10273
// (github.com/NVIDIA/TensorRT-LLM/pull/10273) gives a mean host step of
// 45.11 ms for GPT-OSS-120B at 1 536 requests per attention-DP rank on
// GB200, 29.4 us a request on Grace, 19.6 us on x86 over the Grace launch
// factor 1.5 (ClusterSpec::host_launch_factor). The overlap scheduler runs
// it beside the GPU's step, so a step lasts the longer of the two
// (DecodeBreakdown::host_s).
inline constexpr double kTensorRtLlmHostPerRequest_s = 35e-6;
// The host work of one step of `requests` running requests on one
// attention-DP rank (its own executor process): TensorRT-LLM's PyTorch
// flow pays kTensorRtLlmHostPerRequest_s for each, times the host's launch
// factor; 0 for its C++ executor and for vLLM and SGLang, whose
// per-request host time is not measured (StepOverhead_s holds what their
// steps wait for at small batches).
double HostStepTime_s(search_spaces::ServingEngine engine,
                      const search_spaces::ClusterSpec& cluster,
                      double requests);
// Whether the engine's host works through a step's requests after the
// GPU's step instead of beside it: TensorRT-LLM 1.0's pipeline loop
// (ServingConfig::trtllm_sync_pipeline with pp > 1). Its PyTorch executor
// overlaps them with one pipeline stage (the overlap scheduler runs the
// host's work for step i while the GPU runs step i + 1), but with pipeline
// stages 1.0 runs PyExecutor._executor_loop_pp, whose last stage forwards a
// micro-batch, samples it and updates its requests on the host before it
// schedules the next ("Forward + (decoding) pass ([should be] async)"), so
// every micro-batch pays its requests' host work after its GPU work; later
// versions sample asynchronously and update the previous micro-batch
// meanwhile. The C++ executor and vLLM and SGLang pay no per-request host
// time (HostStepTime_s).
bool HostAfterGpu(const search_spaces::ServingConfig& c);
// How the engine admits requests into its KV cache: TensorRT-LLM's default
// capacity scheduler (GUARANTEED_NO_EVICT) reserves each request's whole
// length, vLLM and SGLang preempt the newest request (closed_loop.h).
KvAdmission KvAdmissionOf(search_spaces::ServingEngine engine);
// How an attention-DP replica's tokens reach the experts of an MoE layer
// and come back.
//   kAllGather  every rank gathers all ranks' tokens (S = g·T·h bytes at the
//               gathered precision, nccl-tests' all-gather convention),
//               runs its local experts on them and reduce-scatters the 16-bit
//               outputs: the default of TensorRT-LLM's fused MoE with
//               attention DP ("[fp4_allgather] + FusedMoe + reducescatter",
//               tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py),
//               of vLLM's allgather_reducescatter all2all backend and of
//               SGLang's DP attention without DeepEP;
//   kAllToAll   each rank sends its tokens' k routed copies (DeepEP, the
//               engines' wide-EP all-to-alls), as MoeExchangeOf says.
enum class MoeExchange { kAllGather, kAllToAll };
// kAllToAll where the engines switch to it: an MoE group larger than one
// NVLink domain (multi-node EP runs DeepEP or wide EP), or TensorRT-LLM
// with ep > top-k on a multi-node NVLink domain (GB200/GB300 NVL72: its
// MNNVL all-to-all, enabled exactly then); kAllGather otherwise.
MoeExchange MoeExchangeOf(const search_spaces::ModelSpec& m,
                          const search_spaces::ServingConfig& c,
                          const search_spaces::ClusterSpec& cluster);
// Bytes per element of the activations gathered by kAllGather: TensorRT-LLM
// quantizes before its all-gather (NVFP4 0.5 + 1/16 of scales, per-tensor
// FP8 1); DeepSeek's block-scaled FP8, BF16 and the other engines gather
// 16-bit activations.
double GatheredActivationBytes(const search_spaces::ServingConfig& c);
// The largest all-reduce the serving engines run with their own one- and
// two-shot kernels; larger ones go to NCCL (vLLM's and SGLang's
// CustomAllreduce max_size, 8 MiB: vllm/distributed/device_communicators/
// custom_all_reduce.py).
inline constexpr double kCustomAllReduceMaxBytes = 8.0 * 1024 * 1024;
// Fraction of the datasheet HBM bandwidth that a serving step's
// memory-bound kernels reach (decode GEMMs streaming their weights, the
// KV-cache reads, norms): aiconfigurator's mem_bw_empirical_scaling_factor,
// "a correction based on observations" of NVIDIA's serving kernels, 0.8 on
// every GPU (github.com/ai-dynamo/aiconfigurator, systems/*.yaml). Below
// the 0.9 that large streaming copies reach (GpuSpec::hbm_efficiency),
// which training keeps.
inline constexpr double kServingHbmFraction = 0.8;
// The fixed time of one kernel of a decode step on top of its bytes or
// FLOPs (launch inside the CUDA graph, ramp-up and tail):
// aiconfigurator's mem_empirical_constant_latency, 3 us on every GPU, which
// it adds to every memory-bound op (query_mem_op: bytes / (0.8 · bandwidth)
// + 3 us; github.com/ai-dynamo/aiconfigurator, systems/*.yaml). A decode
// layer of a dense model runs eight such kernels besides its all-reduces.
inline constexpr double kKernelLatency_s = 3.0e-6;

// Where a decode step's time goes, on one GPU, one step (seconds).
struct DecodeBreakdown {
  double weights_s = 0;      // linear layers bound by reading their weights,
                             // and every kernel's kKernelLatency_s
  double compute_s = 0;      // linear layers bound by their GEMMs
  double kv_cache_s = 0;     // attention: reading the KV cache (or its FLOPs)
  double elementwise_s = 0;  // norms, RoPE, activations, MoE permutes
  double tp_comm_s = 0;      // tp all-reduces
  double ep_comm_s = 0;      // MoE dispatch and combine
  double pp_comm_s = 0;      // pipeline p2p hops
  double overhead_s = 0;     // StepOverhead_s(config.engine)
  // Speculative decoding's draft passes (ServingConfig::nextn): nextn
  // passes of an MTP depth at the batch; the verify's 1 + nextn tokens per
  // request are in the terms above.
  double draft_s = 0;
  // HostStepTime_s of the step's requests, which the engine's host works
  // through beside the GPU's step, or after it (host_after_gpu).
  double host_s = 0;
  // TensorRT-LLM's pipeline loop (HostAfterGpu): the step is the sum.
  bool host_after_gpu = false;
  // The GPU's side of the step: every term above.
  double gpu_s() const {
    return weights_s + compute_s + kv_cache_s + elementwise_s + tp_comm_s +
           ep_comm_s + pp_comm_s + overhead_s + draft_s;
  }
  // The step: the GPU's side or the host's, whichever is longer, or both
  // one after the other.
  double total_s() const {
    return PassWithHost_s(gpu_s(), host_s, host_after_gpu);
  }
};

struct ServingEstimate {
  // Memory per GPU of the most loaded stage, bytes.
  double weight_bytes = 0;
  double runtime_bytes = 0;
  double kv_cache_bytes = 0;         // the cache's share of the memory
  double kv_bytes_per_sequence = 0;  // one sequence of isl + osl tokens,
                                     // in whole pages (KvBlockTokens)
  int64_t kv_block_tokens = 1;       // the engine's page, tokens
  // A shared prefix (ServingWorkload::prefix, prefix_pool): the tokens of
  // its whole pages, which every sequence shares instead of holding, and
  // the bytes its prefix_pool copies take of each rank's cache.
  int64_t kv_shared_prefix_tokens = 0;
  double kv_shared_prefix_bytes = 0;
  // Sequences the replica's KV cache holds (over its attention-DP ranks),
  // and the batch the estimate ran at.
  int64_t max_sequences = 0;
  int64_t batch = 0;
  bool fits = false;
  std::string infeasible_reason;  // empty when it fits

  int64_t replicas = 0;
  double prefill_s = 0;    // one request's prefill alone
  DecodeBreakdown decode;  // one decode step at `batch`, mean context
  double step_s = 0;       // decode step + the prefill share (serving_loads.h)
  double ttft_s = 0;
  double tpot_s = 0;
  // The mean gap between any two tokens of a request, pooled over the
  // requests (closed_loop.h): a simulated benchmark's; 0 elsewhere, where
  // it is tpot_s (every request one length).
  double itl_s = 0;
  // Output tokens per second: the deployment, per GPU, per user (1/TPOT).
  double output_tokens_per_s = 0;
  double output_tokens_per_s_per_gpu = 0;
  double output_tokens_per_s_per_user = 0;
};

// Routed experts a batch of `tokens` tokens touches, expected, when each
// token picks `topk` of `experts` uniformly: experts · (1 − (1 − k/E)^T).
// A decode step reads only these experts' weights.
double ExpectedActiveExperts(int64_t experts, int64_t topk, double tokens);

// The memory part of EstimateServing (serving_loads.h), per GPU of the most
// loaded stage: weight_bytes, runtime_bytes, kv_cache_bytes,
// kv_bytes_per_sequence and max_sequences, with infeasible_reason set when the
// weights or one sequence do not fit; no batch, times or replicas.
ServingEstimate EstimateServingMemory(
    const search_spaces::ModelSpec& model,
    const search_spaces::ClusterSpec& cluster,
    const search_spaces::ServingWorkload& workload,
    const search_spaces::ServingConfig& config);

// Seconds to prefill `tokens` tokens of `sequences` sequences of equal
// length (tokens / sequences each) on one replica, one pipeline stage after
// another. With attention DP each prompt is prefilled whole on one rank and
// the ranks meet at every MoE layer, so the time is the busiest rank's,
// the one with ceil(sequences / adp) prompts; the routed experts see every
// rank's tokens. A sliding-window layer's queries attend to at most its
// window of keys where the engine keeps the window (ServedWindow; the
// training compute model's count).
double PrefillTime_s(const search_spaces::ModelSpec& model,
                     const search_spaces::ClusterSpec& cluster,
                     const search_spaces::ServingConfig& config, int64_t tokens,
                     int64_t sequences, const Calibration& calibration,
                     const ModelOptions& options = ModelOptions());

// Seconds a chunk of `chunk` prompt tokens adds to its pass by attending to
// the `prior` tokens of the same prompt that earlier passes prefilled:
// chunked prefill (vLLM's max_num_batched_tokens, TensorRT-LLM's chunked
// context, SGLang's chunked_prefill_size) runs each chunk's queries against
// all the prompt's keys so far, and PrefillTime_s prices a chunk as a
// prompt of its own, causal over itself. One pass of the heaviest pipeline
// stage: every attention layer's chunk x prior block (not causal), at the
// calibration's flash-attention rate; a sliding-window layer's chunk sees at
// most its window of earlier keys where the engine keeps the window
// (ServedWindow), as PrefillTime_s's attention does.
double ChunkContextTime_s(const search_spaces::ModelSpec& model,
                          const search_spaces::ServingConfig& config,
                          int64_t chunk, int64_t prior,
                          const Calibration& calibration,
                          const ModelOptions& options = ModelOptions());

// Seconds to prefill `sequences` prompts of `isl` tokens each whose first
// `cached` tokens the engine's prefix cache holds
// (ServingWorkload::prefix): PrefillTime_s of their isl − cached new tokens,
// plus each new block of queries against its prompt's cached keys,
// ChunkContextTime_s(isl − cached, cached) through every pipeline stage,
// for each of the busiest attention-DP rank's ceil(sequences / adp)
// prompts (a cached prefix is to a prefill what an earlier chunk is to
// chunked prefill). PrefillTime_s(sequences · isl, sequences) when cached
// is 0.
double PromptsPrefillTime_s(const search_spaces::ModelSpec& model,
                            const search_spaces::ClusterSpec& cluster,
                            const search_spaces::ServingConfig& config,
                            int64_t isl, int64_t cached, int64_t sequences,
                            const Calibration& calibration,
                            const ModelOptions& options = ModelOptions());

// One decode step of `batch` sequences per replica at `context` tokens
// each (the time of a token for each of them).
DecodeBreakdown DecodeStep(const search_spaces::ModelSpec& model,
                           const search_spaces::ClusterSpec& cluster,
                           const search_spaces::ServingConfig& config,
                           int64_t batch, int64_t context,
                           const Calibration& calibration,
                           const ModelOptions& options = ModelOptions());

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_SERVING_MODEL_H_
