// `tune models` and `tune gpus`: the built-in presets with their key numbers.
#include <CLI/CLI.hpp>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "costmodel/model_stats.h"
#include "search_spaces/presets/presets.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/local_cluster.h"
#include "tuner/io/text_format.h"
#include "tuner/machine/calibration_source.h"

namespace meshtune::tuner {
namespace {

std::string Line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Line(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return std::string(buf) + "\n";
}

// Parameter counts of a preset as the cost model makes them: vocabulary
// padded as Megatron does for tp = 1, positions for the recipe's seq_length.
// total = every routed expert, MTP excluded, untied embedding and output
// layer each counted; active = the docs/sources.md §1.6 convention (dense
// parts + k routed + shared experts + router, both embedding matrices).
costmodel::ModelStats PresetStats(const search_spaces::ModelSpec& m) {
  return costmodel::ComputeModelStats(
      m, costmodel::PaddedVocabSize(m.vocab_size, /*tp=*/1), m.seq_length);
}

// A parameter count in billions: one decimal, or three below 0.1 B so that
// the tiny presets do not read as 0.0 (gpt-tiny: 0.004).
std::string Billions(double parameters) {
  const double b = parameters / 1e9;
  return b < 0.1 ? Fmt("%.3f", b) : Fmt("%.1f", b);
}

class ModelsCommand : public Command {
 public:
  explicit ModelsCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand("models", "list the model presets");
    sub->add_flag("--json", json_,
                  "print one JSON object {\"models\": [...]} with the numbers "
                  "of the table, params_b and active_params_b");
    sub->footer(
        "Examples:\n  tune models\n  tune models --json\n"
        "  tune --model gpt3-175b --gpus 1024\n"
        "Parameters (billions) are counted by the cost model: vocab padded to "
        "a multiple of 128, tied embeddings counted once, MTP depths "
        "excluded; active_B = dense parts + top-k routed and shared experts "
        "+ router, both embedding matrices included.");
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    if (json_) {
      out << ToJson().dump(2) << "\n";
      return Status::Ok();
    }
    out << Line("%-16s %-27s %6s %7s %11s %7s %7s %6s %8s %8s %6s %s", "name",
                "model", "layers", "hidden", "heads/grps", "ffn", "vocab",
                "seq", "params_B", "active_B", "gbs", "experts/topk");
    for (const search_spaces::ModelSpec& m : search_spaces::ModelPresets()) {
      const costmodel::ModelStats stats = PresetStats(m);
      const std::string heads = std::to_string(m.num_attention_heads) + "/" +
                                std::to_string(m.num_query_groups);
      const std::string moe = m.is_moe() ? std::to_string(m.num_experts) + "/" +
                                               std::to_string(m.moe_router_topk)
                                         : "-";
      out << Line(
          "%-16s %-27s %6lld %7lld %11s %7lld %7lld %6lld %8s %8s %6lld "
          "%s",
          m.name.c_str(), m.display_name.c_str(),
          static_cast<long long>(m.num_layers),
          static_cast<long long>(m.hidden_size), heads.c_str(),
          static_cast<long long>(m.ffn_hidden_size),
          static_cast<long long>(m.vocab_size),
          static_cast<long long>(m.seq_length),
          Billions(stats.total_params).c_str(),
          Billions(stats.active_params).c_str(),
          static_cast<long long>(m.global_batch_size), moe.c_str());
    }
    return Status::Ok();
  }

 private:
  // One object per preset, in the table's order; counts in billions (1e9).
  static nlohmann::ordered_json ToJson() {
    nlohmann::ordered_json models = nlohmann::ordered_json::array();
    for (const search_spaces::ModelSpec& m : search_spaces::ModelPresets()) {
      const costmodel::ModelStats stats = PresetStats(m);
      nlohmann::ordered_json j;
      j["name"] = m.name;
      j["display_name"] = m.display_name;
      j["params_b"] = stats.total_params / 1e9;
      j["active_params_b"] = stats.active_params / 1e9;
      j["published_params_b"] = m.published_params_b;
      j["num_layers"] = m.num_layers;
      j["hidden_size"] = m.hidden_size;
      j["num_attention_heads"] = m.num_attention_heads;
      j["num_query_groups"] = m.num_query_groups;
      j["ffn_hidden_size"] = m.ffn_hidden_size;
      j["tokenizer_type"] = m.tokenizer_type;
      j["tokenizer_model"] = m.tokenizer_model;
      // The published layout `tune explain` compares with ("" = none).
      j["recipe_config"] = m.recipe_config;
      j["recipe_source"] = m.recipe_source;
      j["vocab_size"] = m.vocab_size;
      j["seq_length"] = m.seq_length;
      j["global_batch_size"] = m.global_batch_size;
      j["num_experts"] = m.num_experts;
      j["moe_router_topk"] = m.moe_router_topk;
      j["multi_latent_attention"] = m.multi_latent_attention;
      j["mtp_num_layers"] = m.mtp_num_layers;
      j["hybrid_layer_pattern"] = m.hybrid_layer_pattern;
      models.push_back(std::move(j));
    }
    nlohmann::ordered_json root;
    root["models"] = std::move(models);
    return root;
  }

  bool json_ = false;
};

class GpusCommand : public Command {
 public:
  explicit GpusCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand("gpus", "list the GPU/cluster presets");
    sub->footer(
        "Examples:\n  tune gpus\n  tune --model 175b --gpus 1024 --gpu "
        "h100-80g\n"
        "Peaks are dense datasheet TFLOP/s; bandwidths are per GPU, one "
        "direction, in GB/s (1e9 bytes/s).");
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    out << Line("%-12s %-28s %9s %8s %7s %7s %9s %10s %8s %7s", "name", "gpu",
                "bf16_TF/s", "fp8_TF/s", "HBM_GB", "HBM_TB/s", "gpus/node",
                "nvl_domain", "NVL_GB/s", "NIC_GB/s");
    for (const search_spaces::ClusterSpec& c :
         search_spaces::ClusterPresets()) {
      const auto& g = c.gpu;
      const std::string fp8 =
          g.peak_fp8_tflops > 0
              ? std::to_string(static_cast<int>(g.peak_fp8_tflops))
              : "-";
      out << Line("%-12s %-28s %9.0f %8s %7.0f %8.2f %9d %10d %8.0f %7.0f",
                  c.name.c_str(), g.display_name.c_str(), g.peak_bf16_tflops,
                  fp8.c_str(), g.hbm_gb, g.hbm_gbps / 1000.0, c.gpus_per_node,
                  c.nvlink_domain_gpus, c.nvlink_gbps, c.nic_gbps);
    }
    const profiler::CpuInfo cpu = profiler::ReadCpuInfo();
    out << Line(
        "%-12s this machine: %lld cores of %s as ranks (numbers from "
        "/proc; `tune profile` measures them)",
        kLocalCluster, static_cast<long long>(cpu.logical_cpus),
        cpu.model.c_str());
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Command> AddModelsCommand(CLI::App* app) {
  return std::make_unique<ModelsCommand>(app);
}

std::unique_ptr<Command> AddGpusCommand(CLI::App* app) {
  return std::make_unique<GpusCommand>(app);
}

}  // namespace meshtune::tuner
