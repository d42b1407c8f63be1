// The CUDA generator (engine/cuda/generator.h) against the CPU generator
// (engine/inference/cpu_generator.h) from the same initial weights: the
// prefill's logits and those of decode steps agree within a bf16 bound
// (every activation rounded to bf16 on the GPU), for GPT, LLaMA and an MoE
// LLaMA with a shared expert (experts over etp = tp) at tp 1 and tp 2 (two
// ranks on one GPU through staged communicators when there is only one).
// Skips without a device; the checks that need none run everywhere.
#include "engine/cuda/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cuda/runtime/device.h"
#include "engine/inference/cpu_generator.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using inference::Generator;
using inference::LogitsOf;

constexpr int64_t kBatch = 2, kPrompt = 6, kSteps = 3;

// The logits of a prefill of kPrompt positions, then of kSteps decode
// steps, appended ([rows, vocab] each), on rank 0 of `tp` ranks.
std::vector<float> Logits(bool cuda, const TrainConfig& config, int tp) {
  std::vector<float> result;
  std::mutex mu;
  RunLocalRanks(tp, [&](Communicator& world) {
    StatusOr<std::unique_ptr<Generator>> gen =
        cuda ? CreateCudaGenerator(config, &world, kBatch, kPrompt + kSteps)
             : StatusOr<std::unique_ptr<Generator>>(
                   inference::CpuGenerator::Create(config, &world, kBatch,
                                                   kPrompt + kSteps)
                       .value());
    ASSERT_TRUE(gen.ok()) << gen.status().message();
    ASSERT_TRUE((*gen)->InitWeights().ok());
    std::vector<int32_t> tokens(kPrompt * kBatch);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (13 * i + 5) % 97;
    std::vector<float> all =
        (*gen)->Forward(tokens, kPrompt, LogitsOf::kAll).value();
    for (int64_t s = 0; s < kSteps; ++s) {
      const std::vector<float> step =
          (*gen)
              ->Forward({static_cast<int32_t>(s + 1), 42}, 1, LogitsOf::kLast)
              .value();
      all.insert(all.end(), step.begin(), step.end());
    }
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) result = all;
  });
  return result;
}

// |gpu − cpu| ≤ 2^-6·|cpu| + 2^-5·max|cpu| over the logits: bf16 weights
// and activations through 4 layers (a handful of roundings of 2^-8 each).
void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  ASSERT_EQ(gpu.size(), cpu.size());
  float max_ref = 0;
  for (float c : cpu) max_ref = std::max(max_ref, std::fabs(c));
  int bad = 0;
  for (size_t i = 0; i < cpu.size() && bad < 5; ++i) {
    const float bound = std::fabs(cpu[i]) / 64 + max_ref / 32;
    if (!(std::fabs(gpu[i] - cpu[i]) <= bound)) {
      ADD_FAILURE() << "logit " << i << ": gpu " << gpu[i] << " cpu " << cpu[i];
      ++bad;
    }
  }
}

enum class Model { kGpt, kLlama, kMoe };

TrainConfig ConfigOf(Model model) {
  return model == Model::kMoe
             ? engine::testing::TinyMoeConfig()
             : engine::testing::TinyConfig(model == Model::kLlama);
}

class CudaGeneratorTest
    : public ::testing::TestWithParam<std::tuple<Model, int>> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaGeneratorTest, LogitsMatchTheCpuGenerator) {
  const auto [model, tp] = GetParam();
  const TrainConfig config = ConfigOf(model);
  ExpectClose(Logits(/*cuda=*/true, config, tp),
              Logits(/*cuda=*/false, config, tp));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGeneratorTest,
                         ::testing::Combine(::testing::Values(Model::kGpt,
                                                              Model::kLlama,
                                                              Model::kMoe),
                                            ::testing::Values(1, 2)));

TEST(CudaGeneratorHostOnlyTest, TakesMoeModelsAndRefusesWideHeads) {
  EXPECT_TRUE(CheckCudaGenerator(inference::InferenceConfig(
                                     engine::testing::TinyMoeConfig(), 2))
                  .ok());
  TrainConfig wide = engine::testing::TinyConfig(/*llama=*/true);
  wide.model.kv_channels = 512;
  const Status s = CheckCudaGenerator(inference::InferenceConfig(wide, 1));
  EXPECT_EQ(s.message().rfind("the CUDA generator's attention takes head_dim "
                              "up to 256",
                              0),
            0u)
      << s.message();
}

}  // namespace
}  // namespace meshtune::engine::cuda
