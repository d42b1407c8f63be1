// The serving vocabulary: KV-cache dtypes and their sizes, weight bytes per
// precision, and the checks of a layout and a workload (exact messages).
#include "search_spaces/serving_spec.h"

#include <gtest/gtest.h>

#include <cmath>

#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

TEST(KvCacheDtype, ParsesEngineSpellings) {
  EXPECT_EQ(ParseKvCacheDtype("bf16").value(), KvCacheDtype::kBf16);
  EXPECT_EQ(ParseKvCacheDtype("auto").value(), KvCacheDtype::kBf16);
  EXPECT_EQ(ParseKvCacheDtype("fp8_e4m3").value(), KvCacheDtype::kFp8);
  EXPECT_EQ(ParseKvCacheDtype("nvfp4").value(), KvCacheDtype::kNvfp4);
  const auto bad = ParseKvCacheDtype("int3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown KV-cache dtype 'int3'");
  for (KvCacheDtype d :
       {KvCacheDtype::kBf16, KvCacheDtype::kFp8, KvCacheDtype::kNvfp4}) {
    EXPECT_EQ(ParseKvCacheDtype(ToString(d)).value(), d);
  }
}

TEST(KvCacheDtype, BytesIncludeBlockScales) {
  EXPECT_DOUBLE_EQ(BytesPerElement(KvCacheDtype::kBf16), 2.0);
  EXPECT_DOUBLE_EQ(BytesPerElement(KvCacheDtype::kFp8), 1.0);
  EXPECT_DOUBLE_EQ(BytesPerElement(KvCacheDtype::kNvfp4), 0.5625);
  EXPECT_DOUBLE_EQ(WeightBytesPerElement(Precision::kBf16), 2.0);
  EXPECT_DOUBLE_EQ(WeightBytesPerElement(Precision::kFp8Blockwise), 1.0);
  EXPECT_DOUBLE_EQ(WeightBytesPerElement(Precision::kMxfp8), 1.03125);
  EXPECT_DOUBLE_EQ(WeightBytesPerElement(Precision::kNvfp4), 0.5625);
}

TEST(ServingConfig, ChecksTheLayout) {
  const ModelSpec llama = ResolveModel("llama3-70b").value();  // 64 heads
  const ModelSpec ds = ResolveModel("deepseek-v3").value();    // 256 experts
  const GpuSpec h100 = ResolveCluster("h100").value().gpu;
  ServingConfig c;
  c.tp = 8;
  EXPECT_TRUE(ValidateServingConfig(llama, h100, c).ok());
  c.tp = 6;
  EXPECT_EQ(ValidateServingConfig(llama, h100, c).message(),
            "tp 6 does not divide the 64 attention heads");
  c.tp = 8;
  c.ep = 2;
  EXPECT_EQ(ValidateServingConfig(llama, h100, c).message(),
            "ep must be 1 for a dense model");
  // DEP8: tp 1, attention DP 8, experts over the 8 GPUs.
  ServingConfig dep;
  dep.attention_dp = 8;
  dep.ep = 8;
  EXPECT_TRUE(ValidateServingConfig(ds, h100, dep).ok());
  EXPECT_EQ(dep.moe_tp(), 1);
  EXPECT_EQ(dep.gpus(), 8);
  dep.ep = 16;
  EXPECT_EQ(ValidateServingConfig(ds, h100, dep, "row 3").message(),
            "row 3: ep 16 must divide the 256 experts and tp·attention_dp = "
            "8");
  ServingConfig fp4;
  fp4.tp = 8;
  fp4.weights = Precision::kNvfp4;
  EXPECT_EQ(ValidateServingConfig(llama, h100, fp4).message(),
            "NVIDIA H100 SXM5 80GB has no FP4 tensor cores");
  ServingConfig bad_fraction;
  bad_fraction.kv_cache_memory_fraction = 1.5;
  EXPECT_EQ(ValidateServingConfig(llama, h100, bad_fraction).message(),
            "the KV cache's memory fraction must be in (0, 1], got 1.500000");
  EXPECT_EQ(ToString(dep), "tp1 pp1 adp8 ep16 bf16 kv:bf16");
}

TEST(ServingWorkload, ChecksLengths) {
  EXPECT_TRUE(ValidateServingWorkload({1024, 256, 0}).ok());
  EXPECT_EQ(ValidateServingWorkload({0, 256, 0}).message(),
            "--isl and --osl must be at least 1 token, got 0 and 256");
  EXPECT_EQ(ValidateServingWorkload({1, 1, -1}).message(),
            "--concurrency must be at least 0, got -1");
  EXPECT_EQ(ValidateServingWorkload({int64_t{1} << 31, 1, 0}).message(),
            "isl + osl exceeds 2^31 tokens");
  ServingWorkload cached{1024, 256, 0};
  cached.prefix = 1023;
  EXPECT_TRUE(ValidateServingWorkload(cached).ok());
  EXPECT_EQ(PrefillTokens(cached), 1);
  cached.prefix = 1024;
  EXPECT_EQ(ValidateServingWorkload(cached).message(),
            "--prefix must be in [0, 1023] (below --isl 1024), got 1024");
  cached.prefix = -1;
  EXPECT_EQ(ValidateServingWorkload(cached).message(),
            "--prefix must be in [0, 1023] (below --isl 1024), got -1");
  cached.prefix = 512;
  cached.prefix_pool = 0;
  EXPECT_EQ(ValidateServingWorkload(cached).message(),
            "--prefix-pool must be in [1, 1048576], got 0");
}

TEST(Speculation, ChecksTheDraftsTheModelAndTheAcceptance) {
  const ModelSpec ds = ResolveModel("deepseek-v3").value();  // one MTP depth
  const ModelSpec llama = ResolveModel("llama3-70b").value();
  const GpuSpec h100 = ResolveCluster("h100").value().gpu;
  ServingWorkload w{1024, 256, 0};
  w.nextn_accepted = 1.8;
  EXPECT_TRUE(ValidateSpeculation(ds, w, 3).ok());
  EXPECT_EQ(ValidateSpeculation(ds, w, 1).message(),
            "--nextn-accepted must be in [0, 1] (at most --nextn 1), got 1.8");
  EXPECT_EQ(ValidateSpeculation(ds, w, 0).message(),
            "--nextn-accepted needs --nextn (speculative decoding is off)");
  w.nextn_accepted = std::nan("");
  EXPECT_EQ(ValidateSpeculation(ds, w, 3).message(),
            "--nextn-accepted must be in [0, 3] (at most --nextn 3), got nan");
  w.nextn_accepted = 0;
  EXPECT_EQ(ValidateSpeculation(ds, w, 9).message(),
            "--nextn must be in [0, 8], got 9");
  EXPECT_EQ(ValidateSpeculation(llama, w, 1).message(),
            "--nextn drafts with the model's MTP layers, and llama3-70b has "
            "none (mtp_num_layers 0)");
  // The layout check says the same of a config.
  ServingConfig c;
  c.tp = 8;
  c.nextn = 2;
  EXPECT_EQ(ValidateServingConfig(llama, h100, c, "row 7").message(),
            "row 7: --nextn drafts with the model's MTP layers, and "
            "llama3-70b has none (mtp_num_layers 0)");
  c.ep = 8;
  EXPECT_TRUE(ValidateServingConfig(ds, h100, c).ok());
  EXPECT_EQ(ToString(c), "tp8 pp1 adp1 ep8 bf16 kv:bf16 nextn:2");
  // The depths a deployment runs: DeepSeek's one, reused for more drafts.
  EXPECT_EQ(ServedMtpDepths(ds, c), 1);
  c.nextn = 0;
  EXPECT_EQ(ServedMtpDepths(ds, c), 0);
  ModelSpec two = ds;
  two.mtp_num_layers = 2;
  c.nextn = 3;
  EXPECT_EQ(ServedMtpDepths(two, c), 2);
  c.nextn = 1;
  EXPECT_EQ(ServedMtpDepths(two, c), 1);
  w.nextn_accepted = 1.25;
  EXPECT_DOUBLE_EQ(DecodeProgress(w, 2), 2.25);
}

TEST(Speculation, PerPositionRatesGiveEachDraftLengthsAcceptance) {
  // Rates 0.8 and 0.5: a step of one draft accepts 0.8 on average, of two
  // 0.8 + 0.8 · 0.5 = 1.2; a third draft past the rates accepts none.
  const ModelSpec ds = ResolveModel("deepseek-v3").value();
  ServingWorkload w{1024, 256, 0};
  w.nextn_accept_rates = {0.8, 0.5};
  EXPECT_DOUBLE_EQ(DecodeProgress(w, 0), 1.0);
  EXPECT_DOUBLE_EQ(DecodeProgress(w, 1), 1.8);
  EXPECT_DOUBLE_EQ(DecodeProgress(w, 2), 2.2);
  EXPECT_DOUBLE_EQ(DecodeProgress(w, 3), 2.2);
  EXPECT_TRUE(ValidateSpeculation(ds, w, 0).ok());
  EXPECT_TRUE(ValidateSpeculation(ds, w, 2).ok());
  w.nextn_accepted = 1;
  EXPECT_EQ(ValidateSpeculation(ds, w, 2).message(),
            "--nextn-accept-rates and --nextn-accepted cannot be combined");
  w.nextn_accepted = 0;
  w.nextn_accept_rates = {0.8, 1.2};
  EXPECT_EQ(ValidateSpeculation(ds, w, 0).message(),
            "--nextn-accept-rates must lie in [0, 1], got 1.2 at position 2");
  w.nextn_accept_rates.assign(9, 0.5);
  EXPECT_EQ(ValidateSpeculation(ds, w, 0).message(),
            "--nextn-accept-rates takes at most 8 rates, got 9");
  w.nextn_accept_rates = {0.8};
  EXPECT_EQ(
      ValidateSpeculation(ResolveModel("llama3-8b").value(), w, 0).message(),
      "--nextn-accept-rates drafts with the model's MTP layers, and "
      "llama3-8b has none (mtp_num_layers 0)");
}

TEST(Speculation, AnEagle3HeadDraftsForModelsWithoutMtpLayers) {
  const ModelSpec llama = ResolveModel("llama3-70b").value();
  const GpuSpec h100 = ResolveCluster("h100").value().gpu;
  ServingWorkload w{1024, 256, 0};
  w.nextn_accepted = 2;
  DraftHead head;
  head.checkpoint = "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B";
  EXPECT_TRUE(ValidateSpeculation(llama, w, 3, Drafter::kEagle3, head).ok());
  EXPECT_EQ(ValidateSpeculation(llama, w, 0, Drafter::kEagle3, head).message(),
            "--spec-method eagle3 needs --nextn or --nextn-accept-rates");
  DraftHead none;
  EXPECT_EQ(ValidateSpeculation(llama, w, 3, Drafter::kEagle3, none).message(),
            "--spec-method eagle3 needs the head's checkpoint (--draft-model)");
  DraftHead quoted = head;
  quoted.checkpoint = "x'; rm -rf /";
  EXPECT_EQ(
      ValidateSpeculation(llama, w, 3, Drafter::kEagle3, quoted).message(),
      "--draft-model 'x'; rm -rf /' has characters the commands cannot "
      "carry as written");
  DraftHead vocab = head;
  vocab.vocab_size = 200000;
  EXPECT_EQ(ValidateSpeculation(llama, w, 3, Drafter::kEagle3, vocab).message(),
            "--draft-vocab must be in [1, 128256] (the target's vocabulary), "
            "got 200000");
  EXPECT_EQ(ValidateSpeculation(ResolveModel("deepseek-v3").value(), w, 3,
                                Drafter::kEagle3, head)
                .message(),
            "--spec-method eagle3 prices a head of standard attention layers, "
            "and deepseek-v3 has MLA");
  const ModelSpec qwen = ResolveModel("qwen3-30b-a3b").value();
  EXPECT_EQ(ValidateSpeculation(qwen, w, 3, Drafter::kEagle3, head).message(),
            "--spec-method eagle3 on the MoE model qwen3-30b-a3b needs the "
            "head's MLP width (--draft-intermediate)");
  DraftHead wide = head;
  wide.intermediate_size = 12288;
  EXPECT_TRUE(ValidateSpeculation(qwen, w, 3, Drafter::kEagle3, wide).ok());
  // A config with the head: drafts without MTP layers, no MTP depths.
  ServingConfig c;
  c.tp = 8;
  c.nextn = 3;
  c.drafter = Drafter::kEagle3;
  c.draft_head = head;
  EXPECT_TRUE(ValidateServingConfig(llama, h100, c).ok());
  EXPECT_EQ(ServedDrafts(llama, c), 3);
  EXPECT_EQ(ServedMtpDepths(llama, c), 0);
  EXPECT_EQ(ToString(c), "tp8 pp1 adp1 ep1 bf16 kv:bf16 eagle3:3");
  // With the MTP drafter on a model that has them, the head is not served.
  ServingConfig mtp = c;
  mtp.drafter = Drafter::kMtp;
  const ModelSpec ds = ResolveModel("deepseek-v3").value();
  EXPECT_EQ(ServedDrafts(ds, mtp), 3);
  EXPECT_EQ(ServedMtpDepths(ds, mtp), 1);
  EXPECT_EQ(ServedDrafts(llama, mtp), 0);
  EXPECT_EQ(ParseDrafter("eagle3").value(), Drafter::kEagle3);
  EXPECT_EQ(ParseDrafter("medusa").status().message(),
            "unknown --spec-method 'medusa'");
}

TEST(Speculation, ATreeHoldsItsDraftTokens) {
  // Depth 3, top-k 4: the first pass 4 candidates, each later one 4 per
  // candidate kept, 1 + 4 + 2 · 16 = 37 tokens at most.
  EXPECT_TRUE(ValidateDraftTree(3, 1, 0, false).ok());
  EXPECT_TRUE(ValidateDraftTree(3, 1, 4, false).ok());
  EXPECT_TRUE(ValidateDraftTree(3, 4, 8, false).ok());
  EXPECT_TRUE(ValidateDraftTree(3, 4, 37, false).ok());
  EXPECT_EQ(ValidateDraftTree(3, 4, 38, false).message(),
            "--draft-tokens must be in [4, 37] for a tree of depth 3 and "
            "top-k 4, got 38");
  EXPECT_EQ(ValidateDraftTree(3, 4, 0, false).message(),
            "--draft-tokens must be in [4, 37] for a tree of depth 3 and "
            "top-k 4, got 0");
  EXPECT_EQ(ValidateDraftTree(3, 1, 5, false).message(),
            "--draft-tokens 5 with a chain of --nextn 3 drafts: a chain "
            "verifies 4");
  EXPECT_EQ(ValidateDraftTree(0, 4, 8, true).message(),
            "--draft-topk 4 needs --nextn (the tree's depth)");
  EXPECT_EQ(ValidateDraftTree(3, 17, 8, false).message(),
            "--draft-topk must be in [1, 16], got 17");
  // A config's tree is checked with its layout.
  const ModelSpec ds = ResolveModel("deepseek-v3").value();
  const GpuSpec h100 = ResolveCluster("h100").value().gpu;
  ServingConfig c;
  c.tp = 8;
  c.ep = 8;
  c.nextn = 3;
  c.draft_topk = 4;
  c.draft_tokens = 8;
  EXPECT_TRUE(ValidateServingConfig(ds, h100, c).ok());
  EXPECT_EQ(ToString(c), "tp8 pp1 adp1 ep8 bf16 kv:bf16 nextn:3 tree:4x8");
  c.draft_tokens = 99;
  EXPECT_FALSE(ValidateServingConfig(ds, h100, c).ok());
}

TEST(Speculation, TheEagle3HeadIsOneDenseLayerOfTheTargetsAttention) {
  const ModelSpec llama = ResolveModel("llama3-70b").value();
  DraftHead head;
  head.checkpoint = "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B";
  const ModelSpec m = Eagle3HeadModel(llama, head);
  EXPECT_EQ(m.num_layers, 1);
  EXPECT_EQ(m.hidden_size, 8192);
  EXPECT_EQ(m.num_attention_heads, 64);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.ffn_hidden_size, 28672);  // the target's, as the 70B head
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_FALSE(m.is_moe());
  EXPECT_TRUE(m.gated_mlp());
  EXPECT_TRUE(m.Validate().ok());
  head.intermediate_size = 12288;
  EXPECT_EQ(Eagle3HeadModel(llama, head).ffn_hidden_size, 12288);
}

}  // namespace
}  // namespace meshtune::search_spaces
