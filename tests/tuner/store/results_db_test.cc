// The results database policy as `tune search` meets it: the implicit
// database is announced once, by the search that creates it.
#include "tuner/store/results_db.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/tuner/run_tune.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

namespace fs = std::filesystem;

const char kSearch[] =
    "search --model gpt-tiny --gpus 2 --gpu a100-80g --top 1";

class CreatedDbNoteTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir(); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CreatedDbNoteTest, FirstSearchSaysItCreatedTuneDbAndLaterOnesDoNot) {
  // TUNE_DB empty: the ./tune.db default, in dir_.
  testing::TuneRun run = testing::RunTuneInProcess(kSearch, dir_, "TUNE_DB=");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err,
            "tune: recording searches in ./tune.db (created); --no-db "
            "records nothing, --db PATH chooses the file\n");
  EXPECT_TRUE(fs::exists(dir_ + "/tune.db"));
  run = testing::RunTuneInProcess(kSearch, dir_, "TUNE_DB=");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
}

TEST_F(CreatedDbNoteTest, QuietNoDbAndExplicitDbSayNothing) {
  testing::TuneRun run = testing::RunTuneInProcess(
      std::string(kSearch) + " --quiet", dir_, "TUNE_DB=");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_TRUE(fs::exists(dir_ + "/tune.db"));
  fs::remove(dir_ + "/tune.db");
  // --quiet does not stick to the next command of the same process.
  run = testing::RunTuneInProcess(kSearch, dir_, "TUNE_DB=");
  EXPECT_NE(run.err.find("(created)"), std::string::npos) << run.err;
  fs::remove(dir_ + "/tune.db");
  run = testing::RunTuneInProcess(std::string(kSearch) + " --no-db", dir_,
                                  "TUNE_DB=");
  EXPECT_EQ(run.err, "");
  EXPECT_FALSE(fs::exists(dir_ + "/tune.db"));
  // A file named with --db was chosen: nothing to announce.
  run = testing::RunTuneInProcess(std::string(kSearch) + " --db mine.db", dir_,
                                  "TUNE_DB=");
  EXPECT_EQ(run.err, "");
  EXPECT_TRUE(fs::exists(dir_ + "/mine.db"));
}

TEST(CreatedDbNote, NamesTheFileAsAPath) {
  EXPECT_EQ(CreatedDbNote("tune.db"),
            "tune: recording searches in ./tune.db (created); --no-db records "
            "nothing, --db PATH chooses the file");
  EXPECT_EQ(CreatedDbNote("/var/runs/t.db"),
            "tune: recording searches in /var/runs/t.db (created); --no-db "
            "records nothing, --db PATH chooses the file");
}

}  // namespace
}  // namespace meshtune::tuner
