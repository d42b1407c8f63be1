// The serving cost model against hand-computed values: weights streamed at
// a batch of one, the MoE experts a batch touches, prefill as GEMMs and a
// prompt chunk's attention to its earlier chunks (the load models on these
// times: serving_loads_test.cc).
#include "costmodel/serving_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/serving_loads.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ClusterSpec;
using search_spaces::KvCacheDtype;
using search_spaces::ModelSpec;
using search_spaces::Precision;
using search_spaces::ServingConfig;
using search_spaces::ServingWorkload;

ModelSpec Preset(const char* name) {
  return search_spaces::ResolveModel(name).value();
}
ClusterSpec Cluster(const char* name) {
  return search_spaces::ResolveCluster(name).value();
}

// A serving step's memory-bound kernels reach kServingHbmFraction (0.8) of
// the datasheet bandwidth: 8.03 GB of LLaMA-3 8B fp8 weights on an H100
// (3350 GB/s) stream in 8.03e9 / (3.35e12 · 0.8) = 3.0 ms.
double StreamTime_s(const ClusterSpec& c, double bytes) {
  return bytes / (c.gpu.hbm_gbps * 1e9 * 0.8);
}

// NVFP4 weights and an FP8 KV cache under TensorRT-LLM's PyTorch flow,
// whose host pays per request (HostStepTime_s).
ServingConfig Nvfp4OnTensorRtLlm() {
  ServingConfig c;
  c.weights = Precision::kNvfp4;
  c.kv_cache = KvCacheDtype::kFp8;
  c.engine = search_spaces::ServingEngine::kTensorRtLlm;
  return c;
}

TEST(ExpectedActiveExperts, IndependentTopKPicks) {
  EXPECT_DOUBLE_EQ(ExpectedActiveExperts(8, 2, 1), 2.0);
  EXPECT_NEAR(ExpectedActiveExperts(8, 2, 4), 8 * (1 - std::pow(0.75, 4)),
              1e-12);  // 5.47
  // DeepSeek-V3 at 32 tokens: 256 · (1 − (248/256)^32) = 256 · (1 −
  // e^(32 · ln 0.96875)) = 256 · (1 − 0.36205) = 163.31.
  EXPECT_NEAR(ExpectedActiveExperts(256, 8, 32), 163.31, 0.01);
  EXPECT_NEAR(ExpectedActiveExperts(8, 2, 1000), 8.0, 1e-9);
  EXPECT_DOUBLE_EQ(ExpectedActiveExperts(8, 2, 0), 0.0);
}

TEST(DecodeStep, BatchOfOneStreamsTheWeights) {
  // LLaMA-3 8B, fp8 weights on one H100: per layer q/o 4096², k/v
  // 4096·1024, MLP 3·4096·14336 = 218 103 808 weights at 1 B; 32 layers;
  // the 16-bit output layer 128 256 · 4096 · 2 B; the norms 2·4096·32·2 B.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.weights = Precision::kFp8;
  const double bytes =
      32 * 218103808.0 + 128256.0 * 4096 * 2 + 2.0 * 4096 * 32 * 2;
  const DecodeBreakdown d = DecodeStep(m, h100, c, 1, 1024, cal);
  // Plus eight kernels per layer (QKV, out-projection, fc1, fc2, two norms,
  // attention, SwiGLU) at 3 us each: 32 · 8 · 3 us = 0.768 ms.
  EXPECT_NEAR(d.weights_s, StreamTime_s(h100, bytes) + 32 * 8 * 3e-6,
              1e-3 * d.weights_s);
  EXPECT_DOUBLE_EQ(d.compute_s, 0.0);
  // The cache of one 1024-token sequence: 32 · 2 · 8 · 128 · 1024 · 2 B.
  EXPECT_NEAR(d.kv_cache_s, StreamTime_s(h100, 32 * 2 * 8 * 128 * 1024 * 2.0),
              1e-9);
  EXPECT_DOUBLE_EQ(d.tp_comm_s, 0.0);
  // The elementwise kernels of the token, per layer: two fused residual
  // adds and RMSNorms (4 · 4096 each), RoPE and the cache append over QKV's
  // (32 + 2 · 8) · 128 = 6144 channels (read and write) and SwiGLU over
  // 3 · 14 336, 16-bit: 88 064 · 2 B.
  EXPECT_NEAR(
      d.elementwise_s,
      StreamTime_s(h100, 32 * (8.0 * 4096 + 2.0 * 6144 + 3.0 * 14336) * 2.0),
      1e-15);
  // The engine's host time per step: vLLM's by default, 2.5 ms.
  EXPECT_DOUBLE_EQ(d.overhead_s, 2.5e-3);
  ServingConfig engine = c;
  engine.engine = search_spaces::ServingEngine::kTensorRtLlm;
  EXPECT_DOUBLE_EQ(DecodeStep(m, h100, engine, 1, 1024, cal).overhead_s,
                   1.0e-3);
  engine.engine = search_spaces::ServingEngine::kSglang;
  EXPECT_DOUBLE_EQ(DecodeStep(m, h100, engine, 1, 1024, cal).overhead_s,
                   3.5e-3);
  // A large batch turns the same layers compute-bound.
  const DecodeBreakdown big = DecodeStep(m, h100, c, 4096, 1024, cal);
  EXPECT_GT(big.compute_s, 0.0);
  EXPECT_GT(big.kv_cache_s, 4000 * d.kv_cache_s);
}

TEST(DecodeStep, SpeculationVerifiesItsDraftsAndRunsTheMtpDepthPerDraft) {
  // LLaMA-3 8B given one MTP depth (its last layer's spec: attention and
  // a dense MLP), fp8 on one H100, batch 1 at 1024 tokens, one draft.
  ModelSpec m = Preset("llama3-8b");
  m.mtp_num_layers = 1;
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.weights = Precision::kFp8;
  const DecodeBreakdown plain = DecodeStep(m, h100, c, 1, 1024, cal);
  c.nextn = 1;
  const DecodeBreakdown spec = DecodeStep(m, h100, c, 1, 1024, cal);
  // The verify runs 2 tokens: below the GEMMs' 16 rows, so the same
  // weights stream; the sequence's cache is read once, as at one token;
  // the elementwise kernels move twice the bytes.
  EXPECT_DOUBLE_EQ(spec.weights_s, plain.weights_s);
  EXPECT_DOUBLE_EQ(spec.kv_cache_s, plain.kv_cache_s);
  EXPECT_NEAR(spec.elementwise_s, 2 * plain.elementwise_s, 1e-15);
  EXPECT_DOUBLE_EQ(plain.draft_s, 0.0);
  // One draft: the MTP layer's 218 103 808 fp8 weights and 2 · 4096
  // 16-bit norm weights, eh_proj's 2 · 4096² fp8 weights, the 16-bit
  // output layer (128 256 · 4096 · 2 B); 8 kernels at 3 us; the layer's
  // cache of 1024 tokens (2 · 8 · 128 · 1024 · 2 B) and its elementwise
  // bytes for the token (88 064 · 2 B, as above).
  const double weights =
      218103808.0 + 2 * 4096 * 2.0 + 2.0 * 4096 * 4096 + 128256.0 * 4096 * 2;
  const double draft = StreamTime_s(h100, weights) + 8 * 3e-6 +
                       StreamTime_s(h100, 2 * 8 * 128 * 1024 * 2.0) +
                       StreamTime_s(h100, 88064 * 2.0);
  EXPECT_NEAR(spec.draft_s, draft, 1e-3 * draft);
  EXPECT_NEAR(spec.total_s() - plain.total_s(), draft + plain.elementwise_s,
              1e-3 * draft);
  // More drafts than MTP depths reuse the one depth: three passes.
  c.nextn = 3;
  EXPECT_NEAR(DecodeStep(m, h100, c, 1, 1024, cal).draft_s, 3 * spec.draft_s,
              1e-12);
  // A model without MTP layers cannot speculate: nothing changes.
  ServingConfig none = c;
  EXPECT_DOUBLE_EQ(
      DecodeStep(Preset("llama3-8b"), h100, none, 1, 1024, cal).total_s(),
      plain.total_s());
}

TEST(DecodeStep, MtpSpeedupFallsWithTheBatchAsSglangPublishes) {
  // SGLang's DeepSeek docs ("Multi-token Prediction", docs.sglang.ai):
  // MTP decodes 1.8x as fast at batch 1 and 1.5x at batch 32 on H200 at
  // TP8, at an acceptance they do not state. At the acceptance that gives
  // 1.8x at batch 1 with 3 drafts (SGLang's engine, 2048-token contexts),
  // the verify's wider GEMMs and the experts more tokens touch leave 1.5x
  // at batch 32: the model's cost of speculation grows with the batch as
  // the engine's does.
  const ModelSpec m = Preset("deepseek-v3");
  const ClusterSpec h200 = Cluster("h200");
  const DatasheetCalibration cal(h200);
  ServingConfig c;
  c.tp = 8;
  c.weights = Precision::kFp8Blockwise;
  c.kv_cache = KvCacheDtype::kFp8;
  c.engine = search_spaces::ServingEngine::kSglang;
  auto step = [&](int64_t nextn, int64_t batch) {
    c.nextn = nextn;
    return DecodeStep(m, h200, c, batch, 2048, cal).total_s();
  };
  const double accepted = 1.8 * step(3, 1) / step(0, 1) - 1.0;
  EXPECT_GT(accepted, 0.0);
  EXPECT_LT(accepted, 3.0);
  EXPECT_NEAR((1.0 + accepted) * step(0, 32) / step(3, 32), 1.5, 0.1);
}

TEST(EstimateServingMemory, SpeculationHoldsTheMtpDepthAndItsCache) {
  // The MTP depth's layer (218 103 808 fp8 weights, 2 · 4096 16-bit norm
  // weights), eh_proj (2 · 4096² at 1 B) and its three norms (3 · 4096 at
  // 2 B); its cache is one more layer's: 33/32 of the model's.
  ModelSpec m = Preset("llama3-8b");
  m.mtp_num_layers = 1;
  const ClusterSpec h100 = Cluster("h100");
  ServingConfig c;
  c.weights = Precision::kFp8;
  const ServingWorkload w{1024, 1024, 0};
  const ServingEstimate plain = EstimateServingMemory(m, h100, w, c);
  c.nextn = 2;
  const ServingEstimate spec = EstimateServingMemory(m, h100, w, c);
  EXPECT_NEAR(spec.weight_bytes - plain.weight_bytes,
              218103808.0 + 2 * 4096 * 2.0 + 2.0 * 4096 * 4096 + 3 * 4096 * 2.0,
              1.0);
  EXPECT_NEAR(spec.kv_bytes_per_sequence, plain.kv_bytes_per_sequence * 33 / 32,
              1e-6);
  // The served depth also runs over the prompt: one more layer, eh_proj
  // and the output layer.
  ServingConfig off = c;
  off.nextn = 0;
  const DatasheetCalibration cal(h100);
  const double prefill = PrefillTime_s(m, h100, off, 1024, 1, cal);
  const double with_mtp = PrefillTime_s(m, h100, c, 1024, 1, cal);
  EXPECT_GT(with_mtp, prefill * (1 + 1.0 / 32));
  EXPECT_LT(with_mtp, prefill * (1 + 2.0 / 32));
}

// An EAGLE-3 head for LLaMA-3 8B (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's
// shape: the target's MLP width 14 336, a 32 000-token draft vocabulary).
ServingConfig Eagle3On8b(int64_t nextn) {
  ServingConfig c;
  c.weights = Precision::kFp8;
  c.nextn = nextn;
  c.drafter = search_spaces::Drafter::kEagle3;
  c.draft_head.checkpoint = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B";
  return c;
}

// The head's 16-bit weights: its layer with query/key/value over 2h
// (2 · 4096 · 6144 + 4096² + 3 · 4096 · 14 336 = 243 269 632) and two norms
// (2 · 4096), its output layer over the draft vocabulary (32 000 · 4096).
constexpr double kEagle3LayerBytes = (243269632.0 + 2 * 4096) * 2;
constexpr double kEagle3OutputBytes = 32000.0 * 4096 * 2;
// Its fc, 3h -> h: 3 · 4096² 16-bit weights.
constexpr double kEagle3FcBytes = 3.0 * 4096 * 4096 * 2;

TEST(DecodeStep, AnEagle3HeadDraftsWithItsOwnLayerAndVocabulary) {
  // LLaMA-3 8B in fp8 on one H100, batch 1 at 1024 tokens, one draft: the
  // verify is MTP's (2 tokens); the draft streams the head's 16-bit layer,
  // its output layer and fc (at 2 rows, the verified tokens), 8 kernels at
  // 3 us, its layer's cache of 1024 tokens (2 · 8 · 128 · 1024 · 2 B) and
  // the token's elementwise bytes (88 064 · 2 B, as for the target).
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig plain = Eagle3On8b(0);
  const DecodeBreakdown off = DecodeStep(m, h100, plain, 1, 1024, cal);
  EXPECT_DOUBLE_EQ(off.draft_s, 0.0);
  const DecodeBreakdown one = DecodeStep(m, h100, Eagle3On8b(1), 1, 1024, cal);
  EXPECT_DOUBLE_EQ(one.weights_s, off.weights_s);
  EXPECT_NEAR(one.elementwise_s, 2 * off.elementwise_s, 1e-15);
  const double pass =
      StreamTime_s(h100, kEagle3LayerBytes + kEagle3OutputBytes) + 8 * 3e-6 +
      StreamTime_s(h100, 2 * 8 * 128 * 1024 * 2.0) +
      StreamTime_s(h100, 88064 * 2.0);
  const double fc = StreamTime_s(h100, kEagle3FcBytes);
  EXPECT_NEAR(one.draft_s, pass + fc, 1e-3 * pass);
  // Three drafts: three passes of the layer, one fc over the 4 verified
  // tokens (still below the GEMMs' 16 rows: the same bytes).
  EXPECT_NEAR(DecodeStep(m, h100, Eagle3On8b(3), 1, 1024, cal).draft_s,
              3 * pass + fc, 3e-3 * pass);
  // The head needs no MTP layers, and the MTP drafter still does: the same
  // config with the MTP drafter does not speculate on LLaMA-3 8B.
  ServingConfig mtp = Eagle3On8b(1);
  mtp.drafter = search_spaces::Drafter::kMtp;
  EXPECT_DOUBLE_EQ(DecodeStep(m, h100, mtp, 1, 1024, cal).total_s(),
                   off.total_s());
}

TEST(DecodeStep, ATreeVerifiesItsDraftTokensAndExpandsItsTopK) {
  // The head at batch 1 with a tree of depth 3, top-k 4 and 8 draft tokens
  // against a chain of 3: the verify runs 8 tokens instead of 4 (below the
  // GEMMs' 16 rows: the same weights, twice the elementwise bytes); the
  // draft passes after the first run 4 candidates instead of 1 (the same
  // weights and cache, 3 more tokens' elementwise bytes each, 88 064 · 2 B
  // per token), and the fc 8 tokens (the same bytes).
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  const DecodeBreakdown chain =
      DecodeStep(m, h100, Eagle3On8b(3), 1, 1024, cal);
  ServingConfig tree = Eagle3On8b(3);
  tree.draft_topk = 4;
  tree.draft_tokens = 8;
  const DecodeBreakdown t = DecodeStep(m, h100, tree, 1, 1024, cal);
  EXPECT_DOUBLE_EQ(t.weights_s, chain.weights_s);
  EXPECT_DOUBLE_EQ(t.kv_cache_s, chain.kv_cache_s);
  EXPECT_NEAR(t.elementwise_s, 2 * chain.elementwise_s, 1e-15);
  EXPECT_NEAR(t.draft_s - chain.draft_s,
              2 * 3 * StreamTime_s(h100, 88064 * 2.0), 1e-9);
  EXPECT_EQ(search_spaces::VerifiedTokens(m, tree), 8);
  EXPECT_EQ(search_spaces::VerifiedTokens(m, Eagle3On8b(3)), 4);
  EXPECT_EQ(search_spaces::VerifiedTokens(m, Eagle3On8b(0)), 1);
}

TEST(EstimateServingMemory, AnEagle3HeadHoldsItsWeightsAndOneLayersCache) {
  // The head's layer, fc and output layer, all 16-bit whatever the
  // target's weights; its cache is one more layer's: 33/32 of the model's.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const ServingWorkload w{1024, 1024, 0};
  const ServingEstimate plain =
      EstimateServingMemory(m, h100, w, Eagle3On8b(0));
  const ServingEstimate head = EstimateServingMemory(m, h100, w, Eagle3On8b(2));
  EXPECT_NEAR(head.weight_bytes - plain.weight_bytes,
              kEagle3LayerBytes + kEagle3FcBytes + kEagle3OutputBytes, 1.0);
  EXPECT_NEAR(head.kv_bytes_per_sequence, plain.kv_bytes_per_sequence * 33 / 32,
              1e-6);
  // At tp 2 the layer and output layer halve (a KV head each rank: 4 of 8
  // groups), the fc stays whole on each rank.
  ServingConfig tp2 = Eagle3On8b(2), tp2_off = Eagle3On8b(0);
  tp2.tp = tp2_off.tp = 2;
  EXPECT_NEAR(EstimateServingMemory(m, h100, w, tp2).weight_bytes -
                  EstimateServingMemory(m, h100, w, tp2_off).weight_bytes,
              (243269632.0 / 2 + 2 * 4096) * 2 + kEagle3FcBytes +
                  kEagle3OutputBytes / 2,
              1.0);
  // The head also runs over the prompt: one more layer, in 16-bit at half
  // the fp8 GEMM rate (about two of the target's fp8 layers at 1024
  // tokens), its wider input, fc and output layer (less than one more).
  const DatasheetCalibration cal(h100);
  const double prefill = PrefillTime_s(m, h100, Eagle3On8b(0), 1024, 1, cal);
  const double with_head = PrefillTime_s(m, h100, Eagle3On8b(2), 1024, 1, cal);
  EXPECT_GT(with_head, prefill * (1 + 2.0 / 32));
  EXPECT_LT(with_head, prefill * (1 + 3.0 / 32));
}

TEST(EstimateServingMemory, ARepeatedMtpLayerIsServedOnce) {
  // Nemotron 3 Super's two MTP depths share one block
  // (mtp_use_repeated_layer): two drafts hold and cache that block once and
  // run it twice, as one draft holds it; separate depths would hold two.
  const ModelSpec m = Preset("nemotron3-super");
  ASSERT_TRUE(m.mtp_use_repeated_layer);
  const ClusterSpec b200 = Cluster("b200");
  ServingConfig c;
  c.tp = 8;
  c.ep = 8;
  c.weights = Precision::kNvfp4;
  c.kv_cache = KvCacheDtype::kFp8;
  const ServingWorkload w{1024, 1024, 0};
  auto weights = [&](const ModelSpec& model, int64_t nextn) {
    ServingConfig x = c;
    x.nextn = nextn;
    return EstimateServingMemory(model, b200, w, x).weight_bytes;
  };
  ServingConfig one = c, two = c;
  one.nextn = 1;
  two.nextn = 2;
  EXPECT_EQ(search_spaces::ServedMtpDepths(m, two), 1);
  const double block = weights(m, 1) - weights(m, 0);
  EXPECT_GT(block, 0.0);
  EXPECT_DOUBLE_EQ(weights(m, 2), weights(m, 1));
  ModelSpec separate = m;
  separate.mtp_use_repeated_layer = false;
  EXPECT_NEAR(weights(separate, 2) - weights(separate, 0), 2 * block,
              1e-9 * block);
  // Its drafts still run the block once per draft.
  const DatasheetCalibration cal(b200);
  EXPECT_NEAR(DecodeStep(m, b200, two, 8, 1024, cal).draft_s,
              2 * DecodeStep(m, b200, one, 8, 1024, cal).draft_s, 1e-12);
}

TEST(DecodeStep, Nvfp4WeightsStreamAtTheGpusNvfp4Rate) {
  // LLaMA-3 8B in NVFP4 on one B200: the same 32 · 218 103 808 linear
  // weights at 0.5 + 1/16 B stream at nvfp4_stream_relative 0.62 of the
  // 16-bit rate (clusters/b200.yaml); the 16-bit output layer and norms
  // and the kernels' fixed 3 us do not change. With the relative rate set
  // to 1 the step loses exactly (1/0.62 − 1) of the NVFP4 bytes' time.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec b200 = Cluster("b200");
  EXPECT_EQ(b200.gpu.nvfp4_stream_relative, 0.62);
  ClusterSpec plain = b200;
  plain.gpu.nvfp4_stream_relative = 1.0;
  const DatasheetCalibration cal(b200);
  ServingConfig c;
  c.weights = Precision::kNvfp4;
  const double nvfp4 = StreamTime_s(b200, 32 * 218103808.0 * 0.5625);
  EXPECT_NEAR(DecodeStep(m, b200, c, 1, 1024, cal).weights_s -
                  DecodeStep(m, plain, c, 1, 1024, cal).weights_s,
              nvfp4 * (1 / 0.62 - 1), 1e-9);
  // 16-bit weights keep the 16-bit rate.
  c.weights = Precision::kBf16;
  EXPECT_DOUBLE_EQ(DecodeStep(m, b200, c, 1, 1024, cal).weights_s,
                   DecodeStep(m, plain, c, 1, 1024, cal).weights_s);
}

TEST(HostStepTime, TensorRtLlmsPyTorchLoopPaysPerRequest) {
  // 35 us a request on an x86 host (H100's preset: launch factor 1),
  // 1.5 times that on Grace: 1 536 requests on one GB200 rank take
  // 80.64 ms (1 536 · 52.5 us).
  using search_spaces::ServingEngine;
  EXPECT_NEAR(
      HostStepTime_s(ServingEngine::kTensorRtLlm, Cluster("h100"), 1536),
      1536 * 35e-6, 1e-12);
  EXPECT_NEAR(
      HostStepTime_s(ServingEngine::kTensorRtLlm, Cluster("gb200"), 1536) * 1e3,
      80.64, 1e-9);
  // The C++ executor and the engines whose per-request time is unmeasured.
  for (ServingEngine e : {ServingEngine::kTensorRtLlmCpp, ServingEngine::kVllm,
                          ServingEngine::kSglang}) {
    EXPECT_EQ(HostStepTime_s(e, Cluster("gb200"), 1536), 0.0);
  }
}

TEST(DecodeStep, AStepLastsTheLongerOfItsGpuAndHostSides) {
  // Qwen3-30B-A3B (3B active) in NVFP4 on one B200 under TensorRT-LLM's
  // PyTorch flow: at 8 requests the GPU's side is longer, at 2048 the
  // host's 71.7 ms (2048 · 35 us) is; attention DP 2 splits the requests
  // over two hosts.
  const ModelSpec m = Preset("qwen3-30b-a3b");
  const ClusterSpec b200 = Cluster("b200");
  const DatasheetCalibration cal(b200);
  ServingConfig c = Nvfp4OnTensorRtLlm();
  const DecodeBreakdown small = DecodeStep(m, b200, c, 8, 1024, cal);
  EXPECT_NEAR(small.host_s, 8 * 35e-6, 1e-15);
  EXPECT_DOUBLE_EQ(small.total_s(), small.gpu_s());
  const DecodeBreakdown big = DecodeStep(m, b200, c, 2048, 256, cal);
  EXPECT_NEAR(big.host_s, 2048 * 35e-6, 1e-12);
  ASSERT_GT(big.host_s, big.gpu_s());
  EXPECT_DOUBLE_EQ(big.total_s(), big.host_s);
  // Offline at 128/128 the batch is 2048 and the host's side binds the
  // step, the GPU's decode and share of prefills being shorter.
  const ServingEstimate e = EstimateServing(m, b200, {128, 128, 0}, c, 1, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  ASSERT_EQ(e.batch, 2048);
  EXPECT_DOUBLE_EQ(e.step_s, e.decode.host_s);
  EXPECT_DOUBLE_EQ(e.tpot_s, e.decode.host_s);
  ServingConfig two = c;
  two.attention_dp = 2;
  EXPECT_NEAR(DecodeStep(m, b200, two, 2048, 256, cal).host_s, 1024 * 35e-6,
              1e-12);
}

TEST(DecodeStep, TensorRtLlm10sPipelineLoopPaysTheHostAfterTheGpu) {
  // The B200 setup above split over two pipeline stages: TensorRT-LLM
  // 1.0's pipeline loop updates a micro-batch's requests on the host after
  // its forward (HostAfterGpu), so the step is the sum of both sides; one
  // stage, later versions and the C++ executor overlap them.
  const ModelSpec m = Preset("qwen3-30b-a3b");
  const ClusterSpec b200 = Cluster("b200");
  const DatasheetCalibration cal(b200);
  ServingConfig c = Nvfp4OnTensorRtLlm();
  c.pp = 2;
  ServingConfig sync = c;
  sync.trtllm_sync_pipeline = true;
  EXPECT_FALSE(HostAfterGpu(c));
  EXPECT_TRUE(HostAfterGpu(sync));
  const DecodeBreakdown plain = DecodeStep(m, b200, c, 8, 1024, cal);
  const DecodeBreakdown serial = DecodeStep(m, b200, sync, 8, 1024, cal);
  ASSERT_GT(plain.gpu_s(), plain.host_s);
  EXPECT_DOUBLE_EQ(plain.total_s(), plain.gpu_s());
  EXPECT_NEAR(serial.host_s, 8 * 35e-6, 1e-15);
  EXPECT_DOUBLE_EQ(serial.total_s(), serial.gpu_s() + serial.host_s);
  // 8 clients: the estimate's step gains the host's 0.28 ms.
  const ServingEstimate e = EstimateServing(m, b200, {1024, 256, 8}, c, 2, cal);
  const ServingEstimate s =
      EstimateServing(m, b200, {1024, 256, 8}, sync, 2, cal);
  ASSERT_TRUE(e.fits && s.fits) << e.infeasible_reason;
  EXPECT_NEAR(s.step_s, e.step_s + 8 * 35e-6, 1e-12);
  // Not with one stage, nor on the C++ executor.
  sync.pp = 1;
  EXPECT_FALSE(HostAfterGpu(sync));
  sync.pp = 2;
  sync.engine = search_spaces::ServingEngine::kTensorRtLlmCpp;
  EXPECT_FALSE(HostAfterGpu(sync));
}

TEST(DecodeStep, MlaDecodeAttentionRunsAtItsKernelsRate) {
  // DeepSeek-V3's absorbed MLA multiplies each of its 128 heads against the
  // latent: 2 · 128 · ctx · (2 · 512 + 64) FLOPs per sequence and layer, 61
  // layers. With the cache's bytes free (HBM 1000x faster) the attention
  // term is those FLOPs at the GPU's rate: on H200 the BF16 ceiling (989 ·
  // 0.803 TFLOP/s) whatever the cache; on B200 over an FP8 cache 0.83 of
  // the FP8 ceiling (4500 · 0.763), over a BF16 one the BF16 ceiling (2250
  // · 0.655). At tp 8 each rank runs 16 of the heads.
  const ModelSpec m = Preset("deepseek-v3");
  EXPECT_EQ(Cluster("h200").gpu.mla_decode_head_ns, 2.04);
  EXPECT_EQ(Cluster("b200").gpu.mla_decode_head_ns, 1.14);
  const double flops = 61 * 2.0 * 8 * 128 * 4096 * (2 * 512 + 64);
  struct Case {
    const char* gpu;
    KvCacheDtype kv;
    double tflops;
  };
  for (const Case& k : {Case{"h200", KvCacheDtype::kFp8, 989 * 0.803},
                        Case{"b200", KvCacheDtype::kFp8, 4500 * 0.763 * 0.83},
                        Case{"b200", KvCacheDtype::kBf16, 2250 * 0.655}}) {
    SCOPED_TRACE(k.gpu);
    ClusterSpec fast = Cluster(k.gpu);
    fast.gpu.hbm_gbps *= 1000;
    const double head_ns = fast.gpu.mla_decode_head_ns;
    fast.gpu.mla_decode_head_ns = 0;  // the fixed part, below
    const DatasheetCalibration cal(fast);
    ServingConfig c;
    c.weights = Precision::kFp8Blockwise;
    c.kv_cache = k.kv;
    const double want = flops / (k.tflops * 1e12);
    EXPECT_NEAR(DecodeStep(m, fast, c, 8, 4096, cal).kv_cache_s, want,
                1e-3 * want);
    // Its kernel's fixed time per sequence and head (H200's 2.04 ns,
    // B200's 1.14; clusters/*.yaml): 61 layers of 8 sequences' 128 heads.
    ClusterSpec fixed = fast;
    fixed.gpu.mla_decode_head_ns = head_ns;
    EXPECT_NEAR(DecodeStep(m, fixed, c, 8, 4096, cal).kv_cache_s,
                want + 61 * 8 * 128 * head_ns * 1e-9, 1e-3 * want);
    c.tp = 8;
    EXPECT_NEAR(DecodeStep(m, fast, c, 8, 4096, cal).kv_cache_s, want / 8,
                1e-3 * want / 8);
    EXPECT_NEAR(DecodeStep(m, fixed, c, 8, 4096, cal).kv_cache_s,
                want / 8 + 61 * 8 * 16 * head_ns * 1e-9, 1e-3 * want / 8);
  }
}

TEST(DecodeStep, SmallBatchesCostTheDevicesNarrowestGemm) {
  // An H100 whose HBM is 1000x faster: every decode GEMM compute-bound.
  // With the tensor cores' 16 rows, batches 1 to 16 cost one 16-row GEMM
  // each; a device without MMAs (decode_gemm_min_rows 1, the CPU `local`
  // preset) pays for its rows only, so a batch of 4 costs a quarter of 16.
  const ModelSpec m = Preset("llama3-8b");
  ClusterSpec fast = Cluster("h100");
  fast.gpu.hbm_gbps *= 1000;
  const DatasheetCalibration cal(fast);
  ServingConfig c;
  const double one = DecodeStep(m, fast, c, 1, 16, cal).compute_s;
  EXPECT_GT(one, 0.0);
  EXPECT_DOUBLE_EQ(DecodeStep(m, fast, c, 16, 16, cal).compute_s, one);
  fast.gpu.decode_gemm_min_rows = 1;
  const DatasheetCalibration cpu_like(fast);
  const double four = DecodeStep(m, fast, c, 4, 16, cpu_like).compute_s;
  const double sixteen = DecodeStep(m, fast, c, 16, 16, cpu_like).compute_s;
  EXPECT_NEAR(four, sixteen / 4, 1e-12 * sixteen);
  EXPECT_NEAR(sixteen, one, 1e-12 * one);
}

TEST(DecodeStep, MoeReadsOnlyTheExpertsTheBatchPicks) {
  // Mixtral 8x7B (top 2 of 8): one token reads 2 experts of each layer,
  // a large batch all 8. One expert is 3 · 4096 · 14336 weights.
  const ModelSpec m = Preset("mixtral-8x7b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.tp = 8;
  c.ep = 1;  // every expert split over the 8 GPUs (moe_tp 8)
  const double expert = 3.0 * 4096 * 14336 / 8 * 2;  // bytes per GPU
  const double one = DecodeStep(m, h100, c, 1, 16, cal).weights_s;
  const double two = DecodeStep(m, h100, c, 2, 16, cal).weights_s;
  // From 1 to 2 tokens: 2 → 8·(1 − 0.75²) = 3.5 experts per layer.
  EXPECT_NEAR(two - one, StreamTime_s(h100, 32 * 1.5 * expert),
              0.01 * (two - one));
}

// Mixtral 8x7B on an H100 whose HBM is 1000x faster, so every GEMM of a
// decode step is compute-bound; at one token each runs at the 16-row
// floor, a 16/256 share of a 256-row GEMM on the calibration's curve.
struct ComputeBoundMixtral {
  ComputeBoundMixtral() {
    fast.gpu.hbm_gbps *= 1000;
    o.Disable(Refinement::kTrainingKernelEfficiency);
  }
  double Gemm16(int64_t n, int64_t k) const {
    return DatasheetCalibration(fast).GemmTime_s(256, n, k, Precision::kBf16,
                                                 o) *
           16 / 256;
  }
  // tp 8 with the experts over `ep` of the GPUs.
  static ServingConfig Tp8(int64_t ep) {
    ServingConfig c;
    c.tp = 8;
    c.ep = ep;
    return c;
  }
  ModelSpec m = Preset("mixtral-8x7b");
  ClusterSpec fast = Cluster("h100");
  ModelOptions o;
};

TEST(DecodeStep, RoutedExpertsRunAsOneGroupedGemm) {
  // At tp 8, ep 1 each expert is split 8 ways. One token picks 2 experts
  // per layer; their fc1 (2 · 14336 / 8 = 3584 columns each, k 4096) and
  // fc2 (4096 columns, k 1792) run as one GEMM each of twice the width.
  const ComputeBoundMixtral x;
  const DatasheetCalibration cal(x.fast);
  const ServingConfig c = ComputeBoundMixtral::Tp8(1);
  const double experts = x.Gemm16(2 * 3584, 4096) + x.Gemm16(2 * 4096, 1792);
  // The rest: QKV ((4 + 2) · 128 = 768 columns), the out-projection (k
  // 512) and, once, the output layer (32 768 / 8 = 4096 columns).
  const double dense = x.Gemm16(768, 4096) + x.Gemm16(4096, 512);
  const double head = x.Gemm16(4096, 4096);
  const DecodeBreakdown d = DecodeStep(x.m, x.fast, c, 1, 16, cal);
  EXPECT_NEAR(d.compute_s, 32 * (experts + dense) + head, 1e-6 * d.compute_s);
  // A GPU whose fused MoE GEMMs reach 0.59 of the dense rate (A100's,
  // clusters/a100-80g.yaml) pays 1/0.59 on the experts only.
  ClusterSpec slow_moe = x.fast;
  slow_moe.gpu.moe_gemm_relative = 0.59;
  EXPECT_NEAR(DecodeStep(x.m, slow_moe, c, 1, 16, cal).compute_s,
              32 * (experts / 0.59 + dense) + head, 1e-6 * d.compute_s);
}

TEST(DecodeStep, SweptFusedMoeMovesItsBytesPerRoutedCopy) {
  // Mixtral at tp 8, ep 1, a decode batch of 64: each GPU holds all
  // 64 · 2 routed copies of a layer at the full hidden width 4096. Where the
  // GPU's fused MoE was swept it moves moe_copy_bytes per copy and hidden
  // element (blockwise FP8: moe_fp8_blockwise_copy_bytes) at 80 % of the
  // HBM datasheet rate, in place of the permute and finalize's 16-bit
  // copies (2 · (1 + k) · h elements per token), 32 layers over.
  const ModelSpec m = Preset("mixtral-8x7b");
  ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c = ComputeBoundMixtral::Tp8(1);
  const auto elementwise_s = [&](double copy_bytes, double blockwise_bytes) {
    h100.gpu.moe_copy_bytes = copy_bytes;
    h100.gpu.moe_fp8_blockwise_copy_bytes = blockwise_bytes;
    return DecodeStep(m, h100, c, 64, 1024, cal).elementwise_s;
  };
  const double bw_Bps = h100.gpu.hbm_gbps * 1e9 * 0.8;
  const double copies = 32 * 64 * 2 * 4096.0;
  const double unswept = 32 * 64 * 2 * (1 + 2) * 4096.0 * 2;
  EXPECT_NEAR(elementwise_s(20, 0) - elementwise_s(0, 0),
              (copies * 20 - unswept) / bw_Bps, 1e-9);
  EXPECT_NEAR(elementwise_s(30, 0) - elementwise_s(10, 0), copies * 20 / bw_Bps,
              1e-9);
  // Only blockwise experts take the blockwise bytes.
  EXPECT_NEAR(elementwise_s(10, 50), elementwise_s(10, 0), 1e-12);
  c.weights = Precision::kFp8Blockwise;
  EXPECT_NEAR(elementwise_s(10, 50) - elementwise_s(10, 0),
              copies * 40 / bw_Bps, 1e-9);
}

TEST(DecodeStep, QuantizedExpertsRunAtTheirFusedKernelsRate) {
  // The step above with blockwise-FP8 experts on a GPU whose fused MoE
  // reaches 0.51 of the dense blockwise GEMM's rate (H200's
  // moe_fp8_blockwise_relative, clusters/h200.yaml), and with NVFP4 experts
  // on one whose fused MoE reaches 0.43 of the dense NVFP4 GEMM's (B200's
  // moe_nvfp4_relative): the experts' fc1 and fc2 take 1/0.51 and 1/0.43
  // of the dense model's time, 32 layers over. Per-tensor FP8 experts keep
  // the dense rate.
  struct Case {
    const char* gpu;
    Precision p;
    double search_spaces::GpuSpec::*relative;
    double value;
  };
  for (const Case& k :
       {Case{"h100", Precision::kFp8Blockwise,
             &search_spaces::GpuSpec::moe_fp8_blockwise_relative, 0.51},
        Case{"b200", Precision::kNvfp4,
             &search_spaces::GpuSpec::moe_nvfp4_relative, 0.43}}) {
    SCOPED_TRACE(k.gpu);
    ComputeBoundMixtral x;
    x.fast = Cluster(k.gpu);
    x.fast.gpu.hbm_gbps *= 1000;
    x.fast.gpu.*k.relative = 1.0;  // the presets carry their own
    const DatasheetCalibration cal(x.fast);
    const auto gemm = [&](int64_t n, int64_t kk) {
      return cal.GemmTime_s(256, n, kk, k.p, x.o) * 16 / 256;
    };
    const double experts = gemm(2 * 3584, 4096) + gemm(2 * 4096, 1792);
    ServingConfig c = ComputeBoundMixtral::Tp8(1);
    c.weights = k.p;
    ClusterSpec slow = x.fast;
    slow.gpu.*k.relative = k.value;
    const auto compute_s = [&](const ClusterSpec& cl) {
      return DecodeStep(x.m, cl, c, 1, 16, cal, x.o).compute_s;
    };
    EXPECT_NEAR(compute_s(slow) - compute_s(x.fast),
                32 * experts * (1 / k.value - 1), 1e-6 * compute_s(slow));
    if (k.p == Precision::kFp8Blockwise) {
      c.weights = Precision::kFp8;
      EXPECT_DOUBLE_EQ(compute_s(slow), compute_s(x.fast));
    }
  }
}

TEST(DecodeStep, ExpertParallelStepWaitsForTheBusiestRank) {
  // At tp 8, ep 8 each GPU holds one whole expert. One token picks 2 of 8:
  // a GPU's expert is active with probability 0.25, so its fc1 (2 · 14336
  // columns, k 4096) and fc2 (4096 columns, k 14336) run at a quarter of
  // their width. The busiest EP rank carries kMoeLoadImbalance (1.2) times
  // the mean: 0.2 more of that time per layer than with balanced routing.
  // At ep 1 the experts are split over every GPU, no rank is busier, and
  // nothing changes.
  const ComputeBoundMixtral x;
  const DatasheetCalibration cal(x.fast);
  ModelOptions balanced = x.o;
  balanced.Disable(Refinement::kMoeImbalance);
  const auto compute_s = [&](int64_t ep, const ModelOptions& o) {
    return DecodeStep(x.m, x.fast, ComputeBoundMixtral::Tp8(ep), 1, 16, cal, o)
        .compute_s;
  };
  const double experts = x.Gemm16(28672 / 4, 4096) + x.Gemm16(4096 / 4, 14336);
  EXPECT_NEAR(compute_s(8, x.o) - compute_s(8, balanced), 32 * 0.2 * experts,
              1e-3 * 32 * 0.2 * experts);
  EXPECT_DOUBLE_EQ(compute_s(1, x.o), compute_s(1, balanced));
}

TEST(DecodeStep, AttentionDpGathersTheTokensAndReduceScattersTheOutputs) {
  // Mixtral 8x7B (h 4096, top-2, 32 MoE layers) at tp 1, attention DP 8,
  // ep 8 on one H100 node, 64 sequences: 8 tokens per rank. Inside one
  // NVLink domain the engines all-gather every rank's tokens and
  // reduce-scatter the 16-bit outputs (MoeExchangeOf): S = 8 ranks · 8
  // tokens · 4096 · 2 B = 524 288 B each for vLLM, which gathers 16-bit
  // activations; TensorRT-LLM gathers its per-tensor FP8 (1 B), 262 144 B.
  // Each is the bandwidth of the collective over 8 NVLink ranks plus two
  // 3.4 us hops.
  const ModelSpec m = Preset("mixtral-8x7b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.attention_dp = 8;
  c.ep = 8;
  c.weights = Precision::kFp8;
  ModelOptions bandwidth;
  bandwidth.Disable(Refinement::kCollectiveRamp);
  bandwidth.Disable(Refinement::kTrainingKernelEfficiency);
  auto collective = [&](Collective op, double bytes) {
    return cal.CollectiveTime_s(op, bytes, CommGroup{8, 1, 8}, bandwidth) +
           2 * 3.4e-6;
  };
  const double gathered = 8.0 * 8 * 4096;
  EXPECT_EQ(MoeExchangeOf(m, c, h100), MoeExchange::kAllGather);
  EXPECT_NEAR(DecodeStep(m, h100, c, 64, 1024, cal).ep_comm_s,
              32 * (collective(Collective::kAllGather, gathered * 2) +
                    collective(Collective::kReduceScatter, gathered * 2)),
              1e-12);
  c.engine = search_spaces::ServingEngine::kTensorRtLlm;
  EXPECT_NEAR(DecodeStep(m, h100, c, 64, 1024, cal).ep_comm_s,
              32 * (collective(Collective::kAllGather, gathered * 1) +
                    collective(Collective::kReduceScatter, gathered * 2)),
              1e-12);
}

TEST(DecodeStep, MultiNodeEpSendsEachTokensCopiesOnce) {
  // The same at attention DP 16 and ep 16 over two H100 nodes: the MoE
  // group leaves the NVLink domain, where the engines run DeepEP or their
  // wide-EP all-to-alls. Each rank's dispatch buffer is its tokens' k
  // copies, 8 · 2 · 4096 · 2 B = 131 072 B (not that times the 16 ranks),
  // priced as one all-to-all over the 16 ranks plus two 14 us network
  // hops; a dispatch and a combine per layer.
  const ModelSpec m = Preset("mixtral-8x7b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.attention_dp = 16;
  c.ep = 16;
  c.weights = Precision::kFp8;
  EXPECT_EQ(MoeExchangeOf(m, c, h100), MoeExchange::kAllToAll);
  const DecodeBreakdown d = DecodeStep(m, h100, c, 128, 1024, cal);
  ModelOptions bandwidth;
  bandwidth.Disable(Refinement::kCollectiveRamp);
  bandwidth.Disable(Refinement::kTrainingKernelEfficiency);
  const double a2a =
      cal.CollectiveTime_s(Collective::kAllToAll, 8.0 * 2 * 4096 * 2,
                           CommGroup{16, 2, 8}, bandwidth) +
      2 * 14e-6;
  EXPECT_NEAR(d.ep_comm_s, 32 * 2 * a2a, 1e-12);
}

TEST(MoeExchangeOf, TensorRtLlmUsesItsMnnvlAllToAllBeyondTopK) {
  // DeepSeek-V3 (top-8) on GB200 NVL72, whose NVLink domain spans nodes:
  // TensorRT-LLM switches to its MNNVL all-to-all when ep exceeds top-k,
  // vLLM keeps its all-gather; on an 8-GPU B200 node TensorRT-LLM gathers.
  const ModelSpec m = Preset("deepseek-v3");
  ServingConfig c;
  c.attention_dp = 16;
  c.ep = 16;
  c.engine = search_spaces::ServingEngine::kTensorRtLlm;
  EXPECT_EQ(MoeExchangeOf(m, c, Cluster("gb200")), MoeExchange::kAllToAll);
  c.attention_dp = 8;
  c.ep = 8;
  EXPECT_EQ(MoeExchangeOf(m, c, Cluster("gb200")), MoeExchange::kAllGather);
  EXPECT_EQ(MoeExchangeOf(m, c, Cluster("b200")), MoeExchange::kAllGather);
  c.attention_dp = 16;
  c.ep = 16;
  c.engine = search_spaces::ServingEngine::kVllm;
  EXPECT_EQ(MoeExchangeOf(m, c, Cluster("gb200")), MoeExchange::kAllGather);
  // NVFP4 gathers at 0.5 + 1/16 bytes in TensorRT-LLM, 16-bit in vLLM.
  c.weights = Precision::kNvfp4;
  EXPECT_EQ(GatheredActivationBytes(c), 2.0);
  c.engine = search_spaces::ServingEngine::kTensorRtLlm;
  EXPECT_EQ(GatheredActivationBytes(c), 0.5625);
}

TEST(DecodeStep, AllReducesAboveTheCustomKernelsLimitGoToNccl) {
  // LLaMA-3 8B (h 4096, 32 layers, two all-reduces each) at tp 8 on an
  // H100 node. 256 sequences all-reduce 256 · 4096 · 2 B = 2 MiB: the
  // engines' one-shot kernel, bandwidth at the ring's busbw (no NVLS) plus
  // two 3.4 us hops. 2048 sequences all-reduce 16 MiB, above the 8 MiB the
  // custom kernels take: NCCL, priced with its latency ramp.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.tp = 8;
  const CommGroup tp8{8, 1, 8};
  ModelOptions nccl;
  nccl.Disable(Refinement::kNvls);
  ModelOptions one_shot = nccl;
  one_shot.Disable(Refinement::kCollectiveRamp);
  const double small = 256.0 * 4096 * 2;
  const double large = 2048.0 * 4096 * 2;
  ASSERT_LT(small, kCustomAllReduceMaxBytes);
  ASSERT_GT(large, kCustomAllReduceMaxBytes);
  EXPECT_NEAR(
      DecodeStep(m, h100, c, 256, 1024, cal).tp_comm_s,
      64 * (cal.CollectiveTime_s(Collective::kAllReduce, small, tp8, one_shot) +
            2 * 3.4e-6),
      1e-12);
  EXPECT_NEAR(
      DecodeStep(m, h100, c, 2048, 1024, cal).tp_comm_s,
      64 * cal.CollectiveTime_s(Collective::kAllReduce, large, tp8, nccl),
      1e-12);
  // NVLink SHARP would have been faster than the ring: not used here.
  EXPECT_LT(
      cal.CollectiveTime_s(Collective::kAllReduce, large, tp8, ModelOptions()),
      cal.CollectiveTime_s(Collective::kAllReduce, large, tp8, nccl));
}

TEST(PrefillTime, IsBoundByTheGemmsFlops) {
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  const double t = PrefillTime_s(m, h100, c, 4096, 1, cal);
  // 2 · 6.98e9 linear weights · 4096 tokens at the bf16 peak, and at half
  // of it (the GEMM curve reaches about 0.8 of the peak at these shapes,
  // plus attention and the output layer of the last token).
  const double flops = 2.0 * 32 * 218103808.0 * 4096;
  EXPECT_GT(t, flops / (989e12));
  EXPECT_LT(t, flops / (0.5 * 989e12));
  // Twice the tokens, at least twice the time (attention grows faster).
  EXPECT_GE(PrefillTime_s(m, h100, c, 8192, 1, cal), 2 * t * 0.99);
}

TEST(PrefillTime, RoutedExpertsRunAsOneGroupedGemm) {
  // Qwen3-30B-A3B (48 layers, top 8 of 128 experts of 3 · 2048 · 768) on
  // an H100 whose HBM is 1000x faster, so the GEMMs bound the prefill.
  // 2048 tokens give each expert 128 rows; as one grouped GEMM per
  // projection they run near the peak: the expert FLOPs 48 · 2048 · 8 ·
  // 2 · 3 · 2048 · 768 = 7.42e12 and the attention projections' 48 · 2048
  // · 2 · 2048 · (4096 + 1024 + 4096) = 3.71e12 take between their time at
  // the bf16 peak and twice that (a launch per expert, each a 128-row GEMM
  // far down the curve, took 83 ms against 21 ms, 3.7x the bound).
  const ModelSpec m = Preset("qwen3-30b-a3b");
  ClusterSpec fast = Cluster("h100");
  fast.gpu.hbm_gbps *= 1000;
  const DatasheetCalibration cal(fast);
  ServingConfig c;
  const double flops = 48.0 * 2048 * 8 * 2 * 3 * 2048 * 768 +
                       48.0 * 2048 * 2 * 2048 * (4096 + 1024 + 4096);
  const double t = PrefillTime_s(m, fast, c, 2048, 1, cal);
  EXPECT_GT(t, flops / 989e12);
  EXPECT_LT(t, 2.0 * flops / 989e12);
}

TEST(PrefillTime, AttentionDpPrefillsEachPromptWholeOnOneRank) {
  // LLaMA-3 8B (dense: no layer meets the other ranks' tokens) over 4
  // attention-DP ranks: a lone prompt runs on one rank, as it would
  // without attention DP, not a quarter of it on each; 4 prompts run one
  // per rank side by side; 5 put two on the busiest rank.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  const ServingConfig one;
  ServingConfig dp4;
  dp4.attention_dp = 4;
  EXPECT_DOUBLE_EQ(PrefillTime_s(m, h100, dp4, 2048, 1, cal),
                   PrefillTime_s(m, h100, one, 2048, 1, cal));
  EXPECT_DOUBLE_EQ(PrefillTime_s(m, h100, dp4, 4 * 2048, 4, cal),
                   PrefillTime_s(m, h100, one, 2048, 1, cal));
  EXPECT_DOUBLE_EQ(PrefillTime_s(m, h100, dp4, 5 * 2048, 5, cal),
                   PrefillTime_s(m, h100, one, 2 * 2048, 2, cal));
}

TEST(PrefillTime, AttentionDpRanksMeetAtTheExperts) {
  // Qwen3-30B-A3B over 4 attention-DP ranks with its experts over ep 4:
  // each rank prefills its own prompt, but every rank's tokens reach the
  // routed experts, so 4 prompts take longer than 1 and less than 4 one
  // after another.
  const ModelSpec m = Preset("qwen3-30b-a3b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.attention_dp = 4;
  c.ep = 4;
  const double one = PrefillTime_s(m, h100, c, 2048, 1, cal);
  const double four = PrefillTime_s(m, h100, c, 4 * 2048, 4, cal);
  EXPECT_GT(four, one);
  EXPECT_LT(four, 4 * one);
}

TEST(ChunkContextTime, EveryAttentionLayersChunkByPriorBlock) {
  // LLaMA-3 8B at tp 2: 32 attention layers of 32 / 2 = 16 heads of 128.
  // A 4096-token chunk against the 8192 tokens before it: 32 blocks of
  // 4096 x 8192 keys, not causal; nothing without earlier tokens.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.tp = 2;
  // Serving prices kernels without the training steps' efficiency
  // discount (docs/serving.md §3).
  ModelOptions serving;
  serving.Disable(Refinement::kTrainingKernelEfficiency);
  const double block =
      cal.AttentionForwardTime_s(16, 4096, 8192, 128, false, serving);
  EXPECT_NEAR(ChunkContextTime_s(m, c, 4096, 8192, cal), 32 * block, 1e-15);
  EXPECT_DOUBLE_EQ(ChunkContextTime_s(m, c, 4096, 0, cal), 0.0);
  // A 16384-token prompt at one client, in two passes of the 8192-token
  // budget: the second pass adds its chunk's block, so the calendar's TTFT
  // is within 5 % of the prompt prefilled whole (a second step overhead and
  // two GEMM passes), where without it the second chunk's attention would
  // be that of a prompt of its own.
  const ServingEstimate bench =
      EstimateClosedLoopBenchmark(m, h100, {16384, 2, 0}, c, 2, 1, 1, 0, cal);
  const double pass = PrefillTime_s(m, h100, c, 8192, 1, cal);
  EXPECT_NEAR(bench.ttft_s,
              2 * (StepOverhead_s(c.engine) + pass) +
                  ChunkContextTime_s(m, c, 8192, 8192, cal),
              1e-12);
  const double whole = PrefillTime_s(m, h100, c, 16384, 1, cal);
  EXPECT_NEAR(bench.ttft_s / whole, 1.0, 0.05);
  // The closed form counts the same two passes, each with the step
  // overhead, around the prompt prefilled whole: within 3 % of the
  // calendar.
  const ServingEstimate closed =
      EstimateServing(m, h100, {16384, 2, 1}, c, 2, cal);
  EXPECT_NEAR(closed.ttft_s, 2 * StepOverhead_s(c.engine) + whole, 1e-12);
  EXPECT_NEAR(closed.ttft_s / bench.ttft_s, 1.0, 0.03);
}

TEST(PromptsPrefillTime, ACachedPrefixIsAnEarlierChunk) {
  // LLaMA-3 8B at tp 2 (32 layers of 16 local heads of 128), prompts of
  // 4096 tokens whose first 3072 are cached: the prefill computes 1024 new
  // tokens each and their queries against the 3072 cached keys, a 1024 x
  // 3072 block per layer and prompt, not causal.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ModelOptions serving;
  serving.Disable(Refinement::kTrainingKernelEfficiency);
  const double block =
      cal.AttentionForwardTime_s(16, 1024, 3072, 128, false, serving);
  ServingConfig c;
  c.tp = 2;
  EXPECT_NEAR(PromptsPrefillTime_s(m, h100, c, 4096, 3072, 4, cal),
              PrefillTime_s(m, h100, c, 4 * 1024, 4, cal) + 4 * 32 * block,
              1e-12);
  EXPECT_DOUBLE_EQ(PromptsPrefillTime_s(m, h100, c, 4096, 0, 4, cal),
                   PrefillTime_s(m, h100, c, 4 * 4096, 4, cal));
  // Four attention-DP ranks and five prompts: the busiest rank runs two.
  ServingConfig dp4 = c;
  dp4.attention_dp = 4;
  EXPECT_NEAR(PromptsPrefillTime_s(m, h100, dp4, 4096, 3072, 5, cal),
              PrefillTime_s(m, h100, dp4, 5 * 1024, 5, cal) + 2 * 32 * block,
              1e-12);
  // Two pipeline stages of 16 layers each: the block on all 32.
  ServingConfig pp2 = c;
  pp2.pp = 2;
  EXPECT_NEAR(PromptsPrefillTime_s(m, h100, pp2, 4096, 3072, 1, cal),
              PrefillTime_s(m, h100, pp2, 1024, 1, cal) + 32 * block, 1e-12);
  // Three quarters of the prompt cached save most of its prefill: the
  // GEMMs run on a quarter of the tokens, the attention on 1024 x 4096
  // keys of a causal 4096 x 4096.
  EXPECT_LT(PromptsPrefillTime_s(m, h100, c, 4096, 3072, 1, cal),
            0.35 * PrefillTime_s(m, h100, c, 4096, 1, cal));
}

TEST(ChunkContextTime, WindowedLayersSeeTheirWindow) {
  // GPT-OSS 20B: 24 layers of 64 heads of 64, every other one a 128-token
  // window (window_size 127). Under vLLM (which keeps the window) a chunk of
  // 4096 against 8192 earlier tokens costs 12 full blocks and 12 of 4096 x
  // 128 keys; under TensorRT-LLM (which keeps the whole context unless told)
  // 24 full blocks.
  const ModelSpec m = Preset("gpt-oss-20b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ModelOptions serving;
  serving.Disable(Refinement::kTrainingKernelEfficiency);
  ServingConfig vllm;
  vllm.weights = Precision::kFp8;
  const double full =
      cal.AttentionForwardTime_s(64, 4096, 8192, 64, false, serving);
  const double windowed =
      cal.AttentionForwardTime_s(64, 4096, 128, 64, false, serving);
  EXPECT_NEAR(ChunkContextTime_s(m, vllm, 4096, 8192, cal),
              12 * full + 12 * windowed, 1e-15);
  ServingConfig trt = vllm;
  trt.engine = search_spaces::ServingEngine::kTensorRtLlm;
  EXPECT_NEAR(ChunkContextTime_s(m, trt, 4096, 8192, cal), 24 * full, 1e-15);
  // The prompt's own attention the same way: a 16 384-token prefill costs
  // vLLM less than TensorRT-LLM by 12 layers' causal attention over 16 384
  // tokens less their windowed 16 384 x 128 blocks (the engines' step
  // overheads do not enter PrefillTime_s).
  const double causal =
      cal.AttentionForwardTime_s(64, 16384, 16384, 64, true, serving);
  const double band =
      cal.AttentionForwardTime_s(64, 16384, 128, 64, false, serving);
  EXPECT_NEAR(PrefillTime_s(m, h100, trt, 16384, 1, cal) -
                  PrefillTime_s(m, h100, vllm, 16384, 1, cal),
              12 * (causal - band), 1e-9);
}

}  // namespace
}  // namespace meshtune::costmodel
