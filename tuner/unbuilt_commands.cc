// `tune validate`: part of the command line contract
// (DESIGN.md §4) and listed in --help, but their libraries (results/,
// profiler/, engine/) are built by later issues. Until then they refuse to
// run with one line naming that issue, rather than printing fake output.
// (`tune regress` is built: tuner/regress_command.cc.)
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tuner/command.h"

namespace meshtune::tuner {
namespace {

class UnbuiltCommand : public Command {
 public:
  UnbuiltCommand(CLI::App* app, std::string name, const std::string& purpose,
                 std::string issue)
      : name_(std::move(name)), issue_(std::move(issue)) {
    CLI::App* sub = app->add_subcommand(name_, purpose + " (not built yet)");
    // Accept any flags so `tune train --config x.yaml` gets the same answer.
    sub->allow_extras();
    sub->footer("Examples:\n  tune " + name_ + "\nNot built yet: see the " +
                issue_ + " issue.");
  }

  Status Run(std::ostream& /*out*/, std::ostream& /*err*/) override {
    return Status::Unimplemented(
        "'tune " + name_ + "' is not built yet (see the " + issue_ + " issue)");
  }

 private:
  std::string name_;
  std::string issue_;
};

}  // namespace

std::vector<std::unique_ptr<Command>> AddUnbuiltCommands(CLI::App* app) {
  std::vector<std::unique_ptr<Command>> out;
  out.push_back(std::make_unique<UnbuiltCommand>(
      app, "validate",
      "short real runs of the top candidates; predicted vs measured",
      "training-engine"));
  return out;
}

}  // namespace meshtune::tuner
