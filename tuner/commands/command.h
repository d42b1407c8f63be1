// The subcommands of `tune`. Each Add*Command registers a CLI11 subcommand on
// `app`, binds its flags to the returned object, and the object's Run() does
// the work after a successful parse. The objects own their flag storage, so
// they must outlive the parse (the caller keeps them).
//
// Run() writes machine-readable output and reports to `out` (stdout) and
// progress notes to `err` (stderr); errors are returned as a Status, which
// the caller prints as `tune: error: ...` / `tune: hint: ...`.
#ifndef MESHTUNE_TUNER_COMMANDS_COMMAND_H_
#define MESHTUNE_TUNER_COMMANDS_COMMAND_H_

#include <memory>
#include <ostream>
#include <vector>

#include "search_spaces/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace meshtune::tuner {

class Command {
 public:
  virtual ~Command() = default;
  virtual Status Run(std::ostream& out, std::ostream& err) = 0;
};

std::unique_ptr<Command> AddSearchCommand(CLI::App* app);  // commands/search.cc
std::unique_ptr<Command> AddEstimateCommand(
    CLI::App* app);  // commands/estimate.cc
std::unique_ptr<Command> AddModelsCommand(CLI::App* app);  // commands/list.cc
std::unique_ptr<Command> AddGpusCommand(CLI::App* app);    // commands/list.cc
// Published runs vs predictions (commands/accuracy.cc).
std::unique_ptr<Command> AddAccuracyCommand(CLI::App* app);
// List and export the results database (commands/db.cc).
std::unique_ptr<Command> AddDbCommand(CLI::App* app);
// Microbenchmarks into the results store (commands/profile.cc).
std::unique_ptr<Command> AddProfileCommand(CLI::App* app);
// Train with the engine (commands/train.cc).
std::unique_ptr<Command> AddTrainCommand(CLI::App* app);
// Text/JSONL to Megatron indexed datasets (commands/data.cc).
std::unique_ptr<Command> AddDataCommand(CLI::App* app);
// A stored candidate as Megatron-LM arguments or NeMo overrides
// (commands/export.cc).
std::unique_ptr<Command> AddExportCommand(CLI::App* app);
// Real runs of a search's best candidates, predicted vs measured, learning
// (commands/validate.cc).
std::unique_ptr<Command> AddValidateCommand(CLI::App* app);
// Best configuration per GPU count (commands/scale.cc); configurations side by
// side, term by term (commands/compare.cc).
std::unique_ptr<Command> AddScaleCommand(CLI::App* app);
std::unique_ptr<Command> AddCompareCommand(CLI::App* app);
// The best plan beside the model's recipe or a --config (commands/explain.cc).
std::unique_ptr<Command> AddExplainCommand(CLI::App* app);
// A ready SLURM script for a chosen configuration (commands/launch.cc).
std::unique_ptr<Command> AddLaunchCommand(CLI::App* app);
// The self-contained HTML report of a search (commands/report.cc).
std::unique_ptr<Command> AddReportCommand(CLI::App* app);
// The fastest inference deployment under latency targets (commands/serve.cc).
std::unique_ptr<Command> AddServeCommand(CLI::App* app);
// Text from a checkpoint on the engine's generator (commands/generate.cc).
std::unique_ptr<Command> AddGenerateCommand(CLI::App* app);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_COMMANDS_COMMAND_H_
