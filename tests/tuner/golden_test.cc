// Golden output of a fixed small search (gpt3-1.3b on 8 a100-80g), with the
// volatile field (elapsed milliseconds) masked, and its --out YAML with the
// version line and the database directory masked. Any change to the cost model,
// the enumeration, the ranking or the report layout shows up here as a diff.
//
// To accept an intended change, regenerate the golden file and review the
// diff before committing:
//   MESHTUNE_UPDATE_GOLDEN=1 ./build/tests/meshtune_tuner_tests
//   --gtest_filter='Golden.*'   (one command line)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "tests/tuner/golden_file.h"
#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

using testing::ReadFile;
using testing::RunTune;
using testing::WriteFile;

// Replaces "in 97 ms" with "in <elapsed> ms".
std::string MaskVolatile(const std::string& text) {
  static const std::regex kElapsed(" in [0-9]+ ms:");
  return std::regex_replace(text, kElapsed, " in <elapsed> ms:");
}

// The --out YAML with its volatile parts masked: the version line (tool
// version and git revision), the directory of the database, and the
// 12-digit predicted step time (its last digits depend on the compiler's
// floating-point contraction; the table golden checks it to 3 decimals).
std::string MaskYaml(const std::string& yaml, const std::string& dir) {
  static const std::regex kVersion("^# Written by tune [^\n]*");
  static const std::regex kPredicted("predicted_step_time_s: [0-9.e+-]+");
  std::string out =
      std::regex_replace(yaml, kVersion, "# Written by tune <version>.");
  out =
      std::regex_replace(out, kPredicted, "predicted_step_time_s: <predicted>");
  for (size_t at = out.find(dir); at != std::string::npos;
       at = out.find(dir, at)) {
    out.replace(at, dir.size(), "<dir>");
  }
  return out;
}

void CheckGolden(const std::string& args, const std::string& golden_name) {
  const auto run = RunTune(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  testing::ExpectGolden(MaskVolatile(run.out), golden_name);
}

TEST(Golden, MaskVolatileOnlyTouchesElapsed) {
  EXPECT_EQ(MaskVolatile("evaluated 10 configurations in 97 ms: 3 feasible"),
            "evaluated 10 configurations in <elapsed> ms: 3 feasible");
  EXPECT_EQ(MaskVolatile("step 1.000 s"), "step 1.000 s");
}

TEST(Golden, Gpt3_1_3bOn8A100Table) {
  CheckGolden("--model gpt3-1.3b --gpus 8 --gpu a100-80g --top 5",
              "search_gpt3-1.3b_8xa100-80g.txt");
}

// A model with experts and an uneven layout: the etp and layout columns,
// the near-capacity mark and its footnote, and the headroom in the header
// (DeepSeek-V2-Lite's 27 layers over pp 2 split unevenly; --memory-headroom
// 5% of an H100's 79.65 GiB).
TEST(Golden, DeepSeekV2LiteOn16H100Table) {
  CheckGolden(
      "--model deepseek-v2-lite --gpus 16 --gpu h100 --tp 2 --pp 2 --top 8 "
      "--memory-headroom 5%",
      "search_deepseek-v2-lite_16xh100_pp2.txt");
}

TEST(Golden, Gpt3_1_3bOn8A100Megatron) {
  CheckGolden("--model gpt3-1.3b --gpus 8 --format megatron",
              "search_gpt3-1.3b_8xa100-80g_megatron.txt");
}

TEST(Golden, MaskYamlOnlyTouchesVersionAndDirectory) {
  EXPECT_EQ(MaskYaml("# Written by tune 0.1.0 (abc).\n# Predicted: x\n"
                     "  db: \"/tmp/d/t.db\"\n  id: 1\n"
                     "  predicted_step_time_s: 1.23456789012e-05\n",
                     "/tmp/d"),
            "# Written by tune <version>.\n# Predicted: x\n"
            "  db: \"<dir>/t.db\"\n  id: 1\n"
            "  predicted_step_time_s: <predicted>\n");
}

// The same search with --out and a fresh database: the model, parallelism,
// training, cluster and search sections.
TEST(Golden, Gpt3_1_3bOn8A100Yaml) {
  const std::string dir = testing::MakeTempDir();
  const auto run = RunTune(
      "--model gpt3-1.3b --gpus 8 --gpu a100-80g --out best.yaml --db t.db",
      dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  testing::ExpectGolden(MaskYaml(ReadFile(dir + "/best.yaml"), dir),
                        "search_gpt3-1.3b_8xa100-80g.yaml");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace meshtune::tuner
