// `tune args...` run in this process (tuner/cli.h RunTune): no binary and no
// shell, so arguments reach the parser exactly as given (newlines, quotes,
// `$(...)`), and the run is fast enough for many hostile cases per test.
#ifndef MESHTUNE_TESTS_TUNER_TUNE_IN_PROCESS_H_
#define MESHTUNE_TESTS_TUNER_TUNE_IN_PROCESS_H_

#include <sstream>
#include <string>
#include <vector>

#include "tuner/commands/cli.h"

namespace meshtune::tuner::testing {

struct InProcessRun {
  int exit_code = -1;
  std::string out;  // what the command wrote to stdout
  std::string err;  // and to stderr
};

inline InProcessRun Tune(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  InProcessRun run;
  run.exit_code = ::meshtune::tuner::RunTune(args, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_TUNE_IN_PROCESS_H_
