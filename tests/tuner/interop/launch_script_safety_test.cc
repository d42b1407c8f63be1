// No user value can put a shell command into the script `tune launch`
// writes: SLURM names (--job-name, --account, --partition) are restricted to
// a safe charset, --time to SLURM's formats, the --out path is shell-quoted
// where it lands in a command, and free text in comments (a model file's
// name, the source) has its control characters escaped. Each flag is tried
// with a newline, a `$(...)` and a quote payload.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "search_spaces/presets/presets.h"
#include "tests/tuner/run_tune.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/commands/cli.h"
#include "tuner/inputs/train_config_yaml.h"
#include "tuner/interop/launch_script.h"
#include "tuner/interop/nemo_overrides.h"

namespace meshtune::tuner {
namespace {

using testing::InProcessRun;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::Tune;
using testing::WriteFile;

std::vector<std::string> Launch(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "launch", "--model", "gpt-tiny", "--gpus",    "2",  "--gpu",
      "local",  "--gbs",   "4",        "--seq-len", "64", "--no-db"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::vector<std::string> kPayloads = {"x\ntouch pwned",
                                            "$(touch pwned)",
                                            "a'b",
                                            "a\"b",
                                            "a b",
                                            "a/b",
                                            "`id`",
                                            ""};

TEST(LaunchSafety, JobNameNewlineIsRejectedWithTheAllowedCharacters) {
  const InProcessRun run = Tune(Launch({"--job-name", "x\ntouch pwned"}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "tune: error: --job-name: 'x\\ntouch pwned' is not a safe SLURM "
            "name\n"
            "tune: hint: use 1 to 128 letters, digits, '.', '_' or '-', e.g. "
            "--job-name run-1\n");
}

TEST(LaunchSafety, EverySlurmNameFlagRejectsEveryPayload) {
  for (const char* flag : {"--job-name", "--account", "--partition"}) {
    for (const std::string& payload : kPayloads) {
      const InProcessRun run = Tune(Launch({flag, payload}));
      EXPECT_EQ(run.exit_code, 2) << flag << " " << payload;
      EXPECT_EQ(run.out, "") << flag << " " << payload;
      EXPECT_EQ(run.err.rfind(std::string("tune: error: ") + flag + ": '", 0),
                0u)
          << run.err;
      // One error line and one hint line, whatever the payload holds.
      EXPECT_EQ(Lines(run.err).size(), 2u) << run.err;
    }
  }
}

TEST(LaunchSafety, TimeRejectsEveryPayload) {
  for (const std::string& payload :
       {std::string("1:00\ntouch pwned"), std::string("$(touch pwned)"),
        std::string("1'0"), std::string("")}) {
    const InProcessRun run = Tune(Launch({"--time", payload}));
    EXPECT_EQ(run.exit_code, 2) << payload;
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err.rfind("tune: error: --time: '", 0), 0u) << run.err;
  }
}

TEST(LaunchSafety, SafeNamesAndPartitionListsAreKept) {
  const std::string long_name(kMaxSlurmNameLength, 'j');
  const InProcessRun run =
      Tune(Launch({"--job-name", long_name, "--account", "proj_1.a-b",
                   "--partition", "gpu,gpu-long"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("#SBATCH --job-name=" + long_name + "\n"),
            std::string::npos);
  EXPECT_NE(run.out.find("#SBATCH --account=proj_1.a-b\n"), std::string::npos);
  EXPECT_NE(run.out.find("#SBATCH --partition=gpu,gpu-long\n"),
            std::string::npos);
  EXPECT_EQ(Tune(Launch({"--job-name", long_name + "j"})).exit_code, 2);
  for (const char* list : {",", "gpu,", ",gpu", "gpu,,cpu"}) {
    EXPECT_EQ(Tune(Launch({"--partition", list})).exit_code, 2) << list;
  }
}

TEST(LaunchSafety, SlurmScriptRefusesAnUnsafeSpec) {
  // The flags are checked in the command; SlurmScript checks again for
  // callers that build the spec themselves.
  LaunchScriptSpec spec;
  spec.model = search_spaces::ResolveModel("gpt-tiny").value();
  spec.training.num_gpus = 2;
  spec.gpus_per_node = 8;
  spec.job_name = "ok";
  spec.run.train_iters = 100;
  spec.run.save_interval = 10;
  ASSERT_TRUE(SlurmScript(spec).ok());
  spec.job_name = "x\ntouch pwned";
  EXPECT_EQ(SlurmScript(spec).status().message(),
            "--job-name: 'x\\ntouch pwned' is not a safe SLURM name");
  spec.job_name = "ok";
  spec.account = "a;b";
  EXPECT_EQ(SlurmScript(spec).status().ExitCode(), 2);
  spec.account = "";
  spec.partition = "gpu\n#SBATCH --exclusive";
  EXPECT_EQ(SlurmScript(spec).status().ExitCode(), 2);
  spec.partition = "";
  spec.time = "1:00\nrm -rf /";
  EXPECT_EQ(SlurmScript(spec).status().ExitCode(), 2);
}

TEST(LaunchSafety, ShellQuoteSurvivesQuotesAndNewlines) {
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  const std::string dir = MakeTempDir();
  const std::string hostile = dir + "/a'b $(touch pwned) `id`\n\"c\".yaml";
  const std::string script = dir + "/q.sh";
  WriteFile(script, "CONFIG=${CONFIG:-" + ShellQuote(hostile) +
                        "}\nprintf %s \"$CONFIG\"\n");
  FILE* pipe =
      popen(("cd '" + dir + "' && bash '" + script + "'").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string printed;
  char buf[256];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) {
    printed.append(buf, n);
  }
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_EQ(printed, hostile);
  EXPECT_NE(access((dir + "/pwned").c_str(), F_OK), 0);
}

TEST(LaunchSafety, HostileOutPathIsQuotedInTheScript) {
  const std::string dir = MakeTempDir();
  const std::string out = dir + "/it's $(touch pwned)\nx.sh";
  const InProcessRun run = Tune(Launch({"--quiet", "--out", out}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string yaml = dir + "/it's $(touch pwned)\nx.yaml";
  ASSERT_NE(ReadFile(yaml), "");
  // Run the script's CONFIG assignment in bash: it must yield the YAML's
  // path. The quoted path holds a newline, so it spans two lines.
  const std::string text = ReadFile(out);
  const size_t start = text.find("CONFIG=");
  const size_t end = text.find("}\n", start);
  ASSERT_NE(end, std::string::npos);
  const std::string snippet = dir + "/snippet.sh";
  WriteFile(snippet,
            text.substr(start, end + 2 - start) + "printf %s \"$CONFIG\"\n");
  FILE* pipe = popen(
      ("cd '" + dir + "' && env -u CONFIG bash '" + snippet + "'").c_str(),
      "r");
  ASSERT_NE(pipe, nullptr);
  std::string printed;
  char buf[256];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) {
    printed.append(buf, n);
  }
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_EQ(printed, yaml);
  EXPECT_EQ(std::system(("bash -n " + ShellQuote(out)).c_str()), 0);
  EXPECT_NE(access((dir + "/pwned").c_str(), F_OK), 0);
}

TEST(LaunchSafety, ModelFileNameCannotLeaveItsComment) {
  const std::string dir = MakeTempDir();
  std::string yaml = ReadFile(std::string(MESHTUNE_SOURCE_DIR) +
                              "/search_spaces/models/gpt-tiny.yaml");
  const size_t name = yaml.find("name: gpt-tiny\n");
  ASSERT_NE(name, std::string::npos);
  yaml.replace(name, 15, "name: \"evil\\ntouch pwned\"\n");
  WriteFile(dir + "/evil.yaml", yaml);
  // The engine on the local preset, Megatron-LM on GPUs.
  for (const char* gpu : {"local", "h100"}) {
    const InProcessRun run =
        Tune({"launch", "--model", dir + "/evil.yaml", "--gpus", "2", "--gpu",
              gpu, "--gbs", "4", "--seq-len", "64", "--no-db"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    for (const std::string& line : Lines(run.out)) {
      EXPECT_NE(line, "touch pwned") << run.out;
    }
    EXPECT_NE(run.out.find("# Model evil\\ntouch pwned on 2 " +
                           std::string(gpu) + " GPUs"),
              std::string::npos)
        << run.out;
    // The default job name keeps only safe characters.
    EXPECT_NE(run.out.find("#SBATCH --job-name=tune-evil-touch-pwned\n"),
              std::string::npos)
        << run.out;
  }
  // The config YAML next to the script keeps the name, escaped, so that
  // `tune train --config` reads it back unchanged.
  const InProcessRun out =
      Tune({"launch", "--model", dir + "/evil.yaml", "--gpus", "2", "--gpu",
            "local", "--gbs", "4", "--seq-len", "64", "--no-db", "--quiet",
            "--out", dir + "/job.sh"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  auto config = ReadTrainConfigYaml(dir + "/job.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->config.model.name, "evil\ntouch pwned");
}

TEST(LaunchSafety, NemoCommentCannotInjectKeys) {
  auto model = search_spaces::ResolveModel("gpt-tiny").value();
  model.name = "evil\nmodel:\n  tensor_model_parallel_size: 64";
  search_spaces::TrainingSpec t;
  t.num_gpus = 2;
  t.global_batch_size = 4;
  t.seq_length = 64;
  search_spaces::ParallelConfig c;
  c.dp = 2;
  auto yaml = NemoOverrides(model, t, c, 8);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  EXPECT_EQ(Lines(yaml.value())
                .front()
                .rfind("# NeMo megatron_gpt overrides from meshtune for "
                       "evil?model:?  tensor_model_parallel_size: 64: ",
                       0),
            0u)
      << yaml.value();
  auto parsed = ParseNemoOverrides(yaml.value());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->config.tp, 1);
}

}  // namespace
}  // namespace meshtune::tuner
