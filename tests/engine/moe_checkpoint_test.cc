// Checkpoints of MoE runs with expert parallelism: the experts go to expert
// shards (one per ep, etp, pp position), a resumed run continues
// bit-exactly, and a checkpoint saved under one ep/etp layout loads into
// another and reproduces the next losses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/checkpoint_format.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/tolerance.h"

namespace meshtune::engine {
namespace {

namespace fs = std::filesystem;

class MoeCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("meshtune_moe_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // LR schedule independent of train_iters: runs stopped at 5 and run to
  // 10 share steps 1..5.
  static TrainConfig Config(int64_t dp, int64_t ep, int64_t tp = 1,
                            int64_t etp = 0, bool dist_opt = false) {
    TrainConfig c = testing::TinyMoeConfig();
    c.train_iters = 10;
    c.optimizer.lr_decay_iters = 10;
    c.parallel.dp = dp;
    c.parallel.ep = ep;
    c.parallel.tp = tp;
    c.parallel.sp = tp > 1;
    c.parallel.etp = etp;
    c.parallel.dist_opt = dist_opt;
    return c;
  }

  fs::path dir_;
};

TEST_F(MoeCheckpointTest, ResumeIsBitExactAndWritesExpertShards) {
  struct Case {
    const char* name;
    TrainConfig config;
    int ep, etp;
  };
  // DeepSeek-V3's expert bias: it is carried by the checkpoint (a bias
  // lost on resume would route step 6 differently).
  TrainConfig biased = Config(2, 2);
  biased.model.moe_router_score_function = search_spaces::RouterScore::kSigmoid;
  biased.model.moe_router_enable_expert_bias = true;
  biased.moe_router_bias_update_rate = 0.05;
  const Case cases[] = {
      {"dp2 ep2 distributed optimizer", Config(2, 2, 1, 0, true), 2, 1},
      {"tp2 sp ep2 etp1", Config(1, 2, 2, 1), 2, 1},
      {"dp2 ep2 expert bias", biased, 2, 1},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const testing::RunResult straight = testing::TrainLocally(k.config);
    const std::string ckpt = (dir_ / k.name).string();
    TrainConfig first = k.config;
    first.train_iters = 5;
    first.save_dir = ckpt;
    testing::TrainLocally(first);
    const std::string iter = ckpt + "/" + IterDirName(5);
    for (int e = 0; e < k.ep; ++e) {
      for (int x = 0; x < k.etp; ++x) {
        EXPECT_TRUE(
            fs::is_regular_file(iter + "/" + ExpertShardFileName(e, x, 0)))
            << ExpertShardFileName(e, x, 0);
      }
    }
    TrainConfig second = k.config;
    second.load_dir = ckpt;
    const testing::RunResult resumed = testing::TrainLocally(second);
    ASSERT_EQ(resumed.losses.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(resumed.losses[i], straight.losses[5 + i]) << "step " << 6 + i;
      EXPECT_EQ(resumed.grad_norms[i], straight.grad_norms[5 + i]);
    }
    EXPECT_EQ(resumed.weights, straight.weights);
  }
}

// ep2 (dp2, distributed optimizer) -> one rank, one rank -> ep4 (dp4),
// ep2 -> tp2 sp ep2 etp1, and cp2 ep2 <-> other layouts: the experts and
// their AdamW state land where the new layout holds them.
TEST_F(MoeCheckpointTest, ReshardsAcrossExpertLayouts) {
  struct Case {
    const char* name;
    TrainConfig save, load;
  };
  // ep folded over cp (the expert shards come from the cp ranks).
  TrainConfig cp2_ep2 = Config(1, 2);
  cp2_ep2.parallel.cp = 2;
  const Case cases[] = {
      {"ep2 to one rank", Config(2, 2, 1, 0, true), Config(1, 1)},
      {"one rank to ep4", Config(1, 1), Config(4, 4)},
      {"ep2 to tp2 ep2 etp1", Config(2, 2), Config(1, 2, 2, 1)},
      {"cp2 ep2 to one rank", cp2_ep2, Config(1, 1)},
      {"dp2 ep2 to cp2 ep2", Config(2, 2), cp2_ep2},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const testing::RunResult straight = testing::TrainLocally(k.save);
    const std::string ckpt = (dir_ / k.name).string();
    TrainConfig first = k.save;
    first.train_iters = 5;
    first.save_dir = ckpt;
    testing::TrainLocally(first);
    TrainConfig second = k.load;
    second.load_dir = ckpt;
    const testing::RunResult resharded = testing::TrainLocally(second);
    ASSERT_EQ(resharded.losses.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_TRUE(testing::WithinFp32Tolerance(resharded.losses[i],
                                               straight.losses[5 + i]))
          << "step " << 6 + i << ": " << resharded.losses[i] << " vs "
          << straight.losses[5 + i];
    }
  }
}

// metadata.json lists every expert shard under its fixed name: one left out
// or renamed is refused with a one-line error before any shard is read.
TEST_F(MoeCheckpointTest, ExpertShardListIsValidated) {
  TrainConfig c = Config(2, 2);
  c.train_iters = 1;
  c.save_dir = (dir_ / "ckpt").string();
  testing::TrainLocally(c);
  const std::string meta_path =
      c.save_dir + "/" + IterDirName(1) + "/" + kMetadataFileName;
  std::ifstream in(meta_path);
  const nlohmann::json original = nlohmann::json::parse(in);
  in.close();
  ASSERT_EQ(original["parallel"]["ep"], 2);
  struct Edit {
    const char* what;
    std::function<void(nlohmann::json&)> apply;
    std::string message;
  };
  const Edit edits[] = {
      {"one expert shard left out",
       [](nlohmann::json& j) { j["shards"].erase(j["shards"].size() - 1); },
       "it lists 1 expert shards but ep·etp·pp = 2"},
      {"an expert shard renamed",
       [](nlohmann::json& j) {
         j["shards"][j["shards"].size() - 1]["file"] = "shard_tp0_pp0.bin";
       },
       "expert shard (ep 1, etp 0, pp 0) is not named "
       "shard_ep1_etp0_pp0.bin"},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.what);
    nlohmann::json j = original;
    e.apply(j);
    std::ofstream(meta_path) << j.dump(1);
    StatusOr<CheckpointMetadata> m = ReadMetadata(meta_path);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find(e.message), std::string::npos)
        << m.status().message();
  }
}

}  // namespace
}  // namespace meshtune::engine
