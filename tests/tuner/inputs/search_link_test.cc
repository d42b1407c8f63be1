// The link from a training run to the search candidate it came from
// (tuner/inputs/search_link.h): the --out file's search: section, the checks
// that decide whether a run is stored against the candidate, `tune train
// --from-search` resolution and its errors, the host-memory check that stops
// plans made for GPU clusters, and the report lines of a linked run.
#include "tuner/inputs/search_link.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "costmodel/estimate.h"
#include "costmodel/model_stats.h"
#include "search_spaces/presets/presets.h"
#include "tests/tuner/run_tune.h"
#include "tests/tuner/seeded_searches.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/train_config_yaml.h"
#include "tuner/render/report_yaml.h"
#include "tuner/train/flags.h"
#include "tuner/train/report.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ParallelConfig;
using testing::MakeTempDir;
using testing::SeedSearches;

// ---- The search: section of the --out file. ----

std::string OutYaml(const SearchLink* link) {
  Inputs in;
  in.model = search_spaces::ResolveModel("gpt-tiny").value();
  in.cluster = search_spaces::ResolveCluster("a100-80g").value();
  in.training.num_gpus = 2;
  in.training.global_batch_size = 4;
  in.training.seq_length = 64;
  costmodel::Estimate e;
  e.config.dp = 2;
  e.fits = true;
  return ConfigToYaml(in, e, link);
}

TEST(SearchLinkYaml, RoundTripsThroughTheTrainConfig) {
  SearchLink link;
  link.db = "/data/runs/t.db";
  link.search_id = 3;
  link.rank = 1;
  link.candidate_id = 27;
  link.predicted_step_time_s = 0.0123456789;
  const std::string yaml = OutYaml(&link);
  EXPECT_NE(yaml.find("search:\n"
                      "  db: \"/data/runs/t.db\"\n"
                      "  id: 3\n"
                      "  rank: 1\n"
                      "  candidate_id: 27\n"
                      "  predicted_step_time_s: 0.0123456789\n"),
            std::string::npos)
      << yaml;
  StatusOr<TrainFileConfig> file = ParseTrainConfigYaml(yaml, "best.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(file->search.has_value());
  EXPECT_EQ(file->search->db, link.db);
  EXPECT_EQ(file->search->search_id, 3);
  EXPECT_EQ(file->search->rank, 1);
  EXPECT_EQ(file->search->candidate_id, 27);
  EXPECT_DOUBLE_EQ(file->search->predicted_step_time_s, 0.0123456789);
  EXPECT_EQ(file->config.parallel.dp, 2);
}

TEST(SearchLinkYaml, AbsentOrNullMeansNoLink) {
  const std::string yaml = OutYaml(nullptr);
  EXPECT_EQ(yaml.find("search:"), std::string::npos);
  StatusOr<TrainFileConfig> file = ParseTrainConfigYaml(yaml, "best.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_FALSE(file->search.has_value());
  file = ParseTrainConfigYaml("model: gpt-tiny\nsearch: null\n", "best.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_FALSE(file->search.has_value());
}

void ExpectYamlError(const std::string& search_section,
                     const std::string& message, const std::string& hint) {
  const std::string yaml = "model: gpt-tiny\nsearch:\n" + search_section;
  StatusOr<TrainFileConfig> file = ParseTrainConfigYaml(yaml, "best.yaml");
  ASSERT_FALSE(file.ok()) << yaml;
  EXPECT_EQ(file.status().message(), message);
  EXPECT_EQ(file.status().hint(), hint);
  EXPECT_EQ(file.status().ExitCode(), 2);
}

constexpr const char* kGoodLink =
    "  db: /t.db\n  id: 1\n  rank: 1\n  candidate_id: 4\n"
    "  predicted_step_time_s: 0.5\n";

TEST(SearchLinkYaml, ErrorsNameFileAndLine) {
  ExpectYamlError(std::string(kGoodLink) + "  candidate: 4\n",
                  "best.yaml:8: unknown key 'candidate' in search",
                  "did you mean 'candidate_id'?");
  ExpectYamlError(
      "  db: /t.db\n  id: first\n  rank: 1\n  candidate_id: 4\n"
      "  predicted_step_time_s: 0.5\n",
      "best.yaml:4: id: expected a positive integer, got 'first'",
      "write a whole number greater than 0, e.g. 'id: 8'");
  ExpectYamlError(
      "  db: /t.db\n  id: 1\n  rank: 0\n  candidate_id: 4\n"
      "  predicted_step_time_s: 0.5\n",
      "best.yaml:5: rank: expected a positive integer, got '0'",
      "write a whole number greater than 0, e.g. 'rank: 8'");
  ExpectYamlError(
      "  db: /t.db\n  id: 1\n  rank: 1\n  candidate_id: 4\n"
      "  predicted_step_time_s: fast\n",
      "best.yaml:7: predicted_step_time_s: expected a non-negative number, "
      "got 'fast'",
      "write a number of 0 or more, e.g. 'predicted_step_time_s: 1.5'");
  ExpectYamlError(
      "  db: [a, b]\n  id: 1\n  rank: 1\n  candidate_id: 4\n"
      "  predicted_step_time_s: 0.5\n",
      "best.yaml:3: db: expected a string, got a list",
      "write the text after the colon, e.g. 'db: my-name'");
  ExpectYamlError(
      "  db: /t.db\n  id: 1\n  rank: 1\n  predicted_step_time_s: 0.5\n",
      "best.yaml:3: search is missing required key 'candidate_id'",
      "add a line 'candidate_id: <integer>'");
  StatusOr<TrainFileConfig> scalar =
      ParseTrainConfigYaml("model: gpt-tiny\nsearch: 3\n", "best.yaml");
  ASSERT_FALSE(scalar.ok());
  EXPECT_EQ(scalar.status().message(),
            "best.yaml:2: expected a search mapping (key: value lines), got "
            "'3'");
}

// ---- CheckRunLink against a seeded database. ----

class LinkCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    seeded_ = SeedSearches(dir_ + "/t.db");
    auto store = results::Store::Open(seeded_.path);
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store.value());
    link_.db = dir_ + "/t.db";
    link_.search_id = seeded_.search1;
    link_.rank = 1;
    link_.candidate_id = seeded_.candidates1.at(0);
    link_.predicted_step_time_s = 0.0125;
    run_.model = search_spaces::ResolveModel("gpt-tiny").value();
    run_.parallel = seeded_.rank1;
    run_.global_batch_size = 4;
    run_.seq_length = 64;
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string Reason() {
    const LinkCheck check = CheckRunLink(store_.get(), false, link_, run_);
    EXPECT_FALSE(check.linked);
    return check.reason;
  }

  std::string dir_;
  testing::SeededSearches seeded_;
  std::unique_ptr<results::Store> store_;
  SearchLink link_;
  engine::TrainConfig run_;
};

TEST_F(LinkCheckTest, TheSameRunInTheSameDatabaseIsLinked) {
  const LinkCheck check = CheckRunLink(store_.get(), false, link_, run_);
  ASSERT_TRUE(check.linked) << check.reason;
  EXPECT_EQ(check.stored.candidate.id, link_.candidate_id);
  EXPECT_EQ(check.stored.search.id, seeded_.search1);
  EXPECT_DOUBLE_EQ(check.stored.candidate.step_time_s, 0.0125);
  EXPECT_EQ(check.stored.db, dir_ + "/t.db");
  // The same file through another spelling of its path.
  link_.db = dir_ + "/./sub/../t.db";
  std::filesystem::create_directory(dir_ + "/sub");
  EXPECT_TRUE(CheckRunLink(store_.get(), false, link_, run_).linked);
}

TEST_F(LinkCheckTest, NoDatabase) {
  LinkCheck check = CheckRunLink(nullptr, true, link_, run_);
  EXPECT_FALSE(check.linked);
  EXPECT_EQ(check.reason, "--no-db records nothing");
  check = CheckRunLink(nullptr, false, link_, run_);
  EXPECT_EQ(check.reason, "there is no results database");
}

TEST_F(LinkCheckTest, AnotherDatabase) {
  link_.db = "/elsewhere/t.db";
  EXPECT_EQ(Reason(),
            "the search was recorded in /elsewhere/t.db, but this "
            "run records into " +
                dir_ + "/t.db (pass --db /elsewhere/t.db to link it)");
}

TEST_F(LinkCheckTest, SearchOrCandidateMissing) {
  link_.search_id = 99;
  EXPECT_EQ(Reason(), "there is no search 99 in " + dir_ + "/t.db");
  link_.search_id = seeded_.search1;
  link_.candidate_id = 999;
  EXPECT_EQ(Reason(), "search " + std::to_string(seeded_.search1) + " in " +
                          dir_ + "/t.db has no candidate 999 at rank 1");
  // The id of rank 2 under rank 1: not that candidate either.
  link_.candidate_id = seeded_.candidates1.at(1);
  EXPECT_EQ(Reason(), "search " + std::to_string(seeded_.search1) + " in " +
                          dir_ + "/t.db has no candidate " +
                          std::to_string(seeded_.candidates1.at(1)) +
                          " at rank 1");
}

TEST_F(LinkCheckTest, TheRunDiffersFromThePrediction) {
  run_.model = search_spaces::ResolveModel("llama-tiny").value();
  EXPECT_EQ(Reason(), "the run trains llama-tiny, the search was for gpt-tiny");
  run_.model = search_spaces::ResolveModel("gpt-tiny").value();
  run_.global_batch_size = 8;
  EXPECT_EQ(Reason(),
            "the run's batch (gbs 8, seq 64) differs from the search's (gbs "
            "4, seq 64)");
  run_.global_batch_size = 4;
  run_.seq_length = 32;
  EXPECT_EQ(Reason(),
            "the run's batch (gbs 4, seq 32) differs from the search's (gbs "
            "4, seq 64)");
  run_.seq_length = 64;
  run_.parallel.mbs = 2;
  EXPECT_EQ(Reason(),
            "the run's config tp1 pp1 vpp1 cp1 ep1 dp2 mbs2 none differs "
            "from the candidate's tp1 pp1 vpp1 cp1 ep1 dp2 mbs1 none");
}

TEST(SearchLink, WarningNamesTheLink) {
  SearchLink link;
  link.search_id = 3;
  link.rank = 2;
  link.candidate_id = 12;
  EXPECT_EQ(NotLinkedWarning(link, "--no-db records nothing"),
            "tune: warning: this run is not linked to search 3 rank 2 "
            "(candidate 12): --no-db records nothing");
}

// ---- tune train --from-search: resolution and its errors. ----

TrainFlags ParseFlags(const std::vector<std::string>& args) {
  CLI::App app("test");
  TrainFlags flags;
  AddTrainFlags(&app, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return flags;
}

class FromSearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    seeded_ = SeedSearches(dir_ + "/t.db");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  StatusOr<TrainPlan> Resolve(std::vector<std::string> args) {
    args.insert(args.end(), {"--db", seeded_.path});
    return ResolveTrainFlags(ParseFlags(args));
  }
  void ExpectError(const std::vector<std::string>& args,
                   const std::string& message, const std::string& hint) {
    StatusOr<TrainPlan> plan = Resolve(args);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().message(), message);
    EXPECT_EQ(plan.status().hint(), hint);
    EXPECT_EQ(plan.status().ExitCode(), 2);
  }

  std::string dir_;
  testing::SeededSearches seeded_;
};

TEST_F(FromSearchTest, BuildsTheRunFromTheCandidate) {
  StatusOr<TrainPlan> plan =
      Resolve({"--from-search", std::to_string(seeded_.search1), "--steps", "7",
               "--lr", "1e-3"});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const engine::TrainConfig& c = plan->config;
  EXPECT_EQ(c.model.name, "gpt-tiny");
  EXPECT_EQ(c.parallel, seeded_.rank1);
  EXPECT_EQ(c.global_batch_size, 4);
  EXPECT_EQ(c.seq(), 64);
  EXPECT_EQ(c.train_iters, 7);
  EXPECT_FLOAT_EQ(c.optimizer.lr, 1e-3f);
  EXPECT_EQ(plan->nproc, 2);
  ASSERT_TRUE(plan->search.has_value());
  EXPECT_EQ(plan->search->db, dir_ + "/t.db");
  EXPECT_EQ(plan->search->search_id, seeded_.search1);
  EXPECT_EQ(plan->search->rank, 1);
  EXPECT_EQ(plan->search->candidate_id, seeded_.candidates1.at(0));
  EXPECT_DOUBLE_EQ(plan->search->predicted_step_time_s, 0.0125);
  EXPECT_TRUE(ValidateTrainPlan(plan.value()).ok());

  plan = Resolve(
      {"--from-search", std::to_string(seeded_.search1), "--rank", "2"});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->config.parallel, seeded_.rank2);
  EXPECT_EQ(plan->search->candidate_id, seeded_.candidates1.at(1));
  EXPECT_EQ(plan->search->rank, 2);
  // The ranks of an MPI job get the same two flags.
  const std::vector<std::string> args = TrainFlagsToArgs(
      ParseFlags({"--from-search", "1", "--rank", "2", "--db", "t.db"}));
  EXPECT_EQ(args, (std::vector<std::string>{"--from-search", "1", "--rank", "2",
                                            "--db", "t.db"}));
}

TEST_F(FromSearchTest, UnknownSearchSaysHowToListThem) {
  ExpectError({"--from-search", "42"},
              "--from-search: no search 42 in " + dir_ + "/t.db",
              "list the recorded searches with 'tune db searches --db " + dir_ +
                  "/t.db'");
  ExpectError({"--from-search", "first"},
              "--from-search must be a positive integer, got 'first'",
              "write a whole number, e.g. --from-search 8");
}

TEST_F(FromSearchTest, RankOutOfRangeSaysHowManyCandidates) {
  const std::string id = std::to_string(seeded_.search1);
  ExpectError({"--from-search", id, "--rank", "4"},
              "--rank: search " + id + " stores 3 candidates, not rank 4",
              "pick a rank from 1 to 3, or search again with --top K to store "
              "more");
  ExpectError({"--from-search", std::to_string(seeded_.search2), "--rank", "2"},
              "--rank: search " + std::to_string(seeded_.search2) +
                  " stores 1 candidate, not rank 2",
              "use rank 1, the only one stored, or search again with --top K "
              "to store more");
  ExpectError({"--from-search", id, "--rank", "0"},
              "--rank must be a positive integer, got 0",
              "write a whole number greater than 0, e.g. --rank 8");
}

TEST_F(FromSearchTest, InfeasibleCandidateIsRefused) {
  const std::string id = std::to_string(seeded_.search1);
  ExpectError({"--from-search", id, "--rank", "3"},
              "--from-search " + id +
                  " --rank 3: candidate tp4 pp1 vpp1 cp1 ep1 dp1 mbs1 none "
                  "is infeasible (out of memory)",
              "use --rank 1 to 2, its feasible candidates");
}

TEST_F(FromSearchTest, ModelThatIsNotAPreset) {
  const std::string id = std::to_string(seeded_.search2);
  ExpectError({"--from-search", id},
              "--from-search " + id + " --rank 1: search " + id +
                  " was for model 'my-model', which is not a built-in preset",
              "train the search's --out file instead: tune search ... --out "
              "best.yaml, then tune train --config best.yaml");
}

TEST_F(FromSearchTest, RefusesWhatWouldChangeTheCandidate) {
  ExpectError({"--from-search", "1", "--config", "best.yaml"},
              "--from-search and --config both say what to train",
              "pass one of them: --config FILE trains a 'tune search --out' "
              "file, --from-search ID a search recorded in the database");
  const std::string hint_tail =
      "; to train another layout, use 'tune train --model M --tp T ...' "
      "(that run is not linked to the search)";
  const std::vector<std::vector<std::string>> layouts = {
      {"--tp", "2"},
      {"--pp", "2"},
      {"--vpp", "2"},
      {"--dp", "1"},
      {"--mbs", "2"},
      {"--gbs", "8"},
      {"--seq-len", "32"},
      {"--recompute", "selective"},
      {"--sp"},
      {"--no-sp"},
      {"--dist-opt"},
      {"--no-dist-opt"},
      {"--model", "gpt-tiny"}};
  for (const auto& extra : layouts) {
    std::vector<std::string> args = {"--from-search", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    ExpectError(args,
                "--from-search and " + extra[0] +
                    " cannot be combined: the search candidate fixes the "
                    "model, batch and parallel layout",
                "leave out " + extra[0] + hint_tail);
  }
  StatusOr<TrainPlan> no_db =
      ResolveTrainFlags(ParseFlags({"--from-search", "1", "--no-db"}));
  ASSERT_FALSE(no_db.ok());
  EXPECT_EQ(no_db.status().message(),
            "--from-search reads the search from the results database, which "
            "--no-db turns off");
  EXPECT_EQ(no_db.status().hint(),
            "leave out --no-db (the database is --db PATH, else $TUNE_DB, "
            "else ./tune.db)");
  ExpectError({"--model", "gpt-tiny", "--rank", "2"},
              "--rank applies to --from-search only",
              "add --from-search ID (tune db searches lists them), or leave "
              "out --rank");
}

TEST_F(FromSearchTest, MissingDatabaseIsAnInputError) {
  StatusOr<TrainPlan> plan = ResolveTrainFlags(
      ParseFlags({"--from-search", "1", "--db", dir_ + "/none.db"}));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(dir_ + "/none.db"), std::string::npos)
      << plan.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/none.db"))
      << "a read-only lookup must not create the database";
}

// ---- Plans that cannot run on this machine. ----

engine::TrainConfig Config(const std::string& model, int64_t tp, int64_t pp,
                           int64_t dp, bool dist_opt) {
  engine::TrainConfig c;
  c.model = search_spaces::ResolveModel(model).value();
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.dp = dp;
  c.parallel.dist_opt = dist_opt;
  return c;
}

TEST(HostMemory, MinStateIsFp32WeightsGradsAndAdam) {
  const engine::TrainConfig one = Config("gpt-tiny", 1, 1, 1, false);
  const double params =
      costmodel::ComputeModelStats(one.model, one.padded_vocab_size(),
                                   one.model.seq_length)
          .total_params;
  // 4 + 4 + 8 bytes per parameter per replica.
  EXPECT_DOUBLE_EQ(MinStateBytes(one), 16 * params);
  EXPECT_DOUBLE_EQ(MinStateBytes(Config("gpt-tiny", 1, 1, 4, false)),
                   4 * 16 * params);
  // The distributed optimizer keeps one copy of the Adam moments.
  EXPECT_DOUBLE_EQ(MinStateBytes(Config("gpt-tiny", 1, 1, 4, true)),
                   4 * 8 * params + 8 * params);
}

TEST(HostMemory, AClusterPlanIsRefusedWithTheSizes) {
  const engine::TrainConfig c = Config("gpt3-175b", 8, 16, 8, true);
  const Status s = CheckHostMemory(c, 64);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.ExitCode(), 2);
  char need[64];
  std::snprintf(need, sizeof(need), "%.1f GiB",
                MinStateBytes(c) / (1024.0 * 1024.0 * 1024.0));
  EXPECT_EQ(s.message(),
            "gpt3-175b on 1024 ranks (tp8 pp16 vpp1 cp1 ep1 dp8 mbs1 none "
            "dist_opt) needs at least " +
                std::string(need) +
                " for fp32 weights, gradients and Adam states; this machine "
                "has 64.0 GiB");
  EXPECT_EQ(s.hint(),
            "train a model that fits here (tune models), e.g. a search made "
            "for this machine: tune search --model gpt-tiny --gpus 2 --gpu "
            "local");
  EXPECT_TRUE(CheckHostMemory(Config("gpt-tiny", 1, 1, 2, false), 1).ok());
  // An unreadable /proc/meminfo does not block a run.
  EXPECT_TRUE(CheckHostMemory(c, 0).ok());
}

// ---- What a linked run prints. ----

StoredCandidate Linked() {
  StoredCandidate s;
  s.db = "/w/t.db";
  s.search.id = 3;
  s.search.gpu = "local";
  s.search.gpus = 2;
  s.candidate.id = 12;
  s.candidate.rank = 1;
  s.candidate.step_time_s = 0.0125;
  return s;
}

TEST(SearchLinkReport, StartupSummaryAndJson) {
  StoredCandidate linked = Linked();
  linked.candidate.calibration = "datasheet";
  // A linked run's one prediction is the candidate's, named with its search,
  // cluster and calibration.
  const StepTimePrediction prediction = CandidatePrediction(linked);
  EXPECT_EQ(FormatPredictionLine(prediction),
            "  predicted:   12.5 ms per iteration (search 3 rank 1, candidate "
            "12 in /w/t.db: 2 x local, datasheet calibration)\n");
  TrainSummary s;
  s.iterations = 5;
  s.measured_steps = 3;
  s.step_time_median_s = 0.010;
  const std::string text = FormatSummary(s, prediction);
  EXPECT_NE(text.find("summary: predicted 12.5 ms per iteration (search 3 "
                      "rank 1, candidate 12 in /w/t.db: 2 x local, datasheet "
                      "calibration), measured median 10.0 ms: error +25.0 %, "
                      "measured / predicted = 0.80\n"),
            std::string::npos)
      << text;
  s.step_time_median_s = 0.025;
  EXPECT_NE(FormatSummary(s, prediction).find("error -50.0 %"),
            std::string::npos);
  EXPECT_EQ(FormatSummary(s, StepTimePrediction()).find("predicted"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(SignedErrorPercent(0.0125, 0.010), 25.0);

  engine::TrainConfig c;
  c.model.name = "gpt-tiny";
  c.global_batch_size = 4;
  c.seq_length = 64;
  const nlohmann::json with = TrainRunToJson(c, {}, s, {}, prediction, &linked);
  EXPECT_EQ(with["search_id"], 3);
  EXPECT_EQ(with["candidate_id"], 12);
  EXPECT_DOUBLE_EQ(with["predicted_step_s"].get<double>(), 0.0125);
  EXPECT_DOUBLE_EQ(with["predicted_step_time_s"].get<double>(), 0.0125);
  EXPECT_EQ(with["prediction_source"], prediction.source);
  const nlohmann::json without =
      TrainRunToJson(c, {}, s, {}, StepTimePrediction());
  for (const char* key : {"search_id", "candidate_id", "predicted_step_s"}) {
    ASSERT_TRUE(without.contains(key)) << key;
    EXPECT_TRUE(without[key].is_null()) << key;
  }
}

}  // namespace
}  // namespace meshtune::tuner
