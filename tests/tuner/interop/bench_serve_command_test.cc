// vLLM's benchmark client's command for a plan: the exact text of a closed
// loop, an open loop's rate as written, and a hostile model name that
// stays one word.
#include "tuner/interop/bench_serve_command.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tuner/interop/shell_words.h"

namespace meshtune::tuner {
namespace {

TEST(VllmBenchServeCommand, ClosedLoopAtThePlansConcurrency) {
  BenchServeLoad load;
  load.model = "meta-llama/Meta-Llama-3-70B";
  load.isl = 2048;
  load.osl = 512;
  load.max_concurrency = 190;
  load.num_prompts = 1900;
  EXPECT_EQ(VllmBenchServeCommand(load),
            "vllm bench serve --backend openai \\\n"
            "  --base-url \"${BASE_URL:-http://localhost:8000}\" \\\n"
            "  --model 'meta-llama/Meta-Llama-3-70B' \\\n"
            "  --dataset-name random \\\n"
            "  --random-input-len 2048 \\\n"
            "  --random-output-len 512 \\\n"
            "  --random-range-ratio 0 \\\n"
            "  --ignore-eos \\\n"
            "  --max-concurrency 190 \\\n"
            "  --num-prompts 1900");
}

TEST(VllmBenchServeCommand, ACachedPrefixIsOneSharedPrefix) {
  // 4096-token prompts whose first 3072 tokens every prompt shares: a
  // 3072-token random prefix and 1024 random tokens after it.
  BenchServeLoad load;
  load.model = "m";
  load.isl = 4096;
  load.osl = 128;
  load.prefix = 3072;
  load.max_concurrency = 8;
  load.num_prompts = 80;
  const std::string cmd = VllmBenchServeCommand(load);
  EXPECT_NE(cmd.find("  --random-prefix-len 3072 \\\n"
                     "  --random-input-len 1024 \\\n"),
            std::string::npos)
      << cmd;
}

TEST(VllmBenchServeCommand, APoolOfPrefixesIsVllmsPrefixRepetitionDataset) {
  // The same prompts from a pool of 16 prefixes: each prompt one of 16
  // 3072-token prefixes and 1024 tokens of its own.
  BenchServeLoad load;
  load.model = "m";
  load.isl = 4096;
  load.osl = 128;
  load.prefix = 3072;
  load.prefix_pool = 16;
  load.max_concurrency = 8;
  load.num_prompts = 96;
  const std::string cmd = VllmBenchServeCommand(load);
  EXPECT_NE(cmd.find("  --dataset-name prefix_repetition \\\n"
                     "  --prefix-repetition-prefix-len 3072 \\\n"
                     "  --prefix-repetition-suffix-len 1024 \\\n"
                     "  --prefix-repetition-num-prefixes 16 \\\n"
                     "  --prefix-repetition-output-len 128 \\\n"
                     "  --ignore-eos \\\n"),
            std::string::npos)
      << cmd;
  EXPECT_EQ(cmd.find("random"), std::string::npos) << cmd;
  // Without a prefix the pool means nothing: the random dataset.
  load.prefix = 0;
  EXPECT_NE(VllmBenchServeCommand(load).find("--dataset-name random"),
            std::string::npos);
}

TEST(VllmBenchServeCommand, OpenLoopRateAsWritten) {
  BenchServeLoad load;
  load.model = "m";
  load.num_prompts = 100;
  const auto rate_words = [&](double rate) {
    load.request_rate = rate;
    const auto words =
        SplitShellWords(VllmBenchServeCommand(load), "the command");
    EXPECT_TRUE(words.ok());
    const std::vector<std::string>& w = words.value();
    EXPECT_EQ(w[w.size() - 4], "--request-rate");
    return w[w.size() - 3];
  };
  EXPECT_EQ(rate_words(20), "20");
  EXPECT_EQ(rate_words(0.37), "0.37");
  EXPECT_EQ(rate_words(2.5e-11), "2.5000000000000001e-11");
}

TEST(VllmBenchServeCommand, ModelIsOneQuotedWord) {
  BenchServeLoad load;
  load.model = "it's; rm -rf / $(x)";
  load.max_concurrency = 4;
  const auto words =
      SplitShellWords(VllmBenchServeCommand(load), "the command");
  ASSERT_TRUE(words.ok()) << words.status().message();
  const std::vector<std::string>& w = words.value();
  ASSERT_GE(w.size(), 9u);
  EXPECT_EQ(w[7], "--model");
  EXPECT_EQ(w[8], load.model);
}

}  // namespace
}  // namespace meshtune::tuner
