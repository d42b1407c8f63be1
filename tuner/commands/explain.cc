// `tune explain`: search (the flags of `tune search`), then set the best
// plan beside the model's published recipe or a --config the user knows,
// term by term, with the assumptions the best relies on
// (tuner/render/explain_report.h, docs/explain.md).
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/io/terminal.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/render/explain_report.h"
#include "tuner/search/search_driver.h"
#include "tuner/search/search_progress.h"
#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kExplainExamples = R"(Examples:
  tune explain --model llama3-70b --gpus 128 --gpu h100    the best plan against NVIDIA's recipe
  tune explain --model 175b --gpus 1024
  tune explain --model 175b --gpus 1024 --config "tp8 pp16 sp selective dist-opt"
  tune explain --model llama3-70b --gpus 128 --gpu h100 --json
The recipe is the model file's recipe_config (tune models --json lists
them); --config compares any configuration instead (tune compare's syntax).
Nothing is recorded in the results database; its measurements, if any,
calibrate the search as for tune search.)";

class ExplainCommand : public Command {
 public:
  explicit ExplainCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "explain",
        "the best plan beside the model's published recipe (or --config), "
        "term by term, with its assumptions");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/true);
    sub->add_option("--space", flags_.space_file,
                    "search-space YAML file (pins; flags narrow it further)")
        ->type_name("FILE");
    sub->add_option("--config", config_,
                    "compare with this configuration instead of the recipe, "
                    "e.g. \"tp8 pp4 mbs1 sp dist-opt\"")
        ->type_name("CONFIG");
    sub->add_flag("--json", json_, "print one JSON object on stdout");
    AddDbOption(sub, &flags_.db, "whose measurements calibrate the search");
    sub->add_flag("--no-db", flags_.no_db, "use datasheet numbers");
    AddTerminalFlags(sub, &terminal_);
    sub->footer(kExplainExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    MESHTUNE_RETURN_IF_ERROR(ApplyTerminalFlags(terminal_));
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    const Inputs& in = inputs.value();
    const search_spaces::ModelSpec& m = in.model;
    if (config_.empty() && m.recipe_config.empty()) {
      return Status::InvalidArgument(
          m.name + " has no published recipe in its model file",
          "give the configuration to compare with --config, e.g. --config "
          "\"tp8 pp4 mbs1 sp dist-opt\"");
    }
    auto calibration = CalibrationFor(in.cluster, flags_.db, flags_.no_db);
    if (!calibration.ok()) return calibration.status();
    const SearchResult result =
        RunSearchWithProgress(in, *calibration.value(), err, terminal_.quiet);
    if (result.feasible == 0) {
      return NoFeasibleConfigStatus(in.model, in.cluster, in.training, result);
    }
    const bool recipe = config_.empty();
    const PlanExplanation e =
        recipe ? ExplainPlan(in, result, *calibration.value(), m.recipe_config,
                             "recipe", m.recipe_source,
                             m.recipe_global_batch_size, m.recipe_seq_length)
               : ExplainPlan(in, result, *calibration.value(), config_,
                             "--config", "", 0, 0);
    if (json_) {
      out << ExplanationToJson(in, e).dump(2) << "\n";
    } else {
      PrintExplanation(out, in, e);
    }
    return Status::Ok();
  }

 private:
  InputFlags flags_;
  std::string config_;
  bool json_ = false;
  TerminalFlags terminal_;
};

}  // namespace

std::unique_ptr<Command> AddExplainCommand(CLI::App* app) {
  return std::make_unique<ExplainCommand>(app);
}

}  // namespace meshtune::tuner
