// Attribution of CUPTI kernel records to repetitions and the clock agreement
// metric (profiler/kernel_timing.h), on synthetic records.
#include "profiler/kernel_timing.h"

#include <vector>

#include "gtest/gtest.h"

namespace meshtune::profiler {
namespace {

TEST(KernelTimingTest, EnvelopeOfEachRepetitionsKernels) {
  // Repetition 0 is a split-K GEMM (main kernel + reduction) on device 0,
  // repetition 1 one kernel. A fill kernel before repetition 0 is ignored.
  const std::vector<KernelInterval> kernels = {
      {0, 50, 90},      // input fill, before the first repetition
      {0, 1020, 1520},  // rep 1 (records arrive in any order)
      {0, 110, 150},    // rep 0 main
      {0, 155, 170},    // rep 0 reduction
  };
  const std::vector<double> t =
      PerRepetitionKernelTimes_s(kernels, {100, 1000});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t[0], 60e-9);   // 110 -> 170
  EXPECT_DOUBLE_EQ(t[1], 500e-9);  // 1020 -> 1520
}

TEST(KernelTimingTest, SlowestDeviceSetsACollectivesTime) {
  const std::vector<KernelInterval> kernels = {
      {0, 100, 300}, {1, 120, 420}, {2, 110, 200}};
  const std::vector<double> t = PerRepetitionKernelTimes_s(kernels, {50});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0], 300e-9);  // device 1: 120 -> 420
}

TEST(KernelTimingTest, AttributedByStartEvenIfTheEndIsLate) {
  // A kernel that starts in repetition 0 but whose end is stamped after
  // repetition 1 began still belongs to repetition 0.
  const std::vector<KernelInterval> kernels = {{0, 110, 1005}, {0, 1010, 1100}};
  const std::vector<double> t =
      PerRepetitionKernelTimes_s(kernels, {100, 1000});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t[0], 895e-9);
  EXPECT_DOUBLE_EQ(t[1], 90e-9);
}

TEST(KernelTimingTest, UntimedRecordsAreSkipped) {
  const std::vector<KernelInterval> kernels = {
      {0, 0, 0},       // CUPTI could not time it
      {0, 400, 300},   // end before start
      {0, 120, 130}};  // the only valid one
  const std::vector<double> t = PerRepetitionKernelTimes_s(kernels, {100});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0], 10e-9);
}

TEST(KernelTimingTest, RepetitionWithoutKernelsIsMarkedMissing) {
  const std::vector<double> t =
      PerRepetitionKernelTimes_s({{0, 310, 320}}, {100, 300});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_LT(t[0], 0);
  EXPECT_DOUBLE_EQ(t[1], 10e-9);
}

TEST(KernelTimingTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(RepetitionMedian({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(RepetitionMedian({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(RepetitionMedian({}), 0);
}

TEST(KernelTimingTest, AgreementPercent) {
  EXPECT_DOUBLE_EQ(AgreementPct({1.0, 1.0}, {1.0, 1.0}), 100.0);
  // 0.97 vs 1.00: 97 % agreement.
  EXPECT_NEAR(AgreementPct({0.97, 0.97, 0.97}, {1.0, 1.0, 1.0}), 97.0, 1e-9);
  EXPECT_NEAR(AgreementPct({1.1}, {1.0}), 90.0, 1e-9);
  EXPECT_DOUBLE_EQ(AgreementPct({}, {1.0}), 0.0);
  EXPECT_DOUBLE_EQ(AgreementPct({1.0}, {0.0}), 0.0);
}

}  // namespace
}  // namespace meshtune::profiler
