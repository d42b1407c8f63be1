// `tune estimate`: the cost model's breakdown for one fully given config.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "costmodel/cost_model.h"
#include "search_spaces/space/enumerate.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/io/terminal.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/render/report_json.h"
#include "tuner/render/report_table.h"
#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kEstimateExamples = R"(Examples:
  tune estimate --model 175b --gpus 1024 --tp 8 --pp 8 --mbs 1 --gbs 1536 --sp --recompute selective
  tune estimate --model 175b --gpus 1024 --gpu a100-80g --tp 8 --pp 8 --recompute full --json
  tune estimate --model llama3-70b --gpus 64 --gpu h100 --tp 8 --pp 4 --vpp 5 --sp --dist-opt --precision fp8
  tune estimate --model mixtral-8x7b --gpus 16 --gpu h100 --tp 4 --ep 4 --etp 1 --memory-headroom 4GiB
Axes not given default to tp=pp=cp=ep=vpp=mbs=1, etp=tp, sp off, recompute
none, dist_opt off; dp = gpus / (tp*pp*cp). --quiet prints one line: step time,
throughput, MFU and memory.)";

// The line --quiet prints.
std::string QuietLine(const costmodel::Estimate& e) {
  char numbers[160];
  std::snprintf(numbers, sizeof(numbers),
                ": step %.3f s, %.1f tokens/s/GPU, MFU %.1f%%, %.2f of %.2f "
                "GiB per GPU",
                e.step_time_s, e.tokens_per_s_per_gpu, 100 * e.mfu,
                e.memory.total_bytes() / (1024.0 * 1024.0 * 1024.0),
                e.memory_capacity_bytes / (1024.0 * 1024.0 * 1024.0));
  std::string line = search_spaces::ToString(e.config) + numbers;
  if (!e.fits) line += " -- does NOT fit: " + e.infeasible_reason;
  return line;
}

class EstimateCommand : public Command {
 public:
  explicit EstimateCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "estimate", "predict time and memory of one fully given configuration");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/false);
    sub->add_flag("--json", json_,
                  "print one JSON estimate (docs/design.md §5) on stdout");
    AddDbOption(sub, &flags_.db,
                "whose measurements, if any, calibrate the estimates");
    sub->add_flag("--no-db", flags_.no_db,
                  "use datasheet numbers, ignore any database");
    AddTerminalFlags(sub, &terminal_);
    sub->footer(kEstimateExamples);
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    MESHTUNE_RETURN_IF_ERROR(ApplyTerminalFlags(terminal_));
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    const Inputs& in = inputs.value();
    auto config = SingleConfigFromFlags(flags_, in.training.num_gpus);
    if (!config.ok()) return config.status();

    std::string detail;
    const std::string reason = search_spaces::CheckConfig(
        in.model, in.training, in.cluster, config.value(), &detail);
    if (!reason.empty()) {
      return Status::InvalidArgument(
          (detail.empty() ? reason : detail) + " (" + reason + ")",
          "change the sizes; 'tune search' with the same flags lists the "
          "valid configurations");
    }
    auto calibration = CalibrationFor(in.cluster, flags_.db, flags_.no_db);
    if (!calibration.ok()) return calibration.status();
    const costmodel::Estimate e =
        costmodel::EstimateConfig(in.model, in.cluster, in.training,
                                  config.value(), *calibration.value());
    if (json_) {
      out << EstimateToJson(e, in.training).dump(2) << "\n";
    } else if (terminal_.quiet) {
      out << QuietLine(e) << "\n";
    } else {
      PrintEstimateReport(out, in, e);
    }
    return Status::Ok();
  }

 private:
  InputFlags flags_;
  bool json_ = false;
  TerminalFlags terminal_;
};

}  // namespace

std::unique_ptr<Command> AddEstimateCommand(CLI::App* app) {
  return std::make_unique<EstimateCommand>(app);
}

}  // namespace meshtune::tuner
