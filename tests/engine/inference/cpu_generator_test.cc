// The CPU generator against the training model (engine/inference/
// cpu_generator.h; the shared loop and sampling of generator.h):
// a prefill's logits equal the training forward's on the same tokens, a
// decode step with the cache equals a prefill of the longer sequence, for
// tp 1 and tp 2, GPT, LLaMA and MoE, fp32 within the engine's 1e-5; and
// generation, sampling and checkpoint loading around them.
#include "engine/inference/cpu_generator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/gpt_model.h"
#include "engine/process_groups.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/tolerance.h"

namespace meshtune::engine::inference {
namespace {

using engine::testing::TinyConfig;
using engine::testing::TinyMoeConfig;

constexpr int64_t kBatch = 2;

// Sequence-major tokens [t·b]: token ti of sequence bi.
std::vector<int32_t> Tokens(int64_t t, int64_t b, int64_t vocab) {
  std::vector<int32_t> tokens(t * b);
  for (int64_t ti = 0; ti < t; ++ti) {
    for (int64_t bi = 0; bi < b; ++bi) {
      tokens[ti * b + bi] =
          static_cast<int32_t>((7 * ti + 31 * bi + 3) % vocab);
    }
  }
  return tokens;
}

// The single-rank training model's logits [t·b, vocab] on `tokens` (its
// forward with the model's seq_length = t and micro-batch b).
std::vector<float> TrainingLogits(TrainConfig config,
                                  const std::vector<int32_t>& tokens, int64_t t,
                                  int64_t b) {
  config.model.seq_length = t;
  config.parallel.mbs = b;
  config.global_batch_size = b;
  std::vector<float> logits;
  RunLocalRanks(1, [&](Communicator& world) {
    ProcessGroups groups = MakeProcessGroups(&world, config.parallel);
    ParamStore store;
    GptModel model(config, &groups, &store);
    store.Finalize();
    model.Init();
    ChunkState state;
    double loss = 0;
    model.Forward(0, tokens.data(), tokens.data(), nullptr, nullptr, &state,
                  &loss);
    const int64_t vl = model.layout().vocab_local(),
                  v = config.model.vocab_size;
    for (int64_t r = 0; r < t * b; ++r) {
      logits.insert(logits.end(), state.logits.begin() + r * vl,
                    state.logits.begin() + r * vl + v);
    }
  });
  return logits;
}

// Runs `fn` on every rank of a tp-rank generator (initialized weights) and
// returns rank 0's result.
template <typename Fn>
auto OnGenerator(const TrainConfig& config, int tp, int64_t capacity, Fn fn) {
  decltype(fn(std::declval<Generator&>())) result{};
  std::mutex mu;
  RunLocalRanks(tp, [&](Communicator& world) {
    auto gen = CpuGenerator::Create(config, &world, kBatch, capacity);
    ASSERT_TRUE(gen.ok()) << gen.status().message();
    ASSERT_TRUE((*gen)->InitWeights().ok());
    auto mine = fn(**gen);
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) result = mine;
  });
  return result;
}

void ExpectClose(const std::vector<float>& actual,
                 const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < expected.size() && bad < 5; ++i) {
    if (!engine::testing::WithinFp32Tolerance(actual[i], expected[i])) {
      ADD_FAILURE() << what << ": logit " << i << " is " << actual[i]
                    << ", expected " << expected[i];
      ++bad;
    }
  }
}

struct Case {
  std::string name;
  TrainConfig config;
  int tp;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GeneratorEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(GeneratorEquivalenceTest, PrefillEqualsTrainingForward) {
  const Case& c = GetParam();
  const int64_t t = 12, v = c.config.model.vocab_size;
  const std::vector<int32_t> tokens = Tokens(t, kBatch, v);
  const std::vector<float> expected =
      TrainingLogits(c.config, tokens, t, kBatch);
  const std::vector<float> actual =
      OnGenerator(c.config, c.tp, t, [&](Generator& g) {
        auto logits = g.Forward(tokens, t, LogitsOf::kAll);
        EXPECT_TRUE(logits.ok()) << logits.status().message();
        return logits.ok() ? *logits : std::vector<float>();
      });
  ExpectClose(actual, expected, c.name + " prefill");
}

TEST_P(GeneratorEquivalenceTest, DecodeStepsEqualPrefillOfLongerSequence) {
  const Case& c = GetParam();
  const int64_t t = 12, prompt = 5, v = c.config.model.vocab_size;
  const std::vector<int32_t> tokens = Tokens(t, kBatch, v);
  // The full sequence at once, then the prompt and one position at a time.
  const auto both = OnGenerator(c.config, c.tp, t, [&](Generator& g) {
    std::vector<std::vector<float>> out(2);
    out[0] = g.Forward(tokens, t, LogitsOf::kAll).value();
    g.Reset();
    const std::vector<int32_t> head(tokens.begin(),
                                    tokens.begin() + prompt * kBatch);
    out[1] = g.Forward(head, prompt, LogitsOf::kAll).value();
    for (int64_t ti = prompt; ti < t; ++ti) {
      const std::vector<int32_t> step(tokens.begin() + ti * kBatch,
                                      tokens.begin() + (ti + 1) * kBatch);
      const std::vector<float> logits =
          g.Forward(step, 1, LogitsOf::kLast).value();
      out[1].insert(out[1].end(), logits.begin(), logits.end());
    }
    EXPECT_EQ(g.position(), t);
    return out;
  });
  ASSERT_EQ(both.size(), 2u);
  ExpectClose(both[1], both[0], c.name + " decode");
  ASSERT_EQ(both[0].size(), static_cast<size_t>(t * kBatch * v));
}

TrainConfig Llama() { return TinyConfig(/*llama=*/true); }
TrainConfig Gpt() { return TinyConfig(/*llama=*/false); }

INSTANTIATE_TEST_SUITE_P(Layouts, GeneratorEquivalenceTest,
                         ::testing::Values(Case{"gpt_tp1", Gpt(), 1},
                                           Case{"gpt_tp2", Gpt(), 2},
                                           Case{"llama_tp1", Llama(), 1},
                                           Case{"llama_tp2", Llama(), 2},
                                           Case{"moe_tp1", TinyMoeConfig(), 1},
                                           Case{"moe_tp2", TinyMoeConfig(), 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(GeneratorTest, GreedyGenerationIsTheSameForTp1AndTp2) {
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4},
                                                     {9, 8, 7, 6}};
  auto run = [&](int tp) {
    return OnGenerator(Llama(), tp, 10, [&](Generator& g) {
      auto gen = g.Generate(prompts, 6, SamplingOptions{});
      EXPECT_TRUE(gen.ok()) << gen.status().message();
      EXPECT_EQ(gen->decode_step_s.size(), 5u);
      EXPECT_GT(gen->prefill_s, 0);
      return gen->tokens;
    });
  };
  const auto tp1 = run(1);
  ASSERT_EQ(tp1.size(), 2u);
  EXPECT_EQ(tp1[0].size(), 6u);
  EXPECT_EQ(run(2), tp1);
}

TEST(GeneratorTest, ACachedPrefixLeavesTheTokensAsTheyWere) {
  // The first positions of the prompts run before the clock (a prefix
  // cache's hit) and the rest attend to them: the same greedy tokens as
  // the whole prefill, for tp 1 and 2. A prefix of the whole prompt
  // leaves nothing to prefill and is refused.
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5},
                                                     {9, 8, 7, 6, 5}};
  for (int tp : {1, 2}) {
    const auto run = [&](int64_t cached) {
      return OnGenerator(Llama(), tp, 11, [&](Generator& g) {
        auto gen = g.Generate(prompts, 6, SamplingOptions{}, -1, cached);
        EXPECT_TRUE(gen.ok()) << gen.status().message();
        EXPECT_GT(gen->prefill_s, 0);
        return gen->tokens;
      });
    };
    EXPECT_EQ(run(3), run(0)) << "tp " << tp;
    EXPECT_EQ(run(4), run(0)) << "tp " << tp;
  }
  const std::string message = OnGenerator(Llama(), 1, 11, [&](Generator& g) {
    return std::string(
        g.Generate(prompts, 2, SamplingOptions{}, -1, 5).status().message());
  });
  EXPECT_EQ(message,
            "a cached prefix of 5 positions leaves none of the 5-token "
            "prompts to prefill");
}

TEST(GeneratorTest, GreedyTokensAreTheArgmaxOfThePrefixLogits) {
  // Greedy decoding re-derived from full prefills: token k is the argmax of
  // the last logits of prompt + tokens[0, k).
  const std::vector<int32_t> prompt = {5, 17, 42};
  const std::vector<int32_t> generated =
      OnGenerator(Gpt(), 1, 8, [&](Generator& g) {
        auto gen = g.Generate({prompt, prompt}, 4, SamplingOptions{});
        return gen.ok() ? gen->tokens[0] : std::vector<int32_t>();
      });
  ASSERT_EQ(generated.size(), 4u);
  std::vector<int32_t> seq = prompt;
  for (int32_t expected : generated) {
    const int64_t t = static_cast<int64_t>(seq.size());
    std::vector<int32_t> batch(t * kBatch);
    for (int64_t ti = 0; ti < t; ++ti)
      batch[ti * kBatch] = batch[ti * kBatch + 1] = seq[ti];
    const std::vector<float> logits = TrainingLogits(Gpt(), batch, t, kBatch);
    const int64_t v = Gpt().model.vocab_size;
    const float* last = logits.data() + (t - 1) * kBatch * v;
    EXPECT_EQ(std::max_element(last, last + v) - last, expected);
    seq.push_back(expected);
  }
}

TEST(GeneratorTest, StopsWhenEverySequenceEmittedTheStopToken) {
  const std::vector<int32_t> prompt = {3, 1, 4, 1};
  auto run = [&](int32_t stop) {
    return OnGenerator(Llama(), 1, 12, [&](Generator& g) {
      return g.Generate({prompt, prompt}, 8, SamplingOptions{}, stop)
          .value()
          .tokens[0];
    });
  };
  const std::vector<int32_t> all = run(-1);
  ASSERT_EQ(all.size(), 8u);
  const auto first = std::find(all.begin(), all.end(), all[2]);
  EXPECT_EQ(run(all[2]), std::vector<int32_t>(all.begin(), first + 1));
}

TEST(SamplingTest, TemperatureAndTopK) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f,  2.0f,   // row 0
                                     5.0f, 5.0f, -1.0f, 0.0f};  // row 1
  EXPECT_EQ(SampleTokens(logits, 2, 4, {}, 0), (std::vector<int32_t>{1, 0}));
  // top_k = 1 is greedy at any temperature.
  SamplingOptions top1{2.0, 1, 7};
  EXPECT_EQ(SampleTokens(logits, 2, 4, top1, 3), (std::vector<int32_t>{1, 0}));
  // Same seed and step, same tokens; the draws follow the softmax.
  SamplingOptions hot{1.0, 0, 11};
  EXPECT_EQ(SampleTokens(logits, 2, 4, hot, 5),
            SampleTokens(logits, 2, 4, hot, 5));
  std::vector<int> counts(4, 0);
  for (int step = 0; step < 4000; ++step) {
    ++counts[SampleTokens(logits, 2, 4, hot, step)[0]];
  }
  // softmax(0, 3, 1, 2) = 0.032, 0.644, 0.087, 0.237.
  EXPECT_NEAR(counts[1] / 4000.0, 0.644, 0.03);
  EXPECT_NEAR(counts[3] / 4000.0, 0.237, 0.03);
  // vocab_limit keeps the choice below it: greedy and sampled.
  SamplingOptions limited{};
  limited.vocab_limit = 1;
  EXPECT_EQ(SampleTokens(logits, 2, 4, limited, 0),
            (std::vector<int32_t>{0, 0}));
  limited.temperature = 1.0;
  limited.vocab_limit = 3;
  for (int step = 0; step < 200; ++step) {
    EXPECT_LT(SampleTokens(logits, 2, 4, limited, step)[0], 3);
  }
  // top_k = 2 never draws outside the two largest.
  SamplingOptions top2{1.0, 2, 11};
  for (int step = 0; step < 200; ++step) {
    const int32_t id = SampleTokens(logits, 2, 4, top2, step)[0];
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
}

TEST(GeneratorTest, RejectsWhatDoesNotFit) {
  RunLocalRanks(1, [&](Communicator& world) {
    // GPT's learned positions stop at seq_length (16).
    auto too_long = CpuGenerator::Create(Gpt(), &world, 1, 17);
    ASSERT_FALSE(too_long.ok());
    EXPECT_EQ(too_long.status().message(),
              "prompt plus new tokens is 17 positions, but model gpt-test has "
              "learned positions for 16");
    // RoPE models stop at their seq_length (16) too.
    auto rope_long = CpuGenerator::Create(Llama(), &world, 1, 17);
    ASSERT_FALSE(rope_long.ok());
    EXPECT_EQ(rope_long.status().message(),
              "prompt plus new tokens is 17 positions, beyond model "
              "llama-test's seq_length of 16");
    auto gen = CpuGenerator::Create(Llama(), &world, 1, 4);
    ASSERT_TRUE(gen.ok());
    ASSERT_TRUE((*gen)->InitWeights().ok());
    auto full = (*gen)->Forward({1, 2, 3, 4, 5}, 5, LogitsOf::kLast);
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.status().message(),
              "the KV cache holds 4 positions; 0 are filled and 5 more do not "
              "fit");
    auto bad = (*gen)->Forward({100}, 1, LogitsOf::kLast);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().message(),
              "token id 100 is outside model llama-test's vocabulary of 100");
  });
  RunLocalRanks(3, [&](Communicator& world) {
    auto odd = CpuGenerator::Create(Llama(), &world, 1, 4);  // 4 heads over 3
    EXPECT_FALSE(odd.ok());
  });
}

TEST(GeneratorTest, LoadsACheckpointSavedWithAnotherLayout) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("meshtune_generator_ckpt_" +
                                                    std::to_string(::getpid()));
  fs::remove_all(dir);
  TrainConfig config = Llama();
  config.parallel.tp = 2;
  config.parallel.pp = 2;
  config.train_iters = 2;
  config.save_dir = dir.string();
  const engine::testing::RunResult trained =
      engine::testing::TrainLocally(config);
  for (int tp : {1, 2}) {
    std::map<std::string, std::vector<float>> loaded;
    std::mutex mu;
    RunLocalRanks(tp, [&](Communicator& world) {
      auto gen = CpuGenerator::Create(Llama(), &world, 1, 8);
      ASSERT_TRUE(gen.ok());
      ASSERT_TRUE((*gen)->LoadCheckpoint(dir.string()).ok());
      engine::testing::GatherInto((*gen)->params(), &loaded, &mu);
    });
    ASSERT_EQ(loaded.size(), trained.weights.size());
    for (const auto& [name, w] : trained.weights) {
      EXPECT_EQ(loaded[name], w) << name << " at tp " << tp;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace meshtune::engine::inference
