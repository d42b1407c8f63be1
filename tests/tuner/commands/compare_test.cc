// `tune compare`: the config-string parser, a golden side-by-side of two 175b
// configurations, the JSON shape and its differences, and every error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/tuner/golden_file.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/inputs/compare_config.h"

namespace meshtune::tuner {
namespace {

using search_spaces::RecomputeGranularity;
using testing::ExpectGolden;
using testing::RunTuneInProcess;

TEST(CompareConfig, ParsesBothSpellings) {
  auto a = ParseConfigString(
      "tp=4,pp=8,vpp=3,dp=32,mbs=1,sp,recompute=selective,dist-opt", 1024,
      "--config 1");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a.value().tp, 4);
  EXPECT_EQ(a.value().pp, 8);
  EXPECT_EQ(a.value().vpp, 3);
  EXPECT_EQ(a.value().dp, 32);
  EXPECT_TRUE(a.value().sp);
  EXPECT_TRUE(a.value().dist_opt);
  EXPECT_EQ(a.value().recompute.granularity, RecomputeGranularity::kSelective);
  // The search report's own line parses back to the same configuration.
  auto b = ParseConfigString(
      "tp4 pp8 vpp3 cp1 ep1 dp32 sp mbs1 selective "
      "dist_opt",
      1024, "--config 2");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(a.value() == b.value());
  auto c = ParseConfigString(FormatCompactConfig(a.value()), 1024, "x");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(a.value() == c.value());
  EXPECT_EQ(FormatCompactConfig(a.value()),
            "tp4 pp8 vpp3 dp32 mbs1 sp selective dist-opt");
  auto d = ParseConfigString("tp8 recompute=full:block:2", 64, "x");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d.value().dp, 8);
  EXPECT_EQ(FormatCompactConfig(d.value()), "tp8 pp1 dp8 mbs1 full:block:2");
}

// What `tune accuracy --with-best` and the search print for MoE and uneven
// plans (expert tp, an uneven layout) parses too, and prints back the same.
TEST(CompareConfig, ExpertTpAndUnevenLayoutRoundTrip) {
  auto a = ParseConfigString(
      "tp2 pp4 vpp7 cp4 ep1 dp2 etp1 sp mbs1 none dist_opt layout2/0", 64,
      "--config 1");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a.value().etp, 1);
  EXPECT_EQ(a.value().layout_first_layers, 2);
  EXPECT_EQ(a.value().layout_last_layers, 0);
  EXPECT_EQ(FormatCompactConfig(a.value()),
            "tp2 pp4 vpp7 cp4 etp1 dp2 mbs1 sp none dist-opt layout2/0");
  auto b = ParseConfigString(FormatCompactConfig(a.value()), 64, "x");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(a.value() == b.value());
  auto c = ParseConfigString("tp2 pp4 layout=3/1", 64, "x");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c.value().layout_first_layers, 3);
  EXPECT_EQ(c.value().layout_last_layers, 1);
}

TEST(CompareConfig, ErrorsNameTheToken) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"tp4 tq8", "--config 1: unknown token 'tq8' in 'tp4 tq8'"},
      {"tp=x", "--config 1: 'tp=x' needs a positive integer, e.g. tp=4"},
      {"tp", "--config 1: 'tp' needs a positive integer, e.g. tp=4"},
      {"tp4 tp8", "--config 1: 'tp8' sets tp a second time in 'tp4 tp8'"},
      {"recompute=most",
       "--config 1: unknown recompute mode in "
       "'recompute=most'"},
      {"tp3", "--config 1: tp 3 x pp 1 x cp 1 = 3 does not divide --gpus 64"},
      {"tp8 dp4", "--config 1: dp=4 contradicts --gpus 64 / (tp·pp·cp 8) = 8"},
      {" , ", "--config 1 is empty"},
      {"layout2",
       "--config 1: 'layout2' needs the first and last stage's "
       "layers, e.g. layout=2/0"},
      {"layout=2/x",
       "--config 1: 'layout=2/x' needs the first and last "
       "stage's layers, e.g. layout=2/0"},
      {"layout1/0 layout2/0",
       "--config 1: 'layout2/0' sets layout a second time in 'layout1/0 "
       "layout2/0'"},
  };
  for (const Case& c : cases) {
    auto r = ParseConfigString(c.text, 64, "--config 1");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().message(), c.message) << c.text;
    EXPECT_FALSE(r.status().hint().empty()) << c.text;
  }
}

constexpr const char* kTwo =
    "compare --model 175b --gpus 1024 --gpu a100-80g --no-db "
    "--config 'tp8 pp8 mbs1 sp selective' --config 'tp4 pp16 mbs1 sp "
    "selective'";

TEST(CompareCommand, GoldenTwo175bConfigs) {
  const auto run = RunTuneInProcess(kTwo);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectGolden(run.out, "compare_175b_tp8pp8_vs_tp4pp16.txt");
}

TEST(CompareCommand, JsonShapeAndDifferences) {
  const auto run = RunTuneInProcess(std::string(kTwo) + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["gpus"], 1024);
  ASSERT_EQ(j["configs"].size(), 2u);
  ASSERT_EQ(j["differences"].size(), 1u);
  for (const char* term :
       {"compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm",
        "pp_bubble", "dp_comm", "optimizer", "step"}) {
    const double a = j["configs"][0]["time_s"][term].get<double>();
    const double b = j["configs"][1]["time_s"][term].get<double>();
    EXPECT_DOUBLE_EQ(j["differences"][0]["time_s"][term].get<double>(), b - a)
        << term;
  }
  for (const char* term :
       {"weights", "gradients", "optimizer", "activations", "other", "total"}) {
    EXPECT_TRUE(j["configs"][0]["memory_gib"].contains(term)) << term;
    EXPECT_TRUE(j["differences"][0]["memory_gib"].contains(term)) << term;
  }
  // Half the tensor parallelism halves no weights per GPU only if pp doubles:
  // tp4 pp16 holds the same share of the model as tp8 pp8.
  EXPECT_NEAR(j["differences"][0]["memory_gib"]["weights"].get<double>(), 0,
              0.05 * j["configs"][0]["memory_gib"]["weights"].get<double>());
  const std::string why = j["differences"][0]["explanation"];
  EXPECT_EQ(why.rfind("tp4 pp16 dp16 mbs1 sp selective is ", 0), 0u) << why;
  EXPECT_NE(why.find(" than tp8 pp8 dp16 mbs1 sp selective: "),
            std::string::npos)
      << why;
}

TEST(CompareCommand, ErrorsAreOneLineWithAHint) {
  struct Case {
    const char* args;
    const char* err;
  };
  const Case cases[] = {
      {"compare --model 175b --gpus 1024 --config 'tp8 pp8'",
       "tune: error: tune compare needs at least two --config, got 1\n"
       "tune: hint: repeat --config, e.g. --config \"tp8 pp8\" --config "
       "\"tp4 pp16\"\n"},
      {"compare --model 175b --gpus 1024 --config 'tp8 pp8' --config 'tp8 "
       "pq8'",
       "tune: error: --config 2: unknown token 'pq8' in 'tp8 pq8'\n"
       "tune: hint: use tokens like tp=4 pp=8 vpp=3 cp=1 ep=1 etp=1 dp=32 "
       "mbs=1 sp dist-opt recompute=selective layout=2/0, separated by commas "
       "or spaces\n"},
      {"compare --model 175b --gpus 1024 --tp 8 --config 'tp8 pp8' --config "
       "'tp4 pp16'",
       "tune: error: --tp does not apply to tune compare\n"
       "tune: hint: put the sizes in each --config, e.g. --config \"tp8 pp8 "
       "sp\"\n"},
  };
  for (const Case& c : cases) {
    const auto run = RunTuneInProcess(std::string(c.args) + " --no-db");
    EXPECT_EQ(run.exit_code, 2) << c.args;
    EXPECT_EQ(run.err, c.err) << c.args;
    EXPECT_EQ(run.out, "") << c.args;
  }
  // An invalid configuration gets the rule's message, as 'tune estimate'.
  const auto bad = RunTuneInProcess(
      "compare --model 175b --gpus 1024 --no-db --config 'tp8 pp8' "
      "--config 'tp1 pp1'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "tune: error: --config 2: global_batch_size 1536 is not divisible "
            "by dp 1024 (gbs_not_divisible_by_mbs_dp)\ntune: hint: change the "
            "sizes; 'tune search' with the same flags lists the valid "
            "configurations\n");
  EXPECT_EQ(bad.out, "");
}

}  // namespace
}  // namespace meshtune::tuner
