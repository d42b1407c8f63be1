// `tune compare`: two or more configurations of one model on one cluster,
// every time and memory term side by side.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/cost_model.h"
#include "search_spaces/enumerate.h"
#include "tuner/calibration_source.h"
#include "tuner/command.h"
#include "tuner/compare_config.h"
#include "tuner/compare_report.h"
#include "tuner/inputs.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kCompareExamples = R"(Examples:
  tune compare --model 175b --gpus 1024 --config "tp8 pp8 sp selective" --config "tp4 pp16 sp selective"
  tune compare --model 175b --gpus 1024 --config tp=8,pp=8,vpp=3,mbs=1,sp,recompute=selective,dist-opt --config tp=8,pp=16,sp --json
Each --config is one configuration: tp=N pp=N vpp=N cp=N ep=N dp=N mbs=N
(also tp8 pp8 ...), sp, dist-opt, recompute=MODE (or a bare none, selective,
full, full:N, full:block:N), separated by commas or spaces. Axes not given
default to 1 / off / none; dp = gpus / (tp*pp*cp). The search report's config
lines paste in as they are. The last columns are each configuration minus the
first; the closing lines name the time terms behind each difference.)";

class CompareCommand : public Command {
 public:
  explicit CompareCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "compare", "two or more configurations side by side, term by term");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/false);
    sub->add_option("--config", configs_,
                    "one configuration (repeat: at least two), e.g. "
                    "\"tp8 pp8 sp selective\"")
        ->type_name("CONFIG");
    sub->add_flag("--json", json_, "print one JSON object on stdout");
    sub->add_option("--db", flags_.db,
                    "results database whose measurements calibrate the "
                    "estimates (default $TUNE_DB, else ./tune.db if present)")
        ->type_name("PATH");
    sub->add_flag("--no-db", flags_.no_db,
                  "use datasheet numbers, ignore any database");
    sub->footer(kCompareExamples);
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    if (configs_.size() < 2) {
      return Status::InvalidArgument(
          "tune compare needs at least two --config, got " +
              std::to_string(configs_.size()),
          "repeat --config, e.g. --config \"tp8 pp8\" --config \"tp4 pp16\"");
    }
    // The pins AddInputFlags registers would be ignored here: say so.
    const std::pair<const char*, bool> pins[] = {
        {"--tp", !flags_.tp.empty()},
        {"--pp", !flags_.pp.empty()},
        {"--vpp", !flags_.vpp.empty()},
        {"--cp", !flags_.cp.empty()},
        {"--ep", !flags_.ep.empty()},
        {"--dp", !flags_.dp.empty()},
        {"--mbs", !flags_.mbs.empty()},
        {"--recompute", !flags_.recompute.empty()},
        {"--sp", flags_.sp.has_value()},
        {"--dist-opt", flags_.dist_opt.has_value()}};
    for (const auto& [name, given] : pins) {
      if (given) {
        return Status::InvalidArgument(
            std::string(name) + " does not apply to tune compare",
            "put the sizes in each --config, e.g. --config \"tp8 pp8 sp\"");
      }
    }
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    const Inputs& in = inputs.value();
    std::vector<search_spaces::ParallelConfig> configs;
    for (size_t i = 0; i < configs_.size(); ++i) {
      const std::string flag = "--config " + std::to_string(i + 1);
      auto c = ParseConfigString(configs_[i], in.training.num_gpus, flag);
      if (!c.ok()) return c.status();
      std::string detail;
      const std::string reason = search_spaces::CheckConfig(
          in.model, in.training, in.cluster, c.value(), &detail);
      if (!reason.empty()) {
        return Status::InvalidArgument(
            flag + ": " + (detail.empty() ? reason : detail) + " (" + reason +
                ")",
            "change the sizes; 'tune search' with the same flags lists the "
            "valid configurations");
      }
      configs.push_back(c.value());
    }
    auto calibration = CalibrationFor(in.cluster, flags_.db, flags_.no_db);
    if (!calibration.ok()) return calibration.status();
    std::vector<costmodel::Estimate> estimates;
    for (const auto& c : configs) {
      estimates.push_back(costmodel::EstimateConfig(
          in.model, in.cluster, in.training, c, *calibration.value()));
    }
    if (json_) {
      out << CompareToJson(in, estimates).dump(2) << "\n";
    } else {
      PrintCompareTable(out, in, estimates);
    }
    return Status::Ok();
  }

 private:
  InputFlags flags_;
  std::vector<std::string> configs_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> AddCompareCommand(CLI::App* app) {
  return std::make_unique<CompareCommand>(app);
}

}  // namespace meshtune::tuner
