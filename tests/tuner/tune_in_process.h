// `tune args...` run in this process (tuner/commands/cli.h RunTune): no binary
// and no shell, so arguments reach the parser exactly as given (newlines,
// quotes, `$(...)`), and the run is fast enough for many hostile cases per
// test.
#ifndef MESHTUNE_TESTS_TUNER_TUNE_IN_PROCESS_H_
#define MESHTUNE_TESTS_TUNER_TUNE_IN_PROCESS_H_

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tuner/run_tune.h"
#include "tuner/commands/cli.h"
#include "tuner/interop/shell_words.h"

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

// RunTune (run_tune.h) without the binary: `args` in the same shell syntax
// (quotes; no variables or redirections), run in this process with TUNE_DB
// set to TestDbPath() (or, as RunTune's `env`, to the value of a
// "TUNE_DB=VALUE" assignment) and, when `cwd` is given, in that directory;
// both are restored afterwards. For the tests of one folder's output, where the
// exit code and the streams are all that is checked; signals, mpirun and the
// process's own streams still need the binary.
inline TuneRun RunTuneInProcess(const std::string& args,
                                const std::string& cwd = "",
                                const std::string& env = "") {
  TuneRun run;
  std::string db = TestDbPath();
  if (!env.empty()) {
    if (env.rfind("TUNE_DB=", 0) != 0) {
      run.err = "RunTuneInProcess sets only TUNE_DB, not: " + env;
      return run;
    }
    db = env.substr(8);
  }
  auto words = ::meshtune::tuner::SplitShellWords(args, "the test's arguments");
  if (!words.ok()) {
    run.err = words.status().message();
    return run;
  }
  char old_cwd[4096];
  if (!cwd.empty() && (getcwd(old_cwd, sizeof(old_cwd)) == nullptr ||
                       chdir(cwd.c_str()) != 0)) {
    run.err = "RunTuneInProcess cannot enter " + cwd;
    return run;
  }
  const char* old_db = std::getenv("TUNE_DB");
  const bool had_db = old_db != nullptr;
  const std::string saved_db = had_db ? old_db : "";
  setenv("TUNE_DB", db.c_str(), 1);
  const InProcessRun r = Tune(*words);
  if (!cwd.empty() && chdir(old_cwd) != 0) {
    run.err = "RunTuneInProcess cannot return to " + std::string(old_cwd);
  }
  if (had_db) {
    setenv("TUNE_DB", saved_db.c_str(), 1);
  } else {
    unsetenv("TUNE_DB");
  }
  run.exit_code = r.exit_code;
  run.out = r.out;
  run.err += r.err;
  return run;
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_TUNE_IN_PROCESS_H_
