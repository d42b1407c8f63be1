#include "profiler/preset_peaks.h"

#include <gtest/gtest.h>

namespace meshtune::profiler {
namespace {

// The datasheet peaks of search_spaces/clusters/*.yaml, for the names the
// CUDA driver reports.
TEST(PresetPeakTflops, DriverNamesReadTheirPresetsPeaks) {
  EXPECT_EQ(PresetPeakTflops("NVIDIA H200", DType::kBf16), 989);
  EXPECT_EQ(PresetPeakTflops("NVIDIA H100 80GB HBM3", DType::kFp8), 1979);
  EXPECT_EQ(PresetPeakTflops("NVIDIA H100 80GB HBM3", DType::kFp32), 67);
  EXPECT_EQ(PresetPeakTflops("NVIDIA B200", DType::kBf16), 2250);
  EXPECT_EQ(PresetPeakTflops("NVIDIA B300 SXM6 AC", DType::kFp8), 4500);
  EXPECT_EQ(PresetPeakTflops("NVIDIA GB300", DType::kBf16), 2500);
  EXPECT_EQ(PresetPeakTflops("NVIDIA A100-SXM4-80GB", DType::kBf16), 312);
}

// Unknown GPUs and missing tensor cores print "-" (0).
TEST(PresetPeakTflops, ZeroWhereNoPresetOrNoTensorCores) {
  EXPECT_EQ(PresetPeakTflops("NVIDIA A100-SXM4-40GB", DType::kFp8), 0);
  EXPECT_EQ(PresetPeakTflops("NVIDIA H100 PCIe", DType::kBf16), 0);
  EXPECT_EQ(PresetPeakTflops("NVIDIA GeForce RTX 4090", DType::kBf16), 0);
  EXPECT_EQ(PresetPeakTflops("", DType::kFp32), 0);
}

}  // namespace
}  // namespace meshtune::profiler
