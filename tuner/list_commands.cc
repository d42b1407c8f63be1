// `tune models` and `tune gpus`: the built-in presets with their key numbers.
#include <CLI/CLI.hpp>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <string>

#include "search_spaces/presets.h"
#include "tuner/calibration_source.h"
#include "tuner/command.h"
#include "tuner/model_facts.h"

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

class ModelsCommand : public Command {
 public:
  explicit ModelsCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand("models", "list the model presets");
    sub->footer(
        "Examples:\n  tune models\n  tune --model gpt3-175b --gpus 1024\n"
        "Parameters are counted by the cost model (vocab padded to a multiple "
        "of 128; tied embeddings counted once).");
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    out << Line("%-16s %-24s %6s %7s %11s %7s %7s %6s %8s %6s %s", "name",
                "model", "layers", "hidden", "heads/grps", "ffn", "vocab",
                "seq", "params_B", "gbs", "experts/topk");
    for (const search_spaces::ModelSpec& m : search_spaces::ModelPresets()) {
      const std::string heads = std::to_string(m.num_attention_heads) + "/" +
                                std::to_string(m.num_query_groups);
      const std::string moe = m.is_moe() ? std::to_string(m.num_experts) + "/" +
                                               std::to_string(m.moe_router_topk)
                                         : "-";
      out << Line(
          "%-16s %-24s %6lld %7lld %11s %7lld %7lld %6lld %8.1f %6lld %s",
          m.name.c_str(), m.display_name.c_str(),
          static_cast<long long>(m.num_layers),
          static_cast<long long>(m.hidden_size), heads.c_str(),
          static_cast<long long>(m.ffn_hidden_size),
          static_cast<long long>(m.vocab_size),
          static_cast<long long>(m.seq_length), ParameterCountB(m),
          static_cast<long long>(m.global_batch_size), moe.c_str());
    }
    return Status::Ok();
  }
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
