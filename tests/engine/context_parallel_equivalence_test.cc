// Context parallelism reproduces the single-rank run (issue checks: cp2,
// cp4, cp2·tp2·sp, cp2·pp2, cp2·dp2 with the distributed optimizer, both
// recompute kinds, hidden and attention dropout): loss and gradient norm at
// each of 10 steps and the final weights, within the fp32 tolerance of
// tolerance.h, for the GPT and LLaMA tiny models. Also: the cp ranks'
// replicated weights stay bitwise equal, checkpoints resume bit-exactly and
// reshard to one rank, and TrainConfig::Validate's refusals for cp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "search_spaces/rank_grid.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/equivalence_check.h"

namespace meshtune::engine {
namespace {

using search_spaces::RecomputeGranularity;
using testing::RunResult;
using testing::TinyConfig;
using testing::TrainLocally;

struct Layout {
  std::string name;
  int64_t cp = 2, tp = 1, pp = 1, dp = 1;
  bool sp = false, dist_opt = false;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
  bool dropout = false;  // hidden and attention dropout 0.1
};

TrainConfig ConfigOf(bool llama, const Layout& l) {
  TrainConfig c = TinyConfig(llama);
  c.parallel.cp = l.cp;
  c.parallel.tp = l.tp;
  c.parallel.pp = l.pp;
  c.parallel.dp = l.dp;
  c.parallel.sp = l.sp;
  c.parallel.dist_opt = l.dist_opt;
  c.parallel.recompute.granularity = l.recompute;
  if (l.dropout) {
    c.hidden_dropout = 0.1f;
    c.attention_dropout = 0.1f;
  }
  return c;
}

// The single-rank runs (seq 16, gbs 8, 10 steps), without and with
// dropout.
const RunResult& Reference(bool llama, bool dropout) {
  const Layout one_rank{"", 1};
  Layout one_rank_dropout = one_rank;
  one_rank_dropout.dropout = true;
  static const RunResult gpt = TrainLocally(ConfigOf(false, one_rank));
  static const RunResult llama_run = TrainLocally(ConfigOf(true, one_rank));
  static const RunResult gpt_drop =
      TrainLocally(ConfigOf(false, one_rank_dropout));
  static const RunResult llama_drop =
      TrainLocally(ConfigOf(true, one_rank_dropout));
  if (dropout) return llama ? llama_drop : gpt_drop;
  return llama ? llama_run : gpt;
}

class ContextParallelEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<bool, Layout>> {};

TEST_P(ContextParallelEquivalenceTest, MatchesSingleRank) {
  const bool llama = std::get<0>(GetParam());
  const Layout& l = std::get<1>(GetParam());
  const RunResult run = TrainLocally(ConfigOf(llama, l));
  testing::ExpectSameRun(run, Reference(llama, l.dropout));
}

const Layout kLayouts[] = {
    {"cp2", 2},
    {"cp4", 4},
    {"cp2_tp2_sp", 2, 2, 1, 1, true},
    {"cp2_pp2", 2, 1, 2},
    {"cp2_dp2_dist_opt", 2, 1, 1, 2, false, true},
    {"cp2_selective", 2, 1, 1, 1, false, false,
     RecomputeGranularity::kSelective},
    {"cp2_tp2_sp_full", 2, 2, 1, 1, true, false, RecomputeGranularity::kFull},
    {"cp2_dropout", 2, 1, 1, 1, false, false, RecomputeGranularity::kNone,
     true},
    {"cp2_selective_dropout", 2, 1, 1, 1, false, false,
     RecomputeGranularity::kSelective, true},
    {"cp4_tp2_sp_dropout", 4, 2, 1, 1, true, false, RecomputeGranularity::kNone,
     true},
};

INSTANTIATE_TEST_SUITE_P(
    Layouts, ContextParallelEquivalenceTest,
    ::testing::Combine(::testing::Bool(), ::testing::ValuesIn(kLayouts)),
    [](const ::testing::TestParamInfo<std::tuple<bool, Layout>>& i) {
      return std::string(std::get<0>(i.param) ? "llama_" : "gpt_") +
             std::get<1>(i.param).name;
    });

// After training, every rank's flat parameters: the ranks that differ only
// in their cp coordinate hold the same tensors (replicated over cp, the
// gradient averaged over dp·cp), and must hold them bit for bit.
TEST(ContextParallelTest, ReplicatedWeightsAreBitwiseEqualAcrossCpRanks) {
  for (const bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama" : "gpt");
    TrainConfig c = ConfigOf(llama, {"", 2, 2, 1, 1, true});
    c.train_iters = 3;
    const int world = static_cast<int>(c.parallel.world());
    testing::SyntheticDataset data(c.seq(), c.model.vocab_size);
    std::vector<std::vector<float>> params(world);
    RunLocalRanks(world, [&](Communicator& w) {
      auto trainer = Trainer::Create(c, &data, &w);
      if (!trainer.ok()) throw std::runtime_error(trainer.status().message());
      Status s = (*trainer)->Run({});
      if (!s.ok()) throw std::runtime_error(s.message());
      params[w.rank()] = (*trainer)->params().flat_params();
    });
    const search_spaces::RankGrid grid(c.parallel, world, world);
    int compared = 0;
    for (int r = 0; r < world; ++r) {
      const auto rc = grid.CoordOf(r);
      if (rc.cp != 0) continue;
      for (int64_t q : grid.GroupOf(search_spaces::GroupKind::kCp, r)) {
        if (q == r) continue;
        ASSERT_EQ(params[q].size(), params[r].size());
        EXPECT_EQ(std::memcmp(params[q].data(), params[r].data(),
                              params[r].size() * sizeof(float)),
                  0)
            << "ranks " << r << " and " << q;
        ++compared;
      }
    }
    EXPECT_EQ(compared, 2);  // one cp peer for each of the 2 tp ranks
  }
}

// Checkpoints of a cp run: the save is written by the cp-rank-0 ranks (cp
// ranks hold the same weights; the distributed optimizer's state is sharded
// over dp·cp and gathered), a resume continues bit-exactly, and the
// checkpoint loads into the single-rank layout.
TEST(ContextParallelTest, CheckpointResumesBitExactlyAndLoadsIntoOneRank) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() /
                       ("meshtune_cp_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  TrainConfig c = ConfigOf(
      true, {"", 2, 1, 1, 2, false, true, RecomputeGranularity::kNone, true});
  c.optimizer.lr_decay_iters = 10;  // steps 1..5 do not depend on iters
  const RunResult straight = TrainLocally(c);

  TrainConfig first = c;
  first.train_iters = 5;
  first.save_dir = (dir / "cp").string();
  TrainLocally(first);
  TrainConfig second = c;
  second.load_dir = first.save_dir;
  const RunResult resumed = TrainLocally(second);
  ASSERT_EQ(resumed.losses.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(resumed.losses[i], straight.losses[5 + i]) << "step " << 6 + i;
    EXPECT_EQ(resumed.grad_norms[i], straight.grad_norms[5 + i]);
  }
  EXPECT_EQ(resumed.weights, straight.weights);

  TrainConfig single = TinyConfig(true);
  single.optimizer.lr_decay_iters = 10;
  single.hidden_dropout = 0.1f;
  single.attention_dropout = 0.1f;
  single.load_dir = first.save_dir;
  const RunResult resharded = TrainLocally(single);
  ASSERT_EQ(resharded.losses.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(testing::WithinFp32Tolerance(resharded.losses[i],
                                             straight.losses[5 + i]))
        << "step " << 6 + i << ": " << resharded.losses[i] << " vs "
        << straight.losses[5 + i];
  }
  fs::remove_all(dir);
}

TEST(ContextParallelTest, ValidateRefusesWhatCpCannotDo) {
  TrainConfig c = TinyConfig(false);  // seq 16
  c.parallel.cp = 2;
  EXPECT_TRUE(c.Validate().ok());

  c.seq_length = 12;  // 12 % 4 == 0 but the position table holds 16: fine
  EXPECT_TRUE(c.Validate().ok());
  c.seq_length = 14;
  Status s = c.Validate();
  EXPECT_EQ(s.message(),
            "context parallelism needs seq_length (14) divisible by 2·cp = 4 "
            "(the sequence is cut into 2·cp chunks)");
  EXPECT_EQ(s.hint(), "use --seq-len a multiple of 4, or another --cp");
  EXPECT_EQ(s.ExitCode(), 2);

  c.seq_length = 12;
  c.parallel.tp = 2;
  c.parallel.sp = true;
  s = c.Validate();
  EXPECT_EQ(s.message(),
            "context parallelism needs seq_length (12) divisible by 2·cp·tp = "
            "8 (2·cp chunks, each cp rank's split over tp by sequence "
            "parallelism)");
  EXPECT_EQ(s.hint(), "use --seq-len a multiple of 8, or another --cp");
  c.parallel.sp = false;  // without SP only 2·cp matters
  EXPECT_TRUE(c.Validate().ok());

  c.seq_length = 0;
  c.parallel.tp = 1;
  c.attention_dropout = 0.1f;  // dropout works with cp (ring_attention.h)
  c.hidden_dropout = 0.1f;
  EXPECT_TRUE(c.Validate().ok());

  c.parallel.cp = 0;
  s = c.Validate();
  EXPECT_EQ(s.message(), "cp must be >= 1 (got 0)");
  EXPECT_EQ(s.hint(), "use --cp 1 (no context parallelism) or more");
}

}  // namespace
}  // namespace meshtune::engine
