// The `tune` command line: builds the CLI11 application from the subcommands
// in tuner/commands/command.h, parses, dispatches and turns every error into
// the contract's one-line form (docs/design.md §4):
//   stderr: "tune: error: <message>" and, when there is one, "tune: hint:
//   <hint>" exit:   0 ok, 2 usage or input error (CLI11 parse errors included),
//           1 runtime failure.
#ifndef MESHTUNE_TUNER_COMMANDS_CLI_H_
#define MESHTUNE_TUNER_COMMANDS_CLI_H_

#include <ostream>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::tuner {

// Runs `tune` with `args` (without the program name); returns the exit code.
// `tune --model M ...` (first argument a flag other than --help/--version)
// means `tune search --model M ...`.
int RunTune(const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err);

// Prints `status` as the error line and optional hint line.
void PrintError(const Status& status, std::ostream& err);

// "tune 0.1.0 (abc123def456)".
std::string VersionString();

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_COMMANDS_CLI_H_
