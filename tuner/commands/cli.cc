#include "tuner/commands/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>

#include "engine/comm/mpi_communicator.h"
#include "tuner/commands/command.h"
#include "tuner/commands/regress.h"
#include "tuner/inputs/config_file_inputs.h"
#include "tuner/io/terminal.h"
#include "tuner/io/version.h"
#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kTopExamples = R"(Examples:
  tune --model 175b --gpus 1024                  search (the default command)
  tune estimate --model 175b --gpus 1024 --tp 8 --pp 8 --sp --recompute selective
  tune models                                    list model presets
  tune gpus                                      list GPU presets
  tune accuracy --csv runs.csv                   published runs vs predictions
  tune db measurements                           stored microbenchmarks
  tune search --help                             all search flags)";

// One line: CLI11 messages occasionally span lines.
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

bool IsSubcommandName(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return true;
  }
  return false;
}

// Levenshtein distance, for "did you mean" on a mistyped command.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string ClosestSubcommand(const CLI::App& app, const std::string& name) {
  std::string best;
  size_t best_distance = 0;
  for (const CLI::App* sub : app.get_subcommands({})) {
    const size_t d = EditDistance(name, sub->get_name());
    if (best.empty() || d < best_distance) {
      best = sub->get_name();
      best_distance = d;
    }
  }
  return best;
}

// `--model best.yaml` (a file `tune search --out` wrote) uses only its
// model: section; IgnoredParallelismWarning says so once, for every
// command with --model. Not on the ranks `tune train` starts under mpirun:
// the launching process has said it already.
void WarnOfIgnoredParallelism(const CLI::App& command, std::ostream& err) {
  if (engine::LaunchedUnderMpi()) return;
  const CLI::Option* model = command.get_option_no_throw("--model");
  if (model == nullptr || model->count() == 0) return;
  const std::string warning =
      IgnoredParallelismWarning(model->results().front());
  if (!warning.empty()) err << warning << "\n";
}

}  // namespace

std::string VersionString() {
  return std::string("tune ") + MESHTUNE_VERSION + " (" +
         MESHTUNE_GIT_REVISION + ")";
}

void PrintError(const Status& status, std::ostream& err) {
  err << "tune: error: " << OneLine(status.message()) << "\n";
  if (!status.hint().empty()) {
    err << "tune: hint: " << OneLine(status.hint()) << "\n";
  }
}

int RunTune(const std::vector<std::string>& raw_args, std::ostream& out,
            std::ostream& err) {
  CLI::App app(
      "tune: find the fastest Megatron-LM parallel configuration for "
      "a model on a cluster",
      "tune");
  app.set_version_flag("--version", VersionString(),
                       "print version and git revision");
  app.footer(kTopExamples);

  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(AddSearchCommand(&app));
  commands.push_back(AddEstimateCommand(&app));
  commands.push_back(AddModelsCommand(&app));
  commands.push_back(AddGpusCommand(&app));
  commands.push_back(AddAccuracyCommand(&app));
  commands.push_back(AddDbCommand(&app));
  commands.push_back(AddProfileCommand(&app));
  commands.push_back(AddTrainCommand(&app));
  commands.push_back(AddDataCommand(&app));
  commands.push_back(AddExportCommand(&app));
  commands.push_back(AddRegressCommand(&app));
  commands.push_back(AddValidateCommand(&app));
  commands.push_back(AddScaleCommand(&app));
  commands.push_back(AddCompareCommand(&app));
  commands.push_back(AddExplainCommand(&app));
  commands.push_back(AddLaunchCommand(&app));
  commands.push_back(AddReportCommand(&app));
  commands.push_back(AddServeCommand(&app));
  commands.push_back(AddGenerateCommand(&app));
  const std::vector<CLI::App*> subs = app.get_subcommands({});

  // One command per call; in-process tests run many in one process.
  SetQuietMode(false);
  std::vector<std::string> args = raw_args;
  if (args.empty()) {
    PrintError(Status::InvalidArgument("no command given",
                                       "run 'tune --help' for the commands, "
                                       "e.g. tune --model 175b --gpus 1024"),
               err);
    return 2;
  }
  // `tune --model M --gpus N` is `tune search ...`.
  const std::string& first = args.front();
  if (!first.empty() && first[0] == '-' && first != "--help" && first != "-h" &&
      first != "--version") {
    args.insert(args.begin(), "search");
  }
  const std::string command =
      IsSubcommandName(app, args.front()) ? args.front() : "";
  if (command.empty() && !args.front().empty() && args.front()[0] != '-') {
    PrintError(Status::InvalidArgument(
                   "unknown command '" + args.front() + "'",
                   "did you mean '" + ClosestSubcommand(app, args.front()) +
                       "'? run 'tune --help' for the commands"),
               err);
    return 2;
  }

  // CLI11 parses a reversed vector (it pops from the back).
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    PrintError(Status::InvalidArgument(
                   e.what(), command.empty()
                                 ? "run 'tune --help' for the commands"
                                 : "run 'tune " + command +
                                       " --help' for its flags and examples"),
               err);
    return 2;
  }

  const Status db_flag = CheckDbFlags(app);
  if (!db_flag.ok()) {
    PrintError(db_flag, err);
    return db_flag.ExitCode();
  }

  for (size_t i = 0; i < subs.size(); ++i) {
    if (subs[i]->parsed()) {
      WarnOfIgnoredParallelism(*subs[i], err);
      const Status status = commands[i]->Run(out, err);
      if (!status.ok()) PrintError(status, err);
      return status.ExitCode();
    }
  }
  PrintError(Status::InvalidArgument("unknown command '" + args.front() + "'",
                                     "run 'tune --help' for the commands"),
             err);
  return 2;
}

}  // namespace meshtune::tuner
