// Unit tests for the flag value parsers and single-config derivation.
#include "tuner/inputs/inputs.h"

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

TEST(ParseMemoryHeadroom, GibAndPercent) {
  // An h100 exposes 79.65 GiB (nvidia-smi 81559 MiB).
  const double h100_gib = 79.65;
  EXPECT_DOUBLE_EQ(ParseMemoryHeadroom("4", h100_gib).value(), 4.0);
  EXPECT_DOUBLE_EQ(ParseMemoryHeadroom("4GiB", h100_gib).value(), 4.0);
  EXPECT_DOUBLE_EQ(ParseMemoryHeadroom(" 4 GiB ", h100_gib).value(), 4.0);
  EXPECT_DOUBLE_EQ(ParseMemoryHeadroom("4.5gib", h100_gib).value(), 4.5);
  EXPECT_DOUBLE_EQ(ParseMemoryHeadroom("0", h100_gib).value(), 0.0);
  // 5 % of 79.65 GiB = 3.9825 GiB; 10 % = 7.965.
  EXPECT_NEAR(ParseMemoryHeadroom("5%", h100_gib).value(), 3.9825, 1e-12);
  EXPECT_NEAR(ParseMemoryHeadroom("5 %", h100_gib).value(), 3.9825, 1e-12);
  EXPECT_NEAR(ParseMemoryHeadroom("10%", h100_gib).value(), 7.965, 1e-12);
  EXPECT_NEAR(ParseMemoryHeadroom("2.5%", 80.0).value(), 2.0, 1e-12);
}

TEST(ParseMemoryHeadroom, RejectsBadValuesWithOneLineMessages) {
  for (const char* bad : {"", "GiB", "%", "4GB", "4 MiB", "abc", "inf", "nan",
                          "0x10", "4%%", "5%GiB", "1e999"}) {
    auto r = ParseMemoryHeadroom(bad, 79.65);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("--memory-headroom must be GiB per GPU (4, 4GiB) or "
                          "a percent of the GPU's memory (5%), got '") +
                  bad + "'");
    EXPECT_EQ(r.status().hint(),
              "write e.g. --memory-headroom 4GiB or --memory-headroom 5%");
    EXPECT_EQ(r.status().ExitCode(), 2);
  }
  for (const char* negative : {"-4", "-4GiB", "-5%"}) {
    auto r = ParseMemoryHeadroom(negative, 79.65);
    ASSERT_FALSE(r.ok()) << negative;
    EXPECT_EQ(r.status().message(),
              std::string("--memory-headroom must not be negative, got '") +
                  negative + "'");
    EXPECT_EQ(r.status().hint(),
              "write 0 for no headroom, or a margin such as "
              "--memory-headroom 4GiB");
    EXPECT_EQ(r.status().ExitCode(), 2);
  }
  for (const char* whole : {"79.65", "100%", "120GiB", "250%"}) {
    auto r = ParseMemoryHeadroom(whole, 79.65);
    ASSERT_FALSE(r.ok()) << whole;
    EXPECT_EQ(r.status().message(),
              std::string("--memory-headroom ") + whole +
                  " is not below the GPU's memory of 79.65 GiB");
    EXPECT_EQ(r.status().hint(),
              "keep a margin of a few GiB or percent, e.g. "
              "--memory-headroom 5%");
  }
  EXPECT_TRUE(ParseMemoryHeadroom("79.6", 79.65).ok());
  EXPECT_TRUE(ParseMemoryHeadroom("99%", 79.65).ok());
}

InputFlags H100Flags(const std::string& model) {
  InputFlags f;
  f.model = model;
  f.gpus = "8";
  f.gpu = "h100";
  return f;
}

TEST(ResolveInputs, MemoryHeadroomReducesUsableMemory) {
  InputFlags f = H100Flags("gpt3-1.3b");
  auto plain = ResolveInputs(f);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->cluster.memory_headroom_gib, 0.0);
  EXPECT_NEAR(plain->cluster.UsableMemoryGib(), 76.65, 1e-12);

  f.memory_headroom = "5%";
  auto in = ResolveInputs(f);
  ASSERT_TRUE(in.ok()) << in.status().message();
  // 79.65 - 3 reserve - 5 % of 79.65 = 79.65 - 3 - 3.9825 = 72.6675.
  EXPECT_NEAR(in->cluster.memory_headroom_gib, 3.9825, 1e-12);
  EXPECT_NEAR(in->cluster.UsableMemoryGib(), 72.6675, 1e-12);

  f.memory_headroom = "4GiB";
  in = ResolveInputs(f);
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_NEAR(in->cluster.UsableMemoryGib(), 72.65, 1e-12);

  // Below the capacity but not below capacity − reserve.
  f.memory_headroom = "77";
  in = ResolveInputs(f);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(),
            "--memory-headroom 77 leaves no usable memory: h100 has 79.65 GiB "
            "per GPU and reserves 3.00 GiB of it");
  EXPECT_EQ(in.status().hint(), "keep the headroom below 76.65 GiB");
  EXPECT_EQ(in.status().ExitCode(), 2);

  f.memory_headroom = "4GB";
  in = ResolveInputs(f);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(),
            "--memory-headroom must be GiB per GPU (4, 4GiB) or a percent of "
            "the GPU's memory (5%), got '4GB'");
}

TEST(ResolveInputs, EtpPins) {
  InputFlags f = H100Flags("mixtral-8x7b");
  f.etp = "2,1";
  auto in = ResolveInputs(f);
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->space.etp, (std::vector<int64_t>{2, 1}));

  f.etp = "0";
  in = ResolveInputs(f);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(),
            "--etp must be a comma list of positive integers, got '0'");

  InputFlags dense = H100Flags("gpt3-1.3b");
  dense.etp = "2";
  in = ResolveInputs(dense);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(),
            "--etp 2: model gpt3-1.3b has no experts; expert tensor "
            "parallelism applies to MoE models only");
  EXPECT_EQ(in.status().hint(), "drop --etp (--tp splits the dense layers)");
  EXPECT_EQ(in.status().ExitCode(), 2);
}

TEST(SingleConfigFromFlags, Etp) {
  InputFlags f;
  f.tp = "4";
  auto c = SingleConfigFromFlags(f, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->etp, 0);  // unset: etp = tp
  EXPECT_EQ(c->expert_tp(), 4);
  f.etp = "1";
  c = SingleConfigFromFlags(f, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->etp, 1);
  EXPECT_EQ(c->expert_tp(), 1);
  f.etp = "1,2";
  EXPECT_EQ(SingleConfigFromFlags(f, 64).status().message(),
            "--etp takes one value in 'tune estimate', got '1,2'");
}

}  // namespace
}  // namespace meshtune::tuner
