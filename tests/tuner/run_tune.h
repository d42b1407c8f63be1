// Test helper: runs the built `tune` binary (MESHTUNE_TUNE_BINARY) through
// the shell and captures its exit code, stdout and stderr separately.
#ifndef MESHTUNE_TESTS_TUNER_RUN_TUNE_H_
#define MESHTUNE_TESTS_TUNER_RUN_TUNE_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

// `--gpu FILE` naming the pinned `local` preset (tests/tuner/testdata/
// local-cpu-4core.yaml, a fixed 4-core CPU machine named `local`): tests use it
// instead of `--gpu local`, whose numbers tune reads from this machine's /proc,
// so that no test or golden depends on the CPU it runs on (docs/build.md). A
// macro so that it joins string literals: "... " MESHTUNE_PINNED_LOCAL_GPU "
// ...".
#define MESHTUNE_PINNED_LOCAL_GPU \
  "--gpu '" MESHTUNE_SOURCE_DIR "/tests/tuner/testdata/local-cpu-4core.yaml'"

namespace meshtune::tuner::testing {

struct TuneRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A results database private to this test process (removed at exit), so
// that `tune search` runs record into it rather than into ./tune.db of the
// directory ctest runs in, and parallel test processes do not share one.
inline const std::string& TestDbPath() {
  static const std::string path = [] {
    static char dir[] = "/tmp/tune_test_db_XXXXXX";
    const char* made = mkdtemp(dir);
    std::atexit([] {
      for (const char* suffix : {"", "-wal", "-shm"}) {
        std::remove((std::string(dir) + "/tune.db" + suffix).c_str());
      }
      rmdir(dir);
    });
    const std::string db = std::string(made ? made : "/tmp") + "/tune.db";
    // Created empty (SQLite reads it as a new database) so that no test
    // depends on whether it ran first: the first search into a database
    // that did not exist prints a note (tuner/store/results_db.h).
    std::FILE* f = made ? std::fopen(db.c_str(), "a") : nullptr;
    if (f != nullptr) std::fclose(f);
    return db;
  }();
  return path;
}

// `args` is appended to the binary path verbatim (shell syntax); `cwd`, when
// given, is the working directory of the run. `env` is a shell variable
// assignment prefix ("TUNE_DB=x.db"); when empty, TUNE_DB is set to
// TestDbPath() (pass "TUNE_DB=" to test the ./tune.db default).
inline TuneRun RunTune(const std::string& args, const std::string& cwd = "",
                       const std::string& env = "") {
  char err_path[] = "/tmp/tune_test_stderr_XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd >= 0) close(fd);
  std::string cmd;
  if (!cwd.empty()) cmd = "cd '" + cwd + "' && ";
  cmd += (env.empty() ? "TUNE_DB='" + TestDbPath() + "'" : env) + " ";
  cmd += std::string("'") + MESHTUNE_TUNE_BINARY + "' " + args + " 2>'" +
         err_path + "'";
  TuneRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.err = ReadFile(err_path);
  std::remove(err_path);
  return run;
}

// A fresh empty directory under /tmp for files a test writes.
inline std::string MakeTempDir() {
  char dir[] = "/tmp/tune_test_XXXXXX";
  const char* made = mkdtemp(dir);
  return made ? made : "/tmp";
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_RUN_TUNE_H_
