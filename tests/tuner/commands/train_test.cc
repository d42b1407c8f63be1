// `tune train`: flag resolution and overrides, validation messages and exit
// codes, the Megatron-style report, the mpirun launcher, and short real runs
// of gpt-tiny through the binary (one rank in process, two under mpirun).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "results/store.h"
#include "tests/tuner/run_tune.h"
#include "tuner/train/flags.h"
#include "tuner/train/launcher.h"
#include "tuner/train/report.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::RunTune;
using testing::TuneRun;
using testing::WriteFile;

// Parses `args` (after `tune train`) into TrainFlags with the real flag
// definitions.
TrainFlags ParseFlags(const std::vector<std::string>& args) {
  CLI::App app("test");
  TrainFlags flags;
  AddTrainFlags(&app, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return flags;
}

TrainPlan Resolve(const std::vector<std::string>& args) {
  StatusOr<TrainPlan> plan = ResolveTrainFlags(ParseFlags(args));
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? plan.value() : TrainPlan();
}

Status ResolveError(const std::vector<std::string>& args) {
  StatusOr<TrainPlan> plan = ResolveTrainFlags(ParseFlags(args));
  return plan.ok() ? Status::Ok() : plan.status();
}

Status ValidateError(const std::vector<std::string>& args) {
  StatusOr<TrainPlan> plan = ResolveTrainFlags(ParseFlags(args));
  if (!plan.ok()) return plan.status();
  return ValidateTrainPlan(plan.value());
}

TEST(TrainFlags, DefaultsComeFromTheModel) {
  const TrainPlan plan = Resolve({"--model", "gpt-tiny"});
  const engine::TrainConfig& c = plan.config;
  EXPECT_EQ(c.model.name, "gpt-tiny");
  EXPECT_EQ(c.parallel, search_spaces::ParallelConfig());
  EXPECT_EQ(c.global_batch_size, 16);
  EXPECT_EQ(c.seq(), 256);
  EXPECT_EQ(c.train_iters, kDefaultTrainSteps);
  EXPECT_EQ(plan.nproc, 1);
  EXPECT_TRUE(plan.data.data_path.empty());
  EXPECT_EQ(plan.data.seq_length, 256);
  EXPECT_EQ(plan.data.num_samples, 16 * kDefaultTrainSteps);
  EXPECT_EQ(plan.data.seed, c.seed);
  EXPECT_GT(c.model_flops_per_iteration, 0);
  EXPECT_TRUE(ValidateTrainPlan(plan).ok());
}

TEST(TrainFlags, FlagsSetEveryField) {
  const TrainPlan plan = Resolve({"--model",   "llama-tiny",
                                  "--tp",      "2",
                                  "--pp",      "2",
                                  "--vpp",     "2",
                                  "--dp",      "1",
                                  "--sp",      "--mbs",
                                  "2",         "--gbs",
                                  "8",         "--recompute",
                                  "full:2",    "--dist-opt",
                                  "--seq-len", "64",
                                  "--steps",   "20",
                                  "--data",    "0.5",
                                  "a",         "0.5",
                                  "b",         "--nproc",
                                  "4",         "--lr",
                                  "1e-3",      "--min-lr",
                                  "1e-4",      "--lr-warmup-iters",
                                  "3",         "--lr-decay-style",
                                  "linear",    "--weight-decay",
                                  "0.01",      "--clip-grad",
                                  "0",         "--seed",
                                  "0",         "--log-interval",
                                  "5"});
  const engine::TrainConfig& c = plan.config;
  EXPECT_EQ(c.model.name, "llama-tiny");
  EXPECT_EQ(c.parallel.tp, 2);
  EXPECT_EQ(c.parallel.pp, 2);
  EXPECT_EQ(c.parallel.vpp, 2);
  EXPECT_TRUE(c.parallel.sp);
  EXPECT_EQ(c.parallel.mbs, 2);
  EXPECT_TRUE(c.parallel.dist_opt);
  EXPECT_EQ(c.parallel.recompute.granularity,
            search_spaces::RecomputeGranularity::kFull);
  EXPECT_EQ(c.parallel.recompute.num_layers, 2);
  EXPECT_EQ(c.global_batch_size, 8);
  EXPECT_EQ(c.seq(), 64);
  EXPECT_EQ(c.train_iters, 20);
  EXPECT_EQ(plan.data.data_path,
            (std::vector<std::string>{"0.5", "a", "0.5", "b"}));
  EXPECT_EQ(plan.nproc, 4);
  EXPECT_FLOAT_EQ(c.optimizer.lr, 1e-3f);
  EXPECT_FLOAT_EQ(c.optimizer.min_lr, 1e-4f);
  EXPECT_EQ(c.optimizer.lr_warmup_iters, 3);
  EXPECT_EQ(c.optimizer.lr_decay_style,
            engine::OptimizerConfig::DecayStyle::kLinear);
  EXPECT_FLOAT_EQ(c.optimizer.weight_decay, 0.01f);
  EXPECT_FLOAT_EQ(c.optimizer.clip_grad, 0.0f);
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.log_interval, 5);
}

TEST(TrainFlags, CommandLineOverridesTheConfigFile) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/best.yaml";
  WriteFile(path,
            "model: gpt-tiny\n"
            "parallelism:\n"
            "  tensor_model_parallel_size: 2\n"
            "  data_parallel_size: 2\n"
            "  sequence_parallel: true\n"
            "training:\n"
            "  micro_batch_size: 1\n"
            "  global_batch_size: 8\n"
            "  seq_length: 128\n"
            "  train_iters: 30\n"
            "  lr: 1.0e-3\n");
  const TrainPlan file_only = Resolve({"--config", path});
  EXPECT_EQ(file_only.config.parallel.tp, 2);
  EXPECT_EQ(file_only.config.parallel.dp, 2);
  EXPECT_TRUE(file_only.config.parallel.sp);
  EXPECT_EQ(file_only.config.global_batch_size, 8);
  EXPECT_EQ(file_only.config.seq(), 128);
  EXPECT_EQ(file_only.config.train_iters, 30);
  EXPECT_FLOAT_EQ(file_only.config.optimizer.lr, 1e-3f);
  EXPECT_EQ(file_only.nproc, 4);

  const TrainPlan overridden = Resolve(
      {"--config", path, "--tp", "1", "--no-sp", "--gbs", "4", "--seq-len",
       "64", "--steps", "3", "--lr", "2e-4", "--model", "llama-tiny"});
  const engine::TrainConfig& c = overridden.config;
  EXPECT_EQ(c.model.name, "llama-tiny");
  EXPECT_EQ(c.parallel.tp, 1);
  EXPECT_EQ(c.parallel.dp, 2) << "not given: the file's value stays";
  EXPECT_FALSE(c.parallel.sp);
  EXPECT_EQ(c.global_batch_size, 4);
  EXPECT_EQ(c.seq(), 64);
  EXPECT_EQ(c.train_iters, 3);
  EXPECT_FLOAT_EQ(c.optimizer.lr, 2e-4f);
  EXPECT_EQ(overridden.nproc, 2);
  std::filesystem::remove_all(dir);
}

TEST(TrainFlags, MalformedValuesNameTheFlag) {
  Status s = ResolveError({"--model", "gpt-tiny", "--tp", "two"});
  EXPECT_EQ(s.message(), "--tp must be a positive integer, got 'two'");
  EXPECT_EQ(s.ExitCode(), 2);
  s = ResolveError({"--model", "gpt-tiny", "--lr", "-1"});
  EXPECT_EQ(s.message(), "--lr must be a number >= 0, got '-1'");
  EXPECT_EQ(s.hint(), "write e.g. --lr 3e-4");
  s = ResolveError({"--model", "gpt-tiny", "--seed", "x"});
  EXPECT_EQ(s.message(), "--seed must be a whole number >= 0, got 'x'");
  s = ResolveError({"--model", "gpt-tiny", "--lr-decay-style", "step"});
  EXPECT_EQ(s.message(), "--lr-decay-style: unknown style 'step'");
  EXPECT_EQ(s.hint(), "use cosine, linear or constant");
  s = ResolveError({"--model", "gpt-tiny", "--recompute", "most"});
  EXPECT_EQ(s.message(), "--recompute: unknown mode 'most'");
  s = ResolveError({"--model", "gpt-tiny", "--steps", "0"});
  EXPECT_EQ(s.message(), "--steps must be a positive integer, got 0");
}

TEST(TrainFlags, NeedsAModel) {
  Status s = ResolveError({});
  EXPECT_EQ(s.message(),
            "tune train needs a model: give --model M or --config FILE");
  EXPECT_EQ(s.ExitCode(), 2);
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/p.yaml", "parallelism:\n  data_parallel_size: 2\n");
  s = ResolveError({"--config", dir + "/p.yaml"});
  EXPECT_EQ(s.message(), "--config " + dir +
                             "/p.yaml has no model: section and no --model "
                             "was given");
  std::filesystem::remove_all(dir);
}

TEST(TrainFlags, DropoutFlagsUseMegatronNames) {
  const TrainPlan off = Resolve({"--model", "gpt-tiny"});
  EXPECT_EQ(off.config.hidden_dropout, 0.0f);
  EXPECT_EQ(off.config.attention_dropout, 0.0f);
  const TrainPlan on = Resolve({"--model", "gpt-tiny", "--hidden-dropout",
                                "0.1", "--attention-dropout", "0.05"});
  EXPECT_FLOAT_EQ(on.config.hidden_dropout, 0.1f);
  EXPECT_FLOAT_EQ(on.config.attention_dropout, 0.05f);
  // The ranks started through mpirun get the same flags.
  const std::vector<std::string> forwarded =
      TrainFlagsToArgs(ParseFlags({"--model", "gpt-tiny", "--hidden-dropout",
                                   "0.1", "--attention-dropout", "0.05"}));
  EXPECT_NE(std::find(forwarded.begin(), forwarded.end(), "--hidden-dropout"),
            forwarded.end());
  EXPECT_NE(
      std::find(forwarded.begin(), forwarded.end(), "--attention-dropout"),
      forwarded.end());
}

TEST(TrainValidation, DropoutMustBeAProbability) {
  Status s = ValidateError({"--model", "gpt-tiny", "--hidden-dropout", "1"});
  EXPECT_EQ(s.message(), "hidden_dropout must be in [0, 1), got 1");
  EXPECT_EQ(s.hint(),
            "use --hidden-dropout 0.1 (Megatron's default) or 0 (off)");
  EXPECT_EQ(s.ExitCode(), 2);
  s = ValidateError({"--model", "gpt-tiny", "--attention-dropout", "x"});
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("--attention-dropout"), std::string::npos)
      << s.message();
}

TEST(TrainValidation, NprocMustMatchTheWorld) {
  Status s =
      ValidateError({"--model", "gpt-tiny", "--dp", "2", "--nproc", "3"});
  EXPECT_EQ(s.message(), "--nproc 3 does not match tp·pp·cp·dp = 1·1·1·2 = 2");
  EXPECT_EQ(s.hint(),
            "pass --nproc 2 (or leave it out), or change --tp/--pp/--cp/--dp "
            "so that their product is 3");
  // Context parallel ranks count in the world.
  s = ValidateError({"--model", "gpt-tiny", "--cp", "2", "--nproc", "3"});
  EXPECT_EQ(s.message(), "--nproc 3 does not match tp·pp·cp·dp = 1·1·2·1 = 2");
  EXPECT_EQ(s.ExitCode(), 2);
}

TEST(TrainValidation, ConfigErrorsPassThroughWithTheirExitCodes) {
  Status s = ValidateError({"--model", "gpt-tiny", "--dp", "2", "--gbs", "3"});
  EXPECT_EQ(s.message(), "global batch size 3 is not a multiple of mbs·dp = 2");
  EXPECT_EQ(s.hint(), "pick --gbs as a multiple of 2");
  EXPECT_EQ(s.ExitCode(), 2);
  // Interleaving needs pipeline ranks (the schedule would run a chunk's
  // backward before its forward with pp = 1).
  s = ValidateError({"--model", "gpt-tiny", "--vpp", "2"});
  EXPECT_EQ(s.message(), "virtual pipeline stages (vpp = 2) need pp >= 2");
  EXPECT_EQ(s.hint(), "use --vpp 1, or --pp 2 or more");
  EXPECT_EQ(s.ExitCode(), 2);
  s = ValidateError({"--model", "gpt-tiny", "--seq-len", "512"});
  EXPECT_EQ(s.message(),
            "seq_length 512 exceeds the learned position table (256 "
            "positions)");
  EXPECT_EQ(s.ExitCode(), 2);
  // Context parallelism from --config (context_parallel_size) or --cp is
  // trained; the engine's refusals pass through as input errors (exit 2).
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/cp.yaml",
            "model: gpt-tiny\nparallelism:\n  context_parallel_size: 2\n");
  EXPECT_TRUE(ValidateError({"--config", dir + "/cp.yaml"}).ok());
  EXPECT_TRUE(ValidateError({"--model", "gpt-tiny", "--cp", "4"}).ok());
  s = ValidateError({"--config", dir + "/cp.yaml", "--seq-len", "250"});
  EXPECT_EQ(s.message(),
            "context parallelism needs seq_length (250) divisible by 2·cp = 4 "
            "(the sequence is cut into 2·cp chunks)");
  EXPECT_EQ(s.hint(), "use --seq-len a multiple of 4, or another --cp");
  EXPECT_EQ(s.ExitCode(), 2);
  std::filesystem::remove_all(dir);
}

TEST(TrainValidation, CheckpointDirectories) {
  const std::string dir = MakeTempDir();
  Status s = ValidateError({"--model", "gpt-tiny", "--load", dir + "/missing"});
  EXPECT_EQ(s.message(), "--load " + dir + "/missing: no such directory");
  EXPECT_EQ(s.hint(),
            "give a directory written by 'tune train --save', or leave out "
            "--load to start from scratch");
  EXPECT_EQ(s.ExitCode(), 2);

  WriteFile(dir + "/file", "x");
  s = ValidateError({"--model", "gpt-tiny", "--save", dir + "/file/ckpt"});
  EXPECT_EQ(s.message().rfind("--save " + dir +
                                  "/file/ckpt: cannot create "
                                  "directory",
                              0),
            0u)
      << s.message();
  EXPECT_EQ(s.hint(), "choose a directory that can be created and written");
  EXPECT_EQ(s.ExitCode(), 1);

  s = ValidateError({"--model", "gpt-tiny", "--save-interval", "5"});
  EXPECT_EQ(s.message(),
            "--save-interval 5 is set but there is no --save directory");

  // A creatable --save is created before training.
  EXPECT_TRUE(
      ValidateError({"--model", "gpt-tiny", "--save", dir + "/a/b"}).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/a/b"));
  std::filesystem::remove_all(dir);
}

TEST(TrainFlags, ArgsRoundTripForTheRanks) {
  const std::vector<std::string> args = {"--config",  "best.yaml",
                                         "--model",   "gpt-tiny",
                                         "--tp",      "2",
                                         "--dp",      "2",
                                         "--no-sp",   "--gbs",
                                         "8",         "--recompute",
                                         "selective", "--dist-opt",
                                         "--steps",   "3",
                                         "--data",    "1",
                                         "x",         "2",
                                         "y",         "--nproc",
                                         "4",         "--lr",
                                         "1e-3",      "--seed",
                                         "5",         "--save",
                                         "ckpt",      "--save-interval",
                                         "2",         "--log-interval",
                                         "1",         "--db",
                                         "t.db",      "--json"};
  const TrainFlags flags = ParseFlags(args);
  const std::vector<std::string> again = TrainFlagsToArgs(flags);
  const TrainFlags reparsed = ParseFlags(again);
  EXPECT_EQ(TrainFlagsToArgs(reparsed), again);
  EXPECT_EQ(reparsed.data, (std::vector<std::string>{"1", "x", "2", "y"}));
  EXPECT_EQ(reparsed.sp, std::optional<bool>(false));
  EXPECT_EQ(reparsed.dist_opt, std::optional<bool>(true));
  EXPECT_TRUE(reparsed.json);
  EXPECT_EQ(reparsed.db, "t.db");
  EXPECT_EQ(reparsed.nproc, "4");
}

TEST(TrainLauncher, MpirunCommandLine) {
  EXPECT_EQ(
      MpirunArgv("/usr/bin/mpirun", 4, "/opt/tune", {"--tp", "2"}, true),
      (std::vector<std::string>{
          "/usr/bin/mpirun", "-np", "4", "--oversubscribe", "--bind-to", "none",
          "--allow-run-as-root", "/opt/tune", "train", "--tp", "2"}));
  const std::vector<std::string> user =
      MpirunArgv("mpirun", 2, "tune", {}, false);
  EXPECT_EQ(std::count(user.begin(), user.end(), "--allow-run-as-root"), 0);
}

TEST(TrainLauncher, ExitStatusOfMpirun) {
  EXPECT_TRUE(MpirunExitStatus(W_EXITCODE(0, 0)).ok());
  Status s = MpirunExitStatus(W_EXITCODE(1, 0));
  EXPECT_EQ(s.message(),
            "training rank failed (mpirun exit status 1); see the rank's "
            "message above");
  EXPECT_EQ(s.ExitCode(), 1);
  EXPECT_EQ(MpirunExitStatus(W_EXITCODE(2, 0)).ExitCode(), 2);
  s = MpirunExitStatus(W_EXITCODE(0, SIGKILL));
  EXPECT_EQ(s.message().rfind("mpirun was killed by signal 9", 0), 0u)
      << s.message();
  EXPECT_EQ(s.ExitCode(), 1);
}

TEST(TrainLauncher, FindsProgramsOnPath) {
  EXPECT_EQ(FindOnPath("sh").empty(), false);
  EXPECT_EQ(FindOnPath("no-such-program-meshtune"), "");
}

engine::IterationLog Log(int64_t it, double step_s, double loss) {
  engine::IterationLog l;
  l.iteration = it;
  l.lr = 3e-4f;
  l.loss = loss;
  l.grad_norm = 1.2345;
  l.step_s = step_s;
  l.tokens_per_s = 4 * 64 / step_s;
  l.tflops_per_rank = 0.0125;
  l.consumed_samples = 4 * it;
  return l;
}

TEST(TrainReport, IterationLineFollowsMegatron) {
  EXPECT_EQ(FormatIterationLine({Log(10, 0.1234, 5.123456)}, 50, 16),
            " iteration       10/      50 | consumed samples:           40 |"
            " elapsed time per iteration (ms): 123.4 | throughput per rank "
            "(TFLOP/s/rank): 0.013 | learning rate: 3.000000E-04 | global "
            "batch size:    16 | lm loss: 5.123456E+00 | grad norm: 1.234 |"
            " tokens per second: 2075 |");
  // An interval averages time and loss and reports the last iteration.
  const std::string two =
      FormatIterationLine({Log(1, 0.1, 6.0), Log(2, 0.3, 4.0)}, 2, 4);
  EXPECT_NE(two.find("iteration        2/       2 |"), std::string::npos);
  EXPECT_NE(two.find("elapsed time per iteration (ms): 200.0 |"),
            std::string::npos);
  EXPECT_NE(two.find("lm loss: 5.000000E+00 |"), std::string::npos);
}

// ETA: the mean step time of the run so far times the iterations left,
// from the logs' own (here injected) times, never the host's clock.
TEST(TrainReport, EtaIsTheMeanStepTimeTimesTheStepsLeft) {
  // Steps of 1 s and 3 s, iteration 2 of 50: 2 s × 48.
  const std::vector<engine::IterationLog> logs = {Log(1, 1.0, 8.0),
                                                  Log(2, 3.0, 7.0)};
  EXPECT_DOUBLE_EQ(EtaSeconds(logs, 50), 96.0);
  // Resumed at iteration 40: only this run's steps and what is left count.
  EXPECT_DOUBLE_EQ(EtaSeconds({Log(41, 0.5, 6.0)}, 50), 4.5);
  EXPECT_DOUBLE_EQ(EtaSeconds(logs, 2), 0.0);
  EXPECT_DOUBLE_EQ(EtaSeconds({}, 50), 0.0);
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(37.4), "37s");
  EXPECT_EQ(FormatDuration(59.6), "1m 00s");
  EXPECT_EQ(FormatDuration(96), "1m 36s");
  EXPECT_EQ(FormatDuration(2 * 3600 + 3 * 60 + 9), "2h 03m 09s");
  EXPECT_EQ(FormatDuration(100 * 3600), "100h 00m 00s");
  EXPECT_EQ(FormatDuration(-1), "0s");
  const std::string line =
      FormatIterationLine({Log(2, 3.0, 7.0)}, 50, 16, EtaSeconds(logs, 50));
  const std::string tail = "| tokens per second: 85 | ETA: 1m 36s |";
  ASSERT_GE(line.size(), tail.size());
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
}

TEST(TrainReport, CheckpointLinesSayWhereWhichAndHowLong) {
  engine::CheckpointEvent e;
  e.iteration = 25;
  e.dir = "ckpt";
  EXPECT_EQ(FormatCheckpointLine(e),
            "saving checkpoint to ckpt (iteration 25) ...");
  e.saved = true;
  e.elapsed_s = 1.25;
  EXPECT_EQ(FormatCheckpointLine(e),
            "saved checkpoint of iteration 25 in 1.2 s");
}

TEST(TrainReport, SummaryLeavesOutTheWarmUp) {
  const std::vector<engine::IterationLog> logs = {
      Log(1, 9.0, 8.0), Log(2, 5.0, 7.0), Log(3, 0.2, 6.0), Log(4, 0.1, 5.5),
      Log(5, 0.3, 5.0)};
  const TrainSummary s = SummarizeRun(logs, 256);
  EXPECT_EQ(s.iterations, 5);
  EXPECT_EQ(s.measured_steps, 3);
  EXPECT_DOUBLE_EQ(s.step_time_median_s, 0.2);
  EXPECT_DOUBLE_EQ(s.step_time_min_s, 0.1);
  EXPECT_DOUBLE_EQ(s.step_time_p99_s, 0.3);
  EXPECT_NEAR(s.step_time_cv, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(s.tokens_per_s, 256 / 0.2);
  EXPECT_DOUBLE_EQ(s.final_loss, 5.0);
  const std::string text = FormatSummary(
      s, {0.1,
          "cost model now: local preset, one core per rank, datasheet "
          "calibration"});
  EXPECT_NE(text.find("median 200.0 ms, min 100.0 ms, p99 300.0 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("summary: predicted 100.0 ms per iteration (cost model "
                      "now: local preset, one core per rank, datasheet "
                      "calibration), measured median 200.0 ms: error -50.0 "
                      "%, measured / predicted = 2.00\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(FormatSummary(s, StepTimePrediction()).find("predicted"),
            std::string::npos);
  // Too short to drop a warm-up: every iteration counts.
  EXPECT_EQ(
      SummarizeRun({Log(1, 1.0, 8.0), Log(2, 3.0, 7.0)}, 1).measured_steps, 2);
}

TEST(TrainReport, MemoryTableAndJson) {
  engine::RankMemory r;
  r.rank = 1;
  r.dp_rank = 1;
  r.num_params = 1048576;
  r.param_bytes = 4 << 20;
  r.grad_bytes = 4 << 20;
  r.optimizer_bytes = 8 << 20;
  EXPECT_EQ(
      FormatMemoryTable({r}),
      "  rank  tp  pp  cp  dp  ep etp      params  params MiB  grads MiB  "
      "optimizer MiB\n"
      "     1   0   0   0   1   0   0     1048576        4.00       4.00"
      "           8.00\n");
  engine::TrainConfig c;
  c.model.name = "gpt-tiny";
  c.parallel.dp = 2;
  c.global_batch_size = 4;
  c.seq_length = 64;
  c.train_iters = 3;
  const std::vector<engine::IterationLog> logs = {
      Log(1, 0.2, 8.0), Log(2, 0.2, 7.0), Log(3, 0.1, 6.0)};
  const nlohmann::json j =
      TrainRunToJson(c, logs, SummarizeRun(logs, 256), {r}, {});
  EXPECT_EQ(j["model"], "gpt-tiny");
  EXPECT_EQ(j["config"]["dp"], 2);
  EXPECT_EQ(j["config"]["gbs"], 4);
  EXPECT_EQ(j["config"]["recompute"], "none");
  EXPECT_EQ(j["iterations"].size(), 3u);
  for (const char* key :
       {"iteration", "lr", "loss", "grad_norm", "step_s", "tokens_per_s"}) {
    EXPECT_TRUE(j["iterations"][0].contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(j["step_time_median_s"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(j["final_loss"].get<double>(), 6.0);
  EXPECT_TRUE(j["predicted_step_time_s"].is_null());
  EXPECT_EQ(j["memory"][0]["optimizer_bytes"], 8 << 20);
}

// ---- Through the binary. ----

void ExpectError(const TuneRun& run, int exit_code, const std::string& error,
                 const std::string& hint) {
  EXPECT_EQ(run.exit_code, exit_code);
  EXPECT_EQ(run.out, "");
  std::string expected = "tune: error: " + error + "\n";
  if (!hint.empty()) expected += "tune: hint: " + hint + "\n";
  EXPECT_EQ(run.err, expected);
}

TEST(TrainBinary, InputErrorsBeforeAnyRankStarts) {
  ExpectError(RunTune("train --model gpt-tiny --nproc 2"), 2,
              "--nproc 2 does not match tp·pp·cp·dp = 1·1·1·1 = 1",
              "pass --nproc 1 (or leave it out), or change --tp/--pp/--cp/--dp "
              "so that their product is 2");
  ExpectError(RunTune("train --model gpt-tiny --tp 3"), 2,
              "tp=3 does not divide the attention heads (4) and query groups "
              "(4)",
              "choose tp dividing num_query_groups");
}

TEST(TrainBinary, MissingDataAndCheckpointsAreInputErrors) {
  ExpectError(RunTune("train --model gpt-tiny --data /nonexistent/corpus"), 2,
              "/nonexistent/corpus.bin: no such file",
              "make /nonexistent/corpus.bin and /nonexistent/corpus.idx with "
              "'tune data --input FILE --output-prefix /nonexistent/corpus'");
  ExpectError(RunTune("train --model gpt-tiny --load /nonexistent/ckpt"), 2,
              "--load /nonexistent/ckpt: no such directory",
              "give a directory written by 'tune train --save', or leave out "
              "--load to start from scratch");
  ExpectError(RunTune("train --model gpt-tiny --db x.db --no-db"), 2,
              "--db and --no-db contradict each other", "pass one of them");
}

TEST(TrainBinary, SeveralRanksWithoutMpirunIsARuntimeError) {
  // Validation passes; starting the ranks needs mpirun, which PATH lacks.
  ExpectError(RunTune("train --model gpt-tiny --dp 2 --no-db", "",
                      "PATH=/nonexistent TUNE_DB="),
              1, "running 2 ranks needs mpirun, which is not on PATH",
              "install Open MPI (apt-get install openmpi-bin), or run one "
              "rank (tp·pp·cp·dp = 1)");
}

// A run small enough for CI: gpt-tiny, 2 sequences of 32 tokens per step.
const char kTiny[] = "train --model gpt-tiny --seq-len 32 --gbs 2 ";
// One OpenMP thread per rank, as the engine tests run (the CI machine has
// two cores shared by everything).
std::string Env(const std::string& db = "") {
  return "OMP_NUM_THREADS=1 TUNE_DB='" +
         (db.empty() ? testing::TestDbPath() : db) + "'";
}

std::vector<std::string> IterationLines(const std::string& text) {
  static const std::regex kLine(
      R"( iteration +(\d+)/ +(\d+) \| consumed samples: +(\d+) \| elapsed )"
      R"(time per iteration \(ms\): [0-9.]+ \| throughput per rank )"
      R"(\(TFLOP/s/rank\): [0-9.]+ \| learning rate: [0-9.]+E[-+]\d+ \| )"
      R"(global batch size: +2 \| lm loss: ([0-9.]+E[-+]\d+) \| grad norm: )"
      R"([0-9.]+ \| tokens per second: \d+ \| ETA: (\d+h )?(\d+m )?\d+s \|)");
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(" iteration", 0) != 0) continue;
    EXPECT_TRUE(std::regex_match(line, kLine)) << line;
    lines.push_back(line);
  }
  return lines;
}

TEST(TrainBinary, OneRankTrainsPrintsAndRecords) {
  const std::string dir = MakeTempDir();
  const std::string db = dir + "/t.db";
  const TuneRun run = RunTune(std::string(kTiny) + "--steps 3 --db " + db +
                                  " --save " + dir + "/ck --save-interval 2",
                              dir, Env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("tune train: gpt-tiny (GPT tiny)"), std::string::npos)
      << run.out;
  // Each save is announced after its iteration line and timed.
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex(R"( iteration +2/ +3 \|[^\n]* ETA: \d+s \|\nsaving )"
                          R"(checkpoint to )" +
                          dir +
                          R"(/ck \(iteration 2\) \.\.\.\nsaved checkpoint of )"
                          R"(iteration 2 in [0-9]+\.[0-9] s\n iteration +3/)")))
      << run.out;
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex(R"(\| ETA: 0s \|\nsaving checkpoint to )" + dir +
                          R"(/ck \(iteration 3\) \.\.\.\nsaved checkpoint )"
                          R"(of iteration 3 in [0-9]+\.[0-9] s\n)")))
      << run.out;
  EXPECT_NE(run.out.find("  config:      tp1 pp1 vpp1 cp1 ep1 dp1 mbs1 none"),
            std::string::npos);
  EXPECT_NE(run.out.find("  ranks:       1 (this process)"), std::string::npos);
  EXPECT_NE(run.out.find("  data:        built-in corpus"), std::string::npos);
  EXPECT_NE(run.out.find("  rank  tp  pp  cp  dp  ep etp      params"),
            std::string::npos);
  // The one prediction of an unlinked run says what it is.
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex(R"(\n  predicted:   [0-9.]+ ms per iteration \(cost )"
                          R"(model now: local preset, one core per rank, )"
                          R"([^ ]+ calibration\)\n)")))
      << run.out;
  const std::vector<std::string> lines = IterationLines(run.out);
  ASSERT_EQ(lines.size(), 3u) << run.out;
  EXPECT_NE(lines[2].find(" iteration        3/       3 | consumed samples: "
                          "           6 |"),
            std::string::npos);
  EXPECT_NE(run.out.find("summary: 3 iterations; step time over 1 (without "
                         "the first 2, warm-up)"),
            std::string::npos)
      << run.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(lines[2], m,
                                std::regex(R"(lm loss: ([0-9.]+E[-+]\d+))")));
  const double last_loss = std::stod(m[1]);
  EXPECT_GT(last_loss, 0);
  EXPECT_LT(last_loss, 20);
  EXPECT_NE(run.err.find("tune: recorded training run 1 in " + db),
            std::string::npos)
      << run.err;

  auto store = results::Store::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto runs = store.value()->GetTrainingRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  const results::TrainingRun& r = runs->front();
  EXPECT_EQ(r.model, "gpt-tiny");
  EXPECT_EQ(r.candidate_id, 0);
  EXPECT_FALSE(r.hardware_id.empty());
  EXPECT_EQ(r.config, search_spaces::ParallelConfig());
  EXPECT_EQ(r.gbs, 2);
  EXPECT_EQ(r.seq_length, 32);
  EXPECT_EQ(r.steps, 1);
  EXPECT_GT(r.step_time_median_s, 0);
  EXPECT_NEAR(r.tokens_per_s * r.step_time_median_s, 64, 1e-6);
  EXPECT_NEAR(r.final_loss, last_loss, 1e-6 * last_loss);
  store.value().reset();
  std::filesystem::remove_all(dir);
}

nlohmann::json ParseJson(const TuneRun& run) {
  try {
    return nlohmann::json::parse(run.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\n" << run.out << "\n" << run.err;
    return nlohmann::json::object();
  }
}

TEST(TrainBinary, TwoRanksUnderMpirunMatchOneRank) {
  if (FindOnPath("mpirun").empty()) GTEST_SKIP() << "mpirun is not on PATH";
  const TuneRun one =
      RunTune(std::string(kTiny) + "--steps 3 --no-db --json", "", Env());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const nlohmann::json j1 = ParseJson(one);
  // Progress lines go to stderr with --json.
  EXPECT_EQ(IterationLines(one.err).size(), 3u) << one.err;

  const TuneRun two =
      RunTune(std::string(kTiny) + "--dp 2 --nproc 2 --steps 3 --no-db --json",
              "", Env());
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const nlohmann::json j2 = ParseJson(two);
  EXPECT_NE(two.err.find("  ranks:       2 (MPI processes)"), std::string::npos)
      << two.err;
  EXPECT_EQ(j2["config"]["dp"], 2);
  ASSERT_EQ(j2["memory"].size(), 2u);
  EXPECT_EQ(j2["memory"][1]["dp_rank"], 1);
  ASSERT_EQ(j1["iterations"].size(), 3u);
  ASSERT_EQ(j2["iterations"].size(), 3u);
  // docs/design.md §9: every layout reproduces the single-rank losses (fp32).
  for (size_t i = 0; i < 3; ++i) {
    const double a = j1["iterations"][i]["loss"].get<double>();
    const double b = j2["iterations"][i]["loss"].get<double>();
    EXPECT_NEAR(b, a, 1e-5 * a) << "iteration " << i + 1;
  }
  EXPECT_DOUBLE_EQ(j2["final_loss"].get<double>(),
                   j2["iterations"][2]["loss"].get<double>());
}

TEST(TrainBinary, NonFiniteLossStopsWithExitOne) {
  // A learning rate of 1e12 without clipping: iteration 2 is not finite.
  const TuneRun run =
      RunTune(std::string(kTiny) + "--steps 2 --lr 1e12 --clip-grad 0 --no-db",
              "", Env());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err.rfind("tune: error: iteration ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("training stopped"), std::string::npos) << run.err;
  if (FindOnPath("mpirun").empty()) return;
  // Under mpirun the failing ranks say why, then the launcher says which.
  const TuneRun two = RunTune(std::string(kTiny) +
                                  "--dp 2 --steps 2 --lr 1e12 --clip-grad 0 "
                                  "--no-db",
                              "", Env());
  EXPECT_EQ(two.exit_code, 1);
  EXPECT_NE(two.err.find(": iteration "), std::string::npos) << two.err;
  const std::string last =
      "tune: error: training rank failed (mpirun exit status 1); see the "
      "rank's message above\n";
  ASSERT_GE(two.err.size(), last.size());
  EXPECT_EQ(two.err.substr(two.err.size() - last.size()), last) << two.err;
}

TEST(TrainBinary, TrainsTheConfigThatSearchWrote) {
  const std::string dir = MakeTempDir();
  const TuneRun search =
      RunTune("search --model gpt-tiny --gpus 1 " MESHTUNE_PINNED_LOCAL_GPU
              " --gbs 2 --seq-len 32 "
              "--no-db --out best.yaml",
              dir, Env());
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const TuneRun train =
      RunTune("train --config best.yaml --steps 2 --no-db", dir, Env());
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_EQ(IterationLines(train.out).size(), 2u) << train.out;
  EXPECT_NE(train.out.find("gbs 2 x seq 32 = 64 tokens"), std::string::npos)
      << train.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace meshtune::tuner
