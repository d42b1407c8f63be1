// Parameter counts and FLOPs of MLA, fine-grained/shared/latent MoE, MTP and
// hybrid Mamba models against the derived numbers of
// docs/sources.md (§1.6 totals and actives, §3.4 FLOPs
// per token) and per-layer formulas worked out by hand (§4.2).
//
// The specs are built here from the §1 tables (not from the preset YAMLs),
// so a wrong preset cannot hide a wrong formula.
#include <gtest/gtest.h>

#include <string>

#include "costmodel/model_stats.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::Activation;
using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::Normalization;
using search_spaces::PositionEmbedding;

// LLaMA-style base: RMSNorm, SwiGLU, RoPE, untied, no biases.
ModelSpec Base(const std::string& name, int64_t layers, int64_t hidden,
               int64_t heads, int64_t groups, int64_t head_dim, int64_t ffn,
               int64_t vocab) {
  ModelSpec m;
  m.name = name;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = head_dim;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.seq_length = 4096;
  m.normalization = Normalization::kRMSNorm;
  m.activation = Activation::kSwiglu;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.untie_embeddings_and_output_weights = true;
  return m;
}

std::vector<uint8_t> Freq(const std::string& expr) {
  return search_spaces::ParseMoeLayerFreq(expr).value();
}

// §1.1-1.3: DeepSeek-V3 (MLA, first 3 dense, 1 shared expert, 1 MTP depth).
ModelSpec DeepSeekV3() {
  ModelSpec m = Base("deepseek-v3", 61, 7168, 128, 128, 128, 18432, 129280);
  m.num_experts = 256;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 2048;
  m.moe_layer_pattern = Freq("([0]*3+[1]*58)");
  m.moe_shared_expert_intermediate_size = 2048;
  m.moe_router_score_function = search_spaces::RouterScore::kSigmoid;
  m.moe_router_num_groups = 8;
  m.moe_router_group_topk = 4;
  m.moe_router_enable_expert_bias = true;
  m.multi_latent_attention = true;
  m.qk_layernorm = true;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_head_dim = 128;
  m.qk_pos_emb_head_dim = 64;
  m.v_head_dim = 128;
  m.mtp_num_layers = 1;
  return m;
}

// §1.1-1.3: Kimi-K2 (DeepSeek-V3 shape, 64 heads, 384 experts, 1 dense).
ModelSpec KimiK2() {
  ModelSpec m = DeepSeekV3();
  m.name = "kimi-k2";
  m.num_attention_heads = 64;
  m.num_query_groups = 64;
  m.vocab_size = 163840;
  m.num_experts = 384;
  m.moe_layer_pattern = Freq("([0]*1+[1]*60)");
  m.moe_router_num_groups = 0;
  m.moe_router_group_topk = 0;
  m.mtp_num_layers = 0;
  return m;
}

// §1.1-1.2: Qwen3 MoE (GQA with 128-wide heads, QK norm, all layers MoE).
ModelSpec Qwen3(int64_t layers, int64_t hidden, int64_t heads, int64_t ffn,
                int64_t expert_ffn) {
  ModelSpec m = Base("qwen3-moe", layers, hidden, heads, 4, 128, ffn, 151936);
  m.qk_layernorm = true;
  m.num_experts = 128;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = expert_ffn;
  return m;
}
ModelSpec Qwen3_235bA22b() { return Qwen3(94, 4096, 64, 12288, 1536); }
ModelSpec Qwen3_30bA3b() { return Qwen3(48, 2048, 32, 6144, 768); }

// §1.1, 1.2, 1.5: GPT-OSS (biases, clamped gated quick-GELU, 128-token
// windows on odd layers).
ModelSpec GptOss(int64_t layers, int64_t experts) {
  ModelSpec m = Base("gpt-oss", layers, 2880, 64, 8, 64, 2880, 201088);
  m.activation = Activation::kQuickGeglu;
  m.add_bias_linear = true;
  m.num_experts = experts;
  m.moe_router_topk = 4;
  m.moe_ffn_hidden_size = 2880;
  m.window_size = 127;
  m.window_attn_skip_freq = 2;
  return m;
}

// §1.1-1.2: Llama 4 (1 shared expert, top-1).
ModelSpec Llama4Maverick() {
  ModelSpec m = Base("llama4-maverick", 48, 5120, 40, 8, 128, 16384, 202048);
  m.num_experts = 128;
  m.moe_router_topk = 1;
  m.moe_ffn_hidden_size = 8192;
  m.moe_shared_expert_intermediate_size = 8192;
  m.moe_layer_pattern = Freq("([0,1]*24)");
  return m;
}
ModelSpec Llama4Scout() {
  ModelSpec m = Llama4Maverick();
  m.name = "llama4-scout";
  // Scout normalises q and k (§1.5); NVIDIA's Megatron line passes
  // --qk-layernorm, which builds two learnable norms of 128 per layer.
  m.qk_layernorm = true;
  m.num_experts = 16;
  m.moe_layer_pattern.clear();  // every layer MoE
  return m;
}

// §1.4: hybrid Nemotron models (squared ReLU, no positions, no biases).
ModelSpec Nemotron(const std::string& pattern, int64_t layers, int64_t hidden,
                   int64_t heads, int64_t groups, int64_t ffn,
                   int64_t mamba_heads) {
  ModelSpec m =
      Base("nemotron", layers, hidden, heads, groups, 128, ffn, 131072);
  m.activation = Activation::kSquaredRelu;
  m.position_embedding_type = PositionEmbedding::kNone;
  m.hybrid_layer_pattern = pattern;
  m.mamba_num_heads = mamba_heads;
  m.mamba_head_dim = 64;
  m.mamba_state_dim = 128;
  m.mamba_num_groups = 8;
  return m;
}

ModelSpec Nemotron3Nano() {
  ModelSpec m = Nemotron("MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
                         52, 2688, 32, 2, 1856, 64);
  m.num_experts = 128;
  m.moe_router_topk = 6;
  m.moe_shared_expert_intermediate_size = 3712;
  return m;
}

// Latent MoE, MTP pattern "*E" twice (NVIDIA's --mtp-num-layers 2).
ModelSpec Nemotron3Super() {
  ModelSpec m = Nemotron(
      "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*"
      "EMEMEMEM*EMEMEMEME/*E/*E",
      88, 4096, 32, 2, 2688, 128);
  m.num_experts = 512;
  m.moe_router_topk = 22;
  m.moe_latent_size = 1024;
  m.moe_shared_expert_intermediate_size = 5376;
  m.mtp_num_layers = 2;
  m.mtp_use_repeated_layer = true;
  return m;
}

ModelSpec NemotronH8b() {
  return Nemotron("M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", 52,
                  4096, 32, 8, 21504, 128);
}

ModelStats Stats(const ModelSpec& m) {
  EXPECT_TRUE(m.Validate().ok()) << m.Validate().message();
  return ComputeModelStats(m, PaddedVocabSize(m.vocab_size, 1), m.seq_length);
}

// Megatron FLOPs per token of one sequence at s = 4096 (§3.4 setting), in
// GFLOP; checked within half a unit of §3.4's last digit.
double MegatronGflopsPerToken(const ModelSpec& m) {
  return ModelFlopsPerStep(m, 1, 4096, PaddedVocabSize(m.vocab_size, 1)) /
         4096 / 1e9;
}

// Counts are checked against §1.6 within half a unit of the last digit
// given there (0.05B on 671.0B), far inside the 1 % bar.

TEST(ModelStatsMoe, VocabPaddingOfTheNewModels) {
  EXPECT_EQ(PaddedVocabSize(129280, 1), 129280);  // DeepSeek-V3
  EXPECT_EQ(PaddedVocabSize(151936, 1), 151936);  // Qwen3
  EXPECT_EQ(PaddedVocabSize(202048, 1), 202112);  // Llama 4: 1578.5·128
}

TEST(ModelStatsMoe, DeepSeekV3MlaLayersByHand) {
  const ModelSpec m = DeepSeekV3();
  // One MLA layer, h = 7168, 128 heads, q_lora 1536, kv_lora 512,
  // d_nope 128, d_rope 64, d_v 128:
  //   replicated: q down 7168·1536 = 11010048, q norm 1536,
  //     kv down 7168·(512+64) = 4128768, kv norm 512, two layer norms
  //     2·7168 = 14336                                   -> 15155200
  //   TP-sharded: q up 1536·128·192 = 37748736, kv up 512·128·256 =
  //     16777216, out 128·128·7168 = 117440512           -> 171966464
  //   dense MLP (layers 0-2): 3·7168·18432 = 396361728 TP-sharded.
  const LayerParams dense = ParamsOfLayer(m, {Mixer::kMla, Mlp::kDense});
  EXPECT_DOUBLE_EQ(dense.replicated, 15155200.0);
  EXPECT_DOUBLE_EQ(dense.tp_sharded, 171966464.0 + 396361728.0);
  EXPECT_DOUBLE_EQ(dense.routed_experts, 0.0);
  // MoE layer: router 256·7168 = 1835008 replicated; shared expert
  // 3·7168·2048 = 44040192 TP-sharded; 256 routed experts
  // 256·3·7168·2048 = 11274289152.
  const LayerParams moe = ParamsOfLayer(m, {Mixer::kMla, Mlp::kMoe});
  EXPECT_DOUBLE_EQ(moe.replicated, 15155200.0 + 1835008.0);
  EXPECT_DOUBLE_EQ(moe.tp_sharded, 171966464.0 + 44040192.0);
  EXPECT_DOUBLE_EQ(moe.routed_experts, 11274289152.0);
  // MTP glue: 3 norms 3·7168, eh_proj 2·7168² = 102760448.
  const LayerParams glue = MtpGlueParams(m);
  EXPECT_DOUBLE_EQ(glue.replicated, 21504.0);
  EXPECT_DOUBLE_EQ(glue.tp_sharded, 102760448.0);
}

TEST(ModelStatsMoe, DeepSeekV3TotalActiveAndMtp) {
  // §1.6: 671.0B total, 37.6B active (both embeddings), MTP module 11.6B.
  const ModelStats st = Stats(DeepSeekV3());
  EXPECT_NEAR(st.total_params / 1e9, 671.0, 0.05);
  EXPECT_NEAR(st.active_params / 1e9, 37.6, 0.05);
  EXPECT_NEAR(st.mtp_params / 1e9, 11.6, 0.05);
  // The old per-layer fields: one expert 3·7168·2048, router h·E.
  EXPECT_DOUBLE_EQ(st.expert_params, 3.0 * 7168 * 2048);
  EXPECT_DOUBLE_EQ(st.router_params, 7168.0 * 256);
  EXPECT_DOUBLE_EQ(st.attention_params, 15140864.0 + 171966464.0);
}

TEST(ModelStatsMoe, KimiK2) {
  // §1.6: 1026B / 32.9B.
  const ModelStats st = Stats(KimiK2());
  EXPECT_NEAR(st.total_params / 1e9, 1026, 0.5);
  EXPECT_NEAR(st.active_params / 1e9, 32.9, 0.05);
  EXPECT_EQ(st.mtp_params, 0.0);
}

TEST(ModelStatsMoe, Qwen3) {
  // §1.6: 235.1B / 22.2B and 30.5B / 3.35B (QK norm, kv_channels 128 with
  // a 4096-wide query projection on h = 2048 for the 30B).
  const ModelStats big = Stats(Qwen3_235bA22b());
  EXPECT_NEAR(big.total_params / 1e9, 235.1, 0.05);
  EXPECT_NEAR(big.active_params / 1e9, 22.2, 0.05);
  const ModelStats small = Stats(Qwen3_30bA3b());
  EXPECT_NEAR(small.total_params / 1e9, 30.5, 0.05);
  EXPECT_NEAR(small.active_params / 1e9, 3.35, 0.005);
}

TEST(ModelStatsMoe, GptOssBiasesByHand) {
  const ModelSpec m = GptOss(36, 128);
  // Attention, h = 2880, 64 heads × 64, 8 groups: q 4096, kv 512.
  //   QKV 2880·(4096 + 1024) + out 4096·2880 = 26542080, QKV bias 5120
  //   sharded; out bias 2880 + two norms 2·2880 replicated.
  // Experts (gated, biased): 128·(3·2880·2880 + 2·2880 + 2880) =
  //   128·24891840. Router 128·2880 replicated.
  const LayerParams p = ParamsOfLayer(m, {Mixer::kAttention, Mlp::kMoe});
  EXPECT_DOUBLE_EQ(p.tp_sharded, 26542080.0 + 5120.0);
  EXPECT_DOUBLE_EQ(p.replicated, 2880.0 * 3 + 128.0 * 2880);
  EXPECT_DOUBLE_EQ(p.routed_experts, 128.0 * 24891840.0);
}

TEST(ModelStatsMoe, GptOss) {
  // §1.6: 116.8B / 5.71B and 20.9B / 4.19B.
  const ModelStats big = Stats(GptOss(36, 128));
  EXPECT_NEAR(big.total_params / 1e9, 116.8, 0.05);
  EXPECT_NEAR(big.active_params / 1e9, 5.71, 0.005);
  const ModelStats small = Stats(GptOss(24, 32));
  EXPECT_NEAR(small.total_params / 1e9, 20.9, 0.05);
  EXPECT_NEAR(small.active_params / 1e9, 4.19, 0.005);
}

TEST(ModelStatsMoe, Llama4) {
  // §1.6: Maverick 400.7B / 17.2B (24 dense layers with F = 16384, MoE on
  // odd layers), Scout 107.8B / 17.2B.
  const ModelStats mav = Stats(Llama4Maverick());
  EXPECT_NEAR(mav.total_params / 1e9, 400.7, 0.05);
  EXPECT_NEAR(mav.active_params / 1e9, 17.2, 0.05);
  const ModelStats scout = Stats(Llama4Scout());
  EXPECT_NEAR(scout.total_params / 1e9, 107.8, 0.05);
  EXPECT_NEAR(scout.active_params / 1e9, 17.2, 0.05);
}

TEST(ModelStatsMoe, NemotronMambaAndLatentLayersByHand) {
  // Nemotron 3 Nano Mamba layer: h = 2688, 64 heads × 64 (d_inner 4096),
  // G·N = 8·128 = 1024, conv 4:
  //   in_proj 2688·(2·4096 + 2·1024 + 64) = 27697152
  //   conv1d (4096 + 2048)·(4 + 1) = 30720, dt/A/D 3·64 = 192,
  //   gated norm 4096, out_proj 4096·2688 = 11010048  -> 38742208 sharded;
  //   its pre-norm 2688 replicated.
  const LayerParams mamba =
      ParamsOfLayer(Nemotron3Nano(), {Mixer::kMamba, Mlp::kNone});
  EXPECT_DOUBLE_EQ(mamba.tp_sharded, 38742208.0);
  EXPECT_DOUBLE_EQ(mamba.replicated, 2688.0);
  // Nemotron 3 Super latent-MoE layer (squared ReLU, 2 GEMMs): experts
  // 512·2·1024·2688 = 2818572288; router 512·4096 = 2097152, latent
  // projections 2·4096·1024 = 8388608 and the norm 4096 replicated; shared
  // expert 2·4096·5376 = 44040192 sharded.
  const LayerParams moe =
      ParamsOfLayer(Nemotron3Super(), {Mixer::kNone, Mlp::kMoe});
  EXPECT_DOUBLE_EQ(moe.routed_experts, 2818572288.0);
  EXPECT_DOUBLE_EQ(moe.replicated, 2097152.0 + 8388608.0 + 4096.0);
  EXPECT_DOUBLE_EQ(moe.tp_sharded, 44040192.0);
  // A hybrid attention layer has one norm: GQA 4096·(4096 + 512) +
  // 4096·4096 sharded.
  const LayerParams attn =
      ParamsOfLayer(Nemotron3Super(), {Mixer::kAttention, Mlp::kNone});
  EXPECT_DOUBLE_EQ(attn.tp_sharded, 4096.0 * 4608 + 4096.0 * 4096);
  EXPECT_DOUBLE_EQ(attn.replicated, 4096.0);
}

TEST(ModelStatsMoe, Nemotron3SuperMatchesTheExportedElementCount) {
  // §1.6: 120.7B main model, active 12.8B; the HF export (main + one MTP
  // block) has 123,611,033,088 elements including 41 FP32 router-bias
  // buffers of 512 (not parameters in Megatron).
  const ModelSpec m = Nemotron3Super();
  const ModelStats st = Stats(m);
  EXPECT_NEAR(st.total_params / 1e9, 120.7, 0.05);
  EXPECT_NEAR(st.active_params / 1e9, 12.8, 0.05);
  // Its two depths share that one block (--mtp-use-repeated-layer): the
  // MTP weights are one block's; two blocks without the flag.
  const double one_block = st.mtp_params;
  EXPECT_NEAR(one_block / 1e9, 2.94, 0.005);
  EXPECT_DOUBLE_EQ(st.total_params + one_block, 123611033088.0 - 41 * 512);
  ModelSpec two = m;
  two.mtp_use_repeated_layer = false;
  EXPECT_DOUBLE_EQ(Stats(two).mtp_params, 2 * one_block);
}

TEST(ModelStatsMoe, Nemotron3NanoAndNemotronH8b) {
  // §1.6: Nano 31.6B / 3.58B; Nemotron-H-8B 8.10B (dense hybrid).
  const ModelStats nano = Stats(Nemotron3Nano());
  EXPECT_NEAR(nano.total_params / 1e9, 31.6, 0.05);
  EXPECT_NEAR(nano.active_params / 1e9, 3.58, 0.005);
  const ModelStats h8 = Stats(NemotronH8b());
  EXPECT_NEAR(h8.total_params / 1e9, 8.10, 0.005);
  EXPECT_EQ(h8.active_params, h8.total_params);
}

// ---- FLOPs.

TEST(ModelFlopsMoe, DeepSeekV3WithMtpIs260GflopPerToken) {
  // §3.4: ≈ 1.065e15 per 4096-token sequence ≈ 260 GFLOP per token.
  const ModelSpec m = DeepSeekV3();
  EXPECT_NEAR(MegatronGflopsPerToken(m), 260, 0.5);
  EXPECT_NEAR(ModelFlopsPerStep(m, 1, 4096, 129280) / 1e15, 1.065, 5e-4);
}

TEST(ModelFlopsMoe, Qwen3_235bIs148GflopPerToken) {
  EXPECT_NEAR(MegatronGflopsPerToken(Qwen3_235bA22b()), 148, 0.5);
}

TEST(ModelFlopsMoe, Nemotron3NanoIs21_7GflopPerTokenWithMegatronsQuirk) {
  // §3.4: the hybrid branch with d_inner = 2h (5376, not 64·64 = 4096).
  const ModelSpec m = Nemotron3Nano();
  EXPECT_NEAR(MegatronGflopsPerToken(m), 21.7, 0.05);
  // The true count runs the Mamba projections at 4096 and adds the router:
  // per token and Mamba layer 6·2688·(2·1280) (in_proj: 2·(5376 − 4096))
  // + 6·1280·2688 (out_proj) + 3·7·1280·128 (scan) fewer, 6·2688·128 more
  // per MoE layer (23 of each).
  const double h = 2688, dd = 5376 - 4096;
  const double mamba_less = 6 * h * 2 * dd + 6 * dd * h + 3 * 7 * dd * 128;
  const double router_more = 6 * h * 128;
  const double diff = (ModelFlopsPerStep(m, 1, 4096, 131072) -
                       TrueModelFlopsPerStep(m, 1, 4096, 131072)) /
                      4096;
  EXPECT_NEAR(diff, 23 * (mamba_less - router_more), 1e-3);
}

TEST(ModelFlopsMoe, TrueCountAddsTheRouterGemm) {
  // Qwen3-235B has no windows, MLA or Mamba and SwiGLU: the two counts
  // differ by the router GEMM 6·h·E per token and layer.
  const ModelSpec m = Qwen3_235bA22b();
  const double diff = (TrueModelFlopsPerStep(m, 2, 4096, 151936) -
                       ModelFlopsPerStep(m, 2, 4096, 151936)) /
                      (2 * 4096);
  EXPECT_NEAR(diff, 6.0 * 4096 * 128 * 94, 1e-3);
}

// A tiny GQA model: L = 2, h = 64, 4 heads × 16, f = 256 (GeLU), V = 128.
ModelSpec Tiny() {
  ModelSpec m = Base("tiny", 2, 64, 4, 4, 16, 256, 128);
  m.activation = Activation::kGelu;
  return m;
}

TEST(ModelFlopsMoe, SlidingWindowByHand) {
  // Window 3 (each query sees itself + 3 back), full attention on layer 2
  // (skip freq 2), s = 8, B = 1.
  //   linear per token (fwd): attention 2·(64·192 + 64·64) = 32768 and MLP
  //     2·2·64·256 = 65536 per layer, logits 2·64·128 = 16384
  //     -> 212992 per token, 1703936 for 8 tokens;
  //   pairs: layer 1 min(32, 4·(8 − 1.5)) = 26, layer 2 8²/2 = 32, each at
  //     4·n·d = 256 FLOPs -> 14848.
  //   true = 3·(1703936 + 14848) = 5156352.
  //   Megatron counts both layers full: 3·1703936 + 6·64·64·2 = 5160960.
  ModelSpec m = Tiny();
  m.window_size = 3;
  m.window_attn_skip_freq = 2;
  EXPECT_DOUBLE_EQ(TrueModelFlopsPerStep(m, 1, 8, 128), 5156352.0);
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(m, 1, 8, 128), 5160960.0);
  // Selective recompute: forward core attention, 256·(26 + 32) true,
  // 256·64 Megatron.
  EXPECT_DOUBLE_EQ(SelectiveRecomputeFlopsPerStep(m, 1, 8, FlopCount::kTrue),
                   14848.0);
  EXPECT_DOUBLE_EQ(SelectiveRecomputeFlopsPerStep(m, 1, 8), 16384.0);
}

TEST(ModelFlopsMoe, LatentMoeByHand) {
  // One GPT layer, E = 4, k = 2, f_e = 32, latent 16, GeLU (2 GEMMs),
  // s = 8, V = 128. Megatron: routed = f_e·k·2·λ/h + 2λ = 32 + 32 = 64,
  // MLP 6·64·64 = 24576; attention 6·(64·192 + 64·64) = 98304; logits
  // 6·64·128 = 49152 -> 172032 per token, ×8 = 1376256; core 6·64·64 =
  // 24576. Total 1400832.
  ModelSpec m = Tiny();
  m.num_layers = 1;
  m.num_experts = 4;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 32;
  m.moe_latent_size = 16;
  ASSERT_TRUE(m.Validate().ok()) << m.Validate().message();
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(m, 1, 8, 128), 1400832.0);
  // True: the same GEMMs plus the router 6·64·4 = 1536 per token.
  EXPECT_DOUBLE_EQ(TrueModelFlopsPerStep(m, 1, 8, 128), 1400832.0 + 8 * 1536);
}

TEST(ModelFlopsMoe, HybridMambaByHand) {
  // Pattern "M*", h = 64, 4 heads × 16, Mamba 2 heads × 16 (d_inner 32),
  // 1 group, state 8, s = 8, B = 1, V = 128.
  // Megatron (d_in = 2h = 128, 2 heads): attention 4·8·64·1·(64 + 64) +
  //   2·64·64 = 270336; Mamba 2·8·64·(256 + 16 + 2) + 7·8·128·8 +
  //   2·8·128·64 = 468992; logits 2·8·64·128 = 131072; ×3 = 2611200.
  // True (d_inner 32): Mamba 2·(64·(64 + 16 + 2) + 32·64) + 7·32·8 = 16384,
  //   attention 2·(64·192 + 64·64) = 32768, logits 16384 per token
  //   -> 524288; core 32 pairs · 256 = 8192; ×3 = 1597440.
  ModelSpec m = Tiny();
  m.hybrid_layer_pattern = "M*";
  m.mamba_num_heads = 2;
  m.mamba_head_dim = 16;
  m.mamba_num_groups = 1;
  m.mamba_state_dim = 8;
  ASSERT_TRUE(m.Validate().ok()) << m.Validate().message();
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(m, 1, 8, 128), 2611200.0);
  EXPECT_DOUBLE_EQ(TrueModelFlopsPerStep(m, 1, 8, 128), 1597440.0);
  // Full recompute: one forward without the logits: (2611200 − 3·131072)/3.
  EXPECT_DOUBLE_EQ(FullRecomputeFlopsPerStep(m, 1, 8, 1.0), 739328.0);
}

TEST(ModelFlopsMoe, MlaInHybridIsGqaForMegatronAndMlaForTheTrueCount) {
  // A hybrid "*-" model with MLA: Megatron's hybrid branch counts the GQA
  // form (4 heads × kv_channels 16); the true count the MLA projections.
  ModelSpec m = Tiny();
  m.hybrid_layer_pattern = "*-";
  m.multi_latent_attention = true;
  m.q_lora_rank = 0;
  m.kv_lora_rank = 32;
  m.qk_head_dim = 16;
  m.qk_pos_emb_head_dim = 8;
  m.v_head_dim = 16;
  m.mamba_num_groups = 1;  // Validate checks Mamba sizes on every hybrid
  ASSERT_TRUE(m.Validate().ok()) << m.Validate().message();
  // Megatron: attention 4·8·64·(64 + 64) + 2·64·64 = 270336; MLP
  //   4·4·8·64² = 524288; logits 131072; ×3 = 2777088.
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(m, 1, 8, 128), 2777088.0);
  // True, per token: q 64·4·24 = 6144, kv down 64·(32 + 8) = 2560, kv up
  //   32·4·32 = 4096, out 4·16·64 = 4096 -> 2·16896 = 33792; MLP
  //   2·2·64·256 = 65536; logits 16384 -> 115712, ×8 = 925696; core
  //   32 pairs · 2·4·(24 + 16) = 320 -> 10240. ×3 = 2807808.
  EXPECT_DOUBLE_EQ(TrueModelFlopsPerStep(m, 1, 8, 128), 2807808.0);
}

TEST(RecomputeFlopsMoe, SelectiveCountsMlaAndMtpAndOnlyAttentionLayers) {
  // DeepSeek-V3: 61 + 1 MTP MLA layers, forward core attention
  // s²/2 · 2·128·(192 + 128) each.
  const double s = 4096;
  EXPECT_DOUBLE_EQ(SelectiveRecomputeFlopsPerStep(DeepSeekV3(), 1, 4096),
                   s * s / 2 * 2 * 128 * 320 * 62);
  // Nemotron 3 Nano: 6 attention layers of 32 heads × 128.
  EXPECT_DOUBLE_EQ(SelectiveRecomputeFlopsPerStep(Nemotron3Nano(), 2, 4096),
                   2 * s * s / 2 * 4 * 32 * 128 * 6);
}

TEST(ModelFlopsMoe, GptOssMegatronCountsTwoMlpGemmsAndFullAttention) {
  // Megatron keys the MLP factor on --swiglu, so GPT-OSS's gated
  // quick-GELU counts 2 GEMMs, and its windowed layers count in full. The
  // true count has 3 GEMMs, the router, and 18 of 36 layers over 128 keys.
  const ModelSpec m = GptOss(36, 128);
  const double s = 4096, h = 2880;
  const double per_token_diff = 36 * 6 * h * (4 * 2880 + 128);  // k·f_e + E
  const double window_pairs = 128 * (s - 127.0 / 2);
  const double core_diff = 18 * 3 * (s * s / 2 - window_pairs) * 4 * 64 * 64;
  EXPECT_NEAR(TrueModelFlopsPerStep(m, 1, 4096, 201088) -
                  ModelFlopsPerStep(m, 1, 4096, 201088),
              s * per_token_diff - core_diff, 1e3);
}

// ---- The preset YAMLs describe the same models as the tables above.

struct PresetCase {
  const char* preset;
  ModelSpec (*table)();
};

ModelSpec GptOss120b() { return GptOss(36, 128); }
ModelSpec GptOss20b() { return GptOss(24, 32); }

class PresetMatchesTable : public ::testing::TestWithParam<PresetCase> {};

TEST_P(PresetMatchesTable, SameCountsAndFlops) {
  const auto preset = search_spaces::ResolveModel(GetParam().preset);
  ASSERT_TRUE(preset.ok()) << preset.status().message();
  const ModelSpec table = GetParam().table();
  const ModelStats a = Stats(*preset);
  const ModelStats b = Stats(table);
  EXPECT_DOUBLE_EQ(a.total_params, b.total_params);
  EXPECT_DOUBLE_EQ(a.active_params, b.active_params);
  EXPECT_DOUBLE_EQ(a.mtp_params, b.mtp_params);
  const int64_t vocab = PaddedVocabSize(table.vocab_size, 1);
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(*preset, 1, 4096, vocab),
                   ModelFlopsPerStep(table, 1, 4096, vocab));
  EXPECT_DOUBLE_EQ(TrueModelFlopsPerStep(*preset, 1, 4096, vocab),
                   TrueModelFlopsPerStep(table, 1, 4096, vocab));
}

INSTANTIATE_TEST_SUITE_P(
    ModelStatsMoe, PresetMatchesTable,
    ::testing::Values(PresetCase{"deepseek-v3", DeepSeekV3},
                      PresetCase{"kimi-k2", KimiK2},
                      PresetCase{"qwen3-235b-a22b", Qwen3_235bA22b},
                      PresetCase{"qwen3-30b-a3b", Qwen3_30bA3b},
                      PresetCase{"gpt-oss-120b", GptOss120b},
                      PresetCase{"gpt-oss-20b", GptOss20b},
                      PresetCase{"llama4-maverick", Llama4Maverick},
                      PresetCase{"llama4-scout", Llama4Scout},
                      PresetCase{"nemotron3-nano", Nemotron3Nano},
                      PresetCase{"nemotron3-super", Nemotron3Super},
                      PresetCase{"nemotron-h-8b", NemotronH8b}),
    [](const ::testing::TestParamInfo<PresetCase>& info) {
      std::string name = info.param.preset;
      for (char& c : name) {
        if (c == '-' || c == '.') c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace meshtune::costmodel
