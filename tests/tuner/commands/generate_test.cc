// `tune generate` in process: text from a tiny checkpoint that `tune train
// --save` wrote (gpt-tiny, 2 steps), greedy tokens the same at tp 1 and
// tp 2, a sampled run reproducible by its seed, and the exact one-line
// errors (exit 2) for flags, a missing checkpoint, a tp that does not
// divide the model, positions beyond the learned table and another model.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/backends/registry.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::RunTuneInProcess;
using testing::TuneRun;

class GenerateCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir());
    const TuneRun train = RunTuneInProcess(
        "train --model gpt-tiny --steps 2 --seq-len 32 --gbs 2 --no-db "
        "--save " +
        *dir_ + "/ck");
    ASSERT_EQ(train.exit_code, 0) << train.err;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(*dir_, ec);
    delete dir_;
  }
  static std::string Ck() { return *dir_ + "/ck"; }

  static nlohmann::json Json(const std::string& flags) {
    const TuneRun run = RunTuneInProcess("generate --load " + Ck() +
                                         " --prompt 'GNU GPL' --json " + flags);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.exit_code == 0 ? nlohmann::json::parse(run.out)
                              : nlohmann::json();
  }

  static void ExpectError(const std::string& args, const std::string& error,
                          const std::string& hint) {
    const TuneRun run = RunTuneInProcess(args);
    EXPECT_EQ(run.exit_code, 2) << args;
    EXPECT_EQ(run.out, "") << args;
    EXPECT_EQ(run.err, "tune: error: " + error + "\ntune: hint: " + hint + "\n")
        << args;
  }

  static std::string* dir_;
};

std::string* GenerateCommandTest::dir_ = nullptr;

TEST_F(GenerateCommandTest, GreedyTextIsTheSameAtTp1AndTp2) {
  const nlohmann::json tp1 = Json("--max-new-tokens 6");
  ASSERT_TRUE(tp1.is_object());
  EXPECT_EQ(tp1["model"], "gpt-tiny");
  EXPECT_EQ(tp1["prompt_tokens"], 7);  // bytes of "GNU GPL"
  EXPECT_EQ(tp1["tp"], 1);
  EXPECT_GT(tp1["ttft_ms"].get<double>(), 0);
  // gpt-tiny at tp 1: 4 layers · 2 (k, v) · 4 groups · 13 positions · 64
  // head dim · 4 bytes.
  EXPECT_EQ(tp1["kv_cache_bytes_per_rank"], 4 * 2 * 4 * 13 * 64 * 4);
  const auto tokens = tp1["tokens"].get<std::vector<int>>();
  EXPECT_LE(tokens.size(), 6u);
  for (int id : tokens) EXPECT_LT(id, 256);  // byte ids: the tokenizer's
  const nlohmann::json tp2 = Json("--max-new-tokens 6 --tp 2");
  EXPECT_EQ(tp2["tokens"], tp1["tokens"]);
  EXPECT_EQ(tp2["text"], tp1["text"]);
  EXPECT_EQ(tp2["kv_cache_bytes_per_rank"], 4 * 2 * 2 * 13 * 64 * 4);
}

TEST_F(GenerateCommandTest, SampledTextFollowsTheSeed) {
  const std::string flags = "--max-new-tokens 8 --temperature 1 --top-k 50";
  const nlohmann::json a = Json(flags + " --seed 3");
  EXPECT_EQ(Json(flags + " --seed 3")["tokens"], a["tokens"]);
  EXPECT_NE(Json(flags + " --seed 4")["tokens"], a["tokens"]);
}

TEST_F(GenerateCommandTest, PlainOutputIsPromptAndText) {
  const TuneRun run = RunTuneInProcess("generate --load " + Ck() +
                                       " --prompt 'ab' --max-new-tokens 3");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.substr(0, 2), "ab");
  EXPECT_NE(run.err.find("tune: generated "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("with gpt-tiny at tp 1 on cpu: TTFT "),
            std::string::npos);
}

TEST_F(GenerateCommandTest, Errors) {
  const std::string g = "generate --load " + Ck() + " --prompt x ";
  ExpectError(g + "--max-new-tokens 0",
              "--max-new-tokens must be in [1, 65536], got 0",
              "e.g. --max-new-tokens 64");
  ExpectError(g + "--temperature -1",
              "--temperature must be in [0, 100], got -1",
              "0 is greedy; 0.7-1.0 are usual for sampling");
  ExpectError(g + "--tp 0", "--tp must be in [1, 64], got 0",
              "it must divide the model's attention heads and query groups");
  ExpectError(g + "--tp 3",
              "tp=3 does not divide the attention heads (4) and query groups "
              "(4)",
              "choose tp dividing num_query_groups");
  ExpectError(g + "--max-new-tokens 300",
              "prompt plus new tokens is 301 positions, but model gpt-tiny "
              "has learned positions for 256",
              "shorten the prompt or lower --max-new-tokens");
  ExpectError(
      g + "--backend tpu", "unknown engine backend 'tpu'",
      "use one of: " + std::string(engine::backends::TrainerBackendBuilt("cuda")
                                       ? "cpu, cuda"
                                       : "cpu"));
  if (engine::backends::TrainerBackendBuilt("cuda") &&
      engine::backends::CudaDeviceCount() == 0) {
    ExpectError(g + "--backend cuda",
                "no CUDA device: cudaGetDeviceCount found none",
                "run on a machine with an NVIDIA GPU and driver, or use the "
                "CPU backend (--backend cpu)");
  }
  ExpectError("generate --load " + Ck() + " --prompt x --max-new-tokens 70000",
              "--max-new-tokens must be in [1, 65536], got 70000",
              "e.g. --max-new-tokens 64");
  ExpectError(g + "--vocab-file v.json",
              "GPT-2 BPE needs both --vocab-file and --merge-file",
              "give both, or neither for the byte tokenizer");
  ExpectError("generate --load " + *dir_ + "/none --prompt x",
              "no checkpoint in " + *dir_ +
                  "/none (latest_checkpointed_iteration.txt is missing)",
              "save one there with tune train --save " + *dir_ +
                  "/none, or pass the directory of one");
  ExpectError(g + "--model llama-tiny",
              "tensor decoder.layers.0.self_attention.linear_qkv.weight has "
              "shape [768, 256] in checkpoint " +
                  Ck() + "/iter_0000002 but [512, 256] in the model",
              "the checkpoint was saved from model 'gpt-tiny' (this run: "
              "'llama-tiny'); load it with the same model and sizes");
}

}  // namespace
}  // namespace meshtune::tuner
