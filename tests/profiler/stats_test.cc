// Statistics, nccl-tests bandwidth conventions, GEMM FLOP accounting and the
// transformer GEMM shapes (profiler/stats.h, profiler/sweep.h).
#include "profiler/stats.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/backend.h"
#include "profiler/sweep.h"

namespace meshtune::profiler {
namespace {

TEST(StatsTest, SummarizesKnownSamples) {
  // Unsorted 1..10 us: median (5+6)/2, min 1, p99 nearest rank = 10th value.
  std::vector<double> t = {3, 1, 10, 7, 5, 2, 9, 4, 8, 6};
  for (double& x : t) x *= 1e-6;
  TimingStats s = Summarize(t);
  EXPECT_EQ(s.samples, 10);
  EXPECT_DOUBLE_EQ(s.median_s, 5.5e-6);
  EXPECT_DOUBLE_EQ(s.min_s, 1e-6);
  EXPECT_DOUBLE_EQ(s.p99_s, 10e-6);
  EXPECT_DOUBLE_EQ(s.mean_s, 5.5e-6);
  // Sample stddev of 1..10 is sqrt(55/6) = 3.0277; cv = 3.0277 / 5.5.
  EXPECT_NEAR(s.cv, std::sqrt(55.0 / 6.0) / 5.5, 1e-12);
}

TEST(StatsTest, OddCountAndP99OfHundredSamples) {
  TimingStats three = Summarize({2.0, 9.0, 4.0});
  EXPECT_DOUBLE_EQ(three.median_s, 4.0);
  EXPECT_DOUBLE_EQ(three.p99_s, 9.0);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  TimingStats h = Summarize(hundred);
  EXPECT_DOUBLE_EQ(h.p99_s, 99.0);  // ceil(0.99 * 100) = 99th value
  EXPECT_DOUBLE_EQ(h.median_s, 50.5);
}

TEST(StatsTest, EmptyAndConstantSamples) {
  TimingStats empty = Summarize({});
  EXPECT_EQ(empty.samples, 0);
  EXPECT_EQ(empty.median_s, 0);
  TimingStats one = Summarize({2.5});
  EXPECT_EQ(one.cv, 0);
  EXPECT_EQ(one.p99_s, 2.5);
  TimingStats same = Summarize({1.0, 1.0, 1.0, 1.0});
  EXPECT_DOUBLE_EQ(same.cv, 0.0);
}

TEST(StatsTest, NcclTestsBusFactors) {
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllToAll, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kSendRecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kSendRecv, 1), 1.0);
}

TEST(StatsTest, AlgbwAndBusbw) {
  // 1 GB in 10 ms is 100 GB/s; all-reduce over 8 ranks: busbw 175 GB/s.
  EXPECT_DOUBLE_EQ(AlgBwGbps(1e9, 0.01), 100.0);
  EXPECT_DOUBLE_EQ(BusBwGbps(Collective::kAllReduce, 8, 1e9, 0.01), 175.0);
  EXPECT_DOUBLE_EQ(BusBwGbps(Collective::kAllGather, 2, 1e9, 0.01), 50.0);
  EXPECT_EQ(AlgBwGbps(1e9, 0.0), 0.0);
}

TEST(StatsTest, GemmFlopAccounting) {
  EXPECT_DOUBLE_EQ(GemmFlops(2, 3, 4), 48.0);
  // 8192^3 GEMM in 1.4 ms: 2 * 8192^3 / 1.4e-3 / 1e12 = 785.4 TFLOP/s.
  EXPECT_NEAR(Tflops(GemmFlops(8192, 8192, 8192), 1.4e-3), 785.4, 0.1);
}

TEST(StatsTest, DoublingSizesCoverEightBytesToCap) {
  std::vector<double> s = DoublingSizes(8, 64.0 * 1024 * 1024);
  ASSERT_EQ(s.size(), 24u);  // 2^3 .. 2^26
  EXPECT_EQ(s.front(), 8);
  EXPECT_EQ(s.back(), 64.0 * 1024 * 1024);
  EXPECT_TRUE(DoublingSizes(16, 8).empty());
  EXPECT_TRUE(DoublingSizes(0, 8).empty());
}

search_spaces::ModelSpec SmallGqaSwiglu() {
  search_spaces::ModelSpec m;
  m.name = "test";
  m.num_layers = 2;
  m.hidden_size = 1024;
  m.num_attention_heads = 16;
  m.num_query_groups = 4;
  m.kv_channels = 64;
  m.ffn_hidden_size = 2816;
  m.vocab_size = 32000;
  m.seq_length = 512;
  m.activation = search_spaces::Activation::kSwiglu;
  return m;
}

TEST(SweepShapesTest, TransformerShapesPerTpRank) {
  std::vector<GemmShape> shapes =
      TransformerGemmShapes(SmallGqaSwiglu(), 2, 512);
  auto find = [&](const std::string& name) {
    for (const GemmShape& s : shapes) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << "missing " << name;
    return GemmShape{};
  };
  // qkv: q 1024 + 2 * 4 groups * 64 = 1536 columns, / tp 2 = 768.
  GemmShape qkv = find("qkv.fwd");
  EXPECT_EQ(qkv.m, 512);
  EXPECT_EQ(qkv.n, 768);
  EXPECT_EQ(qkv.k, 1024);
  GemmShape dgrad = find("qkv.dgrad");  // [T,768] x [768,1024]
  EXPECT_EQ(dgrad.m, 512);
  EXPECT_EQ(dgrad.n, 1024);
  EXPECT_EQ(dgrad.k, 768);
  GemmShape wgrad = find("qkv.wgrad");  // [1024,T] x [T,768]
  EXPECT_EQ(wgrad.m, 1024);
  EXPECT_EQ(wgrad.n, 768);
  EXPECT_EQ(wgrad.k, 512);
  // SwiGLU fuses gate and up: fc1 is 2 * 2816 / 2 = 2816 wide per rank.
  EXPECT_EQ(find("fc1.fwd").n, 2816);
  EXPECT_EQ(find("fc2.fwd").k, 1408);
  EXPECT_EQ(find("logits.fwd").n, 16000);
  // Same FLOPs forward and in each backward GEMM.
  EXPECT_DOUBLE_EQ(GemmFlops(qkv.m, qkv.n, qkv.k),
                   GemmFlops(wgrad.m, wgrad.n, wgrad.k));
}

TEST(SweepShapesTest, StandardShapesAndStreamSizes) {
  EXPECT_FALSE(StandardGemmShapes(true).empty());
  EXPECT_GT(StandardGemmShapes(false).size(), StandardGemmShapes(true).size());
  std::vector<double> quick = StandardStreamSizes(true);
  ASSERT_FALSE(quick.empty());
  EXPECT_EQ(quick.front(), 1024.0 * 1024);
  EXPECT_EQ(StandardStreamSizes(false).back(), 256.0 * 1024 * 1024);
}

}  // namespace
}  // namespace meshtune::profiler
