// The per-generation training kernel efficiency, the NVFP4 rate and the
// Mamba scan rate (costmodel/datasheet_calibration.h): which constant each
// GPU preset gets, and what it does to a GEMM's (or the scan's) time.
#include "costmodel/datasheet_calibration.h"

#include <gtest/gtest.h>

#include <string>

#include "costmodel/model_options.h"
#include "search_spaces/presets.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::Precision;

search_spaces::ClusterSpec Preset(const std::string& name) {
  auto c = search_spaces::ResolveCluster(name);
  EXPECT_TRUE(c.ok()) << name;
  return c.ok() ? *c : search_spaces::ClusterSpec();
}

TEST(TrainingKernelEfficiency, OneConstantPerGeneration) {
  using C = DatasheetCalibration;
  for (const char* ampere : {"a100-40g", "a100-80g"}) {
    EXPECT_EQ(C::TrainingKernelEfficiency(Preset(ampere).gpu),
              C::kAmpereKernelEfficiency)
        << ampere;
  }
  for (const char* hopper : {"h100", "h200"}) {
    EXPECT_EQ(C::TrainingKernelEfficiency(Preset(hopper).gpu),
              C::kHopperKernelEfficiency)
        << hopper;
  }
  // B200 and GB200 are one chip (the GB200 board runs it at a higher power
  // limit, which its datasheet peaks already carry).
  for (const char* blackwell : {"b200", "gb200"}) {
    EXPECT_EQ(C::TrainingKernelEfficiency(Preset(blackwell).gpu),
              C::kBlackwellKernelEfficiency)
        << blackwell;
  }
  for (const char* ultra : {"b300", "gb300"}) {
    EXPECT_EQ(C::TrainingKernelEfficiency(Preset(ultra).gpu),
              C::kBlackwellUltraKernelEfficiency)
        << ultra;
  }
}

TEST(TrainingKernelEfficiency, ScalesEveryGemmAndIsOffInTheAblation) {
  const search_spaces::ClusterSpec b200 = Preset("b200");
  const DatasheetCalibration cal(b200);
  ModelOptions off;
  off.Disable(Refinement::kTrainingKernelEfficiency);
  const double with =
      cal.GemmTime_s(8192, 8192, 8192, Precision::kBf16, ModelOptions());
  const double without =
      cal.GemmTime_s(8192, 8192, 8192, Precision::kBf16, off);
  EXPECT_NEAR(without / with, DatasheetCalibration::kBlackwellKernelEfficiency,
              1e-12);
}

TEST(Nvfp4, RunsAtTheFp4PeakTimesItsRelativeEfficiency) {
  // B200: FP4 peak 9000 TFLOP/s = 2× FP8 (4500). The same GEMM in NVFP4
  // takes 1/(2·0.83) of its MXFP8 time: both use the FP8 ceiling and size
  // and shape factors, NVFP4 pays kNvfp4RelativeEfficiency.
  const DatasheetCalibration cal(Preset("b200"));
  const double fp8 =
      cal.GemmTime_s(8192, 8192, 8192, Precision::kMxfp8, ModelOptions());
  const double fp4 =
      cal.GemmTime_s(8192, 8192, 8192, Precision::kNvfp4, ModelOptions());
  EXPECT_NEAR(fp8 / fp4, 2.0 * DatasheetCalibration::kNvfp4RelativeEfficiency,
              1e-12);
  // GB300: FP4 = 3× FP8.
  const DatasheetCalibration ultra(Preset("gb300"));
  EXPECT_NEAR(
      ultra.GemmTime_s(8192, 8192, 8192, Precision::kMxfp8, ModelOptions()) /
          ultra.GemmTime_s(8192, 8192, 8192, Precision::kNvfp4, ModelOptions()),
      3.0 * DatasheetCalibration::kNvfp4RelativeEfficiency, 1e-12);
}

TEST(Flash2, LosesItsEfficiencyFromHopperOn) {
  const ModelOptions o;
  // 8 heads of 128, 4096 causal queries and keys.
  auto fwd = [&](const char* gpu, AttentionKernel k) {
    return DatasheetCalibration(Preset(gpu), k)
        .AttentionForwardTime_s(8, 4096, 4096, 128, true, o);
  };
  auto bwd = [&](const char* gpu, AttentionKernel k) {
    return DatasheetCalibration(Preset(gpu), k)
        .AttentionBackwardTime_s(8, 4096, 4096, 128, true, o);
  };
  // Hopper: 0.55 of the GEMM ceiling instead of 0.8, forward and backward.
  EXPECT_NEAR(fwd("h100", AttentionKernel::kFlash2) /
                  fwd("h100", AttentionKernel::kFlash),
              0.8 / 0.55, 1e-12);
  EXPECT_NEAR(bwd("h100", AttentionKernel::kFlash2) /
                  bwd("h100", AttentionKernel::kFlash),
              0.8 / 0.55, 1e-12);
  // Ampere: FlashAttention-2 is the native kernel.
  EXPECT_DOUBLE_EQ(fwd("a100-80g", AttentionKernel::kFlash2),
                   fwd("a100-80g", AttentionKernel::kFlash));
  // Still flash: no s² activations.
  EXPECT_TRUE(DatasheetCalibration(Preset("h100"), AttentionKernel::kFlash2)
                  .UsesFlashAttention());
  EXPECT_FALSE(DatasheetCalibration(Preset("h100"), AttentionKernel::kUnfused)
                   .UsesFlashAttention());
}

TEST(MambaScan, RunsAtAFractionOfTheFp32Peak) {
  // 1 TFLOP of scan work (Megatron's count) at 0.34 of the FP32 peak:
  // H100 (67 TFLOP/s) 1/(67·0.34) = 43.90 ms; GB200 (80) 36.76 ms.
  ASSERT_DOUBLE_EQ(DatasheetCalibration::kScanFp32Efficiency, 0.34);
  const ModelOptions o;
  EXPECT_NEAR(DatasheetCalibration(Preset("h100")).ScanTime_s(1e12, o),
              43.898e-3, 1e-6);
  EXPECT_NEAR(DatasheetCalibration(Preset("gb200")).ScanTime_s(1e12, o),
              36.765e-3, 1e-6);
  EXPECT_EQ(DatasheetCalibration(Preset("h100")).ScanTime_s(0, o), 0.0);
}

TEST(MambaScan, FollowsTheCudaCoresNotTheTensorCores) {
  // From H100 to GB300 the bf16 tensor-core peak grows 2.5× (989 -> 2500
  // TFLOP/s), the FP32 peak 1.19× (67 -> 80): the scan gains only the
  // latter, a GEMM about the former (2.49× with the MAMF ceilings and the
  // generation efficiencies).
  const ModelOptions o;
  const DatasheetCalibration h100(Preset("h100")), gb300(Preset("gb300"));
  EXPECT_NEAR(h100.ScanTime_s(1e12, o) / gb300.ScanTime_s(1e12, o), 80.0 / 67,
              1e-12);
  EXPECT_GT(h100.GemmTime_s(8192, 8192, 8192, Precision::kBf16, o) /
                gb300.GemmTime_s(8192, 8192, 8192, Precision::kBf16, o),
            2.4);
}

TEST(MambaScan, WithoutAnFp32PeakUsesTheBf16GemmCeiling) {
  search_spaces::ClusterSpec c = Preset("h100");
  c.gpu.peak_fp32_tflops = 0;
  const DatasheetCalibration cal(c);
  const ModelOptions o;
  // 989 TFLOP/s × MAMF ceiling 0.803 × Hopper's 0.81.
  EXPECT_NEAR(
      cal.ScanTime_s(1e12, o),
      1e12 / (989e12 * 0.803 * DatasheetCalibration::kHopperKernelEfficiency),
      1e-12);
}

}  // namespace
}  // namespace meshtune::costmodel
