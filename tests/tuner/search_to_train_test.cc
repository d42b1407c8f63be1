// From `tune search --out` to `tune train` and back into the database,
// through the binary: a run of the file's config is stored against the
// search candidate it came from (predicted vs measured), a run that differs
// or records elsewhere says why it is not linked, `--from-search` trains a
// recorded candidate, and `tune db searches|runs` list both sides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "results/store.h"
#include "tests/tuner/run_tune.h"
#include "tests/tuner/seeded_searches.h"
#include "tuner/inputs/train_config_yaml.h"
#include "tuner/train/launcher.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTune;
using testing::TuneRun;

// One OpenMP thread per rank (the CI machine has two shared cores); the
// database is always named on the command line.
const char kEnv[] = "OMP_NUM_THREADS=1 TUNE_DB=";
// gpt-tiny, 2 sequences of 32 tokens per step on one rank: seconds.
const char kSearch[] =
    "search --model gpt-tiny --gpus 1 " MESHTUNE_PINNED_LOCAL_GPU
    " --gbs 2 --seq-len 32 --cp 1 "
    "--out best.yaml --db t.db";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class SearchToTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    const TuneRun search = RunTune(kSearch, dir_, kEnv);
    ASSERT_EQ(search.exit_code, 0) << search.err;
    auto store = results::Store::Open(dir_ + "/t.db");
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto candidates = store.value()->GetCandidates(1);
    ASSERT_TRUE(candidates.ok());
    ASSERT_FALSE(candidates->empty());
    best_ = candidates->front();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<results::TrainingRun> Runs() {
    auto store = results::Store::Open(dir_ + "/t.db");
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return {};
    auto runs = store.value()->GetTrainingRuns();
    EXPECT_TRUE(runs.ok());
    return runs.ok() ? runs.value() : std::vector<results::TrainingRun>();
  }

  std::string dir_;
  results::CandidateRecord best_;  // rank 1 of search 1
};

TEST_F(SearchToTrainTest, OutFileNamesTheRecordedCandidate) {
  const std::string yaml = ReadFile(dir_ + "/best.yaml");
  EXPECT_TRUE(Contains(yaml, "search:\n  db: \"" + dir_ +
                                 "/t.db\"\n  id: 1\n  rank: 1\n"
                                 "  candidate_id: " +
                                 std::to_string(best_.id) +
                                 "\n  predicted_step_time_s: "))
      << yaml;
  StatusOr<TrainFileConfig> file = ReadTrainConfigYaml(dir_ + "/best.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(file->search.has_value());
  EXPECT_NEAR(file->search->predicted_step_time_s, best_.step_time_s,
              1e-9 * best_.step_time_s);
  EXPECT_EQ(file->config.parallel, best_.config);
  // Without a database there is nothing to link to.
  const TuneRun no_db =
      RunTune("search --model gpt-tiny --gpus 1 " MESHTUNE_PINNED_LOCAL_GPU
              " --gbs 2 "
              "--seq-len 32 --out plain.yaml --no-db",
              dir_, kEnv);
  ASSERT_EQ(no_db.exit_code, 0) << no_db.err;
  EXPECT_FALSE(Contains(ReadFile(dir_ + "/plain.yaml"), "search:"));
}

TEST_F(SearchToTrainTest, ConfigRunIsStoredAgainstItsCandidate) {
  const TuneRun train =
      RunTune("train --config best.yaml --steps 3 --db t.db", dir_, kEnv);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_FALSE(Contains(train.err, "warning")) << train.err;
  char predicted[32];
  std::snprintf(predicted, sizeof(predicted), "%.1f", 1000 * best_.step_time_s);
  // One prediction, from one source: the candidate's, as the search stored
  // it (what the run is recorded against), named with its calibration.
  const std::string source =
      "search 1 rank 1, candidate " + std::to_string(best_.id) + " in " + dir_ +
      "/t.db: 1 x local, " + best_.calibration + " calibration";
  EXPECT_TRUE(Contains(train.out, std::string("  predicted:   ") + predicted +
                                      " ms per iteration (" + source + ")\n"))
      << train.out;
  EXPECT_TRUE(Contains(train.out, std::string("summary: predicted ") +
                                      predicted + " ms per iteration (" +
                                      source + "), measured median "))
      << train.out;
  std::istringstream lines(train.out);
  int predicted_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    if (Contains(line, "predicted")) ++predicted_lines;
  }
  EXPECT_EQ(predicted_lines, 2) << train.out;
  EXPECT_TRUE(Contains(train.err,
                       "tune: recorded training run 1 in t.db "
                       "(candidate " +
                           std::to_string(best_.id) + ")\n"))
      << train.err;

  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].candidate_id, best_.id);
  auto store = results::Store::Open(dir_ + "/t.db");
  ASSERT_TRUE(store.ok());
  auto joined = store.value()->GetPredictedVsMeasured(1);
  ASSERT_TRUE(joined.ok());
  ASSERT_EQ(joined->size(), 1u);
  EXPECT_EQ((*joined)[0].candidate_id, best_.id);
  EXPECT_EQ((*joined)[0].training_run_id, runs[0].id);
  EXPECT_DOUBLE_EQ((*joined)[0].predicted_step_time_s, best_.step_time_s);
  EXPECT_DOUBLE_EQ((*joined)[0].measured_step_time_s,
                   runs[0].step_time_median_s);

  // tune db runs shows the pair; --search 1 keeps it.
  for (const char* args :
       {"db runs --db t.db", "db runs --search 1 --db t.db"}) {
    const TuneRun list = RunTune(args, dir_, kEnv);
    ASSERT_EQ(list.exit_code, 0) << list.err;
    EXPECT_TRUE(Contains(list.out, " error_pct\n")) << list.out;
    EXPECT_TRUE(Contains(list.out, std::string(" ") + predicted + "  "))
        << list.out;
    EXPECT_EQ(std::count(list.out.begin(), list.out.end(), '\n'), 2)
        << list.out;
  }
}

TEST_F(SearchToTrainTest, UnlinkedRunsSayWhy) {
  const std::string link =
      "tune: warning: this run is not linked to search 1 rank 1 (candidate " +
      std::to_string(best_.id) + "): ";
  // Another global batch size: another step time than predicted.
  TuneRun train = RunTune(
      "train --config best.yaml --steps 2 --gbs 4 --db t.db", dir_, kEnv);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_TRUE(Contains(
      train.err, link + "the run's batch (gbs 4, seq 32) differs from the "
                        "search's (gbs 2, seq 32)\n"))
      << train.err;
  EXPECT_FALSE(Contains(train.out, "(search 1 rank 1")) << train.out;
  EXPECT_TRUE(Contains(train.out, "(cost model now: local preset"))
      << train.out;

  // Another micro-batch size: another parallel config.
  const std::string mbs = best_.config.mbs == 1 ? "2" : "1";
  search_spaces::ParallelConfig changed = best_.config;
  changed.mbs = std::stoll(mbs);
  train =
      RunTune("train --config best.yaml --steps 2 --mbs " + mbs + " --db t.db",
              dir_, kEnv);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_TRUE(Contains(train.err, link + "the run's config " +
                                      search_spaces::ToString(changed) +
                                      " differs from the candidate's " +
                                      best_.config_text + "\n"))
      << train.err;

  // Both runs were recorded, unlinked.
  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].candidate_id, 0);
  EXPECT_EQ(runs[1].candidate_id, 0);

  // Another database: the candidate is not there.
  train =
      RunTune("train --config best.yaml --steps 2 --db other.db", dir_, kEnv);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_TRUE(Contains(train.err, link + "the search was recorded in " + dir_ +
                                      "/t.db, but this run records into " +
                                      dir_ + "/other.db (pass --db " + dir_ +
                                      "/t.db to link it)\n"))
      << train.err;

  train =
      RunTune("train --config best.yaml --steps 2 --no-db --json", dir_, kEnv);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_TRUE(Contains(train.err, link + "--no-db records nothing\n"))
      << train.err;
  const nlohmann::json j = nlohmann::json::parse(train.out);
  EXPECT_TRUE(j["search_id"].is_null());
  EXPECT_TRUE(j["candidate_id"].is_null());
  EXPECT_TRUE(j["predicted_step_s"].is_null());

  // Unlinked rows show dashes in tune db runs; --search 1 has none of them.
  TuneRun list = RunTune("db runs --db t.db", dir_, kEnv);
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(std::regex_search(list.out, std::regex(R"(  +- +- +- +-\n)")))
      << list.out;
  list = RunTune("db runs --search 1 --db t.db", dir_, kEnv);
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out, "");
  EXPECT_EQ(list.err,
            "tune: no training runs of search 1 in t.db; 'tune "
            "train --from-search 1' records one\n");
}

TEST_F(SearchToTrainTest, FromSearchTrainsAndLinksTheCandidate) {
  const TuneRun train =
      RunTune("train --from-search 1 --steps 2 --db t.db --json", dir_, kEnv);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_FALSE(Contains(train.err, "warning")) << train.err;
  EXPECT_TRUE(Contains(train.err, "  predicted:   ")) << train.err;
  EXPECT_TRUE(Contains(train.err,
                       " ms per iteration (search 1 rank 1, "
                       "candidate "))
      << train.err;
  const nlohmann::json j = nlohmann::json::parse(train.out);
  EXPECT_EQ(j["search_id"], 1);
  EXPECT_EQ(j["candidate_id"], best_.id);
  EXPECT_DOUBLE_EQ(j["predicted_step_s"].get<double>(), best_.step_time_s);
  EXPECT_DOUBLE_EQ(j["predicted_step_time_s"].get<double>(), best_.step_time_s);
  EXPECT_EQ(j["config"]["gbs"], 2);
  EXPECT_EQ(j["config"]["seq_length"], 32);
  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].candidate_id, best_.id);
  EXPECT_EQ(runs[0].config, best_.config);
}

TEST_F(SearchToTrainTest, FromSearchErrorsExitTwoBeforeTraining) {
  TuneRun run = RunTune("train --from-search 7 --db t.db", dir_, kEnv);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "tune: error: --from-search: no search 7 in " + dir_ +
                         "/t.db\ntune: hint: list the recorded searches with "
                         "'tune db searches --db " +
                         dir_ + "/t.db'\n");
  run = RunTune("train --from-search 1 --tp 2 --db t.db", dir_, kEnv);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind("tune: error: --from-search and --tp cannot be "
                          "combined",
                          0),
            0u)
      << run.err;

  // A search for a GPU cluster: refused with the memory it would need.
  {
    auto store = results::Store::Open(dir_ + "/t.db");
    ASSERT_TRUE(store.ok());
    results::SearchRecord big;
    big.model = "gpt3-175b";
    big.gpu = "a100-80g";
    big.gpus = 1024;
    big.gpus_per_node = 8;
    big.gbs = 1536;
    big.seq_length = 2048;
    big.precision = "bf16";
    search_spaces::ParallelConfig c;
    c.tp = 8;
    c.pp = 16;
    c.dp = 8;
    c.sp = true;
    c.dist_opt = true;
    auto id = store.value()->PutSearch(
        big, {testing::SeedCandidate(1, c, 15.0, true)},
        {"0.1.0", "abc", testing::kSeedTime});
    ASSERT_TRUE(id.ok());
    ASSERT_EQ(id.value(), 2);
  }
  run = RunTune("train --from-search 2 --db t.db", dir_, kEnv);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err.rfind("tune: error: gpt3-175b on 1024 ranks (tp8 pp16 "
                          "vpp1 cp1 ep1 dp8 sp mbs1 none dist_opt) needs at "
                          "least ",
                          0),
            0u)
      << run.err;
  EXPECT_TRUE(Contains(run.err, "\ntune: hint: train a model that fits here"))
      << run.err;
}

// The flow of the README: two ranks under mpirun, linked like one.
TEST(SearchToTrain, TwoRanksUnderMpirunAreLinked) {
  if (FindOnPath("mpirun").empty()) GTEST_SKIP() << "mpirun is not on PATH";
  const std::string dir = MakeTempDir();
  const TuneRun search =
      RunTune("search --model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
              " --gbs 4 --seq-len 64 "
              "--cp 1 --out best.yaml --db t.db",
              dir, kEnv);
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const TuneRun train = RunTune(
      "train --config best.yaml --steps 3 --nproc 2 --db t.db", dir, kEnv);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_FALSE(Contains(train.err, "warning")) << train.err;
  EXPECT_TRUE(Contains(train.out, "  ranks:       2 (MPI processes)"))
      << train.out;
  EXPECT_TRUE(Contains(train.out,
                       " ms per iteration (search 1 rank 1, "
                       "candidate "))
      << train.out;
  auto store = results::Store::Open(dir + "/t.db");
  ASSERT_TRUE(store.ok());
  auto joined = store.value()->GetPredictedVsMeasured();
  ASSERT_TRUE(joined.ok());
  ASSERT_EQ(joined->size(), 1u);
  EXPECT_EQ((*joined)[0].search_id, 1);
  EXPECT_EQ((*joined)[0].rank, 1);
  store.value().reset();
  std::filesystem::remove_all(dir);
}

// ---- tune db searches | runs on a database with known rows. ----

class DbListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    seeded_ = testing::SeedSearches(dir_ + "/s.db");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  TuneRun Db(const std::string& args) {
    return RunTune("db " + args + " --db s.db", dir_, kEnv);
  }
  std::string dir_;
  testing::SeededSearches seeded_;
};

TEST_F(DbListTest, SearchesShowTheirBestCandidate) {
  const TuneRun run = Db("searches");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out,
            "id  time_utc          model     gpus  gpu       gbs  seq  "
            "evaluated  feasible  best_config                         "
            "best_step_ms\n"
            " 1  2023-11-14 22:13  gpt-tiny     2  local       4   64         "
            "12         2  tp1 pp1 vpp1 cp1 ep1 dp2 mbs1 none          12.5\n"
            " 2  2023-11-14 22:13  my-model     8  a100-80g    8  128          "
            "3         1  tp1 pp1 vpp1 cp1 ep1 dp1 mbs1 none        1500.0\n");
}

TEST_F(DbListTest, RunsShowPredictedAndMeasured) {
  // Linked to rank 1 (predicted 12.5 ms, measured 10 ms: +25 %) and one
  // run that is not linked.
  testing::SeedRun(seeded_.path, seeded_.candidates1.at(0), seeded_.rank1,
                   0.010);
  testing::SeedRun(seeded_.path, 0, seeded_.rank2, 0.040);
  TuneRun run = Db("runs");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "id  time_utc          model     config                           "
            "      steps  median_ms  tokens_per_s  final_loss  search  rank  "
            "predicted_ms  error_pct\n"
            " 1  2023-11-14 22:13  gpt-tiny  tp1 pp1 vpp1 cp1 ep1 dp2 mbs1 "
            "none         3       10.0         25600      5.2500       1     "
            "1          12.5      +25.0\n"
            " 2  2023-11-14 22:13  gpt-tiny  tp2 pp1 vpp1 cp1 ep1 dp1 sp mbs1 "
            "none      3       40.0          6400      5.2500       -     -  "
            "           -          -\n");
  run = Db("runs --search 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 2) << run.out;
  EXPECT_TRUE(Contains(run.out, "\n 1  ")) << run.out;
}

TEST_F(DbListTest, EmptyListsAndErrors) {
  TuneRun run = Db("runs");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "tune: no training runs in s.db; 'tune train' records them\n");
  run = Db("runs --search 9");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "tune: error: --search: no search 9 in " + dir_ +
                         "/s.db\n"
                         "tune: hint: list the recorded searches with 'tune db "
                         "searches --db " +
                         dir_ + "/s.db'\n");
  run = Db("runs --search x");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: --search must be a positive integer, got 'x'\n"
            "tune: hint: write a whole number, e.g. --search 8\n");
  {
    auto empty = results::Store::Open(dir_ + "/e.db");
    ASSERT_TRUE(empty.ok());
  }
  run = RunTune("db searches --db e.db", dir_, kEnv);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "tune: e.db holds no searches yet; 'tune search' records them\n");
}

}  // namespace
}  // namespace meshtune::tuner
