// Unit tests for the flag value parsers and single-config derivation.
#include "tuner/inputs.h"

#include <gtest/gtest.h>

namespace meshtune::tuner {
namespace {

using search_spaces::Recompute;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;

TEST(ParseTokenCount, AcceptsSuffixesAndExponents) {
  EXPECT_DOUBLE_EQ(ParseTokenCount("300e9").value(), 300e9);
  EXPECT_DOUBLE_EQ(ParseTokenCount("300B").value(), 300e9);
  EXPECT_DOUBLE_EQ(ParseTokenCount("300b").value(), 300e9);
  EXPECT_DOUBLE_EQ(ParseTokenCount("1.4T").value(), 1.4e12);
  EXPECT_DOUBLE_EQ(ParseTokenCount("500M").value(), 500e6);
  EXPECT_DOUBLE_EQ(ParseTokenCount("300000000000").value(), 300e9);
}

TEST(ParseTokenCount, RejectsGarbageWithOneLineMessage) {
  for (const char* bad : {"", "B", "3X", "-5B", "0", "1.4TT", "nan", "inf"}) {
    auto r = ParseTokenCount(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("--tokens must be a positive token count, got '") +
                  bad + "'");
    EXPECT_EQ(r.status().hint(), "write e.g. 300e9, 300B or 1.4T");
    EXPECT_EQ(r.status().ExitCode(), 2);
  }
}

TEST(ParsePositiveInt, RejectsZeroNegativeAndText) {
  EXPECT_EQ(ParsePositiveInt("1024", "--gpus").value(), 1024);
  EXPECT_EQ(ParsePositiveInt("0", "--gpus").status().message(),
            "--gpus must be a positive integer, got 0");
  EXPECT_EQ(ParsePositiveInt("-8", "--gpus").status().message(),
            "--gpus must be a positive integer, got -8");
  EXPECT_EQ(ParsePositiveInt("8x", "--gbs").status().message(),
            "--gbs must be a positive integer, got '8x'");
  EXPECT_FALSE(ParsePositiveInt("", "--gbs").ok());
  EXPECT_FALSE(ParsePositiveInt("1.5", "--gbs").ok());
}

TEST(ParseIntList, SplitsCommas) {
  EXPECT_EQ(ParseIntList("4,8,16", "--pp").value(),
            (std::vector<int64_t>{4, 8, 16}));
  EXPECT_EQ(ParseIntList(" 2 , 4 ", "--pp").value(),
            (std::vector<int64_t>{2, 4}));
  EXPECT_FALSE(ParseIntList("4,,8", "--pp").ok());
  EXPECT_FALSE(ParseIntList("4,0", "--pp").ok());
  EXPECT_EQ(ParseIntList("4,a", "--tp").status().message(),
            "--tp must be a comma list of positive integers, got '4,a'");
}

TEST(ParseRecompute, AllModesRoundTrip) {
  for (const char* text :
       {"none", "selective", "full", "full:2", "full:block:4"}) {
    auto r = ParseRecompute(text, /*any_full=*/false);
    ASSERT_TRUE(r.ok()) << text;
    EXPECT_EQ(FormatRecompute(r.value()), text);
  }
  auto block = ParseRecompute("full:block:3", false).value();
  EXPECT_EQ(block.granularity, RecomputeGranularity::kFull);
  EXPECT_EQ(block.method, RecomputeMethod::kBlock);
  EXPECT_EQ(block.num_layers, 3);
  EXPECT_EQ(ParseRecompute("full:uniform:2", false).value().num_layers, 2);
  // In a search, bare "full" means every full variant (SearchSpace: 0).
  EXPECT_EQ(ParseRecompute("full", /*any_full=*/true).value().num_layers, 0);
  EXPECT_EQ(ParseRecompute("full", /*any_full=*/false).value().num_layers, 1);
  for (const char* bad : {"", "fully", "full:", "full:0",
                          "full:block:", "partial", "full:block:x"}) {
    EXPECT_FALSE(ParseRecompute(bad, false).ok()) << bad;
  }
}

TEST(ParsePrecision, KnowsThree) {
  EXPECT_EQ(ParsePrecision("bf16").value(), search_spaces::Precision::kBf16);
  EXPECT_EQ(ParsePrecision("fp16").value(), search_spaces::Precision::kFp16);
  EXPECT_EQ(ParsePrecision("fp8").value(), search_spaces::Precision::kFp8);
  EXPECT_EQ(ParsePrecision("fp32").status().message(),
            "--precision: unknown precision 'fp32'");
}

TEST(SingleConfigFromFlags, DefaultsAndDerivedDp) {
  InputFlags f;
  auto c = SingleConfigFromFlags(f, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tp, 1);
  EXPECT_EQ(c->pp, 1);
  EXPECT_EQ(c->dp, 64);
  EXPECT_FALSE(c->sp);
  EXPECT_FALSE(c->dist_opt);
  EXPECT_EQ(c->recompute.granularity, RecomputeGranularity::kNone);

  f.tp = "8";
  f.pp = "4";
  f.sp = true;
  f.recompute = "full";
  f.dist_opt = true;
  c = SingleConfigFromFlags(f, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dp, 2);
  EXPECT_TRUE(c->sp);
  EXPECT_TRUE(c->dist_opt);
  EXPECT_EQ(c->recompute.num_layers, 1);  // concrete, not "any full"
}

TEST(SingleConfigFromFlags, RejectsListsAndContradictions) {
  InputFlags f;
  f.tp = "4,8";
  EXPECT_EQ(SingleConfigFromFlags(f, 64).status().message(),
            "--tp takes one value in 'tune estimate', got '4,8'");
  f.tp = "3";
  EXPECT_EQ(SingleConfigFromFlags(f, 64).status().message(),
            "tp 3 x pp 1 x cp 1 = 3 does not divide --gpus 64");
  f.tp = "8";
  f.dp = "4";
  EXPECT_EQ(SingleConfigFromFlags(f, 64).status().message(),
            "--dp 4 contradicts --gpus 64 / (tp·pp·cp 8) = 8");
  f.dp = "8";
  EXPECT_TRUE(SingleConfigFromFlags(f, 64).ok());
}

}  // namespace
}  // namespace meshtune::tuner
