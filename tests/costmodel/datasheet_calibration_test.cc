// The per-generation training kernel efficiency and the NVFP4 rate
// (costmodel/datasheet_calibration.h): which constant each GPU preset gets,
// and what it does to a GEMM's time.
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

}  // namespace
}  // namespace meshtune::costmodel
