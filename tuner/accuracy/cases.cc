#include "tuner/accuracy/cases.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "costmodel/compute_model.h"
#include "costmodel/cost_model.h"
#include "costmodel/model_options.h"
#include "search_spaces/limits.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/space/enumerate.h"
#include "search_spaces/yaml_util.h"
#include "tuner/interop/megatron_args_parser.h"

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

// Model of a row: the matching preset (the name without its variants) with
// the variants applied, overridden by the row's own dims.
StatusOr<ModelSpec> ModelForRow(const RowReader& r, const std::string& column,
                                std::string* reason) {
  const ModelVariant variant = ParseModelVariant(column);
  const std::string& name = variant.base_name;
  const std::optional<ModelSpec> preset = FindModelPreset(name);
  ModelSpec m = preset ? *preset : FamilyDefaults(name);
  if (variant.num_layers) m.num_layers = *variant.num_layers;
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
    // MoE rows write the routed experts' width in ffn_hidden (published_dev
    // DeepSeek-V3: 2048, its dense layers 18432; Qwen3-30B-A3B: 768): that
    // is the preset's expert width, not a new dense width.
    if (d.field == &m.ffn_hidden_size && preset && preset->is_moe() &&
        *v.value() == preset->expert_ffn_hidden_size()) {
      continue;
    }
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
  if (!variant.unknown.empty()) {
    *reason = "unknown model variant '(" + Printable(variant.unknown) +
              ")' in '" + Printable(column) +
              "' (known: tokendrop, dropless, w/o MTP, w/ MTP, alt, N-layer, "
              "single transformer layer)";
    return m;
  }
  if (!preset) {
    if (m.num_layers == 0 || m.hidden_size == 0 || m.num_attention_heads == 0) {
      *reason = "no model preset matches '" + Printable(name) +
                "' and the row does not give layers, hidden and heads";
      return m;
    }
    const bool gpt = m.activation == search_spaces::Activation::kGelu &&
                     !StartsWith(NormalizeModelName(name), "nemotron");
    if (m.num_query_groups == 0) m.num_query_groups = m.num_attention_heads;
    if (m.ffn_hidden_size == 0 && gpt) m.ffn_hidden_size = 4 * m.hidden_size;
    if (m.vocab_size == 0 && gpt) m.vocab_size = 51200;  // GPT-3's, padded
    if (m.ffn_hidden_size == 0 || m.vocab_size == 0 || m.seq_length == 0) {
      *reason = "no model preset matches '" + Printable(name) +
                "' and the row leaves ffn_hidden, vocab or seq_len blank";
      return m;
    }
  }
  if (head_shape_changed && m.num_attention_heads > 0 &&
      !m.multi_latent_attention) {
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  // Fewer layers than the preset (a "(4-layer)" slice of DeepSeek-V2): the
  // first layers of its MoE list, so the leading dense layers stay. A longer
  // model keeps the list and fails validation unless megatron_args gives
  // --moe-layer-freq.
  if (!m.moe_layer_pattern.empty() &&
      static_cast<int64_t>(m.moe_layer_pattern.size()) > m.num_layers) {
    m.moe_layer_pattern.resize(static_cast<size_t>(m.num_layers));
  }
  if (variant.moe_expert_capacity_factor) {
    if (!m.is_moe()) {
      *reason = "variant in '" + Printable(column) +
                "' sets the expert capacity, but the model has no experts";
      return m;
    }
    m.moe_expert_capacity_factor = *variant.moe_expert_capacity_factor;
    m.moe_pad_expert_input_to_capacity =
        variant.moe_pad_expert_input_to_capacity;
  }
  if (variant.mtp_num_layers) m.mtp_num_layers = *variant.mtp_num_layers;
  return m;
}

bool IsLayerKind(MetricKind kind) {
  return kind == MetricKind::kLayerForward ||
         kind == MetricKind::kLayerBackward ||
         kind == MetricKind::kLayerForwardBackward;
}

// The model cut to its first decoder layer (no MTP): the shortened model a
// per-layer timing ran. Hybrid patterns are kept whole (a one-symbol
// pattern is not the same layer mix); Validate() decides whether the cut
// model is usable.
ModelSpec WithOneLayer(ModelSpec m) {
  if (m.is_hybrid()) return m;
  if (!m.moe_layer_pattern.empty()) m.moe_layer_pattern.resize(1);
  m.num_layers = 1;
  m.mtp_num_layers = 0;
  return m;
}

// The model with one more decoder layer (per-layer rows: Predict).
ModelSpec WithOneMoreLayer(ModelSpec m) {
  if (!m.moe_layer_pattern.empty()) {
    m.moe_layer_pattern.push_back(m.moe_layer_pattern.back());
  }
  ++m.num_layers;
  return m;
}

// The reason a row cannot be predicted ("" = it can); `c` holds what the
// columns say. Errors are file-level problems (malformed cells).
Status MapRow(const CsvTable& table, const CsvRecord& record,
              std::map<std::string, StatusOr<ClusterSpec>>* clusters,
              AccuracyCase* out) {
  AccuracyCase& c = *out;
  const RowReader r(table, record);
  c.line = record.line;
  c.source = r.Text("source");
  c.model_name = r.Text("model");
  c.gpu_name = r.Text("gpu");
  c.metric = r.Text("measured_metric");
  c.kind = MetricKindOf(c.metric);
  // Every cell ModelForRow and ApplyMegatronFlags read, each prefixed with
  // its length so that no two rows' cells concatenate to the same key.
  for (const char* column :
       {"model", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab",
        "seq_len", "megatron_args"}) {
    const std::string text = r.Text(column);
    c.model_key += std::to_string(text.size()) + ':' + text;
  }
  std::string reason;
  // Every cell first: a malformed cell is an error for the whole file, a
  // blank required one skips the row.
  for (const std::string& column : RequiredAccuracyColumns()) {
    if (reason.empty() && r.Text(column).empty()) {
      reason = "column '" + column + "' is blank; it is required";
    }
  }
  int64_t ints[4] = {0, 0, 0, 0};
  const char* const int_columns[4] = {"num_gpus", "tp", "pp", "gbs"};
  for (int k = 0; k < 4; ++k) {
    auto v = r.Int(int_columns[k]);
    if (!v.ok()) return v.status();
    if (v.value()) ints[k] = *v.value();
  }
  c.num_gpus = ints[0];
  c.config.tp = std::max<int64_t>(1, ints[1]);
  c.config.pp = std::max<int64_t>(1, ints[2]);
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
  if (!r.Text("measured_value").empty()) {
    auto value = r.PositiveNumber("measured_value");
    if (!value.ok()) return value.status();
    c.published_value = value.value();
  }
  std::string model_reason;
  auto model = ModelForRow(r, c.model_name, &model_reason);
  if (!model.ok()) return model.status();
  c.model = std::move(model).value();
  if (reason.empty()) reason = model_reason;
  c.training.seq_length = c.model.seq_length;
  if (!reason.empty()) {
    c.skipped_reason = reason;
    return Status::Ok();
  }

  if (c.kind == MetricKind::kUnknown) {
    reason = "metric '" + Printable(c.metric) +
             "' is not one tune accuracy compares (known: iteration_time_s, "
             "step_time_s, tokens_per_sec_per_gpu, tflops_per_gpu, "
             "model_tflops_per_gpu, mfu_pct, hfu_pct, layer_fwd_ms, "
             "layer_bwd_ms, layer_fwd_bwd_ms, allocated_memory_gib)";
  }
  const std::string cluster_name =
      search_spaces::ClusterPresetForGpu(c.gpu_name);
  const std::string precision_text = r.Text("precision");
  const std::optional<Precision> precision =
      PrecisionForRow(precision_text, c.source);
  const auto recompute = RecomputeFromText(r.Text("recompute"));
  if (reason.empty() && cluster_name.empty()) {
    reason = "no cluster preset for GPU '" + Printable(c.gpu_name) +
             "' (known: GB300, GB200, GH200, B300, B200, H200, H100, "
             "A100 40GB/80GB, L40S, RTX PRO 6000 Server)";
  }
  if (reason.empty()) {
    auto it = clusters->find(cluster_name);
    if (it == clusters->end()) {
      it = clusters
               ->emplace(cluster_name,
                         search_spaces::ResolveCluster(cluster_name))
               .first;
    }
    if (it->second.ok()) {
      c.cluster = it->second.value();
    } else {
      reason = "GPU '" + Printable(c.gpu_name) + "' needs cluster preset '" +
               cluster_name + "', which is not built in";
    }
  }
  if (reason.empty() && !precision) {
    reason = "unknown precision '" + Printable(precision_text) +
             "' (known: bf16, fp16, mixed 16-bit, fp8 (delayed), FP8-CS / "
             "current scaling, blockwise / 128x128, MXFP8 / FP8-MX, NVFP4)";
  }
  if (reason.empty() && search_spaces::IsQuantized(*precision) &&
      c.cluster.gpu.peak_fp8_tflops <= 0) {
    reason = std::string(search_spaces::ToString(*precision)) + " run on " +
             c.cluster.name + ", which has no FP8 tensor cores";
  }
  if (reason.empty() && search_spaces::NeedsBlackwell(*precision) &&
      c.cluster.gpu.peak_fp4_tflops <= 0) {
    reason = std::string(search_spaces::ToString(*precision)) + " run on " +
             c.cluster.name +
             ", which has no block-scaled (Blackwell) tensor cores";
  }
  if (reason.empty() && !recompute) {
    reason = "unknown recompute '" + Printable(r.Text("recompute")) +
             "' (known: none, full, selective, selective (core_attn, mlp, "
             "moe, moe_act, layernorm, mla_up_proj, shared_experts))";
  }
  if (!reason.empty()) {
    c.skipped_reason = reason;
    return Status::Ok();
  }
  c.training.precision = *precision;
  c.config.recompute = *recompute;
  // dp and the micro-batch before the recipe rules, which read the layout
  // (RecipeRecompute matches mbs); nothing below but ApplyRecipeLayout
  // changes tp, pp or cp.
  const int64_t model_parallel = c.config.tp * c.config.pp * c.config.cp;
  c.config.dp = dp > 0 ? dp : std::max<int64_t>(1, c.num_gpus / model_parallel);
  c.config.mbs = MicroBatchFromAccumulation(
      c.training.global_batch_size, c.config.dp, c.config.mbs,
      GradientAccumulationFromNotes(r.Text("notes")));
  // The recipe's layout where the table prints a stale one
  // (tuner/accuracy/rules.h).
  ApplyRecipeLayout(c.source, c.model, cluster_name, *precision, &c.config);
  c.attention = AttentionKernelForRow(c.source, r.Text("notes"));
  const std::string megatron_args = r.Text("megatron_args");
  if (megatron_args.empty()) {
    // NVIDIA's recipes: distributed optimizer; fp8 recipes keep fp8 weights
    // and reduce gradients in bf16 (NeMo `fp8_params: true`,
    // `optim.grad_sync_dtype: bf16`; Megatron --fp8-param-gather
    // --grad-reduce-in-bf16), and overlap TP communication with
    // userbuffers (NeMo launcher ub_cfg_h100_* tables, tp_comm_overlap:
    // true; the cost model applies it only with sequence parallelism).
    // Megatron 2021-22 had no distributed optimizer.
    const bool nvidia = IsNvidiaRecipeSource(c.source);
    const bool quantized = search_spaces::IsQuantized(*precision);
    c.config.dist_opt = nvidia;
    c.training.fp8_param_gather = nvidia && quantized;
    c.training.grad_reduce_in_bf16 = nvidia && quantized;
    c.training.tp_comm_overlap = nvidia && quantized;
    // "FSDP=N" in the notes: N > 0 is Megatron-FSDP (optim_grads_params).
    const std::optional<int64_t> fsdp = FsdpSizeFromNotes(r.Text("notes"));
    c.training.megatron_fsdp = fsdp && *fsdp > 0;
    ApplyRecipeDefaults(c.source, c.model, cluster_name, &c.training);
    // The recipe's recompute where the row leaves the column blank (the
    // published tables do not print it; tuner/accuracy/rules.h).
    if (r.Text("recompute").empty()) {
      if (auto rr = RecipeRecompute(c.source, c.model, cluster_name,
                                    c.training.precision, c.config)) {
        c.config.recompute = *rr;
      }
    }
    // NVIDIA's MoE tables "force-balance tokens across experts" (their
    // footnote, copied into the notes): Megatron's
    // --moe-router-force-load-balancing.
    if (c.model.is_moe() && ForceBalancedFromNotes(r.Text("notes"))) {
      c.model.moe_router_force_load_balancing = true;
    }
    // The recipe's expert tensor parallelism where the row leaves it open.
    if (c.config.etp == 0) {
      c.config.etp = RecipeExpertTensorParallel(c.source, c.model);
    }
    // The recipe's dispatcher and EP overlap, per container version.
    ApplyRecipeMoeSoftware(c.source, cluster_name, c.config, &c.model,
                           &c.training);
    // And its CUDA graphs (the host-launch term).
    ApplyRecipeCudaGraphs(c.source, c.model, cluster_name, &c.training);
    // And its FP8 attention (the core attention's rate).
    ApplyRecipeFp8Attention(c.source, c.model, cluster_name, &c.training);
  } else {
    // The run's own flags on top of Megatron's defaults: nothing overlapped
    // or sharded unless a flag says so.
    c.config.dist_opt = false;
    c.training.fp8_param_gather = false;
    c.training.grad_reduce_in_bf16 = false;
    c.training.tp_comm_overlap = false;
    // Megatron trains MTP only when --mtp-num-layers asks for it (default
    // None): a preset's MTP depths stay only where the model column states
    // them ("(w/ MTP)"). A hybrid pattern's '/' parts are its MTP.
    if (!c.model.is_hybrid() && !ParseModelVariant(c.model_name).mtp_stated) {
      c.model.mtp_num_layers = 0;
    }
    auto applied =
        ApplyMegatronFlags(megatron_args, &c.model, &c.training, &c.config);
    if (!applied.ok()) {
      c.skipped_reason = "megatron_args: " + applied.status().message();
      return Status::Ok();
    }
    c.flags_without_effect = applied.value().without_effect;
  }
  const Status valid = c.model.Validate();
  if (!valid.ok()) {
    c.skipped_reason = "model: " + valid.message();
    return Status::Ok();
  }
  if (c.config.world() != c.num_gpus) {
    c.skipped_reason = "tp·pp·cp·dp = " + std::to_string(c.config.world()) +
                       " but num_gpus = " + std::to_string(c.num_gpus);
    return Status::Ok();
  }
  // A row whose EP does not fit in dp·cp folds the expert grid over the
  // tensor-parallel ranks: only expert_tensor_parallel_size 1 allows that,
  // which is what NVIDIA's fine-grained MoE recipes set (Megatron-Bridge
  // DeepSeek-V3 and Qwen3 perf recipes; docs/sources.md §2.1).
  if (c.model.is_moe() && c.config.etp == 0 && c.config.ep > 1 &&
      (c.config.dp * c.config.cp) % c.config.ep != 0 &&
      (c.config.tp * c.config.dp * c.config.cp) % c.config.ep == 0) {
    c.config.etp = 1;
  }
  std::string detail;
  std::string code = search_spaces::CheckConfig(c.model, c.training, c.cluster,
                                                c.config, &detail);
  if (!code.empty()) {
    c.skipped_reason =
        "invalid configuration: " + (detail.empty() ? code : detail);
    return Status::Ok();
  }
  switch (c.kind) {
    case MetricKind::kStepTime: {
      const std::optional<double> step =
          PublishedStepTime(c.source, c.metric, c.published_value, c.model,
                            c.training, c.config, c.cluster, &reason);
      if (step) c.published = c.published_step_s = *step;
      break;
    }
    case MetricKind::kLayerForward:
    case MetricKind::kLayerBackward:
    case MetricKind::kLayerForwardBackward: {
      // One layer is isolated by adding one (Predict), which needs every
      // layer on one stage and the longer model to stay valid.
      if (c.config.pp != 1 || c.config.vpp != 1) {
        reason = c.metric +
                 ": per-layer times are predicted for pp 1 runs "
                 "only (this row has pp " +
                 std::to_string(c.config.pp) + ")";
        break;
      }
      const ModelSpec longer = WithOneMoreLayer(c.model);
      if (!longer.Validate().ok() ||
          !search_spaces::CheckConfig(longer, c.training, c.cluster, c.config,
                                      &detail)
               .empty()) {
        reason = c.metric +
                 ": the model cannot take one more layer to "
                 "isolate one";
        break;
      }
      c.published = c.published_value;  // ms
      break;
    }
    case MetricKind::kAllocatedMemory:
      c.published = c.published_value;  // GiB
      break;
    case MetricKind::kUnknown:
      break;
  }
  c.skipped_reason = reason;
  return Status::Ok();
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
  cases.reserve(table.records().size());
  for (const CsvRecord& record : table.records()) {
    AccuracyCase c;
    MESHTUNE_RETURN_IF_ERROR(MapRow(table, record, &clusters, &c));
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

namespace {

// Per-micro-batch time of the layers' own work: compute, recompute and the
// exposed TP/CP/EP collectives (not the optimizer, the gradient reduction or
// the bubble, which do not belong to a layer).
double LayerWork_s(const costmodel::Estimate& e, int64_t microbatches) {
  const costmodel::TimeBreakdown& t = e.time;
  return (t.compute_s + t.tp_comm_s + t.cp_comm_s + t.ep_comm_s) /
         static_cast<double>(microbatches);
}

}  // namespace

AccuracyPrediction Predict(const AccuracyCase& c, const Estimator& estimator) {
  MESHTUNE_CHECK(c.skipped_reason.empty());
  const costmodel::DatasheetCalibration calibration(c.cluster, c.attention);
  const costmodel::Estimate e =
      estimator(c.model, c.cluster, c.training, c.config, calibration);
  AccuracyPrediction p;
  p.predicted_step_s = e.step_time_s;
  p.time = e.time;
  p.fits = e.fits;
  p.memory_gib = e.memory.total_bytes() / kGiB;
  p.capacity_gib = e.memory_capacity_bytes / kGiB;
  if (IsLayerKind(c.kind)) {
    // A per-layer row times one layer of a shortened model (Korthikanti et
    // al. 2022 §6 time one transformer layer of the 22B model; its full
    // 48 layers without recompute would not fit in 80 GB, their Fig. 7):
    // what ran, and so what must fit, is the configuration with that one
    // layer, the embedding and the output layer (pp 1; the same tp, mbs,
    // sequence and recompute).
    const ModelSpec one = WithOneLayer(c.model);
    if (one.Validate().ok()) {
      const costmodel::Estimate single =
          estimator(one, c.cluster, c.training, c.config, calibration);
      p.fits = single.fits;
      p.memory_gib = single.memory.total_bytes() / kGiB;
    }
  }
  switch (c.kind) {
    case MetricKind::kAllocatedMemory:
      // torch.cuda.max_memory_allocated: the allocator's peak, without the
      // fragmentation, CUDA context and NCCL buffers of total_bytes().
      p.predicted = e.memory.allocated_bytes() / kGiB;
      break;
    case MetricKind::kLayerForward:
    case MetricKind::kLayerBackward:
    case MetricKind::kLayerForwardBackward: {
      const costmodel::Estimate longer =
          estimator(WithOneMoreLayer(c.model), c.cluster, c.training, c.config,
                    calibration);
      const int64_t microbatches = std::max<int64_t>(
          1, c.config.num_microbatches(c.training.global_batch_size));
      const double recompute_s =
          (longer.time.recompute_s - e.time.recompute_s) /
          static_cast<double>(microbatches);
      const double work_s =
          LayerWork_s(longer, microbatches) - LayerWork_s(e, microbatches);
      const double comm_s = (longer.time.tp_comm_s + longer.time.cp_comm_s +
                             longer.time.ep_comm_s - e.time.tp_comm_s -
                             e.time.cp_comm_s - e.time.ep_comm_s) /
                            static_cast<double>(microbatches);
      const costmodel::LayerCompute layer = costmodel::LayerComputeTime(
          c.model, c.config, c.training.seq_length, c.training.precision,
          /*moe_layer=*/false, calibration, costmodel::ModelOptions());
      const double compute_total = layer.fwd_s() + layer.bwd_s();
      const double fwd_share =
          compute_total > 0 ? layer.fwd_s() / compute_total : 1.0 / 3;
      const double fwd_s = (work_s - comm_s) * fwd_share + comm_s / 2;
      const double total_s = work_s + recompute_s;
      const double s = c.kind == MetricKind::kLayerForward    ? fwd_s
                       : c.kind == MetricKind::kLayerBackward ? total_s - fwd_s
                                                              : total_s;
      p.predicted = 1e3 * s;
      break;
    }
    case MetricKind::kStepTime:
    case MetricKind::kUnknown:
      p.predicted = e.step_time_s;
      break;
  }
  p.error_pct = 100.0 * (p.predicted - c.published) / c.published;
  return p;
}

std::vector<AccuracyResult> PredictAll(const std::vector<AccuracyCase>& cases,
                                       const Estimator& estimator) {
  std::vector<AccuracyResult> results;
  results.reserve(cases.size());
  for (const AccuracyCase& c : cases) {
    AccuracyResult r{c, std::nullopt, std::nullopt};
    if (c.skipped_reason.empty()) r.prediction = Predict(c, estimator);
    results.push_back(std::move(r));
  }
  return results;
}

namespace {

// The --with-best statistics; nullopt when no result carries a BestPlan.
std::optional<WithBestSummary> SummarizeBestPlans(
    const std::vector<AccuracyResult>& results) {
  bool any = false;
  WithBestSummary s;
  std::vector<double> gains;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].best) continue;
    any = true;
    const BestPlan& b = *results[i].best;
    if (!b.searched) continue;
    ++s.searched;
    if (!b.cached) ++s.problems;
    if (!b.config) {
      ++s.no_plan;
      continue;
    }
    ++s.found;
    gains.push_back(b.gain_pct);
    if (s.found == 1 || b.gain_pct > s.max_gain_pct) {
      s.max_gain_pct = b.gain_pct;
      s.max_gain_line = results[i].row.line;
    }
    if (b.gain_pct <= kBestGainBarPct) {
      ++s.within;
    } else {
      s.beyond.push_back(i);
    }
  }
  if (!any) return std::nullopt;
  if (!gains.empty()) {
    std::sort(gains.begin(), gains.end());
    const size_t n = gains.size();
    s.median_gain_pct =
        n % 2 == 1 ? gains[n / 2] : (gains[n / 2 - 1] + gains[n / 2]) / 2;
    s.within_share_pct =
        100.0 * static_cast<double>(s.within) / static_cast<double>(s.found);
  }
  std::stable_sort(s.beyond.begin(), s.beyond.end(), [&](size_t a, size_t b) {
    return results[a].best->gain_pct > results[b].best->gain_pct;
  });
  return s;
}

}  // namespace

AccuracySummary Summarize(const std::vector<AccuracyResult>& results) {
  AccuracySummary summary;
  auto add = [](ErrorStats* s, double error_pct, int64_t line) {
    ++s->n;
    s->mape_pct += std::fabs(error_pct);  // a sum until the end
    if (std::fabs(error_pct) > s->max_abs_pct || s->n == 1) {
      s->max_abs_pct = std::fabs(error_pct);
      s->worst_pct = error_pct;
      s->worst_line = line;
    }
  };
  auto source_stats = [](std::vector<SourceStats>* list,
                         const std::string& source) -> ErrorStats* {
    for (SourceStats& s : *list) {
      if (s.source == source) return &s.stats;
    }
    list->push_back(SourceStats{source, {}});
    return &list->back().stats;
  };
  std::map<std::string, int64_t> reasons;
  for (const AccuracyResult& r : results) {
    ++summary.rows;
    // Every source gets a step-time line, in order of first appearance.
    ErrorStats* step = source_stats(&summary.per_source, r.row.source);
    if (!r.prediction) {
      ++summary.skipped;
      ++reasons[r.row.skipped_reason];
      continue;
    }
    ++summary.predicted;
    // Per-layer rows are judged on the one-layer configuration they ran
    // (Predict).
    if (!r.prediction->fits) ++summary.out_of_memory;
    const double err = r.prediction->error_pct;
    switch (r.row.kind) {
      case MetricKind::kAllocatedMemory:
        add(source_stats(&summary.memory.per_source, r.row.source), err,
            r.row.line);
        add(&summary.memory.all, err, r.row.line);
        break;
      case MetricKind::kLayerForward:
      case MetricKind::kLayerBackward:
      case MetricKind::kLayerForwardBackward:
        add(source_stats(&summary.layer_time.per_source, r.row.source), err,
            r.row.line);
        add(&summary.layer_time.all, err, r.row.line);
        break;
      case MetricKind::kStepTime:
      case MetricKind::kUnknown:
        add(step, err, r.row.line);
        add(&summary.all, err, r.row.line);
        break;
    }
  }
  auto finish = [](ErrorStats* s) {
    if (s->n > 0) s->mape_pct /= static_cast<double>(s->n);
  };
  for (auto* list : {&summary.per_source, &summary.layer_time.per_source,
                     &summary.memory.per_source}) {
    for (SourceStats& s : *list) finish(&s.stats);
  }
  finish(&summary.all);
  finish(&summary.layer_time.all);
  finish(&summary.memory.all);
  for (const auto& [reason, count] : reasons) {
    summary.skip_reasons.push_back(SkipReasonCount{reason, count});
  }
  std::stable_sort(summary.skip_reasons.begin(), summary.skip_reasons.end(),
                   [](const SkipReasonCount& a, const SkipReasonCount& b) {
                     return a.count > b.count;
                   });
  summary.with_best = SummarizeBestPlans(results);
  return summary;
}

}  // namespace meshtune::tuner
