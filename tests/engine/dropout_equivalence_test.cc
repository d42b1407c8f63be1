// Dropout keeps every parallel layout equivalent to the single-rank run:
// masks are counter-based functions of (seed, layer, site, global sample,
// position, column/head) (engine/cpu/dropout_mask.h), so tp (heads split),
// sp (sequence shards), pp/vpp, dp, the distributed optimizer, a different
// micro-batch size and both recompute kinds draw exactly the masks of the
// single-rank run, and losses, grad norms and final weights agree within the
// fp32 tolerance of tolerance.h. Also: dropout changes the run (the masks
// are really applied), reruns are identical, and training still learns.
#include <gtest/gtest.h>

#include <string>

#include "tests/engine/engine_test_util.h"
#include "tests/engine/equivalence_check.h"
#include "tests/engine/tolerance.h"

namespace meshtune::engine {
namespace {

using search_spaces::RecomputeGranularity;
using testing::RunResult;
using testing::TinyConfig;
using testing::TrainLocally;

TrainConfig DropoutConfig(bool llama) {
  TrainConfig c = TinyConfig(llama);
  c.hidden_dropout = 0.1f;
  c.attention_dropout = 0.1f;
  return c;
}

struct Layout {
  std::string name;
  int64_t tp = 1, pp = 1, vpp = 1, dp = 1, mbs = 1;
  bool sp = false, dist_opt = false;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
};

const Layout kLayouts[] = {
    {"tp2", 2},
    {"tp2_sp", 2, 1, 1, 1, 1, true},
    {"pp2_vpp2", 1, 2, 2},
    {"dp2_dist_opt", 1, 1, 1, 2, 1, false, true},
    {"mbs2", 1, 1, 1, 1, 2},
    {"selective", 1, 1, 1, 1, 1, false, false,
     RecomputeGranularity::kSelective},
    {"tp2_sp_full", 2, 1, 1, 1, 1, true, false, RecomputeGranularity::kFull},
    {"tp2_pp2_dp2_mbs2", 2, 2, 1, 2, 2},
};

class DropoutEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<bool, Layout>> {};

const RunResult& Reference(bool llama) {
  static RunResult gpt = TrainLocally(DropoutConfig(false));
  static RunResult lla = TrainLocally(DropoutConfig(true));
  return llama ? lla : gpt;
}

TEST_P(DropoutEquivalenceTest, MatchesSingleRank) {
  const bool llama = std::get<0>(GetParam());
  const Layout& l = std::get<1>(GetParam());
  TrainConfig c = DropoutConfig(llama);
  c.parallel.tp = l.tp;
  c.parallel.pp = l.pp;
  c.parallel.vpp = l.vpp;
  c.parallel.dp = l.dp;
  c.parallel.mbs = l.mbs;
  c.parallel.sp = l.sp;
  c.parallel.dist_opt = l.dist_opt;
  c.parallel.recompute.granularity = l.recompute;
  const RunResult& ref = Reference(llama);
  const RunResult run = TrainLocally(c);
  testing::ExpectSameRun(run, ref);
}

std::string Name(const ::testing::TestParamInfo<std::tuple<bool, Layout>>& i) {
  return std::string(std::get<0>(i.param) ? "llama_" : "gpt_") +
         std::get<1>(i.param).name;
}

INSTANTIATE_TEST_SUITE_P(Layouts, DropoutEquivalenceTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::ValuesIn(kLayouts)),
                         Name);

TEST(DropoutTest, ChangesTheRunAndIsReproducible) {
  for (bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama" : "gpt");
    const RunResult plain = TrainLocally(TinyConfig(llama));
    const RunResult& dropped = Reference(llama);
    // The first step's loss already differs (masks on the embedding and
    // every layer); a no-op dropout would reproduce the plain run exactly.
    EXPECT_GT(std::abs(dropped.losses[0] - plain.losses[0]),
              1e-4 * plain.losses[0])
        << dropped.losses[0] << " vs " << plain.losses[0];
    // Each dropout kind alone also changes the run.
    TrainConfig hidden_only = TinyConfig(llama);
    hidden_only.hidden_dropout = 0.1f;
    TrainConfig attention_only = TinyConfig(llama);
    attention_only.attention_dropout = 0.1f;
    for (const TrainConfig& c : {hidden_only, attention_only}) {
      const RunResult r = TrainLocally(c);
      EXPECT_NE(r.losses[0], plain.losses[0]);
      EXPECT_NE(r.losses[0], dropped.losses[0]);
    }
    // Same seed, same masks: bit-identical rerun.
    const RunResult again = TrainLocally(DropoutConfig(llama));
    EXPECT_EQ(again.losses, dropped.losses);
    // Another seed draws other masks (and other initial weights).
    TrainConfig other = DropoutConfig(llama);
    other.seed = 4321;
    EXPECT_NE(TrainLocally(other).losses[0], dropped.losses[0]);
  }
}

TEST(DropoutTest, TrainingStillLearns) {
  TrainConfig c = DropoutConfig(false);
  c.train_iters = 60;
  c.optimizer.lr_warmup_iters = 5;
  const RunResult run = TrainLocally(c);
  ASSERT_EQ(run.losses.size(), 60u);
  EXPECT_LT(run.losses.back(), run.losses.front() - 1.0)
      << run.losses.front() << " -> " << run.losses.back();
}

TEST(DropoutTest, RejectsProbabilitiesOutsideZeroOne) {
  TrainConfig c = TinyConfig(false);
  c.hidden_dropout = 1.0f;
  Status s = c.Validate();
  EXPECT_EQ(s.message(), "hidden_dropout must be in [0, 1), got 1");
  c.hidden_dropout = 0.0f;
  c.attention_dropout = -0.5f;
  s = c.Validate();
  EXPECT_EQ(s.message(), "attention_dropout must be in [0, 1), got -0.5");
  c.attention_dropout = 0.1f;
  EXPECT_TRUE(c.Validate().ok());
}

}  // namespace
}  // namespace meshtune::engine
