// tune regress's text helpers (tuner/regress/text.h) against hand-written
// output.
#include "tuner/regress/text.h"

#include <gtest/gtest.h>

#include <sstream>

namespace meshtune::tuner::regress_text {
namespace {

TEST(RegressTextTest, TimesAndNumbers) {
  EXPECT_EQ(UtcMinuteText(0), "1970-01-01 00:00");
  EXPECT_EQ(UtcMinuteText(1796038080), "2026-11-30 11:28");
  EXPECT_EQ(Fixed(2.0 / 3.0, 3), "0.667");
  EXPECT_EQ(Throughput(1234.56, 6.78), "1234.6 ± 6.8");
}

TEST(RegressTextTest, TableAlignsByCharactersNotBytes) {
  std::ostringstream out;
  PrintTable(out,
             {{"metric", "value"}, {"tokens/s", "12.0 ± 0.5"}, {"x", "3"}});
  // "±" is two bytes but one column; the first column is left-aligned, the
  // others right-aligned, trailing blanks dropped.
  EXPECT_EQ(out.str(),
            "metric         value\n"
            "tokens/s  12.0 ± 0.5\n"
            "x                  3\n");
}

TEST(RegressTextTest, DescribesCpuAndGpuMachines) {
  results::HardwareFingerprint cpu;
  cpu.id = "cpu-0123";
  cpu.cpu_model = "AMD EPYC";
  cpu.cpu_cores = 2;
  EXPECT_EQ(Describe(cpu), "cpu-0123 (AMD EPYC, 2 CPUs)");
  results::HardwareFingerprint gpu = cpu;
  gpu.id = "cuda-4567";
  gpu.gpu_model = "NVIDIA H200";
  gpu.gpu_count = 8;
  EXPECT_EQ(Describe(gpu), "cuda-4567 (8x NVIDIA H200, AMD EPYC, 2 CPUs)");
}

}  // namespace
}  // namespace meshtune::tuner::regress_text
