// RunGeneration's host-memory check (tuner/generate/generation.h): the bytes
// a request needs, by hand for gpt-tiny, and the one-line refusal of a model
// this machine cannot hold, before anything is allocated.
#include "tuner/generate/generation.h"

#include <gtest/gtest.h>

#include "search_spaces/presets/presets.h"

namespace meshtune::tuner {
namespace {

GenerationRequest Tiny() {
  GenerationRequest r;
  r.config.model = search_spaces::ResolveModel("gpt-tiny").value();
  r.prompts = {std::vector<int32_t>(7, 65)};
  r.max_new_tokens = 6;
  return r;
}

TEST(GenerationHostBytes, WeightsTwiceAndTheKvCache) {
  // gpt-tiny (4 layers, h 256, ffn 1024, vocab 4096, 256 learned positions,
  // tied embeddings): per layer QKV 256·768 + 768, proj 256·256 + 256, fc1
  // 256·1024 + 1024, fc2 1024·256 + 256, two LayerNorms 4·256 = 789 760;
  // ×4 + embedding 4096·256 + positions 256·256 + final norm 512 =
  // 4 273 664 parameters, 8 bytes each. KV cache: 2 · 4 layers · 1 prompt ·
  // 4 groups · 13 positions · 64 · 4 bytes = 106 496.
  GenerationRequest r = Tiny();
  EXPECT_DOUBLE_EQ(GenerationHostBytes(r), 4273664.0 * 8 + 106496);
  r.backend = "cuda";  // the cache lives on the GPU
  EXPECT_DOUBLE_EQ(GenerationHostBytes(r), 4273664.0 * 8);
}

TEST(RunGeneration, RefusesAModelThatDoesNotFitThisMachine) {
  GenerationRequest r = Tiny();
  r.config.model = search_spaces::ResolveModel("llama3-405b").value();
  auto result = RunGeneration(r);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().ExitCode(), 2);
  EXPECT_EQ(result.status().message().rfind(
                "generating with llama3-405b needs ", 0),
            0u)
      << result.status().message();
}

}  // namespace
}  // namespace meshtune::tuner
