// Issue 16 D3, in process: a stop request (SIGTERM, SIGINT or SIGHUP,
// engine/stop_signal.h) ends a multi-rank run after the same iteration on
// every rank, saves a checkpoint that loads, and names the signal; a
// signal delivered to only one rank still stops them all.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/comm/local_communicator.h"
#include "engine/stop_signal.h"
#include "engine/trainer.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine {
namespace {

namespace fs = std::filesystem;

class TrainerStopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClearStopRequest();
    dir_ = fs::temp_directory_path() /
           ("meshtune_trainer_stop_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    ClearStopRequest();
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

// dp2: two ranks as threads.
TrainConfig Dp2Config() {
  TrainConfig c = testing::TinyConfig(false);
  c.parallel.dp = 2;
  c.train_iters = 10;
  return c;
}

TEST_F(TrainerStopTest, SigtermStopsEveryRankAfterTheSameIterationAndSaves) {
  TrainConfig c = Dp2Config();
  c.save_dir = dir_.string();
  testing::SyntheticDataset data(c.seq(), c.model.vocab_size);
  std::atomic<int> iterations_rank0{0}, iterations_rank1{0};
  std::string messages[2];
  RunLocalRanks(2, [&](Communicator& world) {
    auto trainer = Trainer::Create(c, &data, &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    // The signal arrives during iteration 3 (here: while rank 0 logs
    // iteration 2, before iteration 3 starts on either rank).
    const Status s = (*trainer)->Run([&](const IterationLog& log) {
      if (log.iteration == 2) RequestStop(SIGTERM);
    });
    messages[world.rank()] = s.message();
    (world.rank() == 0 ? iterations_rank0 : iterations_rank1) =
        static_cast<int>((*trainer)->history().size());
  });
  // Rank 1 may already be inside iteration 3 when rank 0 records the
  // signal; the flag travels with iteration 3's loss all-reduce, so both
  // stop after iteration 3.
  EXPECT_EQ(iterations_rank0.load(), 3);
  EXPECT_EQ(iterations_rank1.load(), 3);
  const std::string expected =
      "stopped by SIGTERM after iteration 3 of 10; checkpoint of iteration "
      "3 saved in " +
      dir_.string();
  EXPECT_EQ(messages[0], expected);
  EXPECT_EQ(messages[1], expected);
  EXPECT_TRUE(StoppedAtStepBoundary());

  std::ifstream tracker(dir_ / "latest_checkpointed_iteration.txt");
  std::string latest;
  tracker >> latest;
  EXPECT_EQ(latest, "3");
  // The checkpoint is complete: a fresh run resumes from it.
  ClearStopRequest();
  TrainConfig resume = Dp2Config();
  resume.load_dir = dir_.string();
  resume.train_iters = 4;
  RunLocalRanks(2, [&](Communicator& world) {
    auto trainer = Trainer::Create(resume, &data, &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    const Status s = (*trainer)->Run({});
    EXPECT_TRUE(s.ok()) << s.message();
    ASSERT_EQ((*trainer)->history().size(), 1u);
    EXPECT_EQ((*trainer)->history()[0].iteration, 4);
  });
}

TEST_F(TrainerStopTest, WithoutSaveTheMessageSaysNoCheckpoint) {
  const TrainConfig c = Dp2Config();
  testing::SyntheticDataset data(c.seq(), c.model.vocab_size);
  RequestStop(SIGHUP);  // before the first step: stop after iteration 1
  RunLocalRanks(2, [&](Communicator& world) {
    auto trainer = Trainer::Create(c, &data, &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    const Status s = (*trainer)->Run({});
    EXPECT_EQ(s.message(),
              "stopped by SIGHUP after iteration 1 of 10; no checkpoint saved "
              "(the run has no --save)");
    EXPECT_EQ(s.ExitCode(), 1);
  });
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(TrainerStopTest, RealSignalIsRecordedByTheHandler) {
  InstallStopSignalHandlers(/*repeat_kills=*/false);
  ASSERT_EQ(raise(SIGINT), 0);
  EXPECT_EQ(StopSignal(), SIGINT);
  // Without repeat_kills a second signal is ignored (this test survives).
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(StopSignal(), SIGINT);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
}

TEST_F(TrainerStopTest, AStopAtTheLastIterationIsANormalEnd) {
  TrainConfig c = Dp2Config();
  c.train_iters = 2;
  testing::SyntheticDataset data(c.seq(), c.model.vocab_size);
  RunLocalRanks(2, [&](Communicator& world) {
    auto trainer = Trainer::Create(c, &data, &world);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    const Status s = (*trainer)->Run([&](const IterationLog& log) {
      if (log.iteration == 1) RequestStop(SIGTERM);
    });
    // The flag travels with iteration 2's all-reduce, the last one: the
    // run is complete, so it ends normally.
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ((*trainer)->history().size(), 2u);
  });
  EXPECT_FALSE(StoppedAtStepBoundary());
}

TEST(StopSignalNames, NamesTheStopSignals) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(SignalName(SIGHUP), "SIGHUP");
  EXPECT_EQ(SignalName(SIGUSR1), "signal " + std::to_string(SIGUSR1));
}

}  // namespace
}  // namespace meshtune::engine
