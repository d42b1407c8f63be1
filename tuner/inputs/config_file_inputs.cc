#include "tuner/inputs/config_file_inputs.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "search_spaces/yaml_util.h"
#include "tuner/inputs/compare_config.h"

namespace meshtune::tuner {
namespace {

using search_spaces::yaml_util::MapReader;

bool IsSet(const YAML::Node& map, const std::string& key) {
  return map.IsMap() && map[key] && !map[key].IsNull();
}

Status MissingKey(const std::string& path, const std::string& key) {
  return Status::InvalidArgument(
      "--config " + path + " has no " + key +
          ", so the cluster to launch on is unknown",
      "launch a file written by 'tune search ... --out FILE', or add " + key);
}

}  // namespace

StatusOr<Inputs> InputsOfConfigFile(const std::string& path,
                                    const TrainFileConfig& file) {
  if (!file.has_model) {
    return Status::InvalidArgument(
        "--config " + path + " has no model: section",
        "launch a file written by 'tune search ... --out FILE', or add "
        "model: <preset>");
  }
  auto text = search_spaces::yaml_util::ReadFile(path, "--config file");
  if (!text.ok()) return text.status();
  auto root = search_spaces::yaml_util::Load(text.value(), path);
  if (!root.ok()) return root.status();
  // ReadTrainConfigYaml has checked these keys' types; read them as such.
  const YAML::Node cluster =
      IsSet(*root, "cluster") ? (*root)["cluster"] : YAML::Node();
  const YAML::Node training =
      IsSet(*root, "training") ? (*root)["training"] : YAML::Node();
  if (!IsSet(cluster, "preset")) return MissingKey(path, "cluster.preset");

  InputFlags f;
  // A --out file is a model file too (its model: section, or a preset
  // name there), so the search's own resolution applies.
  f.model = path;
  const MapReader c(cluster, path, "cluster");
  MESHTUNE_RETURN_IF_ERROR(c.String("preset", true, &f.gpu));
  if (IsSet(cluster, "gpus_per_node")) {
    int64_t g = 0;
    MESHTUNE_RETURN_IF_ERROR(c.Int("gpus_per_node", true, 1, &g));
    f.gpus_per_node = std::to_string(g);
  }
  f.gpus = std::to_string(file.config.parallel.world());
  if (file.config.global_batch_size > 0) {
    f.gbs = std::to_string(file.config.global_batch_size);
  }
  if (file.config.seq_length > 0) {
    f.seq_len = std::to_string(file.config.seq_length);
  }
  if (training.IsMap()) {
    const MapReader t(training, path, "training");
    if (IsSet(training, "precision")) {
      MESHTUNE_RETURN_IF_ERROR(t.String("precision", true, &f.precision));
    }
    if (IsSet(training, "train_tokens")) {
      double tokens = 0;
      MESHTUNE_RETURN_IF_ERROR(t.Double("train_tokens", true, &tokens));
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.17g", tokens);
      f.tokens = buf;
    }
    if (IsSet(training, "cuda_graph_impl")) {
      MESHTUNE_RETURN_IF_ERROR(
          t.String("cuda_graph_impl", true, &f.cuda_graph_impl));
    }
    if (IsSet(training, "cuda_graph_scope")) {
      // A list, or one string of names separated by commas or spaces.
      std::vector<std::string> scope;
      MESHTUNE_RETURN_IF_ERROR(t.StringList("cuda_graph_scope", &scope));
      f.cuda_graph_scope = search_spaces::yaml_util::Join(scope, ",");
    }
    const std::pair<const char*, bool*> switches[] = {
        {"grad_reduce_in_bf16", &f.grad_reduce_in_bf16},
        {"fp8_param_gather", &f.fp8_param_gather},
        {"tp_comm_overlap", &f.tp_comm_overlap},
        {"overlap_moe_expert_parallel_comm", &f.moe_ep_overlap},
        {"fp8_dot_product_attention", &f.fp8_dot_product_attention}};
    for (const auto& [key, value] : switches) {
      if (IsSet(training, key)) {
        MESHTUNE_RETURN_IF_ERROR(t.Bool(key, true, value));
      }
    }
  }
  return ResolveInputs(f);
}

std::string IgnoredParallelismWarning(const std::string& model_flag) {
  std::error_code ec;
  if (model_flag.empty() || !std::filesystem::is_regular_file(model_flag, ec)) {
    return "";  // a preset name, or a file ResolveModel will report on
  }
  auto text = search_spaces::yaml_util::ReadFile(model_flag, "--model file");
  if (!text.ok()) return "";
  auto root = search_spaces::yaml_util::Load(text.value(), model_flag);
  if (!root.ok() || !root->IsMap() || !(*root)["parallelism"]) return "";
  std::string compact;
  auto file = ParseTrainConfigYaml(text.value(), model_flag);
  if (file.ok()) compact = FormatCompactConfig(file->config.parallel);
  std::string line = "tune: warning: " + model_flag +
                     ": --model reads only its model: section; its "
                     "parallelism: section ";
  if (!compact.empty()) line += "(" + compact + ") ";
  line +=
      "is ignored: pin axes with --tp/--pp/..., or use the plan as "
      "written with tune train --config " +
      model_flag + ", tune launch --config " + model_flag;
  line += compact.empty() ? " or tune compare --config '<tp.. pp.. ...>'"
                          : " or tune compare --config '" + compact + "'";
  return line;
}

}  // namespace meshtune::tuner
