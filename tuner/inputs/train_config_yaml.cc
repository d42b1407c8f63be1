#include "tuner/inputs/train_config_yaml.h"

#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>
#include <vector>

#include "search_spaces/cuda_graphs.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::tuner {
namespace {

using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::yaml_util::MapReader;

const std::vector<std::string>& TopLevelKeys() {
  static const std::vector<std::string> kKeys = {
      "model", "parallelism", "training", "cluster", "search"};
  return kKeys;
}

const std::vector<std::string>& ParallelismKeys() {
  static const std::vector<std::string> kKeys = {
      "tensor_model_parallel_size",
      "pipeline_model_parallel_size",
      "virtual_pipeline_model_parallel_size",
      "account_for_embedding_in_pipeline_split",
      "account_for_loss_in_pipeline_split",
      "context_parallel_size",
      "expert_model_parallel_size",
      "data_parallel_size",
      "sequence_parallel",
      "use_distributed_optimizer",
      "recompute_granularity",
      "recompute_method",
      "recompute_num_layers",
  };
  return kKeys;
}

const std::vector<std::string>& TrainingKeys() {
  static const std::vector<std::string> kKeys = {
      // Written by `tune search --out`.
      "micro_batch_size", "global_batch_size", "seq_length", "precision",
      "grad_reduce_in_bf16", "fp8_param_gather", "tp_comm_overlap",
      "overlap_moe_expert_parallel_comm", "fp8_dot_product_attention",
      "cuda_graph_impl", "cuda_graph_scope", "train_tokens",
      // Engine settings (Megatron arguments.py names).
      "train_iters", "lr", "min_lr", "lr_warmup_iters", "lr_decay_iters",
      "lr_decay_style", "weight_decay", "clip_grad", "adam_beta1", "adam_beta2",
      "adam_eps", "init_method_std", "hidden_dropout", "attention_dropout",
      "seed", "data_path", "save", "load", "save_interval", "log_interval"};
  return kKeys;
}

const std::vector<std::string>& ClusterKeys() {
  static const std::vector<std::string> kKeys = {"preset", "num_gpus",
                                                 "gpus_per_node"};
  return kKeys;
}

// True when `key` is present with a non-null value. The search writes
// `null` for keys that do not apply (vpp 1, recompute keys when not full).
bool IsSet(const YAML::Node& map, const std::string& key) {
  const YAML::Node value = map[key];
  return value && !value.IsNull();
}

// The section `key` of the document, or an undefined node when absent/null.
YAML::Node Section(const YAML::Node& root, const std::string& key) {
  return IsSet(root, key) ? root[key] : YAML::Node(YAML::NodeType::Undefined);
}

Status ReadFloat(const MapReader& r, const YAML::Node& map,
                 const std::string& key, float* out) {
  if (!IsSet(map, key)) return Status::Ok();
  double v = 0;
  MESHTUNE_RETURN_IF_ERROR(r.Double(key, true, &v));
  *out = static_cast<float>(v);
  return Status::Ok();
}

Status ReadParallelism(const YAML::Node& node, const std::string& source,
                       engine::TrainConfig* c) {
  const MapReader r(node, source, "parallelism");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(ParallelismKeys()));
  auto& p = c->parallel;
  auto read_int = [&](const std::string& key, int64_t* out) {
    return IsSet(node, key) ? r.Int(key, true, 1, out) : Status::Ok();
  };
  auto read_bool = [&](const std::string& key, bool* out) {
    return IsSet(node, key) ? r.Bool(key, true, out) : Status::Ok();
  };
  MESHTUNE_RETURN_IF_ERROR(read_int("tensor_model_parallel_size", &p.tp));
  MESHTUNE_RETURN_IF_ERROR(read_int("pipeline_model_parallel_size", &p.pp));
  MESHTUNE_RETURN_IF_ERROR(
      read_int("virtual_pipeline_model_parallel_size", &p.vpp));
  MESHTUNE_RETURN_IF_ERROR(read_int("context_parallel_size", &p.cp));
  MESHTUNE_RETURN_IF_ERROR(read_int("expert_model_parallel_size", &p.ep));
  MESHTUNE_RETURN_IF_ERROR(read_int("data_parallel_size", &p.dp));
  MESHTUNE_RETURN_IF_ERROR(read_bool("sequence_parallel", &p.sp));
  MESHTUNE_RETURN_IF_ERROR(read_bool("use_distributed_optimizer", &p.dist_opt));
  // The pipeline split follows from num_layers, pp and vpp
  // (search_spaces::PipelineLayout); these two only document it.
  bool ignored = false;
  MESHTUNE_RETURN_IF_ERROR(
      read_bool("account_for_embedding_in_pipeline_split", &ignored));
  MESHTUNE_RETURN_IF_ERROR(
      read_bool("account_for_loss_in_pipeline_split", &ignored));

  // Megatron: --recompute-granularity full|selective; --recompute-method
  // uniform|block and --recompute-num-layers apply to full only.
  search_spaces::Recompute rc;
  if (IsSet(node, "recompute_granularity")) {
    std::string g;
    MESHTUNE_RETURN_IF_ERROR(
        r.Enum("recompute_granularity", true, {"selective", "full"}, &g));
    rc.granularity = g == "full" ? RecomputeGranularity::kFull
                                 : RecomputeGranularity::kSelective;
  }
  const bool full = rc.granularity == RecomputeGranularity::kFull;
  for (const char* key : {"recompute_method", "recompute_num_layers"}) {
    if (!full && IsSet(node, key)) {
      return Status::InvalidArgument(
          r.WhereKey(key) + ": " + key +
              " applies to recompute_granularity full only",
          "set recompute_granularity: full, or write '" + std::string(key) +
              ": null'");
    }
  }
  if (full) {
    if (IsSet(node, "recompute_method")) {
      std::string m;
      MESHTUNE_RETURN_IF_ERROR(
          r.Enum("recompute_method", true, {"uniform", "block"}, &m));
      rc.method =
          m == "block" ? RecomputeMethod::kBlock : RecomputeMethod::kUniform;
    }
    MESHTUNE_RETURN_IF_ERROR(read_int("recompute_num_layers", &rc.num_layers));
  }
  p.recompute = rc;
  return Status::Ok();
}

// "1 corpus_a 2 corpus_b" or a YAML list: Megatron --data-path tokens.
Status ReadDataPath(const MapReader& r, std::vector<std::string>* out) {
  std::vector<std::string> items;
  MESHTUNE_RETURN_IF_ERROR(r.StringList("data_path", &items));
  out->clear();
  for (const std::string& item : items) {
    std::istringstream words(item);
    std::string word;
    while (words >> word) out->push_back(word);
  }
  return Status::Ok();
}

Status ReadTraining(const YAML::Node& node, const std::string& source,
                    TrainFileConfig* file) {
  const MapReader r(node, source, "training");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(TrainingKeys()));
  engine::TrainConfig& c = file->config;
  engine::OptimizerConfig& o = c.optimizer;
  auto read_int = [&](const std::string& key, int64_t min_value, int64_t* out) {
    return IsSet(node, key) ? r.Int(key, true, min_value, out) : Status::Ok();
  };
  auto read_float = [&](const std::string& key, float* out) {
    return ReadFloat(r, node, key, out);
  };
  auto read_string = [&](const std::string& key, std::string* out) {
    return IsSet(node, key) ? r.String(key, true, out) : Status::Ok();
  };
  MESHTUNE_RETURN_IF_ERROR(read_int("micro_batch_size", 1, &c.parallel.mbs));
  MESHTUNE_RETURN_IF_ERROR(
      read_int("global_batch_size", 1, &c.global_batch_size));
  MESHTUNE_RETURN_IF_ERROR(read_int("seq_length", 1, &c.seq_length));

  // Planning keys: type-checked so a typo is caught, not used (the CPU
  // engine computes in fp32 whatever precision the plan was made for).
  std::string precision;
  if (IsSet(node, "precision")) {
    MESHTUNE_RETURN_IF_ERROR(
        r.Enum("precision", true, {"bf16", "fp16", "fp8", "fp32"}, &precision));
  }
  bool flag = false;
  for (const char* key :
       {"grad_reduce_in_bf16", "fp8_param_gather", "tp_comm_overlap",
        "overlap_moe_expert_parallel_comm", "fp8_dot_product_attention"}) {
    if (IsSet(node, key)) MESHTUNE_RETURN_IF_ERROR(r.Bool(key, true, &flag));
  }
  std::string graph_impl;
  if (IsSet(node, "cuda_graph_impl")) {
    MESHTUNE_RETURN_IF_ERROR(r.Enum("cuda_graph_impl", true,
                                    search_spaces::CudaGraphImplNames(),
                                    &graph_impl));
  }
  std::vector<std::string> graph_scope;
  if (IsSet(node, "cuda_graph_scope")) {
    MESHTUNE_RETURN_IF_ERROR(r.StringList("cuda_graph_scope", &graph_scope));
  }
  double tokens = 0;
  if (IsSet(node, "train_tokens")) {
    MESHTUNE_RETURN_IF_ERROR(r.Double("train_tokens", true, &tokens));
  }

  MESHTUNE_RETURN_IF_ERROR(read_int("train_iters", 1, &c.train_iters));
  MESHTUNE_RETURN_IF_ERROR(read_float("lr", &o.lr));
  MESHTUNE_RETURN_IF_ERROR(read_float("min_lr", &o.min_lr));
  MESHTUNE_RETURN_IF_ERROR(read_int("lr_warmup_iters", 0, &o.lr_warmup_iters));
  MESHTUNE_RETURN_IF_ERROR(read_int("lr_decay_iters", 0, &o.lr_decay_iters));
  if (IsSet(node, "lr_decay_style")) {
    std::string style;
    MESHTUNE_RETURN_IF_ERROR(r.Enum("lr_decay_style", true,
                                    {"constant", "linear", "cosine"}, &style));
    o.lr_decay_style =
        style == "constant" ? engine::OptimizerConfig::DecayStyle::kConstant
        : style == "linear" ? engine::OptimizerConfig::DecayStyle::kLinear
                            : engine::OptimizerConfig::DecayStyle::kCosine;
  }
  MESHTUNE_RETURN_IF_ERROR(read_float("weight_decay", &o.weight_decay));
  MESHTUNE_RETURN_IF_ERROR(read_float("clip_grad", &o.clip_grad));
  MESHTUNE_RETURN_IF_ERROR(read_float("adam_beta1", &o.adam_beta1));
  MESHTUNE_RETURN_IF_ERROR(read_float("adam_beta2", &o.adam_beta2));
  MESHTUNE_RETURN_IF_ERROR(read_float("adam_eps", &o.adam_eps));
  MESHTUNE_RETURN_IF_ERROR(read_float("init_method_std", &c.init_method_std));
  MESHTUNE_RETURN_IF_ERROR(read_float("hidden_dropout", &c.hidden_dropout));
  MESHTUNE_RETURN_IF_ERROR(
      read_float("attention_dropout", &c.attention_dropout));
  int64_t seed = static_cast<int64_t>(c.seed);
  MESHTUNE_RETURN_IF_ERROR(read_int("seed", 0, &seed));
  c.seed = static_cast<uint64_t>(seed);
  if (IsSet(node, "data_path")) {
    MESHTUNE_RETURN_IF_ERROR(ReadDataPath(r, &file->data_path));
  }
  MESHTUNE_RETURN_IF_ERROR(read_string("save", &c.save_dir));
  MESHTUNE_RETURN_IF_ERROR(read_string("load", &c.load_dir));
  MESHTUNE_RETURN_IF_ERROR(read_int("save_interval", 1, &c.save_interval));
  MESHTUNE_RETURN_IF_ERROR(read_int("log_interval", 1, &c.log_interval));
  return Status::Ok();
}

Status CheckCluster(const YAML::Node& node, const std::string& source) {
  const MapReader r(node, source, "cluster");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(ClusterKeys()));
  std::string preset;
  if (IsSet(node, "preset")) {
    MESHTUNE_RETURN_IF_ERROR(r.String("preset", true, &preset));
  }
  int64_t n = 0;
  for (const char* key : {"num_gpus", "gpus_per_node"}) {
    if (IsSet(node, key)) MESHTUNE_RETURN_IF_ERROR(r.Int(key, true, 1, &n));
  }
  return Status::Ok();
}

// The link back to the search (tuner/inputs/search_link.h). Every key is
// required: a partial link could not be checked against the database.
Status ReadSearch(const YAML::Node& node, const std::string& source,
                  SearchLink* link) {
  const MapReader r(node, source, "search");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(
      {"db", "id", "rank", "candidate_id", "predicted_step_time_s"}));
  MESHTUNE_RETURN_IF_ERROR(r.String("db", true, &link->db));
  MESHTUNE_RETURN_IF_ERROR(r.Int("id", true, 1, &link->search_id));
  MESHTUNE_RETURN_IF_ERROR(r.Int("rank", true, 1, &link->rank));
  MESHTUNE_RETURN_IF_ERROR(r.Int("candidate_id", true, 1, &link->candidate_id));
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("predicted_step_time_s", true, &link->predicted_step_time_s));
  return Status::Ok();
}

}  // namespace

StatusOr<TrainFileConfig> ParseTrainConfigYaml(const std::string& text,
                                               const std::string& source) {
  StatusOr<YAML::Node> root = search_spaces::yaml_util::Load(text, source);
  if (!root.ok()) return root.status();
  const MapReader top(*root, source, "training config");
  MESHTUNE_RETURN_IF_ERROR(top.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(top.CheckKeys(TopLevelKeys()));

  TrainFileConfig file;
  if (IsSet(*root, "model")) {
    // The model parser reads the model: section of a --out file itself
    // (search_spaces/presets/model_yaml.cc), including `model: <preset>`.
    StatusOr<search_spaces::ModelSpec> model =
        search_spaces::ParseModelYaml(text, source);
    if (!model.ok()) return model.status();
    file.config.model = model.value();
    file.has_model = true;
  }
  if (const YAML::Node p = Section(*root, "parallelism")) {
    MESHTUNE_RETURN_IF_ERROR(ReadParallelism(p, source, &file.config));
  }
  if (const YAML::Node t = Section(*root, "training")) {
    MESHTUNE_RETURN_IF_ERROR(ReadTraining(t, source, &file));
  }
  if (const YAML::Node c = Section(*root, "cluster")) {
    MESHTUNE_RETURN_IF_ERROR(CheckCluster(c, source));
  }
  if (const YAML::Node s = Section(*root, "search")) {
    SearchLink link;
    MESHTUNE_RETURN_IF_ERROR(ReadSearch(s, source, &link));
    file.search = link;
  }
  return file;
}

StatusOr<TrainFileConfig> ReadTrainConfigYaml(const std::string& path) {
  StatusOr<std::string> text =
      search_spaces::yaml_util::ReadFile(path, "--config file");
  if (!text.ok()) {
    if (text.status().code() == Status::Code::kNotFound) {
      return Status::NotFound("--config file '" + path + "' not found",
                              "write one with 'tune search ... --out " + path +
                                  "', or check the path");
    }
    return text.status();
  }
  return ParseTrainConfigYaml(text.value(), path);
}

}  // namespace meshtune::tuner
