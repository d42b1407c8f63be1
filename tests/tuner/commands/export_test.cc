// `tune export`: a recorded search's candidates as Megatron-LM arguments and
// NeMo overrides (parsed back and compared with the stored configuration),
// and each error with its exact message and exit code.
#include <gtest/gtest.h>

#include <string>

#include "results/store.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/interop/megatron_args_parser.h"
#include "tuner/interop/nemo_overrides.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::RunTuneInProcess;
using testing::TuneRun;

// A database with one search (id 1) of gpt3-1.3b on 8 GPUs, 3 candidates.
class ExportCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(MakeTempDir() + "/export.db");
    const TuneRun run = RunTuneInProcess(
        "search --model gpt3-1.3b --gpus 8 --top 3 --db " + *db_);
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static void TearDownTestSuite() {
    delete db_;
    db_ = nullptr;
  }

  static results::CandidateRecord Stored(int64_t search_id, int64_t rank) {
    auto store = results::Store::Open(*db_);
    EXPECT_TRUE(store.ok()) << store.status().message();
    auto candidates = (*store)->GetCandidates(search_id);
    EXPECT_TRUE(candidates.ok());
    for (const auto& c : candidates.value()) {
      if (c.rank == rank) return c;
    }
    ADD_FAILURE() << "no rank " << rank;
    return {};
  }

  static TuneRun Export(const std::string& args) {
    return RunTuneInProcess("export " + args + " --db " + *db_);
  }

  static std::string* db_;
};

std::string* ExportCommandTest::db_ = nullptr;

TEST_F(ExportCommandTest, MegatronArgumentsOfEveryStoredRankParseBack) {
  for (int64_t rank = 1; rank <= 3; ++rank) {
    const TuneRun run = Export("--search 1 --rank " + std::to_string(rank) +
                               " --format megatron");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const results::CandidateRecord stored = Stored(1, rank);
    EXPECT_EQ(run.err, "tune: search 1 rank " + std::to_string(rank) +
                           ": gpt3-1.3b on 8 GPUs, " + stored.config_text +
                           "\n");
    auto parsed = ParseMegatronArgs(run.out, 8);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << run.out;
    EXPECT_TRUE(parsed->config == stored.config)
        << search_spaces::ToString(parsed->config) << " vs "
        << stored.config_text;
    EXPECT_EQ(parsed->model.num_layers, 24);
    EXPECT_EQ(parsed->model.hidden_size, 2048);
    EXPECT_EQ(parsed->training.precision, search_spaces::Precision::kBf16);
  }
}

TEST_F(ExportCommandTest, NemoOverridesParseBackAndRankDefaultsToOne) {
  const TuneRun run = Export("--search 1 --format nemo");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto parsed = ParseNemoOverrides(run.out);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << run.out;
  EXPECT_TRUE(parsed->config == Stored(1, 1).config) << run.out;
  EXPECT_EQ(parsed->training.num_gpus, 8);
  EXPECT_EQ(parsed->gpus_per_node, 8);
  EXPECT_NE(run.out.find("# NeMo megatron_gpt overrides from meshtune for "
                         "gpt3-1.3b: "),
            std::string::npos);
}

// Megatron-Bridge overrides carry the stored plan, the tokenizer and the
// token budget's iterations (300e9 / (256 x 2048) = 572205).
TEST_F(ExportCommandTest, BridgeOverridesCarryThePlanAndTheRun) {
  const TuneRun run = Export("--search 1 --rank 2 --format bridge");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const search_spaces::ParallelConfig c = Stored(1, 2).config;
  for (const std::string& word :
       {"model.tensor_model_parallel_size=" + std::to_string(c.tp) + " \\\n",
        "model.pipeline_model_parallel_size=" + std::to_string(c.pp) + " \\\n",
        "train.micro_batch_size=" + std::to_string(c.mbs) + " \\\n",
        std::string("train.global_batch_size=256 \\\n"),
        std::string("train.train_iters=572205 \\\n"),
        std::string("mixed_precision=bf16_mixed \\\n"),
        std::string("tokenizer.tokenizer_type=GPT2BPETokenizer \\\n"),
        std::string("optimizer.lr=0.0002 \\\n")}) {
    EXPECT_NE(run.out.find(word), std::string::npos) << word << run.out;
  }
}

TEST_F(ExportCommandTest, ReadsTheDatabaseFromTuneDb) {
  const TuneRun run = RunTuneInProcess("export --search 1 --format megatron",
                                       "", "TUNE_DB=" + *db_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("--num-layers 24 \\\n"), std::string::npos);
}

// The switches without a column of their own come from the stored command
// line.
TEST(ExportCommand, KeepsTheSearchsFp8Switches) {
  const std::string db = MakeTempDir() + "/fp8.db";
  const TuneRun search = RunTuneInProcess(
      "search --model gpt3-1.3b --gpus 8 --gpu h100 --precision fp8 "
      "--fp8-param-gather --grad-reduce-in-bf16 --fp8-dot-product-attention "
      "--top 1 --db " +
      db);
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const TuneRun run =
      RunTuneInProcess("export --search 1 --format megatron --db " + db);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto parsed = ParseMegatronArgs(run.out, 8);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->training.precision, search_spaces::Precision::kFp8);
  EXPECT_TRUE(parsed->training.fp8_param_gather);
  EXPECT_TRUE(parsed->training.grad_reduce_in_bf16);
  EXPECT_TRUE(parsed->training.fp8_dot_product_attention);
}

TEST_F(ExportCommandTest, UnknownSearch) {
  const TuneRun run = Export("--search 9 --format megatron");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "tune: error: --search: no search 9 in " + *db_ +
                         "\ntune: hint: list the recorded searches with 'tune "
                         "db searches --db " +
                         *db_ + "'\n");
}

TEST_F(ExportCommandTest, RankOutOfRange) {
  const TuneRun run = Export("--search 1 --rank 4 --format nemo");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "tune: error: --rank: search 1 stores 3 candidates, not rank 4\n"
            "tune: hint: pick a rank from 1 to 3, or search again with --top K "
            "to store more\n");
}

TEST_F(ExportCommandTest, UnknownFormat) {
  const TuneRun run = Export("--search 1 --format deepspeed");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: --format: unknown format 'deepspeed'\n"
            "tune: hint: use --format megatron, nemo or bridge\n");
}

TEST_F(ExportCommandTest, BadRankAndMissingFormat) {
  TuneRun run = Export("--search 1 --rank 0 --format megatron");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: --rank must be a positive integer, got 0\n"
            "tune: hint: write a whole number greater than 0, e.g. --rank 8\n");
  run = Export("--search 1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: --format is required\n"
            "tune: hint: run 'tune export --help' for its flags and "
            "examples\n");
}

TEST_F(ExportCommandTest, HelpHasExamples) {
  const TuneRun run = RunTuneInProcess("export --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("tune export --search 3 --rank 2 --format nemo"),
            std::string::npos)
      << run.out;
}

// A search whose model neither resolves by name nor by its --model argument.
TEST(ExportCommand, ModelThatNoLongerResolves) {
  const std::string dir = MakeTempDir();
  const std::string db = dir + "/gone.db";
  {
    auto store = results::Store::Open(db);
    ASSERT_TRUE(store.ok()) << store.status().message();
    results::SearchRecord s;
    s.model = "my-model";
    s.gpu = "a100-80g";
    s.gpus = 8;
    s.gpus_per_node = 8;
    s.gbs = 64;
    s.seq_length = 1024;
    s.precision = "bf16";
    s.arguments = "tune search --model " + dir + "/my_model.yaml --gpus 8";
    results::CandidateRecord c;
    c.rank = 1;
    c.config.dp = 8;
    ASSERT_TRUE((*store)->PutSearch(s, {c}, {"0.1.0", "abc", 1700000000}).ok());
  }
  const TuneRun run =
      RunTuneInProcess("export --search 1 --format megatron --db " + db);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "tune: error: search 1's model 'my-model' no longer resolves: "
            "model file '" +
                dir +
                "/my_model.yaml' not found\n"
                "tune: hint: restore that model file or preset, or search "
                "again with a model 'tune models' lists\n");
}

TEST(ExportCommand, SearchWithoutCandidates) {
  const std::string db = MakeTempDir() + "/empty.db";
  {
    auto store = results::Store::Open(db);
    ASSERT_TRUE(store.ok()) << store.status().message();
    results::SearchRecord s;
    s.model = "gpt3-1.3b";
    s.gpus = 8;
    s.gpus_per_node = 8;
    s.gbs = 64;
    s.seq_length = 1024;
    s.precision = "bf16";
    ASSERT_TRUE((*store)->PutSearch(s, {}, {"0.1.0", "abc", 1700000000}).ok());
  }
  const TuneRun run =
      RunTuneInProcess("export --search 1 --format nemo --db " + db);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: --rank: search 1 stores no candidates\n"
            "tune: hint: search again; 'tune search --top K' stores the best "
            "K\n");
}

}  // namespace
}  // namespace meshtune::tuner
