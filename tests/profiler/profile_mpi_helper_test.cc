// `tune profile --backend cpu` run from a directory without the MPI helper
// meshtune_mpi_bench (what building only `--target tune` used to leave): the
// GEMM and stream rows are still measured, and the collectives note says
// what is missing and how to build it. tune looks for the helper next to its
// own executable (/proc/self/exe), so this needs a copy of the binary in an
// empty directory, run as a subprocess.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/comm/mpi_communicator.h"
#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;

struct ShellRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

ShellRun RunShell(const std::string& cmd) {
  ShellRun run;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(ProfileMpiHelperTest, MissingHelperIsNamedWithItsBuildCommand) {
  char tmpl[] = "/tmp/meshtune_no_helper_XXXXXX";
  const char* made = mkdtemp(tmpl);
  ASSERT_NE(made, nullptr);
  const fs::path dir = fs::canonical(made);
  const fs::path tune = dir / "tune";
  fs::copy_file(MESHTUNE_TUNE_BINARY, tune);

  const ShellRun run = RunShell("'" + tune.string() +
                                "' profile --backend cpu --quick --no-db "
                                "--reps 1 --warmup 0");
  fs::remove_all(dir);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("triad"), std::string::npos) << run.out;
  // No CMakeCache.txt beside the copy: not a build tree, so the note names
  // the README's build directory.
  const std::string expected =
      meshtune::engine::MpiAvailable()
          ? "# collectives skipped: the MPI helper meshtune_mpi_bench is "
            "missing from " +
                dir.string() +
                " (this tune was built with MPI); build it with `cmake "
                "--build build --target meshtune_mpi_bench`\n"
          : "# collectives skipped: meshtune_mpi_bench was not built "
            "(configure found no MPI; install libopenmpi-dev and "
            "reconfigure)\n";
  EXPECT_NE(run.out.find(expected), std::string::npos) << run.out;
}

}  // namespace
