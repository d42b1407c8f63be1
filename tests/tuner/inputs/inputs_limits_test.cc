// Hostile inputs to `tune search` and `tune launch` (issue 16 D1, D6, D7):
// sizes beyond search_spaces/limits.h, a global batch whose token count
// overflowed, FIFOs and directories given as input files. Each answers one
// error line and a hint, exit 2, at once; run in-process through RunTune.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/file_faults.h"
#include "tests/tuner/run_tune.h"
#include "tuner/commands/cli.h"
#include "tuner/inputs/inputs.h"

namespace meshtune::tuner {
namespace {

using test_files::FifoWatchdog;

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

CliRun InProcess(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunTune(args, out, err);
  return {code, out.str(), err.str()};
}

void ExpectInputError(const CliRun& run, const std::string& error,
                      const std::string& hint) {
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "tune: error: " + error + "\ntune: hint: " + hint + "\n");
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// gpt-tiny.yaml with its num_layers line replaced, as in the sed.
std::string BigModelFile(const std::string& dir, const std::string& layers) {
  std::string text = ReadText(std::string(MESHTUNE_SOURCE_DIR) +
                              "/search_spaces/models/gpt-tiny.yaml");
  const std::string from = "\nnum_layers: 4\n";
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos);
  text.replace(at, from.size(), "\nnum_layers: " + layers + "\n");
  const std::string path = dir + "/big.yaml";
  std::ofstream(path) << text;
  return path;
}

TEST(HostileSizes, TwoBillionLayersInSearchAndLaunch) {
  // D1: std::bad_alloc (exit 134) before; 1e8 layers took 4.9 GB.
  const std::string dir = testing::MakeTempDir();
  const std::string big = BigModelFile(dir, "2000000000");
  const std::string error = big +
                            ":8: num_layers: 2000000000 is above the limit of "
                            "10000 layers";
  const std::string hint =
      "the largest published models have under 200 layers; check the value";
  ExpectInputError(
      InProcess({"search", "--model", big, "--gpus", "4", "--no-db"}), error,
      hint);
  ExpectInputError(
      InProcess({"launch", "--model", big, "--gpus", "4", "--no-db"}), error,
      hint);
  std::filesystem::remove_all(dir);
}

TEST(HostileSizes, GbsWhoseTokenCountOverflowed) {
  // D6: 2^62 sequences x 256 tokens wrapped to "= 0 tokens per step", exit 0.
  ExpectInputError(InProcess({"search", "--model", "gpt-tiny", "--gpus", "4",
                              "--gbs", "4611686018427387904", "--no-db"}),
                   "--gbs: 4611686018427387904 is above the limit of 16777216 "
                   "sequences",
                   "published global batches are 512 to 16384 sequences; "
                   "check the value");
}

TEST(HostileSizes, EveryFlagIsBounded) {
  struct Case {
    std::string flag, value, error;
  };
  const std::vector<Case> cases = {
      {"--gpus", "1048577",
       "--gpus: 1048577 is above the limit of 1048576 GPUs"},
      {"--gpus", "99999999999999999999",
       "--gpus: 99999999999999999999 is above the limit of 1048576 GPUs"},
      {"--gpus-per-node", "4294967304",
       "--gpus-per-node: 4294967304 is above the limit of 1024 GPUs"},
      {"--seq-len", "16777217",
       "--seq-len: 16777217 is above the limit of 16777216 tokens"},
      {"--tp", "1,1048577", "--tp: 1048577 is above the limit of 1048576"},
      {"--pp", "4611686018427387904",
       "--pp: 4611686018427387904 is above the limit of 1048576"},
      {"--vpp", "10001", "--vpp: 10001 is above the limit of 10000"},
      {"--mbs", "16777217",
       "--mbs: 16777217 is above the limit of 16777216 sequences"},
      {"--recompute", "full:10001",
       "--recompute: 10001 is above the limit of 10000"},
      {"--tokens", "1e300T",
       "--tokens: 1e300T is above the limit of 1e18 tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flag + " " + c.value);
    std::vector<std::string> args = {"search",  "--model", "gpt-tiny",
                                     "--no-db", c.flag,    c.value};
    if (c.flag != "--gpus") {
      args.push_back("--gpus");
      args.push_back("4");
    }
    const CliRun run = InProcess(args);
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err.substr(0, run.err.find('\n')), "tune: error: " + c.error);
  }
  // At the bound the values are accepted.
  InputFlags f;
  f.model = "gpt-tiny";
  f.gpus = "4";
  f.gbs = "16777216";
  f.seq_len = "16777216";
  EXPECT_TRUE(ResolveInputs(f).ok());
}

TEST(HostileFiles, FifoAsModelClusterSpaceAndCsv) {
  // D7: `mkfifo m.yaml; tune search --model m.yaml --gpus 4` hung for ever.
  const std::string dir = testing::MakeTempDir();
  const std::string fifo = dir + "/m.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FifoWatchdog watchdog(fifo);
  const std::string hint =
      "give the path of a regular file; copy a stream to a file first";
  const std::string not_regular =
      "'" + fifo + "' is not a regular file (a FIFO, socket or device)";
  ExpectInputError(
      InProcess({"search", "--model", fifo, "--gpus", "4", "--no-db"}),
      "model file " + not_regular, hint);
  ExpectInputError(InProcess({"search", "--model", "gpt-tiny", "--gpus", "4",
                              "--gpu", fifo, "--no-db"}),
                   "cluster file " + not_regular, hint);
  ExpectInputError(InProcess({"search", "--model", "gpt-tiny", "--gpus", "4",
                              "--space", fifo, "--no-db"}),
                   "search space file " + not_regular, hint);
  ExpectInputError(InProcess({"accuracy", "--csv", fifo}),
                   "CSV file " + not_regular, hint);
  std::filesystem::remove_all(dir);
}

TEST(HostileFiles, DirectoriesAreInputErrorsWithExitTwo) {
  // A directory as the model was exit 1 (an I/O error) while a missing
  // file was exit 2; as the CSV it was "empty file (no header row)".
  const std::string dir = testing::MakeTempDir();
  const std::string hint = "give the path of a regular file inside it";
  ExpectInputError(
      InProcess({"search", "--model", dir, "--gpus", "4", "--no-db"}),
      "model file '" + dir + "' is a directory", hint);
  ExpectInputError(InProcess({"accuracy", "--csv", dir}),
                   "CSV file '" + dir + "' is a directory", hint);
  ExpectInputError(InProcess({"accuracy", "--csv", dir + "/none.csv"}),
                   "CSV file '" + dir + "/none.csv' not found",
                   "check the path given to --csv");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace meshtune::tuner
