// The `tune` binary's error contract (docs/design.md §4): one `tune: error:`
// line, an optional `tune: hint:` line, nothing on stdout, exit 2 for input
// errors and 1 for runtime failures.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::RunTune;
using testing::TuneRun;
using testing::WriteFile;

void ExpectError(const TuneRun& run, int exit_code, const std::string& error,
                 const std::string& hint) {
  EXPECT_EQ(run.exit_code, exit_code);
  EXPECT_EQ(run.out, "") << "errors must not write to stdout";
  std::string expected = "tune: error: " + error + "\n";
  if (!hint.empty()) expected += "tune: hint: " + hint + "\n";
  EXPECT_EQ(run.err, expected);
}

TEST(CliErrors, UnknownModelPresetSuggestsNames) {
  ExpectError(RunTune("--model 17b --gpus 8"), 2, "unknown model preset '17b'",
              "did you mean: gpt3-175b, gpt3-1.3b, gpt-1.7b? run 'tune models' "
              "for the list");
}

TEST(CliErrors, UnknownGpuPreset) {
  const TuneRun run = RunTune("--model 175b --gpus 8 --gpu a100-90g");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err.rfind("tune: error: unknown", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("a100-90g"), std::string::npos);
  EXPECT_NE(run.err.find("tune: hint: "), std::string::npos);
}

TEST(CliErrors, MalformedModelYamlNamesFileAndLine) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/bad.yaml",
            "name: bad\nnum_layers: [oops\nhidden_size: 10\n");
  ExpectError(RunTune("--model bad.yaml --gpus 8", dir), 2,
              "bad.yaml:3: malformed YAML: end of sequence flow not found",
              "fix the YAML syntax on that line (indentation, ':' after keys, "
              "matching brackets and quotes)");
  WriteFile(dir + "/bad2.yaml",
            "name: bad\nnum_layers: 24\nhidden_size: abc\n");
  ExpectError(
      RunTune("--model bad2.yaml --gpus 8", dir), 2,
      "bad2.yaml:3: hidden_size: expected a positive integer, got 'abc'",
      "write a whole number greater than 0, e.g. 'hidden_size: 8'");
}

TEST(CliErrors, ZeroAndNegativeGpus) {
  ExpectError(RunTune("--model 175b --gpus 0"), 2,
              "--gpus must be a positive integer, got 0",
              "write a whole number greater than 0, e.g. --gpus 8");
  ExpectError(RunTune("--model 175b --gpus -8"), 2,
              "--gpus must be a positive integer, got -8",
              "write a whole number greater than 0, e.g. --gpus 8");
  ExpectError(RunTune("--model 175b --gpus 8 --gbs -1"), 2,
              "--gbs must be a positive integer, got -1",
              "write a whole number greater than 0, e.g. --gbs 8");
  ExpectError(RunTune("--model 175b --gpus 8 --seq-len 0"), 2,
              "--seq-len must be a positive integer, got 0",
              "write a whole number greater than 0, e.g. --seq-len 8");
}

TEST(CliErrors, ContradictoryPinsBetweenFlagAndSpaceFile) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/tp4.yaml", "tensor_model_parallel_size: [4]\n");
  ExpectError(RunTune("--model 175b --gpus 1024 --tp 8 --space tp4.yaml", dir),
              2,
              "contradictory pins: tensor_model_parallel_size 8 (command line) "
              "and 4 (search space file)",
              "drop the command-line pin or pick a value the search space file "
              "allows");
}

TEST(CliErrors, NoConfigFitsNamesSmallestMemoryNeed) {
  const TuneRun run = RunTune("--model 175b --gpus 1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  // The exact GiB figure belongs to the cost model; the sentence is ours.
  const std::string prefix =
      "tune: error: no configuration of gpt3-175b on 1 x a100-80g fits in "
      "memory: the smallest need is ";
  ASSERT_EQ(run.err.rfind(prefix, 0), 0u) << run.err;
  EXPECT_NE(run.err.find(" GiB per GPU (tp1 pp1 "), std::string::npos);
  // The usable figure is the preset's capacity after the reserve (cost model).
  EXPECT_TRUE(std::regex_search(
      run.err, std::regex(R"(\) but [0-9]+\.[0-9] GiB are usable\n)")))
      << run.err;
  EXPECT_NE(run.err.find("\ntune: hint: use more GPUs (--gpus), a GPU with "
                         "more memory (--gpu)"),
            std::string::npos);
}

TEST(CliErrors, RulesEliminatingEverythingAreCounted) {
  // tp 3 divides neither 96 heads nor 1024 GPUs: every candidate breaks a rule.
  const TuneRun run = RunTune("--model 175b --gpus 1024 --tp 3");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind("tune: error: no valid configuration of gpt3-175b "
                          "on 1024 x a100-80g: all ",
                          0),
            0u)
      << run.err;
  EXPECT_NE(run.err.find("candidates break a rule ("), std::string::npos);
}

TEST(CliErrors, Fp8OnGpuWithoutFp8) {
  ExpectError(RunTune("--model 175b --gpus 1024 --precision fp8"), 2,
              "--precision fp8: a100-80g (NVIDIA A100 SXM4 80GB) has no FP8 "
              "tensor cores",
              "use --precision bf16, or a GPU that has them (tune gpus lists "
              "the peaks)");
}

TEST(CliErrors, BlackwellRecipesNeedBlackwell) {
  ExpectError(RunTune("--model llama3-8b --gpus 8 --gpu h100 "
                      "--precision mxfp8"),
              2,
              "--precision mxfp8 needs Blackwell's block-scaled tensor cores, "
              "which h100 does not have",
              "use --precision fp8-tensorwise or fp8-blockwise on Hopper");
  ExpectError(RunTune("--model llama3-8b --gpus 8 --gpu h100 "
                      "--precision fp4"),
              2, "--precision: unknown precision 'fp4'",
              "use bf16, fp16, fp8 (delayed scaling), fp8-tensorwise, "
              "fp8-blockwise, mxfp8 or nvfp4");
}

TEST(CliErrors, Fp8ParamGatherNeedsFp8) {
  ExpectError(RunTune("--model llama3-8b --gpus 8 --gpu h100 "
                      "--fp8-param-gather"),
              2,
              "--fp8-param-gather needs an fp8 or fp4 --precision, got "
              "--precision bf16",
              "add --precision fp8 or drop --fp8-param-gather");
}

TEST(CliErrors, Fp8DotProductAttentionNeedsFp8) {
  ExpectError(RunTune("--model llama3-8b --gpus 8 --gpu h100 "
                      "--fp8-dot-product-attention"),
              2,
              "--fp8-dot-product-attention needs an fp8 --precision, got "
              "--precision bf16",
              "add --precision fp8 or drop --fp8-dot-product-attention");
}

TEST(Cli, StateByteFlagsShrinkMemory) {
  const std::string base =
      "estimate --model llama3-70b --gpus 64 --gpu h100 --tp 4 --pp 4 --vpp 5 "
      "--cp 2 --sp --dist-opt --precision fp8 --json";
  const TuneRun plain = RunTune(base);
  const TuneRun lean =
      RunTune(base + " --fp8-param-gather --grad-reduce-in-bf16");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(lean.exit_code, 0) << lean.err;
  const auto gib = [](const std::string& json, const std::string& key) {
    const size_t at = json.find("\"" + key + "\":");
    EXPECT_NE(at, std::string::npos) << key;
    return std::stod(json.substr(json.find(':', at) + 1));
  };
  // Without param gather Transformer Engine keeps the bf16 weight and an fp8
  // copy (3 B per linear weight), with it only the fp8 copy (1 B); norms and
  // embeddings stay 16-bit (costmodel/memory_model.h). 2 instead of 4 bytes
  // of main grads.
  const double ratio = gib(lean.out, "weights") / gib(plain.out, "weights");
  EXPECT_GT(ratio, 1.0 / 3);
  EXPECT_LT(ratio, 0.4);
  EXPECT_NEAR(gib(lean.out, "gradients"), gib(plain.out, "gradients") / 2,
              1e-6);
}

TEST(Cli, TpCommOverlapHidesTpCommunication) {
  const std::string base =
      "estimate --model llama3-70b --gpus 64 --gpu h100 --tp 8 --pp 2 --sp "
      "--dist-opt --json";
  const TuneRun plain = RunTune(base);
  const TuneRun overlap = RunTune(base + " --tp-comm-overlap");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(overlap.exit_code, 0) << overlap.err;
  const auto seconds = [](const std::string& json) {
    const size_t at = json.find("\"tp_comm\":");
    EXPECT_NE(at, std::string::npos);
    return std::stod(json.substr(json.find(':', at) + 1));
  };
  EXPECT_LT(seconds(overlap.out), 0.5 * seconds(plain.out));
}

TEST(CliErrors, BadTokensAndFormat) {
  ExpectError(RunTune("--model 175b --gpus 1024 --tokens 3X"), 2,
              "--tokens must be a positive token count, got '3X'",
              "write e.g. 300e9, 300B or 1.4T");
  ExpectError(RunTune("--model 175b --gpus 1024 --format csv"), 2,
              "--format: unknown format 'csv'",
              "use --format table, megatron, nemo or bridge");
}

TEST(CliErrors, ParseErrorsUseTheSameFormat) {
  ExpectError(RunTune("--model 175b --gpus 8 --bogus"), 2,
              "The following argument was not expected: --bogus",
              "run 'tune search --help' for its flags and examples");
  ExpectError(RunTune("--model 175b"), 2, "--gpus is required",
              "run 'tune search --help' for its flags and examples");
  ExpectError(RunTune("estimate --model 175b --gpus 8 --sp --no-sp"), 2,
              "--sp excludes --no-sp",
              "run 'tune estimate --help' for its flags and examples");
  ExpectError(RunTune("serch --model 175b"), 2, "unknown command 'serch'",
              "did you mean 'search'? run 'tune --help' for the commands");
  ExpectError(RunTune(""), 2, "no command given",
              "run 'tune --help' for the commands, e.g. tune --model 175b "
              "--gpus 1024");
}

TEST(CliErrors, EstimateRuleViolationGivesDetail) {
  ExpectError(
      RunTune("estimate --model 175b --gpus 1024 --tp 8 --pp 16 --vpp 4"), 2,
      "num_layers 96 is not divisible by pp·vpp = 64, even counting the "
      "embedding and loss as layers (98), and no uneven first/last layout "
      "fits (layers_not_divisible_by_pp_vpp)",
      "change the sizes; 'tune search' with the same flags lists the valid "
      "configurations");
  ExpectError(RunTune("estimate --model 175b --gpus 1024 --tp 8,4"), 2,
              "--tp takes one value in 'tune estimate', got '8,4'",
              "use 'tune search --tp 8,4' to compare several");
}

TEST(CliErrors, OutFileInAMissingDirectoryIsAnInputError) {
  ExpectError(
      RunTune("--model gpt3-1.3b --gpus 8 --out /nonexistent-dir/best.yaml"), 2,
      "--out: cannot write '/nonexistent-dir/best.yaml': directory "
      "'/nonexistent-dir': No such file or directory",
      "create the directory first, or write somewhere else");
}

TEST(CliErrors, SubcommandsRefuseBadInputWithoutFakeOutput) {
  // train is built: it refuses bad input before training (exit 2); its
  // other errors are tested in train_command_test.cc.
  ExpectError(RunTune("train"), 2,
              "tune train needs a model: give --model M or --config FILE",
              "e.g. tune train --model gpt-tiny, or tune search --model "
              "gpt-tiny --gpus 1 --gpu local --out best.yaml && tune train "
              "--config best.yaml");
  ExpectError(RunTune("train --config best.yaml", MakeTempDir()), 2,
              "--config file 'best.yaml' not found",
              "write one with 'tune search ... --out best.yaml', or check the "
              "path");
  // validate is built: its errors are tested in validate_command_test.cc.
  // profile is built (issue 4): its errors are tested in tests/profiler/.
  ExpectError(RunTune("profile --no-db --dtype fp64"), 2,
              "--dtype: unknown dtype 'fp64'", "use one of: fp32, bf16, fp8");
  // regress is built: its errors are tested in regress_command_test.cc.
  ExpectError(RunTune("regress"), 2, "A subcommand is required",
              "run 'tune regress --help' for its flags and examples");
}

TEST(Cli, VersionAndHelp) {
  const TuneRun version = RunTune("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("tune 0.", 0), 0u) << version.out;
  EXPECT_NE(version.out.find(" ("), std::string::npos);
  EXPECT_EQ(version.out.back(), '\n');

  for (const char* cmd : {"", "search ", "estimate ", "models ", "gpus ",
                          "train ", "profile ", "validate ", "regress "}) {
    const TuneRun help = RunTune(std::string(cmd) + "--help");
    EXPECT_EQ(help.exit_code, 0) << cmd;
    EXPECT_NE(help.out.find("Examples:"), std::string::npos) << cmd;
  }
  const TuneRun top = RunTune("--help");
  for (const char* sub : {"search", "estimate", "models", "gpus", "profile",
                          "train", "validate", "regress"}) {
    EXPECT_NE(top.out.find(sub), std::string::npos) << sub;
  }
}

TEST(Cli, ListsPresets) {
  const TuneRun models = RunTune("models");
  EXPECT_EQ(models.exit_code, 0);
  EXPECT_NE(models.out.find("gpt3-175b"), std::string::npos);
  EXPECT_NE(models.out.find("params_B"), std::string::npos);
  const TuneRun gpus = RunTune("gpus");
  EXPECT_EQ(gpus.exit_code, 0);
  EXPECT_NE(gpus.out.find("a100-80g"), std::string::npos);
  EXPECT_NE(gpus.out.find("HBM_GB"), std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
