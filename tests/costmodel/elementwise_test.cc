// Calibration::ElementwiseTime_s and the compute model's use of it: the
// default is the datasheet byte model the compute model summed before
// elementwise ops had their own method, so datasheet answers are unchanged.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/compute_model.h"
#include "costmodel/datasheet_calibration.h"
#include "costmodel/fitted_calibration.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ParallelConfig;
using search_spaces::Precision;

// Relative comparison: separate MemoryTime_s calls sum to the single call
// on the summed bytes up to rounding.
void ExpectClose(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 * expected) << expected;
}

TEST(ElementwiseBytes, DatasheetBytesPerElement) {
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kNorm, false), 4.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kNorm, true), 8.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kBiasDropoutAdd, false), 7.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kResidualAdd, false), 6.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kGelu, true), 8.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kSwiglu, false), 6.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kRope, true), 8.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kCrossEntropy, false), 38.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kCrossEntropy, true), 14.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kEmbedding, false), 8.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kEmbedding, true), 8.0);
  // Fused cross-entropy (calibration.h): native 2+4 + 4+4 + 4+4 forward,
  // 4+2 backward; Transformer Engine's 2 + 2+2 forward, 2+2 backward.
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kCrossEntropyNative, false), 22.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kCrossEntropyNative, true), 6.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kCrossEntropyTe, false), 6.0);
  EXPECT_EQ(ElementwiseBytes(ElementwiseOp::kCrossEntropyTe, true), 4.0);
}

TEST(CrossEntropyOp, FollowsTheFusionFlags) {
  search_spaces::TrainingSpec t;
  EXPECT_EQ(CrossEntropyOp(t), ElementwiseOp::kCrossEntropy);
  t.cross_entropy_fusion_impl = search_spaces::CrossEntropyFusionImpl::kTe;
  EXPECT_EQ(CrossEntropyOp(t), ElementwiseOp::kCrossEntropy);  // fusion off
  t.cross_entropy_loss_fusion = true;
  EXPECT_EQ(CrossEntropyOp(t), ElementwiseOp::kCrossEntropyTe);
  t.cross_entropy_fusion_impl = search_spaces::CrossEntropyFusionImpl::kNative;
  EXPECT_EQ(CrossEntropyOp(t), ElementwiseOp::kCrossEntropyNative);
}

TEST(ElementwiseOpNames, RoundTrip) {
  for (int i = 0; i < kNumElementwiseOps; ++i) {
    const auto op = static_cast<ElementwiseOp>(i);
    ElementwiseOp parsed = ElementwiseOp::kEmbedding;
    ASSERT_TRUE(ParseElementwiseOp(ToString(op), &parsed)) << ToString(op);
    EXPECT_EQ(parsed, op);
  }
  ElementwiseOp unused;
  EXPECT_FALSE(ParseElementwiseOp("softmax", &unused));
  EXPECT_STREQ(ToString(ElementwiseOp::kBiasDropoutAdd), "bias_dropout_add");
}

TEST(DefaultElementwiseTime, IsTheByteCountThroughMemoryTime) {
  const DatasheetCalibration cal(testing::A100Cluster());
  const ModelOptions o;
  // A100: 2039 GB/s · 0.9 HBM efficiency; 1e6 GELU elements backward are
  // 8e6 bytes.
  EXPECT_DOUBLE_EQ(cal.ElementwiseTime_s(ElementwiseOp::kGelu, 1e6, true, o),
                   cal.MemoryTime_s(8e6, o));
  EXPECT_DOUBLE_EQ(
      cal.ElementwiseTime_s(ElementwiseOp::kCrossEntropy, 1e6, false, o),
      cal.MemoryTime_s(38e6, o));
  EXPECT_EQ(cal.ElementwiseTime_s(ElementwiseOp::kNorm, 0, false, o), 0.0);
}

// GPT layer, tp 2 with SP, 2 sequences of 1024 tokens: T = 2048 tokens,
// h = 1024, f = 4096. Forward bytes: 2 LayerNorms 4 B + 2 bias-dropout-adds
// 7 B per h-element of the SP shard (T·h/2), GELU 4 B per f-element of the
// tp shard (T·f/2); backward twice that.
TEST(DefaultElementwiseTime, GptLayerMatchesTheByteModel) {
  const DatasheetCalibration cal(testing::A100Cluster());
  ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  c.mbs = 2;
  const LayerCompute lc = LayerComputeTime(testing::Gpt(1, 1024, 16), c, 1024,
                                           Precision::kBf16, false, cal, {});
  const double T = 2048, h = 1024, f = 4096;
  const double bytes = (2 * 4.0 + 2 * 7.0) * T * h / 2 + 4.0 * T * f / 2;
  EXPECT_DOUBLE_EQ(bytes, 39845888.0);
  ExpectClose(lc.elem_fwd_s, cal.MemoryTime_s(bytes, {}));
  ExpectClose(lc.elem_bwd_s, cal.MemoryTime_s(2 * bytes, {}));
}

// LLaMA layer, tp 2 without SP, 1 sequence of 2048 tokens, h = 4096, 32
// heads in 8 groups (d = 128), f = 14336. Forward bytes: 2 RMSNorms 4 B +
// 2 residual adds 6 B per h-element (replicated: T·h), SwiGLU 6 B per
// output element (T·f/2), RoPE 4 B per q/k element (T·(4096 + 1024)/2).
TEST(DefaultElementwiseTime, LlamaLayerMatchesTheByteModel) {
  const DatasheetCalibration cal(testing::A100Cluster());
  ParallelConfig c;
  c.tp = 2;
  const LayerCompute lc =
      LayerComputeTime(testing::Llama(1, 4096, 32, 8, 14336, 32000, 2048), c,
                       2048, Precision::kBf16, false, cal, {});
  const double T = 2048;
  const double bytes = (2 * 4.0 + 2 * 6.0) * T * 4096 + 6.0 * T * 14336 / 2 +
                       4.0 * T * (4096 + 1024) / 2;
  EXPECT_DOUBLE_EQ(bytes, 276824064.0);
  ExpectClose(lc.elem_fwd_s, cal.MemoryTime_s(bytes, {}));
  ExpectClose(lc.elem_bwd_s, cal.MemoryTime_s(2 * bytes, {}));
}

// Records every ElementwiseTime_s call and answers 1 s per call, so the
// compute model's element counts are visible.
class RecordingCalibration : public DatasheetCalibration {
 public:
  using DatasheetCalibration::DatasheetCalibration;
  double ElementwiseTime_s(ElementwiseOp op, double elements, bool backward,
                           const ModelOptions&) const override {
    calls.emplace_back(op, elements, backward);
    return 1.0;
  }
  mutable std::vector<std::tuple<ElementwiseOp, double, bool>> calls;
};

TEST(ComputeModel, AsksTheCalibrationPerOpWithElementCounts) {
  const RecordingCalibration cal(testing::A100Cluster());
  ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  const search_spaces::ModelSpec llama =
      testing::Llama(1, 4096, 32, 8, 14336, 32000, 2048);
  const LayerCompute lc =
      LayerComputeTime(llama, c, 2048, Precision::kBf16, false, cal, {});
  using E = ElementwiseOp;
  const std::vector<std::tuple<E, double, bool>> layer = {
      {E::kNorm, 2 * 2048.0 * 4096 / 2, false},
      {E::kNorm, 2 * 2048.0 * 4096 / 2, true},
      {E::kResidualAdd, 2 * 2048.0 * 4096 / 2, false},
      {E::kResidualAdd, 2 * 2048.0 * 4096 / 2, true},
      {E::kRope, 2048.0 * 5120 / 2, false},
      {E::kRope, 2048.0 * 5120 / 2, true},
      {E::kSwiglu, 2048.0 * 14336 / 2, false},
      {E::kSwiglu, 2048.0 * 14336 / 2, true}};
  EXPECT_EQ(cal.calls, layer);
  EXPECT_EQ(lc.elem_fwd_s, 4.0);
  EXPECT_EQ(lc.elem_bwd_s, 4.0);

  cal.calls.clear();
  const LayerCompute logits =
      LogitsComputeTime(llama, c, 2048, 32000, Precision::kBf16, cal, {});
  const std::vector<std::tuple<E, double, bool>> head = {
      {E::kCrossEntropy, 2048.0 * 16000, false},
      {E::kCrossEntropy, 2048.0 * 16000, true},
      {E::kNorm, 2048.0 * 4096 / 2, false},
      {E::kNorm, 2048.0 * 4096 / 2, true}};
  EXPECT_EQ(cal.calls, head);
  EXPECT_EQ(logits.elem_fwd_s, 2.0);
  // The fused kernel the run selects replaces the unfused cross-entropy.
  cal.calls.clear();
  LogitsComputeTime(llama, c, 2048, 32000, Precision::kBf16, cal, {},
                    E::kCrossEntropyTe);
  EXPECT_EQ(std::get<0>(cal.calls.front()), E::kCrossEntropyTe);
  EXPECT_EQ(std::get<1>(cal.calls.front()), 2048.0 * 16000);

  cal.calls.clear();
  const LayerCompute emb = EmbeddingComputeTime(llama, c, 2048, cal, {});
  const std::vector<std::tuple<E, double, bool>> embedding = {
      {E::kEmbedding, 2048.0 * 4096, false},
      {E::kEmbedding, 2048.0 * 4096, true}};
  EXPECT_EQ(cal.calls, embedding);
  EXPECT_EQ(emb.elem_bwd_s, 1.0);

  // The elementwise refinement off: the layer charges none of it.
  ModelOptions off;
  off.Disable(Refinement::kElementwise);
  const LayerCompute none =
      LayerComputeTime(llama, c, 2048, Precision::kBf16, false, cal, off);
  EXPECT_EQ(none.elem_fwd_s, 0.0);
}

TEST(ScaledCalibrationView, ScalesElementwiseByTheMemoryFactor) {
  const DatasheetCalibration base(testing::A100Cluster());
  EfficiencyFactors f;
  f.memory = 2.5;
  f.compute = 7.0;
  const ScaledCalibrationView view(base, f);
  EXPECT_DOUBLE_EQ(
      view.ElementwiseTime_s(ElementwiseOp::kGelu, 1e6, false, {}),
      2.5 * base.ElementwiseTime_s(ElementwiseOp::kGelu, 1e6, false, {}));
}

}  // namespace
}  // namespace meshtune::costmodel
