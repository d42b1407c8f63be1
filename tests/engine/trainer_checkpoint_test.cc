// Checkpoints through the trainer: resume continues bit-exactly, a
// checkpoint saved as tp2·pp2 loads into tp1·pp4 and reproduces the next
// losses, and a non-finite loss stops the run keeping the last checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/data/dataset.h"
#include "engine/data/indexed_dataset.h"
#include "engine/trainer.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/tolerance.h"

namespace meshtune::engine {
namespace {

namespace fs = std::filesystem;

class TrainerCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("meshtune_trainer_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A config whose LR schedule does not depend on train_iters, so a run
  // that stops at 5 and one that goes on to 10 share steps 1..5.
  static TrainConfig Config(bool llama, int64_t iters) {
    TrainConfig c = testing::TinyConfig(llama);
    c.train_iters = iters;
    c.optimizer.lr_decay_iters = 10;
    return c;
  }

  fs::path dir_;
};

TEST_F(TrainerCheckpointTest, ResumeIsBitExact) {
  for (bool dist_opt : {false, true}) {
    SCOPED_TRACE(dist_opt ? "dp2 distributed optimizer, dropout" : "tp2 pp2");
    TrainConfig c = Config(true, 10);
    if (dist_opt) {
      c.parallel.dp = 2;
      c.parallel.dist_opt = true;
      // The resumed run must draw the masks the straight run drew at steps
      // 6..10 (keyed by the restored consumed-sample count).
      c.hidden_dropout = 0.1f;
      c.attention_dropout = 0.1f;
    } else {
      c.parallel.tp = 2;
      c.parallel.pp = 2;
    }
    const testing::RunResult straight = testing::TrainLocally(c);

    const std::string ckpt = (dir_ / (dist_opt ? "a" : "b")).string();
    TrainConfig first = c;
    first.train_iters = 5;
    first.save_dir = ckpt;
    testing::TrainLocally(first);
    TrainConfig second = c;
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

TEST_F(TrainerCheckpointTest, ReshardsTp2Pp2IntoTp1Pp4) {
  TrainConfig c = Config(false, 10);
  c.parallel.tp = 2;
  c.parallel.pp = 2;
  const testing::RunResult straight = testing::TrainLocally(c);

  TrainConfig first = c;
  first.train_iters = 5;
  first.save_dir = dir_.string();
  testing::TrainLocally(first);
  TrainConfig second = Config(false, 10);
  second.parallel.pp = 4;
  second.load_dir = dir_.string();
  const testing::RunResult resharded = testing::TrainLocally(second);
  ASSERT_EQ(resharded.losses.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(testing::WithinFp32Tolerance(resharded.losses[i],
                                             straight.losses[5 + i]))
        << "step " << 6 + i << ": " << resharded.losses[i] << " vs "
        << straight.losses[5 + i];
  }
}

// The observer hears each save before and after it, on world rank 0 only
// (tp2: two ranks save, one reports), so `tune train` can say why the log
// pauses.
TEST_F(TrainerCheckpointTest, ObserverHearsEverySaveOnRankZero) {
  TrainConfig c = Config(false, 4);
  c.parallel.tp = 2;
  c.save_dir = dir_.string();
  c.save_interval = 3;  // iteration 3, and 4 at the end
  testing::SyntheticDataset data(c.seq(), c.model.vocab_size);
  std::mutex mu;
  std::vector<CheckpointEvent> events;
  RunLocalRanks(2, [&](Communicator& world) {
    auto trainer = Trainer::Create(c, &data, &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    (*trainer)->SetCheckpointObserver([&](const CheckpointEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      // A save is announced before the files exist and reported after.
      EXPECT_EQ(fs::exists(dir_ / (e.iteration == 3 ? "iter_0000003"
                                                    : "iter_0000004")),
                e.saved);
      events.push_back(e);
    });
    ASSERT_TRUE((*trainer)->Run({}).ok());
  });
  ASSERT_EQ(events.size(), 4u);
  const int64_t iterations[] = {3, 3, 4, 4};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].iteration, iterations[i]) << i;
    EXPECT_EQ(events[i].saved, i % 2 == 1) << i;
    EXPECT_EQ(events[i].dir, dir_.string()) << i;
    EXPECT_GE(events[i].elapsed_s, 0) << i;
  }
}

TEST_F(TrainerCheckpointTest, NonFiniteLossStopsAndKeepsTheLastCheckpoint) {
  TrainConfig c = Config(false, 10);
  c.optimizer.lr = 1e30f;  // the first update blows the weights up
  c.optimizer.lr_warmup_iters = 0;
  c.save_dir = dir_.string();
  c.save_interval = 1;
  testing::SyntheticDataset data(c.seq(), c.model.vocab_size);
  RunLocalRanks(1, [&](Communicator& world) {
    auto trainer = Trainer::Create(c, &data, &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    const Status s = (*trainer)->Run({});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("iteration 2: loss is"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("the last saved checkpoint is kept"),
              std::string::npos);
  });
  // The checkpoint of iteration 1 (the last finite loss) stays the newest.
  std::ifstream tracker(dir_ / "latest_checkpointed_iteration.txt");
  std::string latest;
  tracker >> latest;
  EXPECT_EQ(latest, "1");
  EXPECT_TRUE(fs::exists(dir_ / "iter_0000001" / "metadata.json"));
}

// Issue 16 D2: saved at gbs 8 after 3 steps (24 samples consumed), resumed
// at gbs 2 for a 4th step over a corpus so small that data sized for 4·2
// samples ends before sample 24. The sampler used to read past the end of
// the data (a failed check in GptDataset::GetSample, exit 134).
TEST_F(TrainerCheckpointTest, ResumeWithASmallerGbsNeedsDataSizedForIt) {
  const std::string prefix = (dir_ / "small").string();
  {
    auto builder =
        data::IndexedDatasetBuilder::Create(prefix, data::TokenDtype::kUint16);
    ASSERT_TRUE(builder.ok()) << builder.status().message();
    std::vector<int32_t> doc(50);
    for (size_t i = 0; i < doc.size(); ++i)
      doc[i] = static_cast<int32_t>(i % 90 + 1);
    ASSERT_TRUE((*builder)->AddDocument(doc.data(), 50).ok());
    ASSERT_TRUE((*builder)->AddDocument(doc.data(), 40).ok());
    ASSERT_TRUE((*builder)->Finalize().ok());
  }
  const std::string ckpt = (dir_ / "ck").string();
  auto open = [&](const TrainConfig& c, int64_t samples) {
    data::DataConfig d;
    d.data_path = {prefix};
    d.seq_length = c.seq();
    d.num_samples = samples;
    d.seed = c.seed;
    auto ds = data::OpenTrainingData(d, c.model.vocab_size);
    EXPECT_TRUE(ds.ok()) << ds.status().message();
    return std::move(ds).value();
  };

  TrainConfig first = Config(false, 3);
  first.global_batch_size = 8;
  first.save_dir = ckpt;
  const auto first_data = open(first, 3 * 8);
  RunLocalRanks(1, [&](Communicator& world) {
    auto trainer = Trainer::Create(first, first_data.get(), &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    ASSERT_TRUE((*trainer)->Run({}).ok());
  });

  TrainConfig second = Config(false, 4);
  second.global_batch_size = 2;
  second.load_dir = ckpt;
  // What tune train opened before the fix: train_iters·gbs samples.
  const auto short_data = open(second, 4 * 2);
  ASSERT_LT(short_data->num_samples(), 26);
  RunLocalRanks(1, [&](Communicator& world) {
    auto trainer = Trainer::Create(second, short_data.get(), &world);
    ASSERT_FALSE(trainer.ok());
    EXPECT_EQ(trainer.status().message(),
              "resuming from the checkpoint in " + ckpt +
                  " at iteration 3 (24 samples consumed) needs 26 training "
                  "samples, but the data holds " +
                  std::to_string(short_data->num_samples()));
    EXPECT_EQ(trainer.status().ExitCode(), 2);
  });

  // Sized by ResumeSamples, the 4th step reads samples 24 and 25.
  const StatusOr<CheckpointState> state = ReadCheckpointState(ckpt);
  ASSERT_TRUE(state.ok()) << state.status().message();
  const StatusOr<int64_t> samples = ResumeSamples(ckpt, *state, second);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  EXPECT_EQ(*samples, 26);
  const auto data = open(second, *samples);
  RunLocalRanks(1, [&](Communicator& world) {
    auto trainer = Trainer::Create(second, data.get(), &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    ASSERT_TRUE((*trainer)->Run({}).ok());
    ASSERT_EQ((*trainer)->history().size(), 1u);
    EXPECT_EQ((*trainer)->history()[0].iteration, 4);
    EXPECT_EQ((*trainer)->history()[0].consumed_samples, 26);
  });
}

// A checkpoint already at --steps: the run used to train nothing and report
// a loss of 0.
TEST_F(TrainerCheckpointTest, CheckpointAtTheLastStepLeavesNothingToTrain) {
  TrainConfig first = Config(false, 3);
  first.save_dir = dir_.string();
  testing::TrainLocally(first);
  TrainConfig again = Config(false, 3);
  again.load_dir = dir_.string();
  testing::SyntheticDataset data(again.seq(), again.model.vocab_size);
  RunLocalRanks(1, [&](Communicator& world) {
    auto trainer = Trainer::Create(again, &data, &world);
    ASSERT_FALSE(trainer.ok());
    EXPECT_EQ(trainer.status().message(),
              "the checkpoint in " + dir_.string() +
                  " is at iteration 3 >= --steps 3: nothing to train");
    EXPECT_EQ(trainer.status().ExitCode(), 2);
  });
}

}  // namespace
}  // namespace meshtune::engine
