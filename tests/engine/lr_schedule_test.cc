// LearningRate against hand-computed values of Megatron's
// OptimizerParamScheduler.get_lr (optimizer_param_scheduler.py).
#include "engine/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace meshtune::engine {
namespace {

// lr 1e-3 → 1e-4, 10 warmup iterations, decay ends at 100.
OptimizerConfig Schedule(OptimizerConfig::DecayStyle style) {
  OptimizerConfig c;
  c.lr = 1e-3f;
  c.min_lr = 1e-4f;
  c.lr_warmup_iters = 10;
  c.lr_decay_iters = 100;
  c.lr_decay_style = style;
  return c;
}

TEST(LrScheduleTest, CosineWithWarmupMatchesHandValues) {
  const OptimizerConfig c = Schedule(OptimizerConfig::DecayStyle::kCosine);
  const int64_t train_iters = 200;
  // Warmup: lr·it/warmup, so iteration 1 already moves (0 only at it = 0).
  EXPECT_FLOAT_EQ(LearningRate(c, 0, train_iters), 0.0f);
  EXPECT_FLOAT_EQ(LearningRate(c, 1, train_iters), 1e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 5, train_iters), 5e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 10, train_iters), 1e-3f);
  // ratio = (55 − 10)/(100 − 10) = 0.5: min + (max − min)·0.5.
  EXPECT_FLOAT_EQ(LearningRate(c, 55, train_iters), 5.5e-4f);
  // ratio = 23/90: 1e-4 + 9e-4·0.5·(cos(23π/90) + 1).
  EXPECT_FLOAT_EQ(
      LearningRate(c, 33, train_iters),
      static_cast<float>(1e-4 +
                         9e-4 * 0.5 * (std::cos(M_PI * 23.0 / 90.0) + 1.0)));
  EXPECT_FLOAT_EQ(LearningRate(c, 100, train_iters), 1e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 101, train_iters), 1e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 150, train_iters), 1e-4f);
}

TEST(LrScheduleTest, LinearDecay) {
  const OptimizerConfig c = Schedule(OptimizerConfig::DecayStyle::kLinear);
  EXPECT_FLOAT_EQ(LearningRate(c, 10, 200), 1e-3f);
  // ratio 0.5 → 1e-4 + 9e-4·0.5; ratio 0.9 → 1e-4 + 9e-4·0.1.
  EXPECT_FLOAT_EQ(LearningRate(c, 55, 200), 5.5e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 91, 200), 1.9e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 100, 200), 1e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 150, 200), 1e-4f);
}

TEST(LrScheduleTest, ConstantKeepsPeakAfterWarmup) {
  // Megatron returns max_lr for 'constant' before looking at decay_iters.
  const OptimizerConfig c = Schedule(OptimizerConfig::DecayStyle::kConstant);
  EXPECT_FLOAT_EQ(LearningRate(c, 5, 200), 5e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 11, 200), 1e-3f);
  EXPECT_FLOAT_EQ(LearningRate(c, 150, 200), 1e-3f);
}

TEST(LrScheduleTest, NoWarmupStartsAtPeak) {
  OptimizerConfig c = Schedule(OptimizerConfig::DecayStyle::kCosine);
  c.lr_warmup_iters = 0;
  EXPECT_FLOAT_EQ(LearningRate(c, 0, 200), 1e-3f);
  // ratio 1/100 right after the start.
  EXPECT_FLOAT_EQ(
      LearningRate(c, 1, 200),
      static_cast<float>(1e-4 + 9e-4 * 0.5 * (std::cos(M_PI * 0.01) + 1.0)));
  EXPECT_FLOAT_EQ(LearningRate(c, 50, 200), 5.5e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 100, 200), 1e-4f);
}

TEST(LrScheduleTest, ZeroDecayItersMeansTrainIters) {
  OptimizerConfig c = Schedule(OptimizerConfig::DecayStyle::kLinear);
  c.lr_decay_iters = 0;
  // Decay over [10, 50]: iteration 30 is halfway, 50 the end.
  EXPECT_FLOAT_EQ(LearningRate(c, 30, 50), 5.5e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 50, 50), 1e-4f);
  EXPECT_FLOAT_EQ(LearningRate(c, 60, 50), 1e-4f);
  // With decay_iters set, train_iters does not matter.
  c.lr_decay_iters = 100;
  EXPECT_FLOAT_EQ(LearningRate(c, 55, 50), 5.5e-4f);
}

TEST(LrScheduleTest, DecayEndingInsideWarmupFallsToMinLr) {
  // No decay phase exists; after warmup the schedule is at min_lr.
  OptimizerConfig c = Schedule(OptimizerConfig::DecayStyle::kCosine);
  c.lr_decay_iters = 5;
  EXPECT_FLOAT_EQ(LearningRate(c, 10, 200), 1e-3f);
  EXPECT_FLOAT_EQ(LearningRate(c, 11, 200), 1e-4f);
}

}  // namespace
}  // namespace meshtune::engine
