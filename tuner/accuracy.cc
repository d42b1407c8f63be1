#include "tuner/accuracy.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "costmodel/cost_model.h"
#include "search_spaces/enumerate.h"
#include "search_spaces/limits.h"
#include "search_spaces/presets.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ClusterSpec;
using search_spaces::ModelSpec;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::SizeLimit;
using search_spaces::yaml_util::Printable;
namespace limits = search_spaces::limits;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(ch));
  return s;
}
bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The bound of each integer column (search_spaces/limits.h): the cells are
// multiplied (tp·pp·cp·dp, 4·hidden) and divided by, so an unbounded
// 2^32 in two cells would wrap their product to 0.
const SizeLimit& ColumnLimit(const std::string& column) {
  static const auto* const kLimits = new std::map<std::string, SizeLimit>{
      {"layers", limits::kNumLayers},
      {"hidden", limits::kHiddenSize},
      {"heads", limits::kAttentionHeads},
      {"kv_heads", limits::kAttentionHeads},
      {"ffn_hidden", limits::kFfnHiddenSize},
      {"vocab", limits::kVocabSize},
      {"seq_len", limits::kSeqLength},
      {"num_gpus", limits::kNumGpus},
      {"gbs", limits::kGlobalBatchSize},
      {"vp", limits::kLayerCount},
      {"mbs", limits::kMicroBatchSize},
  };
  const auto it = kLimits->find(column);
  return it == kLimits->end() ? limits::kParallelSize : it->second;
}

// Reads the cells of one record with `file:line:` errors.
class RowReader {
 public:
  RowReader(const CsvTable& table, const CsvRecord& record)
      : table_(table), record_(record) {}

  std::string Text(const std::string& column) const {
    return Trim(table_.Cell(record_, column));
  }
  // A positive integer, or nullopt when the cell is blank.
  StatusOr<std::optional<int64_t>> Int(const std::string& column) const {
    const std::string text = Text(column);
    if (text.empty()) return std::optional<int64_t>();
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    // The end check also rejects a NUL byte inside the cell.
    if (end != text.c_str() + text.size() || v < 1 ||
        (errno == ERANGE && v != LLONG_MAX)) {
      return Bad(column, text, "a positive integer");
    }
    if (errno == ERANGE) {  // a whole number above INT64_MAX
      return search_spaces::AboveLimit(Printable(text), ColumnLimit(column),
                                       "column '" + column + "'",
                                       table_.Where(record_));
    }
    MESHTUNE_RETURN_IF_ERROR(search_spaces::CheckLimit(
        v, ColumnLimit(column), "column '" + column + "'",
        table_.Where(record_)));
    return std::optional<int64_t>(v);
  }
  StatusOr<double> PositiveNumber(const std::string& column) const {
    const std::string text = Text(column);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(v > 0) ||
        !std::isfinite(v)) {
      return Bad(column, text, "a positive number");
    }
    return v;
  }
  Status Bad(const std::string& column, const std::string& text,
             const std::string& what) const {
    return Status::InvalidArgument(table_.Where(record_) + ": column '" +
                                       column + "' is '" + Printable(text) +
                                       "', not " + what,
                                   "fix the cell in the CSV");
  }

 private:
  const CsvTable& table_;
  const CsvRecord& record_;
};

// Model family for rows with no preset, from the model's name.
ModelSpec FamilyDefaults(const std::string& name) {
  const std::string n = NormalizeModelName(name);
  ModelSpec m;
  m.name = name;
  m.display_name = name;
  if (StartsWith(n, "llama")) {
    m.normalization = search_spaces::Normalization::kRMSNorm;
    m.activation = search_spaces::Activation::kSwiglu;
    m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
    m.untie_embeddings_and_output_weights = true;
  } else if (StartsWith(n, "nemotron")) {
    // Squared-ReLU MLP: GELU's GEMM shapes (see the nemotron presets).
    m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
    m.untie_embeddings_and_output_weights = true;
  }
  return m;
}

// Model of a row: the matching preset, overridden by the row's own dims.
StatusOr<ModelSpec> ModelForRow(const RowReader& r, const std::string& name,
                                std::string* reason) {
  const std::optional<ModelSpec> preset = FindModelPreset(name);
  ModelSpec m = preset ? *preset : FamilyDefaults(name);
  struct Dim {
    const char* column;
    int64_t* field;
  };
  const Dim dims[] = {
      {"layers", &m.num_layers},          {"hidden", &m.hidden_size},
      {"heads", &m.num_attention_heads},  {"kv_heads", &m.num_query_groups},
      {"ffn_hidden", &m.ffn_hidden_size}, {"vocab", &m.vocab_size},
      {"seq_len", &m.seq_length}};
  bool head_shape_changed = !preset.has_value();
  // A multi-head preset stays multi-head when the row changes the heads
  // but leaves kv_heads blank.
  const bool preset_mha =
      preset && preset->num_query_groups == preset->num_attention_heads;
  for (const Dim& d : dims) {
    auto v = r.Int(d.column);
    if (!v.ok()) return v.status();
    if (!v.value()) continue;
    if ((d.field == &m.hidden_size || d.field == &m.num_attention_heads) &&
        *d.field != *v.value()) {
      head_shape_changed = true;
    }
    *d.field = *v.value();
  }
  auto kv_heads = r.Int("kv_heads");
  if (!kv_heads.ok()) return kv_heads.status();
  if (preset_mha && !kv_heads.value()) {
    m.num_query_groups = m.num_attention_heads;
  }
  if (!preset) {
    if (m.num_layers == 0 || m.hidden_size == 0 || m.num_attention_heads == 0) {
      *reason = "no model preset matches '" + name +
                "' and the row does not give layers, hidden and heads";
      return m;
    }
    const bool gpt = m.activation == search_spaces::Activation::kGelu &&
                     !StartsWith(NormalizeModelName(name), "nemotron");
    if (m.num_query_groups == 0) m.num_query_groups = m.num_attention_heads;
    if (m.ffn_hidden_size == 0 && gpt) m.ffn_hidden_size = 4 * m.hidden_size;
    if (m.vocab_size == 0 && gpt) m.vocab_size = 51200;  // GPT-3's, padded
    if (m.ffn_hidden_size == 0 || m.vocab_size == 0 || m.seq_length == 0) {
      *reason = "no model preset matches '" + name +
                "' and the row leaves ffn_hidden, vocab or seq_len blank";
      return m;
    }
  }
  if (head_shape_changed && m.num_attention_heads > 0) {
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  const Status valid = m.Validate();
  if (!valid.ok()) *reason = "model: " + valid.message();
  return m;
}

}  // namespace

const std::vector<std::string>& RequiredAccuracyColumns() {
  static const std::vector<std::string>* const kColumns =
      new std::vector<std::string>{
          "source", "model", "gpu",       "num_gpus",        "tp",
          "pp",     "gbs",   "precision", "measured_metric", "measured_value"};
  return *kColumns;
}

StatusOr<std::vector<AccuracyCase>> MapAccuracyRows(const CsvTable& table) {
  for (const std::string& column : RequiredAccuracyColumns()) {
    if (table.Column(column) < 0) {
      return Status::InvalidArgument(
          table.source() + ":1: missing required column '" + column + "'",
          "the header needs the columns of tests/data/"
          "published_calibration.csv (at least source, model, gpu, "
          "num_gpus, tp, pp, gbs, precision, measured_metric, "
          "measured_value)");
    }
  }
  std::map<std::string, StatusOr<ClusterSpec>> clusters;
  std::vector<AccuracyCase> cases;
  for (const CsvRecord& record : table.records()) {
    const RowReader r(table, record);
    AccuracyCase c;
    c.line = record.line;
    c.source = r.Text("source");
    c.model_name = r.Text("model");
    c.gpu_name = r.Text("gpu");
    c.metric = r.Text("measured_metric");
    // Numbers first: a malformed cell is an error for the whole file.
    int64_t ints[4] = {0, 0, 0, 0};
    const char* const int_columns[4] = {"num_gpus", "tp", "pp", "gbs"};
    for (int k = 0; k < 4; ++k) {
      auto v = r.Int(int_columns[k]);
      if (!v.ok()) return v.status();
      if (!v.value()) {
        return Status::InvalidArgument(table.Where(record) + ": column '" +
                                           int_columns[k] +
                                           "' is blank; it is required",
                                       "fill in the cell in the CSV");
      }
      ints[k] = *v.value();
    }
    c.num_gpus = ints[0];
    c.config.tp = ints[1];
    c.config.pp = ints[2];
    c.training.num_gpus = c.num_gpus;
    c.training.global_batch_size = ints[3];
    struct Optional {
      const char* column;
      int64_t* field;
    };
    int64_t dp = 0;
    for (const Optional& o :
         {Optional{"cp", &c.config.cp}, Optional{"ep", &c.config.ep},
          Optional{"vp", &c.config.vpp}, Optional{"mbs", &c.config.mbs},
          Optional{"dp", &dp}}) {
      auto v = r.Int(o.column);
      if (!v.ok()) return v.status();
      if (v.value()) *o.field = *v.value();
    }
    const std::string sp = Lower(r.Text("sp"));
    if (sp.empty()) {
      c.config.sp = c.config.tp > 1;
    } else if (sp == "1" || sp == "true" || sp == "on" || sp == "yes") {
      c.config.sp = true;
    } else if (sp == "0" || sp == "false" || sp == "off" || sp == "no") {
      c.config.sp = false;
    } else {
      return r.Bad("sp", sp, "0/1 (or blank: on when tp > 1)");
    }
    auto value = r.PositiveNumber("measured_value");
    if (!value.ok()) return value.status();
    c.published_value = value.value();

    std::string reason;
    auto model = ModelForRow(r, c.model_name, &reason);
    if (!model.ok()) return model.status();
    c.model = std::move(model).value();
    c.training.seq_length = c.model.seq_length;

    const std::string cluster_name = ClusterPresetForGpu(c.gpu_name);
    const std::optional<Precision> precision =
        PrecisionFromText(r.Text("precision"));
    const auto recompute = RecomputeFromText(r.Text("recompute"));
    if (reason.empty() && cluster_name.empty()) {
      reason = "no cluster preset for GPU '" + c.gpu_name +
               "' (known: GB300, GB200, B300, B200, H200, H100, "
               "A100 40GB/80GB)";
    }
    if (reason.empty()) {
      auto it = clusters.find(cluster_name);
      if (it == clusters.end()) {
        it = clusters
                 .emplace(cluster_name,
                          search_spaces::ResolveCluster(cluster_name))
                 .first;
      }
      if (it->second.ok()) {
        c.cluster = it->second.value();
      } else {
        reason = "GPU '" + c.gpu_name + "' needs cluster preset '" +
                 cluster_name + "', which is not built in";
      }
    }
    if (reason.empty() && !precision) {
      reason = "unknown precision '" + r.Text("precision") +
               "' (known: bf16, fp16, mixed 16-bit, fp8 variants)";
    }
    if (reason.empty() && search_spaces::IsQuantized(*precision) &&
        c.cluster.gpu.peak_fp8_tflops <= 0) {
      reason =
          "fp8 run on " + c.cluster.name + ", which has no FP8 tensor cores";
    }
    if (reason.empty() && !recompute) {
      reason = "unknown recompute '" + r.Text("recompute") +
               "' (known: none, selective, full)";
    }
    if (reason.empty()) {
      c.training.precision = *precision;
      c.config.recompute = *recompute;
      // NeMo recipes: distributed optimizer; fp8 recipes keep fp8 weights
      // and reduce gradients in bf16 (NeMo `fp8_params: true`,
      // `optim.grad_sync_dtype: bf16`; Megatron --fp8-param-gather
      // --grad-reduce-in-bf16). Megatron 2021-22 had no distributed
      // optimizer.
      const bool nemo = IsNemoSource(c.source);
      c.config.dist_opt = nemo;
      c.training.fp8_param_gather =
          nemo && search_spaces::IsQuantized(*precision);
      c.training.grad_reduce_in_bf16 =
          nemo && search_spaces::IsQuantized(*precision);
      // ... and overlap TP communication with userbuffers (NeMo launcher
      // ub_cfg_h100_* tables, tp_comm_overlap: true; the cost model applies
      // it only with sequence parallelism, tp > 1).
      c.training.tp_comm_overlap =
          nemo && search_spaces::IsQuantized(*precision);
      c.attention = AttentionKernelForSource(c.source);
      const int64_t model_parallel = c.config.tp * c.config.pp * c.config.cp;
      c.config.dp = dp > 0 ? dp : c.num_gpus / model_parallel;
      if (c.config.world() != c.num_gpus) {
        reason = "tp·pp·cp·dp = " + std::to_string(c.config.world()) +
                 " but num_gpus = " + std::to_string(c.num_gpus);
      }
    }
    if (reason.empty()) {
      std::string detail;
      const std::string code = search_spaces::CheckConfig(
          c.model, c.training, c.cluster, c.config, &detail);
      if (!code.empty()) {
        reason = "invalid configuration: " + (detail.empty() ? code : detail);
      }
    }
    if (reason.empty()) {
      const std::optional<double> step =
          PublishedStepTime(c.source, c.metric, c.published_value, c.model,
                            c.training, c.config, c.cluster, &reason);
      if (step) c.published_step_s = *step;
    }
    c.skipped_reason = reason;
    cases.push_back(std::move(c));
  }
  return cases;
}

Estimator DefaultEstimator() {
  return [](const ModelSpec& model, const ClusterSpec& cluster,
            const search_spaces::TrainingSpec& training,
            const search_spaces::ParallelConfig& config,
            const costmodel::Calibration& calibration) {
    return costmodel::EstimateConfig(model, cluster, training, config,
                                     calibration);
  };
}

AccuracyPrediction Predict(const AccuracyCase& c, const Estimator& estimator) {
  MESHTUNE_CHECK(c.skipped_reason.empty());
  const costmodel::DatasheetCalibration calibration(c.cluster, c.attention);
  const costmodel::Estimate e =
      estimator(c.model, c.cluster, c.training, c.config, calibration);
  AccuracyPrediction p;
  p.predicted_step_s = e.step_time_s;
  p.error_pct =
      100.0 * (e.step_time_s - c.published_step_s) / c.published_step_s;
  p.fits = e.fits;
  p.memory_gib = e.memory.total_bytes() / kGiB;
  p.capacity_gib = e.memory_capacity_bytes / kGiB;
  return p;
}

std::vector<AccuracyResult> PredictAll(const std::vector<AccuracyCase>& cases,
                                       const Estimator& estimator) {
  std::vector<AccuracyResult> results;
  results.reserve(cases.size());
  for (const AccuracyCase& c : cases) {
    AccuracyResult r{c, std::nullopt};
    if (c.skipped_reason.empty()) r.prediction = Predict(c, estimator);
    results.push_back(std::move(r));
  }
  return results;
}

AccuracySummary Summarize(const std::vector<AccuracyResult>& results) {
  AccuracySummary summary;
  std::map<std::string, size_t> index;
  auto add = [](ErrorStats* s, double error_pct, int64_t line) {
    ++s->n;
    s->mape_pct += std::fabs(error_pct);  // a sum until the end
    if (std::fabs(error_pct) > s->max_abs_pct || s->n == 1) {
      s->max_abs_pct = std::fabs(error_pct);
      s->worst_pct = error_pct;
      s->worst_line = line;
    }
  };
  for (const AccuracyResult& r : results) {
    auto it = index.find(r.row.source);
    if (it == index.end()) {
      it = index.emplace(r.row.source, summary.per_source.size()).first;
      summary.per_source.push_back(SourceStats{r.row.source, {}});
    }
    if (!r.prediction) {
      ++summary.skipped;
      continue;
    }
    if (!r.prediction->fits) ++summary.out_of_memory;
    add(&summary.per_source[it->second].stats, r.prediction->error_pct,
        r.row.line);
    add(&summary.all, r.prediction->error_pct, r.row.line);
  }
  for (SourceStats& s : summary.per_source) {
    if (s.stats.n > 0) s.stats.mape_pct /= static_cast<double>(s.stats.n);
  }
  if (summary.all.n > 0) {
    summary.all.mape_pct /= static_cast<double>(summary.all.n);
  }
  return summary;
}

}  // namespace meshtune::tuner
