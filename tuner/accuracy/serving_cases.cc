#include "tuner/accuracy/serving_cases.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <regex>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/model_stats.h"
#include "costmodel/serving_loads.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/yaml_util.h"
#include "tuner/accuracy/rules.h"

namespace meshtune::tuner {

using search_spaces::ClusterSpec;
using search_spaces::KvCacheDtype;
using search_spaces::ModelSpec;
using search_spaces::Precision;
using search_spaces::ServingConfig;

namespace {

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(ch));
  return s;
}

bool Contains(const std::string& text, const std::string& what) {
  return Lower(text).find(Lower(what)) != std::string::npos;
}

// A whole non-negative number, or nullopt for a blank or other cell.
std::optional<int64_t> Int(const std::string& cell) {
  if (cell.empty()) return std::nullopt;
  int64_t v = 0;
  for (char ch : cell) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
    if (v > (int64_t{1} << 40)) return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

// The model preset of a serving row's model column: the checkpoint name
// after its organisation, with checkpoint suffixes dropped one at a time.
std::optional<ModelSpec> ServingModelPreset(const std::string& column) {
  std::string name = column.substr(column.rfind('/') + 1);
  static const std::regex kSuffix(R"((-instruct|-fp8|-nvfp4|-fp4|-v2|-\d{4})$)",
                                  std::regex::icase);
  for (int i = 0; i < 6; ++i) {
    if (auto preset = FindModelPreset(name)) return preset;
    const std::string shorter = std::regex_replace(name, kSuffix, "");
    if (shorter == name) break;
    name = shorter;
  }
  return std::nullopt;
}

std::optional<Precision> ServingPrecision(const std::string& cell,
                                          const std::string& notes) {
  std::string text = Lower(cell);
  if (text.empty() || text == "not recorded") {
    static const std::regex kGemm(R"(gemm=([a-z0-9_]+))");
    std::smatch m;
    const std::string n = Lower(notes);
    if (std::regex_search(n, m, kGemm)) {
      text = m[1];
    } else if (Contains(n, "gemm=-")) {
      // aiconfigurator's "-": no GEMM quantization, the checkpoint's own
      // 16-bit weights.
      text = "bf16";
    } else {
      return std::nullopt;
    }
  }
  if (text.rfind("fp8", 0) == 0) return Precision::kFp8;
  if (text.rfind("fp4", 0) == 0 || text.rfind("nvfp4", 0) == 0) {
    return Precision::kNvfp4;
  }
  if (text.rfind("bf16", 0) == 0 || text.rfind("fp16", 0) == 0 ||
      text == "float16") {
    return Precision::kBf16;
  }
  return std::nullopt;
}

// An FP8 row's weights: blockwise-scaled where the model's own FP8
// checkpoint is (DeepSeek-V3 and R1, Kimi-K2: their config.json states
// quantization_config {"quant_method": "fp8", "weight_block_size": [128,
// 128]}, the only FP8 weights these models are published in) or where the
// notes name fp8_block (aiconfigurator's "moe=fp8_block"); per-tensor
// otherwise (ModelOpt's FP8 checkpoints).
Precision ServingFp8Weights(Precision weights, const ModelSpec& model,
                            const std::string& notes) {
  if (weights != Precision::kFp8) return weights;
  const bool native_block =
      model.name == "deepseek-v3" || model.name == "kimi-k2";
  return native_block || Contains(notes, "fp8_block") ? Precision::kFp8Blockwise
                                                      : weights;
}

KvCacheDtype ServingKvCache(Precision weights, const std::string& framework,
                            const std::string& precision_cell,
                            const std::string& notes) {
  const std::string all = precision_cell + " " + notes;
  if (Contains(all, "FP16 KV") || Contains(all, "BF16 KV")) {
    return KvCacheDtype::kBf16;
  }
  if (Contains(all, "FP8 KV") || Contains(all, "kv fp8")) {
    return KvCacheDtype::kFp8;
  }
  const bool trtllm = Contains(framework, "TensorRT-LLM");
  return trtllm && search_spaces::IsQuantized(weights) ? KvCacheDtype::kFp8
                                                       : KvCacheDtype::kBf16;
}

// "P workers x (tpA ppB adpC moe_tpD epE, bsF)" after `phase`.
bool ParseWorker(const std::string& notes, const std::string& phase,
                 int64_t* workers, ServingConfig* c) {
  const std::regex re(phase + R"(: (\d+) workers x \(tp(\d+) pp(\d+) adp(\d+) )"
                              R"(moe_tp(\d+) ep(\d+), bs(\d+)\))");
  std::smatch m;
  if (!std::regex_search(notes, m, re)) return false;
  *workers = std::stoll(m[1]);
  c->tp = std::stoll(m[2]);
  c->pp = std::stoll(m[3]);
  c->attention_dp = std::stoll(m[4]);
  c->ep = std::stoll(m[6]);
  c->max_batch = std::stoll(m[7]) * c->attention_dp;
  return true;
}

// The open-loop request rate of "request rate N QPS"; infinity for
// "infinite request rate" or "QPS INF" (every request sent at once); 0 when
// none is stated.
double RequestRate(const std::string& notes) {
  if (Contains(notes, "infinite request rate") || Contains(notes, "QPS INF")) {
    return std::numeric_limits<double>::infinity();
  }
  static const std::regex kRate(R"(request rate ([0-9.]+) QPS)");
  std::smatch m;
  if (!std::regex_search(notes, m, kRate)) return 0;
  return std::stod(m[1]);
}

// How the lengths of a row's requests spread. TensorRT-LLM's online
// serving table (perf-overview.md, v0.14 behind Triton) ran three
// workloads; its 202/214 one is a dataset of those mean lengths, as the
// table's own numbers show: at QPS INF its runs took 2.8 times as many
// passes (run time over mean ITL, the run time 500 requests over req/s)
// as their 214 mean outputs, where the fixed 467/256 runs took 1.4 times
// their 256 (the queue behind the batch), so a tail of long requests
// decodes nearly alone at the end. Every other row states fixed lengths.
search_spaces::LengthSpread LengthSpreadOf(const std::string& source,
                                           int64_t isl, int64_t osl) {
  const bool online_table = Contains(source, "TensorRT-LLM") &&
                            Contains(source, "Online Serving Measurements");
  return online_table && isl == 202 && osl == 214
             ? search_spaces::LengthSpread::kExponential
             : search_spaces::LengthSpread::kFixed;
}

// The benchmark's request count, "N requests" or "N synthetic requests" in
// notes (the TensorRT-LLM online table's 500), or trtllm-bench's
// "num_requests=N"; 0 when not stated.
int64_t BenchmarkRequests(const std::string& notes) {
  static const std::regex kRequests(
      R"((\d+) (?:synthetic )?requests|num_requests=(\d+))");
  std::smatch m;
  if (!std::regex_search(notes, m, kRequests)) return 0;
  return std::stoll(m[1].matched ? m[1].str() : m[2].str());
}

// The run's "kv_cache_free_gpu_mem_fraction F" in notes (TensorRT-LLM's
// perf-overview runs: 0.95), or 0 when not stated.
double KvCacheMemoryFraction(const std::string& notes) {
  static const std::regex kFraction(
      R"(kv_cache_free_gpu_mem(?:ory)?_fraction ([0-9.]+))");
  std::smatch m;
  if (!std::regex_search(notes, m, kFraction)) return 0;
  const double f = std::stod(m[1]);
  return f > 0 && f <= 1 ? f : 0;
}

// Speculative decoding a row states in notes: "MTP ... nextn=N" (not "no
// MTP"), and its acceptance as "acceptance length L" (accepted = L − 1) or
// "nextn_accepted A"; -1 = not stated.
struct StatedMtp {
  int64_t nextn = 0;
  double accepted = -1;
};
StatedMtp MtpOf(const std::string& notes) {
  static const std::regex kNextn(R"(MTP[^;]*?nextn=(\d+))");
  static const std::regex kLength(R"(acceptance length ([0-9.]+))");
  static const std::regex kAccepted(R"(nextn_accepted ([0-9.]+))");
  StatedMtp mtp;
  std::smatch m;
  if (Contains(notes, "no MTP") || !std::regex_search(notes, m, kNextn)) {
    return mtp;
  }
  mtp.nextn = std::stoll(m[1]);
  if (std::regex_search(notes, m, kLength)) {
    mtp.accepted = std::stod(m[1]) - 1.0;
  } else if (std::regex_search(notes, m, kAccepted)) {
    mtp.accepted = std::stod(m[1]);
  }
  return mtp;
}

std::string Printable(const std::string& s) {
  return search_spaces::yaml_util::Printable(s);
}

// The source of TensorRT-LLM v1.0's perf-overview throughput tables
// (docs/source/performance/perf-overview.md at 00f3768).
constexpr const char* kV10ThroughputTable =
    "perf-overview.md (v1.0 throughput tables)";

// The row's layout, or the reason it has none.
std::string MapLayout(const CsvTable& t, const CsvRecord& r,
                      const std::string& notes, ServingCase* c) {
  if (Contains(notes, "disaggregated")) {
    c->disaggregated = true;
    if (!ParseWorker(notes, "prefill", &c->prefill_workers,
                     &c->prefill_config) ||
        !ParseWorker(notes, "decode", &c->decode_workers, &c->config)) {
      return "disaggregated row without its worker counts and batches in "
             "notes (the source left them blank)";
    }
    const int64_t gpus = c->prefill_workers * c->prefill_config.gpus() +
                         c->decode_workers * c->config.gpus();
    if (c->num_gpus == 0) c->num_gpus = gpus;  // blank: the workers'
    if (gpus != c->num_gpus) {
      return "the prefill and decode workers hold " + std::to_string(gpus) +
             " GPUs, not num_gpus " + std::to_string(c->num_gpus);
    }
    return "";
  }
  if (c->num_gpus < 1) return "num_gpus not stated";
  const auto tp = Int(t.Cell(r, "tp"));
  if (!tp || *tp < 1) return "parallel layout not stated (blank tp)";
  c->config.tp = *tp;
  c->config.pp = Int(t.Cell(r, "pp")).value_or(1);
  c->config.attention_dp = Int(t.Cell(r, "dp")).value_or(1);
  const auto ep = Int(t.Cell(r, "ep"));
  c->config.ep = ep ? *ep : 1;
  if (c->model.is_moe() && !ep && t.Cell(r, "dp").empty() &&
      c->source.find(kV10ThroughputTable) != std::string::npos) {
    // That table's MoE runs set enable_attention_dp and pass --ep (its
    // "Running the Benchmark" section): its "TP8" is 8 attention-DP ranks
    // with the experts over all of them.
    c->config.attention_dp = c->config.tp;
    c->config.ep = c->config.tp;
    c->config.tp = 1;
  }
  if (c->config.pp < 1 || c->config.attention_dp < 1 || c->config.ep < 1) {
    return "pp, dp and ep must be at least 1";
  }
  if (c->num_gpus % c->config.gpus() != 0) {
    return "num_gpus " + std::to_string(c->num_gpus) +
           " is not a multiple of tp·pp·dp = " +
           std::to_string(c->config.gpus());
  }
  return "";
}

// The engine a framework cell names: TensorRT-LLM, SGLang, else vLLM (the
// default engine; MLPerf's and the blogs' rows name TensorRT-LLM).
search_spaces::ServingEngine ServingEngineOf(const std::string& framework) {
  if (Contains(framework, "TensorRT-LLM")) {
    // Built TensorRT engines under the C++ executor: the 0.x engine flow,
    // Triton's backend, NVIDIA's MLPerf submissions.
    const bool cpp = Contains(framework, "TRT engine") ||
                     Contains(framework, "Triton") ||
                     Contains(framework, "MLPerf");
    return cpp ? search_spaces::ServingEngine::kTensorRtLlmCpp
               : search_spaces::ServingEngine::kTensorRtLlm;
  }
  if (Contains(framework, "SGLang")) {
    return search_spaces::ServingEngine::kSglang;
  }
  return search_spaces::ServingEngine::kVllm;
}

// aiconfigurator's measured serving points (its silicon_sample.csv).
constexpr const char* kAiconfiguratorSource = "ai-dynamo/aiconfigurator";
// The prefill headroom aiconfigurator's generated engine configs add to
// the prompt in a step's token budget (generator/rule_plugin/benchmark/
// {trtllm,vllm,sglang}.rule: isl + 1500).
constexpr int64_t kAiconfiguratorPrefillHeadroom = 1500;
// Requests its benchmark measures per client, after a warm-up of two per
// client that it drains first (generator/config/backend_templates/
// benchmark/bench_run.sh.j2: aiperf --num-requests C·20
// --warmup-request-count C·2).
constexpr int64_t kAiconfiguratorRequestsPerClient = 20;

// The layout an aiconfigurator point's id names, "..._tpT_epE_N"
// (TensorRT-LLM's tp_size T, the GPUs of the replica, and moe_ep_size E),
// where the columns contradict it. Its 2026-04-06 dump writes the columns
// of every point with E > 1 as tp_size (or attention_dp_size) T · E and
// moe_tp_size T, T · E GPUs, while those points' measured values are the
// 2026-03-25 dump's points of the id's layout to the last digit
// (DeepSeek-R1 FP8 on H200, 8192/1024 at 4 clients, "tp8_ep8": 595.596 ms
// TTFT and 8.586 ms TPOT in both, one at tp 64, the other at tp 8 on 8
// GPUs). The id's layout is then the deployment: T GPUs, attention over T
// by TP or by attention DP as the columns have it, the experts over E of
// them (MoE TP T/E). Rows whose columns agree with their id, or whose id
// names no layout, keep their columns.
void ApplyIdLayout(const std::string& notes, ServingCase* c) {
  static const std::regex kIdLayout(R"(id=[^;]*_tp(\d+)_ep(\d+)_\d+;)");
  std::smatch m;
  if (!std::regex_search(notes, m, kIdLayout)) return;
  const int64_t gpus = std::stoll(m[1]);
  const int64_t ep = std::stoll(m[2]);
  ServingConfig& config = c->config;
  const int64_t attention = config.tp * config.attention_dp;
  if (ep < 2 || config.pp != 1 || config.ep != ep || attention != gpus * ep ||
      c->num_gpus != attention) {
    return;
  }
  if (config.attention_dp > 1) {
    config.attention_dp = gpus;
  } else {
    config.tp = gpus;
  }
  c->num_gpus = gpus;
}

// How aiconfigurator deployed and measured its points (docs/serving.md
// §4): the engine settings its generator writes and the benchmark its
// scripts run.
//   - The layout its id names where its columns contradict it
//     (ApplyIdLayout);
//   - The step's token budget per attention-DP rank: max_batch_size + isl
//     + 1500 (TensorRT-LLM max_num_tokens, vLLM max-num-batched-tokens),
//     isl + 1500 (SGLang max-prefill-tokens), max_batch_size being the
//     row's "batch_size field" (per rank);
//   - quantized checkpoints serve an FP8 KV cache on every backend
//     (aic-core sdk/models/helpers.py infers kvcache fp8 from fp8,
//     fp8_block and nvfp4 checkpoints, and the generator passes it on);
//   - aiperf drains its warm-up, so the measured requests start with a
//     fresh burst of C: C·20 requests, none of them warm-up.
void ApplyAiconfiguratorProtocol(const std::string& framework,
                                 const std::string& notes, ServingCase* c) {
  if (!c->disaggregated) {
    ApplyIdLayout(notes, c);
    static const std::regex kBatch(R"(batch_size field=(\d+))");
    std::smatch m;
    const int64_t per_rank_batch =
        std::regex_search(notes, m, kBatch)
            ? std::stoll(m[1])
            : c->workload.concurrency / c->config.attention_dp;
    c->config.max_num_tokens =
        c->workload.isl + kAiconfiguratorPrefillHeadroom +
        (Contains(framework, "SGLang") ? 0 : per_rank_batch);
  }
  if (search_spaces::IsQuantized(c->config.weights)) {
    c->config.kv_cache = KvCacheDtype::kFp8;
    c->prefill_config.kv_cache = KvCacheDtype::kFp8;
  }
  if (c->workload.concurrency > 0 && c->benchmark_requests == 0) {
    c->benchmark_requests =
        kAiconfiguratorRequestsPerClient * c->workload.concurrency;
  }
}

// Maps one record; a non-empty return is the reason it is skipped.
std::string MapRecord(const CsvTable& t, const CsvRecord& r,
                      std::map<std::string, StatusOr<ClusterSpec>>* clusters,
                      ServingCase* c) {
  const std::string notes = t.Cell(r, "notes");
  if (c->metric == ServingMetric::kUnknown) {
    return "metric '" + Printable(c->metric_name) +
           "' is not one tune accuracy compares for serving (known: "
           "output_tokens_per_s, output_tokens_per_s_per_gpu, "
           "requests_per_s, ttft_ms, tpot_ms, itl_ms)";
  }
  const auto model = ServingModelPreset(c->model_name);
  if (!model) return "no model preset for '" + Printable(c->model_name) + "'";
  c->model = *model;
  // Speculative decoding is priced where the row states it and its
  // acceptance, which depends on the traffic (docs/serving.md §3); a run
  // that speculated at an acceptance the source leaves out cannot be.
  const StatedMtp mtp = MtpOf(notes);
  if (mtp.nextn > 0 && mtp.accepted < 0) {
    return "ran MTP speculative decoding (nextn=" + std::to_string(mtp.nextn) +
           ") at an acceptance the source does not state";
  }
  c->config.nextn = mtp.nextn;
  c->prefill_config.nextn = mtp.nextn;
  c->workload.nextn_accepted = std::max(0.0, mtp.accepted);
  std::string gpu = c->gpu_name;
  const size_t beta = Lower(gpu).find("(beta)");
  if (beta != std::string::npos) gpu.erase(beta);
  const std::string preset = search_spaces::ClusterPresetForGpu(gpu);
  if (preset.empty()) {
    return "no cluster preset for GPU '" + Printable(c->gpu_name) + "'";
  }
  auto it = clusters->find(preset);
  if (it == clusters->end()) {
    it = clusters->emplace(preset, search_spaces::ResolveCluster(preset)).first;
  }
  if (!it->second.ok()) return "cluster preset '" + preset + "' not built in";
  c->cluster = it->second.value();
  const auto isl = Int(t.Cell(r, "isl"));
  const auto osl = Int(t.Cell(r, "osl"));
  if (!isl || !osl || *isl < 1 || *osl < 1) {
    return "isl/osl not stated (a variable-length dataset)";
  }
  c->workload.isl = *isl;
  c->workload.osl = *osl;
  c->workload.concurrency = Int(t.Cell(r, "concurrency")).value_or(0);
  c->workload.lengths = LengthSpreadOf(c->source, *isl, *osl);
  c->request_rate = RequestRate(notes);
  c->benchmark_requests = BenchmarkRequests(notes);
  // Blank on some disaggregated rows: their workers' GPUs (MapLayout).
  c->num_gpus = Int(t.Cell(r, "num_gpus")).value_or(0);
  const std::string precision_cell = t.Cell(r, "precision");
  const auto precision = ServingPrecision(precision_cell, notes);
  if (!precision) {
    return "unknown precision '" + Printable(precision_cell) +
           "' (known: bf16, fp16, fp8, fp4/nvfp4)";
  }
  std::string reason = MapLayout(t, r, notes, c);
  if (!reason.empty()) return reason;
  const KvCacheDtype kv =
      ServingKvCache(*precision, t.Cell(r, "framework"), precision_cell, notes);
  const double fraction = KvCacheMemoryFraction(notes);
  const Precision weights = ServingFp8Weights(*precision, c->model, notes);
  for (ServingConfig* sc : {&c->config, &c->prefill_config}) {
    sc->weights = weights;
    sc->kv_cache = kv;
    if (fraction > 0) sc->kv_cache_memory_fraction = fraction;
  }
  const std::string framework = t.Cell(r, "framework");
  c->config.engine = ServingEngineOf(framework);
  c->config.trtllm_sync_pipeline = Contains(framework, "TensorRT-LLM 1.0");
  c->prefill_config.engine = c->config.engine;
  c->prefill_config.trtllm_sync_pipeline = c->config.trtllm_sync_pipeline;
  // "attention DP w/ balance": the developer guide's DeepSeek runs set
  // attention_dp_config.enable_balance.
  c->config.attention_dp_balance = Contains(notes, "attention DP w/ balance");
  if (c->source.find(kAiconfiguratorSource) != std::string::npos) {
    ApplyAiconfiguratorProtocol(framework, notes, c);
  }
  c->trtllm_bench_settings =
      Contains(framework, "trtllm-bench") && !c->disaggregated &&
      c->workload.concurrency == 0 && c->request_rate == 0;
  const Status valid =
      search_spaces::ValidateServingConfig(c->model, c->cluster.gpu, c->config);
  if (!valid.ok()) return valid.message();
  if (c->disaggregated) {
    const Status p = search_spaces::ValidateServingConfig(
        c->model, c->cluster.gpu, c->prefill_config);
    if (!p.ok()) return "prefill: " + p.message();
  }
  return "";
}

}  // namespace

const std::vector<std::string>& RequiredServingColumns() {
  static const std::vector<std::string> kColumns = {
      "source",      "model",  "gpu",       "num_gpus",  "tp",  "pp",
      "ep",          "dp",     "precision", "framework", "isl", "osl",
      "concurrency", "metric", "value",     "notes"};
  return kColumns;
}

bool IsServingCsv(const CsvTable& table) {
  return table.Column("isl") >= 0 && table.Column("osl") >= 0;
}

ServingMetric ServingMetricOf(const std::string& metric) {
  if (metric == "output_tokens_per_s") return ServingMetric::kOutputTokensPerS;
  if (metric == "output_tokens_per_s_per_gpu") {
    return ServingMetric::kOutputTokensPerSPerGpu;
  }
  if (metric == "requests_per_s") return ServingMetric::kRequestsPerS;
  if (metric == "ttft_ms") return ServingMetric::kTtftMs;
  if (metric == "tpot_ms") return ServingMetric::kTpotMs;
  if (metric == "itl_ms") return ServingMetric::kItlMs;
  return ServingMetric::kUnknown;
}

bool IsThroughputMetric(ServingMetric metric) {
  return metric == ServingMetric::kOutputTokensPerS ||
         metric == ServingMetric::kOutputTokensPerSPerGpu ||
         metric == ServingMetric::kRequestsPerS;
}

StatusOr<std::vector<ServingCase>> MapServingRows(const CsvTable& table) {
  for (const std::string& col : RequiredServingColumns()) {
    if (table.Column(col) < 0) {
      return Status::InvalidArgument(
          table.source() + ": serving CSV has no column '" + col + "'",
          "give it the serving columns of docs/accuracy.md (\"Serving rows\")");
    }
  }
  std::map<std::string, StatusOr<ClusterSpec>> clusters;
  std::vector<ServingCase> cases;
  for (const CsvRecord& r : table.records()) {
    ServingCase c;
    c.line = r.line;
    c.source = table.Cell(r, "source");
    c.model_name = table.Cell(r, "model");
    c.gpu_name = table.Cell(r, "gpu");
    c.metric_name = table.Cell(r, "metric");
    c.metric = ServingMetricOf(c.metric_name);
    const std::string value = table.Cell(r, "value");
    char* end = nullptr;
    c.published = std::strtod(value.c_str(), &end);
    if (value.empty() || end == nullptr || *end != '\0' ||
        !std::isfinite(c.published) || c.published <= 0) {
      return Status::InvalidArgument(table.Where(r) + ": value '" +
                                         Printable(value) +
                                         "' is not a positive number",
                                     "write the measurement as a plain number");
    }
    c.skipped_reason = MapRecord(table, r, &clusters, &c);
    cases.push_back(std::move(c));
  }
  return cases;
}

namespace {

// Requests of an open-loop benchmark whose notes state no count (the
// TensorRT-LLM online table's 500).
constexpr int64_t kDefaultBenchmarkRequests = 500;

// Times of the load model (docs/serving.md §4), seconds and requests/s.
struct LoadPoint {
  double ttft_s = 0;
  double tpot_s = 0;
  double itl_s = 0;  // 0 = tpot_s
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
};

// Bytes trtllm-bench prices a checkpoint element at (tuning.py's
// BYTES_PER_ELEM by the checkpoint's quantization), 0 for a quantization
// it does not tune.
double TrtllmBenchBytesPerElement(Precision p) {
  switch (p) {
    case Precision::kNvfp4:
      return 0.5;
    case Precision::kFp8:
    case Precision::kFp8Tensorwise:
    case Precision::kFp8Blockwise:
      return 1.0;
    case Precision::kBf16:
    case Precision::kFp16:
      return 2.0;
    case Precision::kMxfp8:
      return 0.0;
  }
  return 0.0;
}

// The replica's config under trtllm-bench's settings
// (TrtllmBenchEngineSettings), each attention-DP rank scheduling its own
// requests: max_batch_size per rank and micro-batch, max_num_tokens per
// rank, from the KV requests trtllm-bench itself estimates
// (TrtllmBenchKvRequests; the cost model's capacity where it would not
// estimate). The cache the run then admits into is the cost model's.
ServingConfig TrtllmBenchConfig(const ServingCase& c) {
  ServingConfig config = c.config;
  const costmodel::ServingEstimate capacity = costmodel::EstimateServingMemory(
      c.model, c.cluster, c.workload, c.config);
  if (capacity.max_sequences < 1) return config;  // refused later
  const double estimated = TrtllmBenchKvRequests(c);
  const double kv_requests = estimated >= 1.0
                                 ? estimated
                                 : static_cast<double>(capacity.max_sequences);
  const TrtllmBenchSettings s = TrtllmBenchEngineSettings(
      kv_requests, c.workload.isl, c.workload.osl, c.config.pp);
  config.max_batch = s.max_batch_size * c.config.pp * c.config.attention_dp;
  config.max_num_tokens = s.max_num_tokens;
  return config;
}

// Closed loop of `concurrency` clients over an aggregated deployment, or
// offline (concurrency 0), from EstimateServing.
std::optional<LoadPoint> Aggregated(const ServingCase& c,
                                    const costmodel::Calibration& cal,
                                    int64_t concurrency, std::string* why) {
  search_spaces::ServingWorkload w = c.workload;
  w.concurrency = concurrency;
  // A closed loop is its benchmark: the notes' "N requests" all measured,
  // else the steady state (docs/serving.md §4).
  costmodel::ServingEstimate e;
  if (concurrency == 0) {
    const ServingConfig config =
        c.trtllm_bench_settings ? TrtllmBenchConfig(c) : c.config;
    e = costmodel::EstimateServing(c.model, c.cluster, w, config, c.num_gpus,
                                   cal);
  } else if (c.benchmark_requests > 0) {
    e = costmodel::EstimateClosedLoopBenchmark(c.model, c.cluster, w, c.config,
                                               c.num_gpus, concurrency,
                                               c.benchmark_requests, 0, cal);
  } else {
    e = costmodel::EstimateClosedLoopSteadyState(
        c.model, c.cluster, w, c.config, c.num_gpus, concurrency, cal);
  }
  if (!e.fits) {
    *why = e.infeasible_reason;
    return std::nullopt;
  }
  LoadPoint p;
  p.ttft_s = e.ttft_s;
  p.tpot_s = e.tpot_s;
  p.itl_s = e.itl_s;
  p.output_tokens_per_s = e.output_tokens_per_s;
  p.requests_per_s = e.output_tokens_per_s / c.workload.osl;
  return p;
}

// Open loop at `rate` requests/s: the benchmark's N requests (the row's
// count, else kDefaultBenchmarkRequests) arriving as a Poisson process at
// that rate (vLLM's benchmark_serving.py and its forks, whose metric names
// the rate rows' tables print: "Mean TTFT", "Mean ITL", a QPS of "INF"),
// or all at once at an infinite one, simulated pass by pass
// (costmodel::EstimateOpenLoopBenchmark). A steady state (what tune serve
// --request-rate prices) describes neither a rate above the capacity,
// where the backlog is worked off prompts first and then their decodes,
// nor the makespan over which a finite benchmark divides its tokens.
std::optional<LoadPoint> OpenLoop(const ServingCase& c,
                                  const costmodel::Calibration& cal,
                                  double rate, std::string* why) {
  const int64_t requests = c.benchmark_requests > 0 ? c.benchmark_requests
                                                    : kDefaultBenchmarkRequests;
  const costmodel::ServingEstimate e = costmodel::EstimateOpenLoopBenchmark(
      c.model, c.cluster, c.workload, c.config, c.num_gpus, rate, requests,
      costmodel::Arrivals::kPoisson, cal);
  if (!e.fits) {
    *why = e.infeasible_reason;
    return std::nullopt;
  }
  LoadPoint p;
  p.ttft_s = e.ttft_s;
  p.tpot_s = e.tpot_s;
  p.itl_s = e.itl_s;
  p.output_tokens_per_s = e.output_tokens_per_s;
  p.requests_per_s = e.output_tokens_per_s / c.workload.osl;
  return p;
}

// Disaggregated workers: costmodel::EstimateDisaggregated, its TTFT over
// the benchmark's requests when it states them (the first burst queueing
// for the prefill ranks, costmodel::DisaggregatedBenchmarkTtft_s), as the
// aggregated calendar counts it.
std::optional<LoadPoint> Disaggregated(const ServingCase& c,
                                       const costmodel::Calibration& cal,
                                       std::string* why) {
  const costmodel::DisaggregatedEstimate d = costmodel::EstimateDisaggregated(
      c.model, c.cluster, c.workload, c.prefill_config, c.prefill_workers,
      c.config, c.decode_workers, cal);
  if (!d.fits) {
    *why = d.infeasible_reason;
    return std::nullopt;
  }
  LoadPoint lp;
  lp.ttft_s = d.ttft_s;
  if (c.benchmark_requests > 0) {
    lp.ttft_s = costmodel::DisaggregatedBenchmarkTtft_s(
        d.prefill_s, c.prefill_workers * c.prefill_config.attention_dp,
        c.workload.concurrency, c.benchmark_requests, d.ttft_s);
  }
  lp.tpot_s = d.tpot_s;
  lp.requests_per_s = d.requests_per_s;
  lp.output_tokens_per_s = d.output_tokens_per_s;
  return lp;
}

// What trtllm-bench reads off a checkpoint for its estimate.
struct CheckpointFacts {
  double elements = 0;  // safetensors elements (parameter_count)
  double attention_layers = 0;
  bool mla = false;
  bool mamba = false;  // a hybrid: trtllm-bench's extra-cache branch
};

// The decoder's linear layers at the weight format (a quantized byte is one
// element: NVFP4's 0.5625 bytes per weight, FP8's one), norms, routers and
// embeddings in 16-bit, one element per weight.
CheckpointFacts CheckpointOf(const ModelSpec& m, Precision weights) {
  const double stored =
      std::min(1.0, search_spaces::WeightBytesPerElement(weights));
  CheckpointFacts f;
  for (const search_spaces::LayerKind& kind : m.DecoderLayers()) {
    const costmodel::LayerParams p = costmodel::ParamsOfLayer(m, kind);
    f.elements += (p.tp_sharded + p.routed_experts) * stored + p.replicated;
    f.mamba = f.mamba || kind.mixer == search_spaces::Mixer::kMamba;
    f.mla = f.mla || kind.mixer == search_spaces::Mixer::kMla;
    if (kind.mixer == search_spaces::Mixer::kAttention ||
        kind.mixer == search_spaces::Mixer::kMla) {
      ++f.attention_layers;
    }
  }
  f.elements += (m.untie_embeddings_and_output_weights ? 2.0 : 1.0) *
                static_cast<double>(m.vocab_size) *
                static_cast<double>(m.hidden_size);
  return f;
}

}  // namespace

double TrtllmBenchKvRequests(const ServingCase& c) {
  const ModelSpec& m = c.model;
  const ServingConfig& config = c.config;
  const double elem_bytes = TrtllmBenchBytesPerElement(config.weights);
  if (elem_bytes <= 0) return 0.0;
  const CheckpointFacts f = CheckpointOf(m, config.weights);
  if (f.mamba) return 0.0;
  const bool mla = f.mla;
  const double h = static_cast<double>(m.hidden_size);
  const double heads = static_cast<double>(m.num_attention_heads);
  const double kv_heads = mla || m.num_query_groups <= 0
                              ? heads
                              : static_cast<double>(m.num_query_groups);
  const double head_size = mla || m.kv_channels <= 0
                               ? h / heads
                               : static_cast<double>(m.kv_channels);
  double kv_bytes = 2.0;
  if (config.kv_cache == KvCacheDtype::kFp8) kv_bytes = 1.0;
  if (config.kv_cache == KvCacheDtype::kNvfp4) kv_bytes = 0.5;
  const double tp = static_cast<double>(config.tp * config.attention_dp);
  const double gib = 1073741824.0;
  const double per_token_gib = 2.0 * f.attention_layers *
                               std::max(tp, kv_heads) * head_size * kv_bytes /
                               gib;
  const double gpus = tp * static_cast<double>(config.pp);
  const double available_gib =
      gpus * c.cluster.CapacityGib() - f.elements * elem_bytes / gib;
  const double seq = static_cast<double>(c.workload.isl + c.workload.osl);
  if (per_token_gib <= 0 || seq <= 0 || available_gib <= 0) return 0.0;
  return available_gib * config.kv_cache_memory_fraction /
         (per_token_gib * seq);
}

TrtllmBenchSettings TrtllmBenchEngineSettings(double kv_requests, int64_t isl,
                                              int64_t osl, int64_t pp) {
  const double raw_batch = std::min(kv_requests, 4096.0) /
                           static_cast<double>(std::max<int64_t>(1, pp));
  const auto round_up = [](double v, double step) {
    return static_cast<int64_t>(step * std::ceil(v / step));
  };
  TrtllmBenchSettings s;
  s.max_batch_size = raw_batch < 256
                         ? std::max<int64_t>(64, round_up(raw_batch, 32))
                     : raw_batch < 1024 ? round_up(raw_batch, 128)
                                        : round_up(raw_batch, 256);
  const double raw_tokens = std::min(
      raw_batch * (1.0 + static_cast<double>(isl) / static_cast<double>(osl)),
      32768.0);
  s.max_num_tokens = raw_tokens < 4096
                         ? std::max<int64_t>(2048, round_up(raw_tokens, 256))
                     : raw_tokens < 8192 ? round_up(raw_tokens, 512)
                                         : round_up(raw_tokens, 1024);
  return s;
}

ServingPrediction PredictServingCase(const ServingCase& c) {
  ServingPrediction out;
  if (!c.skipped_reason.empty()) {
    out.skipped_reason = c.skipped_reason;
    return out;
  }
  const costmodel::DatasheetCalibration cal(c.cluster);
  std::string why;
  std::optional<LoadPoint> p;
  if (c.disaggregated) {
    p = Disaggregated(c, cal, &why);
  } else if (c.request_rate > 0) {
    p = OpenLoop(c, cal, c.request_rate, &why);
  } else {
    p = Aggregated(c, cal, c.workload.concurrency, &why);
  }
  if (!p) {
    out.skipped_reason = "the cost model refuses the layout: " + why;
    return out;
  }
  switch (c.metric) {
    case ServingMetric::kOutputTokensPerS:
      out.predicted = p->output_tokens_per_s;
      break;
    case ServingMetric::kOutputTokensPerSPerGpu:
      out.predicted = p->output_tokens_per_s / c.num_gpus;
      break;
    case ServingMetric::kRequestsPerS:
      out.predicted = p->requests_per_s;
      break;
    case ServingMetric::kTtftMs:
      out.predicted = p->ttft_s * 1e3;
      break;
    case ServingMetric::kTpotMs:
      out.predicted = p->tpot_s * 1e3;
      break;
    case ServingMetric::kItlMs:
      out.predicted = (p->itl_s > 0 ? p->itl_s : p->tpot_s) * 1e3;
      break;
    case ServingMetric::kUnknown:
      out.skipped_reason = "unknown metric";
      return out;
  }
  out.error_pct = (out.predicted - c.published) / c.published * 100.0;
  return out;
}

}  // namespace meshtune::tuner
