// KV-cache sizes against hand-computed values: GQA split over tp (and a
// head replicated when tp exceeds the query groups), MLA's latent, sliding
// windows (and the engines that keep them), Mamba states, pipeline stages,
// the cache dtype and each engine's pages.
#include "costmodel/kv_cache.h"

#include <gtest/gtest.h>

#include <tuple>

#include "search_spaces/presets/presets.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::KvCacheDtype;
using search_spaces::ModelSpec;
using search_spaces::ServingConfig;

ModelSpec Preset(const char* name) {
  return search_spaces::ResolveModel(name).value();
}

ServingConfig Tp(int64_t tp, KvCacheDtype kv = KvCacheDtype::kBf16) {
  ServingConfig c;
  c.tp = tp;
  c.kv_cache = kv;
  return c;
}

TEST(KvCache, Llama3_70bGqaSplitsOverTp) {
  const ModelSpec m = Preset("llama3-70b");  // 80 layers, 8 groups, d 128
  // 80 layers · (K and V) · 8 groups · 128 · 2 B.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(1)), 327680.0);
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(8)), 40960.0);
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(8, KvCacheDtype::kFp8)), 20480.0);
  // NVFP4: 4 bits and an e4m3 scale per 16 values, 0.5625 B.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(8, KvCacheDtype::kNvfp4)),
                   40960.0 * 0.5625 / 2.0);
  // tp 16 > 8 groups: each rank keeps one (replicated) head.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(16)), 40960.0);
  // A sequence takes whole pages: vLLM's 16 tokens (the default engine),
  // 1008 for 1000 tokens; TensorRT-LLM's 32, 1024; SGLang's 1.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, Tp(8), 1000), 40960.0 * 1008);
  ServingConfig trt = Tp(8);
  trt.engine = search_spaces::ServingEngine::kTensorRtLlm;
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, trt, 1000), 40960.0 * 1024);
  ServingConfig sglang = Tp(8);
  sglang.engine = search_spaces::ServingEngine::kSglang;
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, sglang, 1000), 40960.0 * 1000);
  // What a decode step reads is the tokens themselves.
  EXPECT_DOUBLE_EQ(KvCacheBytesOfLayer(m, Tp(8), 0, {}, 1000), 512.0 * 1000);
}

TEST(KvCache, PagesPerEngine) {
  // TensorRT-LLM's tokens_per_block 32, vLLM's block size 16 (64 for MLA,
  // FlashMLA's page), SGLang's page size 1.
  const ModelSpec llama = Preset("llama3-8b");
  const ModelSpec ds = Preset("deepseek-v3");
  ServingConfig c;
  for (const auto& [engine, gqa, mla] :
       {std::tuple{search_spaces::ServingEngine::kTensorRtLlm, 32, 32},
        std::tuple{search_spaces::ServingEngine::kTensorRtLlmCpp, 32, 32},
        std::tuple{search_spaces::ServingEngine::kVllm, 16, 64},
        std::tuple{search_spaces::ServingEngine::kSglang, 1, 1}}) {
    c.engine = engine;
    EXPECT_EQ(KvBlockTokens(llama, c), gqa);
    EXPECT_EQ(KvBlockTokens(ds, c), mla);
  }
}

TEST(KvCache, PipelineStageHoldsItsLayers) {
  const ModelSpec m = Preset("llama3-70b");
  ServingConfig c = Tp(1);
  c.pp = 3;  // 27, 27 and 26 layers
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, c), 27 * 2 * 8 * 128 * 2.0);
}

TEST(KvCache, DeepSeekV3MlaLatentIs70KBPerToken) {
  const ModelSpec m = Preset("deepseek-v3");
  // 61 layers · (kv_lora_rank 512 + RoPE key 64) · 2 B: DeepSeek-V2 §2.1's
  // compressed cache, the same on every tp rank.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(1)), 70272.0);
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(8)), 70272.0);
}

TEST(KvCache, SlidingWindowLayersStopGrowing) {
  ModelSpec m = Preset("llama3-8b");  // 32 layers, 8 groups, d 128
  m.window_size = 3;                  // keeps 4 tokens
  m.window_attn_skip_freq = 2;        // layers 2, 4, ... full
  // 16 full layers at 4096 B per token and 16 windowed ones at 4 tokens,
  // each in whole 16-token pages (vLLM's): 112 tokens and 16.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, Tp(1), 100),
                   16 * 4096.0 * 112 + 16 * 4096.0 * 16);
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(1)), 16 * 4096.0);
  // A context shorter than the window keeps every token (a page).
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, Tp(1), 2), 32 * 4096.0 * 16);
}

TEST(KvCache, TensorRtLlmKeepsTheWholeContextOfAWindowedModel) {
  const ModelSpec m = Preset("mistral-7b");  // 32 layers, 8 groups of 128,
                                             // a 4096-token window
  // 32 layers · (K and V) · 8 groups · 128 · 2 B = 131072 B per token.
  ServingConfig c = Tp(1);
  c.engine = search_spaces::ServingEngine::kVllm;
  EXPECT_TRUE(EngineKeepsWindow(c.engine));
  // The window and the token in 16-token pages: 4112.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, c, 22000), 131072.0 * 4112);
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, c), 0.0);  // nothing grows
  c.engine = search_spaces::ServingEngine::kSglang;
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, c, 22000), 131072.0 * 4097);
  // TensorRT-LLM without max_attention_window: every token of every layer,
  // in 32-token blocks (22 016).
  for (const auto engine : {search_spaces::ServingEngine::kTensorRtLlm,
                            search_spaces::ServingEngine::kTensorRtLlmCpp}) {
    c.engine = engine;
    EXPECT_FALSE(EngineKeepsWindow(engine));
    EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, c, 22000), 131072.0 * 22016);
    EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, c), 131072.0);
  }
}

TEST(KvCache, KeptAttentionWindowsForTensorRtLlm) {
  // Mistral 7B: every layer keeps its 4096-token window and the token.
  EXPECT_EQ(KeptAttentionWindows(Preset("mistral-7b"), 22000),
            (std::vector<int64_t>{4097}));
  // GPT-OSS: layers 1, 3, ... keep 128 tokens, 2, 4, ... the whole context.
  EXPECT_EQ(KeptAttentionWindows(Preset("gpt-oss-120b"), 3000),
            (std::vector<int64_t>{128, 3000}));
  EXPECT_TRUE(KeptAttentionWindows(Preset("llama3-8b"), 3000).empty());
}

TEST(KvCache, NemotronHMambaStateIsFixed) {
  const ModelSpec m = Preset("nemotron-h-8b");  // 24 M, 4 attention layers
  // Mamba layer: SSM 128 heads · 64 · 128 state + conv (8192 + 2·8·128)·3,
  // 16-bit: 2 158 592 B per sequence. Attention: 2 · 8 · 128 · 2 B per token.
  const double mamba = 24 * 2158592.0;
  // The attention layers' tokens in 16-token pages (1008); the states
  // are no pages.
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, Tp(1), 1000),
                   mamba + 4 * 4096.0 * 1008);
  EXPECT_DOUBLE_EQ(KvCacheBytesPerSequence(m, Tp(2), 0), mamba / 2);
  EXPECT_DOUBLE_EQ(KvCacheBytesPerToken(m, Tp(1)), 4 * 4096.0);
}

}  // namespace
}  // namespace meshtune::costmodel
