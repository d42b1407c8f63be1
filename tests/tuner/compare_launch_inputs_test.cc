// The inputs `tune compare` and `tune launch` take besides search flags:
// candidates of a recorded search (compare --search ID --ranks R,R; launch
// --search ID --rank R) and a `tune search --out` file (launch --config
// FILE). Each is checked against the flag-built equivalent (same table,
// same script but for its Source/CONFIG lines), goldens hold the scripts,
// and every error has its exact message and exit code 2.
//
// To accept an intended change to a script, regenerate and review the diff:
//   MESHTUNE_UPDATE_GOLDEN=1 ./build/tests/meshtune_tuner_tests
//   --gtest_filter='LaunchFrom*'   (one command line)
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "results/store.h"
#include "tests/tuner/golden_file.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/inputs/compare_config.h"
#include "tuner/interop/megatron_args_parser.h"

namespace meshtune::tuner {
namespace {

using testing::ExpectGolden;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTuneInProcess;

constexpr const char* k175b = "--model 175b --gpus 1024 --gpu a100-80g";

// One directory per test binary holding t.db with search 1 (175b on 1024
// A100s, top 5 stored) and best.yaml, its --out file (linked to it).
struct Recorded {
  std::string dir;
  std::string db;
  std::string yaml;
  std::vector<std::string> configs;  // FormatCompactConfig of ranks 1..5
};

const Recorded& RecordedSearch() {
  static const Recorded r = [] {
    Recorded rec;
    rec.dir = MakeTempDir();
    rec.db = rec.dir + "/t.db";
    rec.yaml = rec.dir + "/best.yaml";
    const auto run =
        RunTuneInProcess(std::string("search ") + k175b + " --top 5 --db " +
                         rec.db + " --out " + rec.yaml);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    auto store = results::Store::Open(rec.db);
    EXPECT_TRUE(store.ok());
    if (!store.ok()) return rec;
    auto candidates = (*store)->GetCandidates(1);
    EXPECT_TRUE(candidates.ok());
    if (!candidates.ok()) return rec;
    for (const auto& c : candidates.value()) {
      rec.configs.push_back(FormatCompactConfig(c.config));
    }
    EXPECT_EQ(rec.configs.size(), 5u);
    return rec;
  }();
  return r;
}

// stdout of a run that must succeed.
std::string Ok(const std::string& args) {
  const auto run = RunTuneInProcess(args);
  EXPECT_EQ(run.exit_code, 0) << args << "\n" << run.err;
  return run.out;
}

void ExpectUsageError(const std::string& args, const std::string& message,
                      const std::string& hint) {
  const auto run = RunTuneInProcess(args);
  EXPECT_EQ(run.exit_code, 2) << args;
  EXPECT_EQ(run.err, "tune: error: " + message + "\ntune: hint: " + hint + "\n")
      << args;
  EXPECT_EQ(run.out, "") << args;
}

// ---- tune compare --search ID --ranks R,R ----

TEST(CompareFromSearch, SameTableAsTheConfigStrings) {
  const Recorded& r = RecordedSearch();
  ASSERT_EQ(r.configs.size(), 5u);
  const std::string from_search =
      Ok("compare --search 1 --ranks 1,3,5 --db " + r.db);
  const std::string from_flags =
      Ok(std::string("compare ") + k175b + " --db " + r.db + " --config '" +
         r.configs[0] + "' --config '" + r.configs[2] + "' --config '" +
         r.configs[4] + "'");
  EXPECT_EQ(from_search, from_flags);
  EXPECT_NE(from_search.find("[3] " + r.configs[4] + "\n"), std::string::npos)
      << from_search;
}

TEST(CompareFromSearch, RanksDefaultToTheBestTwoAndJsonWorks) {
  const Recorded& r = RecordedSearch();
  ASSERT_EQ(r.configs.size(), 5u);
  EXPECT_EQ(Ok("compare --search 1 --db " + r.db),
            Ok("compare --search 1 --ranks 1,2 --db " + r.db));
  const std::string json =
      Ok("compare --search 1 --ranks 2,1 --json --db " + r.db);
  EXPECT_NE(json.find("\"config\": \"" + r.configs[1] + "\""),
            std::string::npos)
      << json;
  const std::string quiet = Ok("compare --search 1 -q --db " + r.db);
  EXPECT_EQ(quiet.rfind(r.configs[1], 0), 0u) << quiet;
  EXPECT_EQ(std::count(quiet.begin(), quiet.end(), '\n'), 1) << quiet;
}

TEST(CompareFromSearch, Errors) {
  const Recorded& r = RecordedSearch();
  const std::string db = " --db " + r.db;
  ExpectUsageError(
      "compare --search 9" + db, "--search: no search 9 in " + r.db,
      "list the recorded searches with 'tune db searches --db " + r.db + "'");
  ExpectUsageError("compare --search 1 --ranks 1,6" + db,
                   "--ranks: search 1 stores 5 candidates, not rank 6",
                   "pick ranks from 1 to 5, or search again with --top K to "
                   "store more");
  ExpectUsageError(
      "compare --search 1 --config 'tp8 pp8' --config 'tp4 pp16'" + db,
      "--config and --search both choose the configurations",
      "pick one of them");
  ExpectUsageError("compare --search 1 --model 175b" + db,
                   "--model does not apply with --search",
                   "the recorded search gives the model, GPUs and batch; "
                   "drop --model");
  ExpectUsageError("compare --search 1 --precision fp8" + db,
                   "--precision does not apply with --search",
                   "the recorded search gives the model, GPUs and batch; "
                   "drop --precision");
  ExpectUsageError("compare --search 1 --ranks 2" + db,
                   "tune compare needs at least two --ranks, got 1",
                   "e.g. --ranks 1,2");
  ExpectUsageError("compare --search 1 --ranks 2,2" + db,
                   "--ranks lists 2 twice", "give each rank once");
  ExpectUsageError(
      "compare --search 1 --ranks 1,x" + db,
      "--ranks must be a comma list of positive integers, got '1,x'",
      "e.g. --ranks 4,8");
  ExpectUsageError("compare --search 1 --no-db",
                   "--search reads the results database, but --no-db is "
                   "given",
                   "drop --no-db (--db PATH names the database)");
  ExpectUsageError(std::string("compare ") + k175b +
                       " --ranks 1,2 --config tp8 --config tp4" + db,
                   "--ranks needs --search",
                   "add --search ID (tune db searches lists them), or give "
                   "--config");
  ExpectUsageError("compare --gpus 8 --config tp8 --config tp4 --no-db",
                   "--model is required",
                   "give --model and --gpus with the --config strings, or "
                   "--search ID to compare candidates of a recorded search");
}

// ---- tune launch --search ID [--rank R] / --config FILE ----

std::string MaskScript(const std::string& script, const std::string& dir) {
  static const std::regex kVersion("# Generated by tune launch \\([^\n]*");
  std::string s = std::regex_replace(script, kVersion,
                                     "# Generated by tune launch (<version>).");
  for (size_t at = s.find(dir); at != std::string::npos; at = s.find(dir)) {
    s.replace(at, dir.size(), "<dir>");
  }
  return s;
}

// `script` without its Source: and CONFIG= lines, the ones that name where
// the configuration came from.
std::string WithoutSource(const std::string& script) {
  static const std::regex kSource("# Source: [^\n]*\n|CONFIG=[^\n]*\n");
  return std::regex_replace(script, kSource, "");
}

TEST(LaunchFromSearch, GoldenRank2) {
  const Recorded& r = RecordedSearch();
  const std::string script = Ok("launch --search 1 --rank 2 --db " + r.db);
  EXPECT_NE(script.find("# Source: search 1, rank 2 (" + r.db + ")\n"),
            std::string::npos)
      << script;
  ExpectGolden(MaskScript(script, r.dir), "launch_175b_search_rank2.sh");
}

TEST(LaunchFromSearch, SameScriptAsSearchingAgain) {
  const Recorded& r = RecordedSearch();
  // Rank 2 has cp 2, which the engine cannot train: Megatron-LM for it.
  for (const char* trainer : {"--rank 1 --trainer tune", "--rank 2"}) {
    const std::string flags = std::string(" ") + trainer;
    EXPECT_EQ(
        WithoutSource(Ok("launch --search 1 --db " + r.db + flags)),
        WithoutSource(Ok(std::string("launch ") + k175b + " --no-db" + flags)))
        << trainer;
  }
}

TEST(LaunchFromSearch, OutWritesALinkedConfig) {
  const Recorded& r = RecordedSearch();
  const std::string dir = MakeTempDir();
  const auto run =
      RunTuneInProcess("launch --trainer tune --search 1 --rank 3 --db " +
                       r.db + " --out " + dir + "/job.sh");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string yaml = ReadFile(dir + "/job.yaml");
  EXPECT_NE(yaml.find("search:\n  db: \"" + r.db + "\"\n  id: 1\n  rank: 3\n"),
            std::string::npos)
      << yaml;
}

TEST(LaunchFromConfig, GoldenAndSameScriptAsTheSearch) {
  const Recorded& r = RecordedSearch();
  const std::string script = Ok("launch --trainer tune --config " + r.yaml);
  EXPECT_NE(script.find("# Source: search 1, rank 1 (" + r.db + ") via " +
                        r.yaml + "\n"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("CONFIG=${CONFIG:-'" + r.yaml + "'}\n"),
            std::string::npos)
      << script;
  EXPECT_EQ(WithoutSource(script),
            WithoutSource(Ok(std::string("launch --trainer tune ") + k175b +
                             " --no-db")));
  ExpectGolden(MaskScript(script, r.dir), "launch_175b_config_file.sh");
}

TEST(LaunchFromConfig, MegatronArgumentsAreTheFilesConfig) {
  const Recorded& r = RecordedSearch();
  ASSERT_EQ(r.configs.size(), 5u);
  const std::string script =
      Ok("launch --config " + r.yaml + " --trainer megatron");
  const size_t begin = script.find("MEGATRON_ARGS=(\n");
  const size_t end = script.find("\n)\n", begin);
  ASSERT_NE(end, std::string::npos) << script;
  auto args =
      ParseMegatronArgs(script.substr(begin + 16, end - begin - 16), 1024);
  ASSERT_TRUE(args.ok()) << args.status().message();
  EXPECT_EQ(FormatCompactConfig(args->config), r.configs[0]);
}

TEST(LaunchFromConfig, OutWritesOnlyTheScript) {
  const Recorded& r = RecordedSearch();
  const std::string dir = MakeTempDir();
  const auto run = RunTuneInProcess("launch --trainer tune --config " + r.yaml +
                                    " --out " + dir + "/job.sh");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "tune: wrote the SLURM script to " + dir +
                         "/job.sh; submit it with: sbatch " + dir +
                         "/job.sh\n");
  EXPECT_TRUE(ReadFile(dir + "/job.yaml").empty());
  EXPECT_NE(ReadFile(dir + "/job.sh").find("CONFIG=${CONFIG:-'" + r.yaml),
            std::string::npos);
}

TEST(LaunchFromConfig, AFileWithoutALinkNamesItself) {
  const std::string dir = MakeTempDir();
  ASSERT_EQ(RunTuneInProcess(std::string("search ") + k175b +
                             " --no-db --out " + dir + "/plain.yaml")
                .exit_code,
            0);
  const std::string script = Ok("launch --config " + dir + "/plain.yaml");
  EXPECT_NE(script.find("# Source: " + dir + "/plain.yaml\n"),
            std::string::npos)
      << script;
}

TEST(LaunchFromInputs, Errors) {
  const Recorded& r = RecordedSearch();
  const std::string db = " --db " + r.db;
  ExpectUsageError("launch --search 1 --config " + r.yaml + db,
                   "--search and --config both choose what to launch",
                   "pick one of them");
  ExpectUsageError(
      "launch --search 9" + db, "--search: no search 9 in " + r.db,
      "list the recorded searches with 'tune db searches --db " + r.db + "'");
  ExpectUsageError("launch --search 1 --rank 6" + db,
                   "--rank: search 1 stores 5 candidates, not rank 6",
                   "pick a rank from 1 to 5, or search again with --top K to "
                   "store more");
  ExpectUsageError("launch --search 1 --gpus 64" + db,
                   "--gpus does not apply with --search",
                   "--search gives the model, GPUs and configuration; drop "
                   "--gpus");
  ExpectUsageError("launch --search 1 --no-db",
                   "--search reads the results database, but --no-db is "
                   "given",
                   "drop --no-db (--db PATH names the database)");
  ExpectUsageError("launch --config " + r.yaml + " --tp 8",
                   "--tp does not apply with --config",
                   "--config gives the model, GPUs and configuration; drop "
                   "--tp");
  ExpectUsageError("launch --config " + r.yaml + " --rank 2",
                   "--rank does not apply with --config",
                   "the file holds one configuration; drop --rank");
  ExpectUsageError("launch --config " + r.dir + "/missing.yaml",
                   "--config file '" + r.dir + "/missing.yaml' not found",
                   "write one with 'tune search ... --out " + r.dir +
                       "/missing.yaml', or check the path");
  ExpectUsageError("launch --gpus 8 --no-db", "--model is required",
                   "give --model and --gpus to search, or launch --search ID "
                   "or --config FILE");

  // A hand-written file without a cluster cannot be placed on nodes.
  const std::string dir = MakeTempDir();
  testing::WriteFile(dir + "/bare.yaml",
                     "model: gpt-tiny\nparallelism:\n  "
                     "data_parallel_size: 2\n");
  ExpectUsageError("launch --config " + dir + "/bare.yaml",
                   "--config " + dir +
                       "/bare.yaml has no cluster.preset, so the cluster to "
                       "launch on is unknown",
                   "launch a file written by 'tune search ... --out FILE', "
                   "or add cluster.preset");
}

}  // namespace
}  // namespace meshtune::tuner
