// A short real training run through the binary lowers the loss clearly:
// gpt-tiny on the built-in corpus (Debian's license texts, byte-level),
// 100 iterations of 4 × 64 tokens on one rank at lr 1e-3. The first loss is
// about ln(4096) = 8.3 (uniform over the vocabulary); after 120 steps the model
// has learned the byte statistics of English text (2.7 measured) and is
// below 3.2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

TEST(TrainLossTest, GptTinyLearnsTheBuiltInCorpus) {
  const testing::TuneRun run = testing::RunTune(
      "train --model gpt-tiny --steps 100 --seq-len 64 --gbs 4 --lr 1e-3 "
      "--min-lr 1e-4 --no-db --json",
      "", "OMP_NUM_THREADS=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  const auto& it = j.at("iterations");
  ASSERT_EQ(it.size(), 100u);
  const double first = it.front().at("loss").get<double>();
  const double last = it.back().at("loss").get<double>();
  EXPECT_GT(first, 7.5);
  EXPECT_LT(last, 3.2) << "first " << first;
}

}  // namespace
}  // namespace meshtune::tuner
