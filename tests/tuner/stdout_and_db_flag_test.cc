// A failed write to standard output is an error (the binary, since only
// main() can see it), and an empty --db is an input error instead of a
// silent ./tune.db.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/tuner/run_tune.h"
#include "tuner/commands/cli.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::TuneRun;

TEST(StdoutErrors, FullStdoutExitsOneWithOneLine) {
  for (const char* command :
       {"models", "gpus",
        "--model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
        " --gbs 4 --seq-len 64 --no-db"}) {
    const TuneRun run = testing::RunTune(std::string(command) + " >/dev/full");
    EXPECT_EQ(run.exit_code, 1) << command;
    EXPECT_EQ(run.err,
              "tune: error: cannot write to standard output: No space left on "
              "device\n")
        << command;
  }
}

TEST(StdoutErrors, AnEarlierErrorKeepsItsExitCode) {
  const TuneRun run = testing::RunTune("--model nosuch --gpus 8 >/dev/full");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind("tune: error: ", 0), 0u) << run.err;
}

TEST(StdoutErrors, WorkingStdoutExitsZero) {
  const TuneRun run = testing::RunTune("models");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.err, "");
  EXPECT_FALSE(run.out.empty());
}

int InProcess(const std::vector<std::string>& args, std::string* err_text) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = RunTune(args, out, err);
  *err_text = err.str();
  return code;
}

TEST(EmptyDbFlag, IsAnInputErrorForEveryCommand) {
  const std::string dir = MakeTempDir();
  const std::string expected =
      "tune: error: --db: the database path is empty\n"
      "tune: hint: give the database file, e.g. --db tune.db, or leave --db "
      "out to use $TUNE_DB, else ./tune.db\n";
  const std::vector<std::vector<std::string>> commands = {
      {"search", "--model", "gpt-tiny", "--gpus", "2", "--gpu", "local", "--db",
       ""},
      {"launch", "--model", "gpt-tiny", "--gpus", "2", "--gpu", "local", "--db",
       ""},
      {"db", "searches", "--db", ""},
      {"db", "export", "--table", "searches", "--csv", "-", "--db", ""},
      {"export", "--search", "1", "--format", "megatron", "--db", ""},
      {"regress", "results", "--db", ""},
  };
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(dir.c_str()), 0);
  for (const auto& args : commands) {
    std::string err;
    EXPECT_EQ(InProcess(args, &err), 2) << args.front();
    EXPECT_EQ(err, expected) << args.front();
  }
  // "--db=" is CLI11's own usage error, also exit 2 and naming --db.
  std::string err;
  EXPECT_EQ(InProcess({"db", "searches", "--db="}, &err), 2);
  EXPECT_EQ(err.rfind("tune: error: --db: ", 0), 0u) << err;
  // Nothing was created in the working directory.
  EXPECT_NE(access("tune.db", F_OK), 0);
  ASSERT_EQ(chdir(cwd), 0);
}

}  // namespace
}  // namespace meshtune::tuner
