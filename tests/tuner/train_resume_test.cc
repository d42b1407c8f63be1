// `tune train --load` (issue 16): the data is sized for the resumed run, so
// a checkpoint saved with a larger --gbs resumes (D2); a checkpoint already
// at --steps, one whose metadata was edited, or one with a FIFO for a shard
// is a one-line input error (exit 2). Also --ep, which the engine refuses
// above 1 with the same message from a flag or a --config file, --cp, which
// it trains, and what `train --help` says about the cuda backend.
//
// One tiny checkpoint (gpt-tiny, seq 32, gbs 8, 3 steps over a ~100-token
// corpus) is made once through the binary; the checks run in process
// (ResolveTrainFlags) where they can, and through the binary for the exact
// stderr and exit code.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/tuner/run_tune.h"
#include "tuner/train/flags.h"

namespace meshtune::tuner {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::RunTune;
using testing::TuneRun;
using testing::WriteFile;

// One OpenMP thread (the CI machine has two cores shared by everything) and
// no results database.
const char kEnv[] = "OMP_NUM_THREADS=1 TUNE_DB=";

TrainFlags ParseFlags(const std::vector<std::string>& args) {
  CLI::App app("test");
  TrainFlags flags;
  AddTrainFlags(&app, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return flags;
}

void ExpectError(const TuneRun& run, int exit_code, const std::string& error,
                 const std::string& hint) {
  EXPECT_EQ(run.exit_code, exit_code);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "tune: error: " + error + "\ntune: hint: " + hint + "\n");
}

class TrainResumeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir());
    WriteFile(*dir_ + "/small.txt",
              "A tiny corpus: a hundred bytes or so of text, far fewer tokens "
              "than the samples a resumed run reads.\n");
    const TuneRun data =
        RunTune("data --input " + *dir_ + "/small.txt --output-prefix " +
                *dir_ + "/small");
    ASSERT_EQ(data.exit_code, 0) << data.err;
    const TuneRun saved = RunTune(
        "train --model gpt-tiny --steps 3 --seq-len 32 --gbs 8 --data " +
            *dir_ + "/small --save " + *dir_ + "/ck --no-db",
        "", kEnv);
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  // A copy of the checkpoint that a test may damage.
  static std::string CopyCheckpoint(const std::string& name) {
    const std::string to = *dir_ + "/" + name;
    fs::remove_all(to);
    fs::copy(*dir_ + "/ck", to, fs::copy_options::recursive);
    return to;
  }

  static std::string Small() { return *dir_ + "/small"; }
  static std::string Ck() { return *dir_ + "/ck"; }

  static std::string* dir_;
};

std::string* TrainResumeTest::dir_ = nullptr;

TEST_F(TrainResumeTest, DataIsSizedForTheResumedRun) {
  // Saved at gbs 8 after 3 steps: step 4 at gbs 2 reads samples 24 and 25,
  // past the 4·2 samples a run without the checkpoint reads.
  StatusOr<TrainPlan> plan = ResolveTrainFlags(
      ParseFlags({"--model", "gpt-tiny", "--steps", "4", "--seq-len", "32",
                  "--gbs", "2", "--data", Small(), "--load", Ck()}));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->data.num_samples, 26);
  // The same gbs: what a straight run reads, so the data order is the same.
  plan = ResolveTrainFlags(
      ParseFlags({"--model", "gpt-tiny", "--steps", "5", "--seq-len", "32",
                  "--gbs", "8", "--data", Small(), "--load", Ck()}));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->data.num_samples, 40);
}

TEST_F(TrainResumeTest, SmallerGbsResumesThroughTheBinary) {
  // The issue's command: it used to abort in GptDataset::GetSample (134).
  const TuneRun run = RunTune(
      "train --model gpt-tiny --steps 4 --seq-len 32 "
      "--gbs 2 --data " +
          Small() + " --load " + Ck() + " --no-db",
      "", kEnv);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex(R"( iteration +4/ +4 \| consumed samples: +26 \|)")))
      << run.out;
}

TEST_F(TrainResumeTest, CheckpointAtStepsLeavesNothingToTrain) {
  const std::string message = "the checkpoint in " + Ck() +
                              " is at iteration 3 >= --steps 3: nothing to "
                              "train";
  const std::string hint =
      "pass --steps greater than 3 (--steps counts the checkpoint's "
      "iterations), or leave out --load";
  const StatusOr<TrainPlan> plan = ResolveTrainFlags(
      ParseFlags({"--model", "gpt-tiny", "--steps", "3", "--seq-len", "32",
                  "--gbs", "8", "--load", Ck()}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), message);
  EXPECT_EQ(plan.status().hint(), hint);
  // It used to print "final lm loss 0" for a run that trained nothing.
  ExpectError(RunTune("train --model gpt-tiny --steps 2 --seq-len 32 --gbs 8 "
                      "--load " +
                          Ck() + " --no-db",
                      "", kEnv),
              2,
              "the checkpoint in " + Ck() +
                  " is at iteration 3 >= --steps 2: nothing to train",
              "pass --steps greater than 3 (--steps counts the checkpoint's "
              "iterations), or leave out --load");
}

TEST_F(TrainResumeTest, EditedConsumedSamplesIsAnInputError) {
  const std::string ck = CopyCheckpoint("edited");
  const std::string meta_path = ck + "/iter_0000003/metadata.json";
  nlohmann::json meta = nlohmann::json::parse(std::ifstream(meta_path));
  meta["consumed_samples"] = -5;
  std::ofstream(meta_path) << meta.dump(1);
  const std::string message =
      meta_path +
      ": consumed_samples -5 is below iteration 3 (every iteration consumes "
      "at least one sample)";
  const std::string hint =
      "the metadata was edited or is corrupt; restore it, or load an older "
      "checkpoint";
  const StatusOr<TrainPlan> plan =
      ResolveTrainFlags(ParseFlags({"--model", "gpt-tiny", "--steps", "4",
                                    "--seq-len", "32", "--load", ck}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), message);
  EXPECT_EQ(plan.status().ExitCode(), 2);
  ExpectError(RunTune("train --model gpt-tiny --steps 4 --seq-len 32 --gbs 2 "
                      "--data " +
                          Small() + " --load " + ck + " --no-db",
                      "", kEnv),
              2, message, hint);
}

TEST_F(TrainResumeTest, FifoForAShardIsAnInputErrorNotAHang) {
  const std::string ck = CopyCheckpoint("fifo");
  const std::string shard = ck + "/iter_0000003/shard_tp0_pp0.bin";
  fs::remove(shard);
  ASSERT_EQ(::mkfifo(shard.c_str(), 0600), 0);
  // `timeout` ends a run that blocks on the FIFO (the bug) instead of the
  // test waiting for ever.
  ExpectError(RunTune("train --model gpt-tiny --steps 4 --seq-len 32 --gbs 2 "
                      "--data " +
                          Small() + " --load " + ck + " --no-db",
                      "", std::string(kEnv) + " timeout -s KILL 120"),
              2,
              "checkpoint shard '" + shard +
                  "' is not a regular file (a FIFO, socket or device)",
              "the checkpoint is corrupt; load an older checkpoint or save "
              "again");
}

// ---- --cp / --ep ----

TEST(TrainCpEp, CpIsTrainedOnCpTimesMoreRanks) {
  // Context parallelism is built in the CPU engine: --cp 2 plans 2 ranks
  // per tp·pp·dp position and passes validation.
  StatusOr<TrainPlan> plan = ResolveTrainFlags(
      ParseFlags({"--model", "gpt-tiny", "--cp", "2", "--dp", "2"}));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->config.parallel.cp, 2);
  EXPECT_EQ(plan->nproc, 4);
  EXPECT_TRUE(ValidateTrainPlan(plan.value()).ok());
  // What it cannot do is an input error naming the fix.
  plan =
      ResolveTrainFlags(ParseFlags({"--model", "gpt-tiny", "--cp", "2", "--tp",
                                    "2", "--sp", "--seq-len", "252"}));
  ASSERT_TRUE(plan.ok());
  const Status s = ValidateTrainPlan(plan.value());
  EXPECT_EQ(s.message(),
            "context parallelism needs seq_length (252) divisible by 2·cp·tp "
            "= 8 (2·cp chunks, each cp rank's split over tp by sequence "
            "parallelism)");
  EXPECT_EQ(s.hint(), "use --seq-len a multiple of 8, or another --cp");
  EXPECT_EQ(s.ExitCode(), 2);
  // Malformed values name the flag, as every other size flag does.
  plan = ResolveTrainFlags(ParseFlags({"--model", "gpt-tiny", "--cp", "two"}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "--cp must be a positive integer, got 'two'");
}

// Expert parallelism needs an MoE model; on moe-tiny it trains, from the
// flags and from a `tune search --out` file.
TEST(TrainCpEp, ExpertParallelismNeedsAnMoeModel) {
  const std::string message =
      "ep=2 etp=1 need an MoE model (gpt-tiny is dense)";
  const std::string hint = "use --ep 1 and leave --etp unset";
  StatusOr<TrainPlan> plan =
      ResolveTrainFlags(ParseFlags({"--model", "gpt-tiny", "--ep", "2"}));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  Status s = ValidateTrainPlan(plan.value());
  EXPECT_EQ(s.message(), message);
  EXPECT_EQ(s.hint(), hint);
  EXPECT_EQ(s.ExitCode(), 2);
  ExpectError(RunTune("train --model gpt-tiny --no-db --ep 2", "", kEnv), 2,
              message, hint);
  // moe-tiny: 8 experts; ep 3 does not divide them, etp·ep must divide the
  // dense ranks, and tp needs sp.
  plan = ResolveTrainFlags(ParseFlags(
      {"--model", "moe-tiny", "--dp", "3", "--ep", "3", "--gbs", "12"}));
  ASSERT_TRUE(plan.ok());
  s = ValidateTrainPlan(plan.value());
  EXPECT_EQ(s.message(), "ep=3 does not divide num_experts (8)");
  EXPECT_EQ(s.ExitCode(), 2);
  plan = ResolveTrainFlags(ParseFlags({"--model", "moe-tiny", "--ep", "2"}));
  ASSERT_TRUE(plan.ok());
  s = ValidateTrainPlan(plan.value());
  EXPECT_EQ(s.message(),
            "etp·ep = 2 does not divide tp·cp·dp = 1 (the expert grid "
            "etp·ep·edp folds over the dense ranks)");
  plan = ResolveTrainFlags(ParseFlags({"--model", "moe-tiny", "--tp", "2"}));
  ASSERT_TRUE(plan.ok());
  s = ValidateTrainPlan(plan.value());
  EXPECT_EQ(s.message(),
            "MoE with tensor parallelism (tp=2) needs sequence parallelism");
  EXPECT_EQ(s.hint(), "add --sp");
  plan =
      ResolveTrainFlags(ParseFlags({"--model", "moe-tiny", "--dp", "2", "--ep",
                                    "2", "--moe-aux-loss-coeff", "0.01"}));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(ValidateTrainPlan(plan.value()).ok());
  EXPECT_EQ(plan->config.moe_aux_loss_coeff, 0.01);
  EXPECT_EQ(plan->nproc, 2);
  plan = ResolveTrainFlags(
      ParseFlags({"--model", "moe-tiny", "--moe-router-load-balancing-type",
                  "seq_aux_loss"}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->config.moe_router_load_balancing_type,
            engine::TrainConfig::LoadBalancing::kSeqAuxLoss);
  plan = ResolveTrainFlags(ParseFlags(
      {"--model", "moe-tiny", "--moe-router-load-balancing-type", "sinkhorn"}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "--moe-router-load-balancing-type: unknown type 'sinkhorn'");
  EXPECT_EQ(plan.status().hint(), "use aux_loss, seq_aux_loss or none");
  EXPECT_EQ(plan.status().ExitCode(), 2);
  plan = ResolveTrainFlags(ParseFlags(
      {"--model", "moe-tiny", "--moe-router-bias-update-rate", "0.002"}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->config.moe_router_bias_update_rate, 0.002);
  plan = ResolveTrainFlags(ParseFlags(
      {"--model", "moe-tiny", "--moe-router-bias-update-rate", "-1"}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message().rfind("--moe-router-bias-update-rate", 0),
            0u)
      << plan.status().message();
  EXPECT_EQ(plan.status().ExitCode(), 2);
}

TEST(TrainCpEp, FlagsRoundTripForTheRanks) {
  const std::vector<std::string> args = {"--model",
                                         "moe-tiny",
                                         "--cp",
                                         "1",
                                         "--ep",
                                         "2",
                                         "--etp",
                                         "1",
                                         "--moe-router-load-balancing-type",
                                         "seq_aux_loss",
                                         "--moe-aux-loss-coeff",
                                         "0.01",
                                         "--moe-router-bias-update-rate",
                                         "0.002"};
  std::vector<std::string> got = TrainFlagsToArgs(ParseFlags(args));
  EXPECT_EQ(got, args);
}

TEST(TrainHelp, SaysWhatTheCudaBackendRuns) {
  const TuneRun run = RunTune("train --help", "", kEnv);
  EXPECT_EQ(run.exit_code, 0);
  // The help wraps lines: compare without the layout.
  const std::string text =
      std::regex_replace(run.out, std::regex(R"(\s+)"), " ");
  EXPECT_EQ(text.find("one GPU, bf16"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda (bf16; every layout of the CPU engine, MoE and "
                      "cp included, one GPU per rank, or ranks sharing a GPU "
                      "through staged collectives)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--cp"), std::string::npos);
  EXPECT_NE(text.find("--ep"), std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
