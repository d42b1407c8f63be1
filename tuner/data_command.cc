// `tune data`: being built with the training-engine issue; until then it
// refuses to run with one line saying so.
#include <CLI/CLI.hpp>
#include <memory>

#include "tuner/command.h"

namespace meshtune::tuner {
namespace {

class NotYet : public Command {
 public:
  explicit NotYet(CLI::App* app) {
    CLI::App* sub = app->add_subcommand("data", "not built yet");
    sub->allow_extras();
  }
  Status Run(std::ostream&, std::ostream&) override {
    return Status::Unimplemented(
        "'tune data' is not built yet (see the training-engine issue)");
  }
};

}  // namespace

std::unique_ptr<Command> AddDataCommand(CLI::App* app) {
  return std::make_unique<NotYet>(app);
}

}  // namespace meshtune::tuner
