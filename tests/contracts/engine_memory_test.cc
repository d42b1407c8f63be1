// Each rank really holds only its shard, and the shard sizes are the cost
// model's: parameters (= gradients) per rank equal costmodel::
// StageLocalParams for the rank's pipeline stage, and AdamW state per rank
// is divided by dp with the distributed optimizer, like the cost model's
// optimizer term.
#include <gtest/gtest.h>

#include "costmodel/memory_model.h"
#include "costmodel/model_stats.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine {
namespace {

struct Shape {
  int64_t tp, pp, dp;
  bool dist_opt;
};

std::vector<RankMemory> Memory(bool llama, const Shape& s) {
  TrainConfig c = testing::TinyConfig(llama);
  c.parallel.tp = s.tp;
  c.parallel.pp = s.pp;
  c.parallel.dp = s.dp;
  c.parallel.dist_opt = s.dist_opt;
  c.train_iters = 1;
  return testing::TrainLocally(c).memory;
}

TEST(MemoryReportTest, ParamsPerRankMatchTheCostModel) {
  for (bool llama : {false, true}) {
    for (const Shape& s :
         {Shape{1, 1, 1, false}, Shape{2, 1, 1, false}, Shape{1, 2, 1, false},
          Shape{2, 2, 1, false}, Shape{1, 1, 2, true}, Shape{2, 2, 2, true}}) {
      SCOPED_TRACE(testing::TinyConfig(llama).model.name + " tp" +
                   std::to_string(s.tp) + " pp" + std::to_string(s.pp) + " dp" +
                   std::to_string(s.dp));
      TrainConfig c = testing::TinyConfig(llama);
      c.parallel.tp = s.tp;
      c.parallel.pp = s.pp;
      c.parallel.dp = s.dp;
      c.parallel.dist_opt = s.dist_opt;
      const auto stats = costmodel::ComputeModelStats(
          c.model, c.padded_vocab_size(), c.model.seq_length);
      const auto memory = Memory(llama, s);
      ASSERT_EQ(static_cast<int64_t>(memory.size()), c.parallel.world());
      for (const RankMemory& r : memory) {
        const double expected =
            costmodel::StageLocalParams(c.model, stats, c.parallel, r.pp_rank)
                .dense;
        EXPECT_EQ(static_cast<double>(r.num_params), expected)
            << "rank " << r.rank;
        EXPECT_EQ(r.param_bytes, 4 * r.num_params);
        EXPECT_EQ(r.grad_bytes, 4 * r.num_params);
        // AdamW m and v (fp32) for the rank's share; the distributed
        // optimizer pads the buffer to a multiple of dp.
        const double share = s.dist_opt
                                 ? static_cast<double>(r.num_params) / s.dp
                                 : static_cast<double>(r.num_params);
        EXPECT_NEAR(static_cast<double>(r.optimizer_bytes), 8.0 * share,
                    8.0 * s.dp)
            << "rank " << r.rank;
      }
    }
  }
}

TEST(MemoryReportTest, ShardingDividesWhatEachRankHolds) {
  const auto one = Memory(false, {1, 1, 1, false});
  const auto tp2 = Memory(false, {2, 1, 1, false});
  const auto pp2 = Memory(false, {1, 2, 1, false});
  const auto dist = Memory(false, {1, 1, 2, true});
  const int64_t total = one[0].num_params;
  // tp=2 halves everything but the replicated norms/biases (and positions).
  EXPECT_LT(tp2[0].num_params, total * 0.6);
  EXPECT_GT(tp2[0].num_params, total * 0.45);
  // pp=2 splits the layers; the tied embedding is held on both ends.
  EXPECT_LT(pp2[0].num_params + pp2[1].num_params, total * 1.6);
  EXPECT_LT(pp2[1].num_params, total);
  // The distributed optimizer halves the optimizer state, not the weights.
  EXPECT_EQ(dist[0].num_params, total);
  EXPECT_NEAR(dist[0].optimizer_bytes, one[0].optimizer_bytes / 2.0, 16);
}

}  // namespace
}  // namespace meshtune::engine
