// `tune explain`: golden outputs for the two cases (LLaMA-3 70B on
// 128 H100 against NVIDIA's TP8 PP4 recipe, GPT-3 175B on 1024 A100 against
// TP8 PP8), a user --config, the cases where the compared configuration
// does not apply or does not fit, and every preset's recipe parsing.
//
// To accept an intended change, regenerate and review the diff:
//   MESHTUNE_UPDATE_GOLDEN=1 ./build/tests/meshtune_tuner_tests
//   --gtest_filter='Explain*'   (one command line)
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "search_spaces/presets/presets.h"
#include "tests/tuner/golden_file.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/inputs/compare_config.h"

namespace meshtune::tuner {
namespace {

using testing::ReadFile;
using testing::RunTuneInProcess;

TEST(ExplainGolden, Llama3_70bOn128H100AgainstTheRecipe) {
  const auto run = RunTuneInProcess(
      "explain --model llama3-70b --gpus 128 --gpu h100 --no-db");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The recipe is TP8 PP4 and 13-16 % slower, for TP communication and the
  // bubble of a pipeline without virtual stages.
  EXPECT_NE(run.out.find("recipe    tp8 pp4 dp4 mbs1 sp none dist-opt: rank "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("tp_comm +"), std::string::npos) << run.out;
  testing::ExpectGolden(run.out, "explain_llama3-70b_128xh100.txt");
}

TEST(ExplainGolden, Gpt3_175bOn1024A100AgainstTheRecipe) {
  const auto run = RunTuneInProcess(
      "explain --model 175b --gpus 1024 --gpu a100-80g --no-db");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("recipe    tp8 pp8 dp16 mbs1 sp none dist-opt: "),
            std::string::npos)
      << run.out;
  testing::ExpectGolden(run.out, "explain_175b_1024xa100-80g.txt");
}

TEST(Explain, UserConfigRankAndJson) {
  const auto run = RunTuneInProcess(
      "explain --model 175b --gpus 1024 --gpu a100-80g --no-db --json "
      "--config \"tp8 pp16 mbs1 sp selective dist-opt\"");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["other_label"], "--config");
  EXPECT_EQ(j["other"], "tp8 pp16 dp8 mbs1 sp selective dist-opt");
  EXPECT_GT(j["other_rank"].get<int64_t>(), 1);
  EXPECT_LE(j["other_rank"].get<int64_t>(), j["feasible"].get<int64_t>());
  EXPECT_EQ(j["comparison"]["configs"].size(), 2u);
  EXPECT_FALSE(j["explanation"].get<std::string>().empty());
  EXPECT_FALSE(j["assumptions"].empty());
}

TEST(Explain, ConfigThatDoesNotApplyOrFit) {
  // 16 GPUs cannot hold the 70B recipe's tp8 pp4 = 32 GPUs.
  auto run = RunTuneInProcess(
      "explain --model llama3-70b --gpus 16 --gpu h100 --no-db");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("recipe    does not apply: "), std::string::npos)
      << run.out;
  // tp1 pp2 of a 175B model does not fit in 80 GB.
  run = RunTuneInProcess(
      "explain --model 175b --gpus 1024 --gpu a100-80g --no-db --config "
      "\"tp1 pp2 mbs1\"");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("does not fit: "), std::string::npos) << run.out;
}

TEST(Explain, ModelWithoutARecipeNeedsConfig) {
  const auto run = RunTuneInProcess(
      "explain --model llama3-405b --gpus 1024 --gpu h100 --no-db");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: llama3-405b has no published recipe in its model "
            "file\ntune: hint: give the configuration to compare with "
            "--config, e.g. --config \"tp8 pp4 mbs1 sp dist-opt\"\n");
}

// The HTML report carries the same comparison where the model has a recipe.
TEST(Explain, HtmlReportHasTheSectionWhereARecipeExists) {
  const std::string dir = testing::MakeTempDir();
  auto run = RunTuneInProcess("report --html " + dir +
                              "/r.html --model llama3-70b --gpus 128 --gpu "
                              "h100 --no-db");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string html = ReadFile(dir + "/r.html");
  EXPECT_NE(html.find("<section id=\"explain\">"), std::string::npos);
  EXPECT_NE(html.find("tp8 pp4 dp4 mbs1 sp none dist-opt</code>, rank "),
            std::string::npos);
  EXPECT_NE(html.find("<ul id=\"explain-assumptions\">"), std::string::npos);
  run = RunTuneInProcess("report --html " + dir +
                         "/q.html --model llama3-405b --gpus 1024 --gpu h100 "
                         "--no-db");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(dir + "/q.html").find("id=\"explain\""),
            std::string::npos);
}

// Every recipe in a model file parses (on a GPU count it divides).
TEST(Explain, EveryPresetRecipeParses) {
  int recipes = 0;
  for (const search_spaces::ModelSpec& m : search_spaces::ModelPresets()) {
    if (m.recipe_config.empty()) continue;
    ++recipes;
    EXPECT_FALSE(m.recipe_source.empty()) << m.name;
    EXPECT_TRUE(ParseConfigString(m.recipe_config, 4096, m.name).ok())
        << m.name << ": " << m.recipe_config;
  }
  EXPECT_GE(recipes, 6);
}

}  // namespace
}  // namespace meshtune::tuner
