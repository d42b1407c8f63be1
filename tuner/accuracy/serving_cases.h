// `tune accuracy` on serving rows: the columns source, commit_or_date,
// model, gpu, num_gpus, tp, pp, ep, dp, precision, framework, isl, osl,
// concurrency, metric, value, notes (docs/accuracy.md "Serving rows"). One
// record becomes a ServingCase (the deployment and the load it ran under),
// which PredictServingCase prices with costmodel::EstimateServing.
//
// Mapping rules (each at its function in serving_cases.cc):
//   model      the part after the last '/', then the preset whose name or
//              alias matches with the checkpoint suffixes (-Instruct, -FP8,
//              -NVFP4, -FP4, -v2, a -MMDD date) dropped
//   gpu        search_spaces::ClusterPresetForGpu; "(beta)" ignored
//   layout     tp, pp, ep and dp (attention data parallel) columns; a blank
//              ep is 1: the experts tensor-parallel over the tp·dp GPUs,
//              TensorRT-LLM's Mapping default when no expert parallelism
//              is given (moe_tp = tp, moe_ep = 1), except in TensorRT-LLM
//              v1.0's perf-overview tables, whose MoE runs enable attention
//              DP and pass --ep: "TP8" is tp 1, dp 8, ep 8; replicas =
//              num_gpus / (tp·pp·dp). aiconfigurator's disaggregated rows
//              give "prefill: P workers x (tpA ppB adpC moe_tpD epE, bsF);
//              decode: ..." in notes
//   precision  FP8/fp8 -> fp8, FP4/fp4/NVFP4 -> nvfp4, BF16/FP16 -> bf16;
//              "not recorded" -> the "gemm=" of notes ("gemm=-", no GEMM
//              quantization: bf16), else skipped. The KV
//              cache is fp8 with quantised weights on TensorRT-LLM (its FP8
//              and NVFP4 checkpoints quantise it) and 16-bit elsewhere; a
//              note "FP16 KV" or "FP8 KV" wins; a note's
//              "kv_cache_free_gpu_mem_fraction F" sets the cache's share of
//              the free memory (TensorRT-LLM's perf-overview runs: 0.95)
//   engine     the framework column: TensorRT-LLM, SGLang, else vLLM
//              (its step overhead and KV admission, costmodel::
//              StepOverhead_s and KvAdmissionOf); a note "attention DP w/
//              balance" turns on TensorRT-LLM's attention-DP balance
//              (ServingConfig::attention_dp_balance).
//              aiconfigurator's rows (source "ai-dynamo/aiconfigurator")
//              run its generated configs and benchmark: a step budget of
//              the notes' "batch_size field" + isl + 1500 tokens per rank
//              (SGLang: isl + 1500), an FP8 KV cache with quantised
//              weights, and 20 requests per client measured from a fresh
//              burst (aiperf drains its warm-up)
//   load       concurrency column -> that many requests in flight (closed
//              loop, its benchmark simulated pass by pass: the first burst
//              as warm-up, 10 requests per client measured, or the notes'
//              "N requests" (or aiconfigurator's) all measured); "request
//              rate N QPS" in notes -> the benchmark's requests (the
//              notes' "N requests", "N synthetic requests" or
//              "num_requests=N", else 500) arriving at that rate as a
//              Poisson process,
//              "infinite request rate" or "QPS INF" -> all sent at once,
//              either simulated as an open loop
//              (costmodel::EstimateOpenLoopBenchmark); otherwise offline
//              maximum throughput (a
//              `trtllm-bench` run's at the engine sizes it derives,
//              TrtllmBenchEngineSettings)
//   lengths    isl and osl for every request, except TensorRT-LLM's online
//              table's 202/214 workload, a dataset of those means
//              (LengthSpread::kExponential; docs/serving.md §4)
//   metrics    output_tokens_per_s (the deployment),
//              output_tokens_per_s_per_gpu, requests_per_s (throughput);
//              ttft_ms, tpot_ms, itl_ms (latency; ITL is the simulated
//              run's pooled gap, TPOT where every request is one length)
// A row that cannot be predicted is skipped with its reason.
#ifndef MESHTUNE_TUNER_ACCURACY_SERVING_CASES_H_
#define MESHTUNE_TUNER_ACCURACY_SERVING_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/serving_spec.h"
#include "search_spaces/status.h"
#include "tuner/io/csv_reader.h"

namespace meshtune::tuner {

// Columns a serving CSV must have.
const std::vector<std::string>& RequiredServingColumns();
// True when `table` is a serving CSV (it has isl and osl columns).
bool IsServingCsv(const CsvTable& table);

enum class ServingMetric {
  kOutputTokensPerS,
  kOutputTokensPerSPerGpu,
  kRequestsPerS,
  kTtftMs,
  kTpotMs,
  kItlMs,
  kUnknown,
};
// The metric column's spelling; kUnknown for any other.
ServingMetric ServingMetricOf(const std::string& metric);
// True for the throughput metrics, false for the latencies.
bool IsThroughputMetric(ServingMetric metric);

struct ServingCase {
  int64_t line = 0;
  std::string source;
  std::string model_name;
  std::string gpu_name;
  std::string metric_name;
  ServingMetric metric = ServingMetric::kUnknown;
  double published = 0;  // in the metric's unit

  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;
  search_spaces::ServingWorkload workload;
  int64_t num_gpus = 0;
  // Aggregated: the replicas' layout. Disaggregated: the decode workers'.
  search_spaces::ServingConfig config;
  bool disaggregated = false;
  search_spaces::ServingConfig prefill_config;
  int64_t prefill_workers = 0;
  int64_t decode_workers = 0;
  // Open-loop requests/s; infinity = all sent at once ("infinite request
  // rate", "QPS INF"); 0 = closed loop or offline.
  double request_rate = 0;
  // The benchmark's request count ("N requests", "N synthetic requests",
  // "num_requests=N" in notes); 0 = not stated.
  int64_t benchmark_requests = 0;
  // An offline `trtllm-bench throughput` run that left max_batch_size and
  // max_num_tokens to trtllm-bench, which sizes them from the KV cache
  // (TrtllmBenchEngineSettings).
  bool trtllm_bench_settings = false;

  std::string skipped_reason;  // empty when the row is predicted
};

// Maps every record; file-level problems (a missing column, a value cell
// that is not a number) are errors, row-level ones skip the row.
StatusOr<std::vector<ServingCase>> MapServingRows(const CsvTable& table);

// The engine settings `trtllm-bench throughput` gives a run that sets
// neither max_batch_size nor max_num_tokens, from the requests its KV cache
// holds (TensorRT-LLM tensorrt_llm/bench/build/tuning.py, finetune_setting;
// the same from the TRT-engine flow of v0.1x to the PyTorch flow of 1.x):
//   raw batch   b = min(kv_requests, 4096) / pp
//   max_batch   b rounded up to 32 (b < 256; at least 64), 128 (b < 1024),
//               else 256: the batch of one pipeline micro-batch
//   raw tokens  t = min(b · (1 + isl/osl), 32768)
//   max_tokens  t rounded up to 256 (t < 4096; at least 2048), 512
//               (t < 8192), else 1024
struct TrtllmBenchSettings {
  int64_t max_batch_size = 0;
  int64_t max_num_tokens = 0;
};
// kv_requests is fractional, as trtllm-bench's estimate is: 64.4 requests
// round up to 96, 64 to 64.
TrtllmBenchSettings TrtllmBenchEngineSettings(double kv_requests, int64_t isl,
                                              int64_t osl, int64_t pp);

// The requests trtllm-bench believes its KV cache holds, the kv_requests
// above, by its own rough estimate (tensorrt_llm/bench/build/tuning.py,
// calc_engine_setting), not by the cost model's capacity:
//   n        = tp · pp GPUs (trtllm-bench's --tp spans attention DP too)
//   engine   = checkpoint elements · 0.5 (NVFP4), 1 (FP8) or 2 bytes, the
//              elements counted as safetensors stores them: a packed NVFP4
//              byte (two weights) and its FP8 scales are elements too
//   per_tok  = 2 · attention layers · max(tp, kv heads) · head size · KV
//              bytes (1 for FP8, 0.5 for NVFP4, else 2)
//   requests = (n · GPU GiB − engine) · kv fraction / (per_tok · (isl+osl))
// The heads and head size are the Hugging Face config's: MLA models state
// num_key_value_heads = num_attention_heads and no head_dim, so the head
// size is hidden / heads, and the estimate prices DeepSeek-V3's 576-byte
// latent as 2·128·56 = 14 336 elements, 25 times too large; the caps then
// bind where the real cache would hold more. 0 when trtllm-bench would not
// estimate (a checkpoint outside NVFP4, FP8 and 16-bit, which gets
// BuildConfig's defaults, or a Mamba hybrid, whose extra cache term is not
// reproduced): the caller then uses the cost model's capacity.
double TrtllmBenchKvRequests(const ServingCase& c);

struct ServingPrediction {
  double predicted = 0;        // in the metric's unit
  double error_pct = 0;        // (predicted − published) / published · 100
  std::string skipped_reason;  // the case's, or why the model refused it
};

// Prices one mapped case with the datasheet calibration of its cluster
// (docs/serving.md §4 has the load models).
ServingPrediction PredictServingCase(const ServingCase& c);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_SERVING_CASES_H_
