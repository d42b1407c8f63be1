// `--model FILE` with a file `tune search --out` wrote: the model is read,
// the parallelism: section is ignored with one warning line that says how to
// use it instead.
#include "tuner/inputs/config_file_inputs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/tuner/run_tune.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

namespace fs = std::filesystem;

class IgnoredParallelismTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    const testing::TuneRun search = testing::RunTuneInProcess(
        "search --model gpt-tiny --gpus 2 --gpu a100-80g --tp 2 --sp --mbs 4 "
        "--recompute none --no-dist-opt --out best.yaml --no-db",
        dir_);
    ASSERT_EQ(search.exit_code, 0) << search.err;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
};

const char kWarning[] =
    "tune: warning: best.yaml: --model reads only its model: section; its "
    "parallelism: section (tp2 pp1 dp1 mbs4 sp none) is ignored: pin axes with "
    "--tp/--pp/..., or use the plan as written with tune train --config "
    "best.yaml, tune launch --config best.yaml or tune compare --config "
    "'tp2 pp1 dp1 mbs4 sp none'\n";

TEST_F(IgnoredParallelismTest, SearchAndEstimateWarnOnceAndStillRun) {
  for (const char* command :
       {"--model best.yaml --gpus 2 --gpu a100-80g --top 1 --no-db",
        "search --model best.yaml --gpus 2 --gpu a100-80g --top 1 --no-db -q",
        "estimate --model best.yaml --gpus 2 --gpu a100-80g"}) {
    SCOPED_TRACE(command);
    const testing::TuneRun run = testing::RunTuneInProcess(command, dir_);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err, kWarning);
    EXPECT_NE(run.out, "");
  }
}

TEST_F(IgnoredParallelismTest, PlainModelFilesAndPresetsSayNothing) {
  EXPECT_EQ(IgnoredParallelismWarning("gpt-tiny"), "");
  EXPECT_EQ(IgnoredParallelismWarning(""), "");
  EXPECT_EQ(IgnoredParallelismWarning(dir_ + "/missing.yaml"), "");
  testing::WriteFile(dir_ + "/model.yaml",
                     "model:\n  name: m\n  num_layers: 2\n");
  EXPECT_EQ(IgnoredParallelismWarning(dir_ + "/model.yaml"), "");
  // A section that does not parse still gets the warning, without the
  // compact configuration.
  testing::WriteFile(dir_ + "/odd.yaml",
                     "parallelism:\n  tensor_model_parallel_size: two\n");
  const std::string odd = IgnoredParallelismWarning(dir_ + "/odd.yaml");
  EXPECT_NE(odd.find("its parallelism: section is ignored: "),
            std::string::npos)
      << odd;
}

}  // namespace
}  // namespace meshtune::tuner
