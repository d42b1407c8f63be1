// The 2025-26 presets (fine-grained MoE, MLA, MTP, hybrid Mamba): each loads
// and validates, its layer structure is the published one, its names include
// the dev set's spellings, and its dimensions reproduce the parameter totals
// derived in docs/sources.md §1.6.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "search_spaces/embedded_file.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

const std::vector<std::string>& NewPresets() {
  static const std::vector<std::string> kNames = {
      "deepseek-v3",    "deepseek-v2",     "deepseek-v2-lite", "kimi-k2",
      "qwen3-30b-a3b",  "qwen3-235b-a22b", "gpt-oss-20b",      "gpt-oss-120b",
      "llama4-scout",   "llama4-maverick", "nemotron-h-8b",    "nemotron-h-56b",
      "nemotron3-nano", "nemotron3-super", "nemotron3-ultra"};
  return kNames;
}

ModelSpec Preset(const std::string& name) {
  StatusOr<ModelSpec> m = ResolveModel(name);
  EXPECT_TRUE(m.ok()) << name << ": " << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

// Parameters of the main model (MTP excluded) by the per-layer formulas of
// docs/sources.md §4.2, written out here independently of the cost model:
// untied embedding and output layer V·h each, one norm of h per hybrid layer
// and two per GPT layer, the final norm, GPT-OSS biases and attention sinks,
// and one router bias per expert with aux-loss-free balancing. Vocabulary as
// given (the §1.6 totals use the unpadded vocabularies).
double DerivedTotalB(const ModelSpec& m) {
  const double h = m.hidden_size;
  const double n = m.num_attention_heads;
  const double bias = m.has_linear_biases() ? 1 : 0;
  const double up = m.gated_mlp() ? 2 : 1;  // up-projections per MLP
  double attention = 0;
  if (m.multi_latent_attention) {
    const double qk = m.mla_qk_head_dim();
    const double q = m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank +
                                             m.q_lora_rank * n * qk
                                       : h * n * qk;
    attention = q + h * (m.kv_lora_rank + m.qk_pos_emb_head_dim) +
                m.kv_lora_rank +
                m.kv_lora_rank * n * (m.qk_head_dim + m.v_head_dim) +
                n * m.v_head_dim * h;
  } else {
    const double d = m.kv_channels;
    const double g = m.num_query_groups;
    attention = h * (n * d + 2 * g * d) + n * d * h;
    if (m.qk_layernorm) attention += 2 * d;
    // QKV and output biases plus GPT-OSS's learnable softmax offset per head.
    if (bias > 0) attention += n * d + 2 * g * d + h + n;
  }
  auto mlp = [&](double in, double f) {
    return (up + 1) * in * f + bias * (up * f + in);
  };
  const double dense = mlp(h, m.ffn_hidden_size);
  double moe = 0;
  if (m.is_moe()) {
    const double e = m.num_experts;
    const double in = m.moe_latent_size > 0 ? m.moe_latent_size : h;
    moe = e * mlp(in, m.expert_ffn_hidden_size()) + e * h + bias * e +
          (m.moe_router_enable_expert_bias ? e : 0) +
          (up + 1) * h * m.moe_shared_expert_intermediate_size +
          2 * h * m.moe_latent_size;
  }
  const double p = m.mamba_head_dim;
  const double heads = m.mamba_heads();
  const double gn = m.mamba_num_groups * m.mamba_state_dim;
  const double mamba = h * (2 * heads * p + 2 * gn + heads) +
                       (heads * p + 2 * gn) * (m.mamba_conv_kernel + 1) +
                       3 * heads + heads * p + heads * p * h;
  double total = 2.0 * m.vocab_size * h + h;
  for (const LayerKind& k : m.DecoderLayers()) {
    if (m.is_hybrid()) {
      total += h;  // the block's pre-norm
    } else {
      total += 2 * h;  // input and pre-MLP norms
    }
    if (k.mixer == Mixer::kAttention || k.mixer == Mixer::kMla) {
      total += attention;
    }
    if (k.mixer == Mixer::kMamba) total += mamba;
    if (k.mlp == Mlp::kDense) total += dense;
    if (k.mlp == Mlp::kMoe) total += moe;
  }
  return total / 1e9;
}

TEST(NewPresetsTest, EachLoadsFromItsFileAndValidates) {
  std::map<std::string, int> files;
  for (const EmbeddedFile& f : EmbeddedPresetFiles()) ++files[f.path];
  for (const std::string& name : NewPresets()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(files["models/" + name + ".yaml"], 1);
    const ModelSpec m = Preset(name);
    EXPECT_EQ(m.name, name);
    EXPECT_TRUE(m.Validate().ok()) << m.Validate().message();
    EXPECT_TRUE(m.is_moe() || m.is_hybrid());
    EXPECT_GT(m.global_batch_size, 0);
    EXPECT_GT(m.published_params_b, 0);
    EXPECT_TRUE(m.untie_embeddings_and_output_weights);
    EXPECT_EQ(m.normalization, Normalization::kRMSNorm);
    ASSERT_TRUE(m.add_bias_linear.has_value());
    // Only GPT-OSS keeps linear biases (docs/sources.md §1.5).
    EXPECT_EQ(*m.add_bias_linear, name.rfind("gpt-oss", 0) == 0);
  }
}

// docs/sources.md §1.6 "derived" column: the architecture tables evaluated
// with the §4.2 formulas (MTP excluded).
TEST(NewPresetsTest, DimensionsReproduceDerivedTotals) {
  const std::map<std::string, double> derived_b = {
      {"deepseek-v3", 671.0},     {"deepseek-v2-lite", 15.7},
      {"kimi-k2", 1026},          {"qwen3-30b-a3b", 30.5},
      {"qwen3-235b-a22b", 235.1}, {"gpt-oss-20b", 20.9},
      {"gpt-oss-120b", 116.8},    {"llama4-scout", 107.8},
      {"llama4-maverick", 400.7}, {"nemotron-h-8b", 8.10},
      {"nemotron-h-56b", 56.3},   {"nemotron3-nano", 31.6},
      {"nemotron3-super", 120.7}, {"nemotron3-ultra", 549.3}};
  for (const auto& [name, total_b] : derived_b) {
    SCOPED_TRACE(name);
    EXPECT_NEAR(DerivedTotalB(Preset(name)) / total_b, 1.0, 0.003);
  }
  // DeepSeek-V2 is not in §1.6: the paper's 236B.
  EXPECT_NEAR(DerivedTotalB(Preset("deepseek-v2")) / 236, 1.0, 0.01);
  // Every published count agrees with the architecture (catches typos).
  for (const std::string& name : NewPresets()) {
    SCOPED_TRACE(name);
    const ModelSpec m = Preset(name);
    EXPECT_NEAR(DerivedTotalB(m) / m.published_params_b, 1.0, 0.05);
  }
}

TEST(NewPresetsTest, DeepSeekV3Layers) {
  const ModelSpec m = Preset("deepseek-v3");
  const std::vector<LayerKind> layers = m.DecoderLayers();
  ASSERT_EQ(layers.size(), 61u);
  for (size_t i = 0; i < layers.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(layers[i].mixer, Mixer::kMla);
    EXPECT_EQ(layers[i].mlp, i < 3 ? Mlp::kDense : Mlp::kMoe);
  }
  EXPECT_EQ(m.num_moe_layers(), 58);
  EXPECT_EQ(m.num_dense_layers(), 3);
  EXPECT_EQ(FormatMoeLayerFreq(m.moe_layer_pattern), "([0]*3+[1]*58)");
  EXPECT_EQ(m.mtp_num_layers, 1);
  // One MTP depth = one more layer of the last decoder layer's kind.
  EXPECT_EQ(m.MtpDepthLayers(),
            std::vector<LayerKind>({{Mixer::kMla, Mlp::kMoe}}));
  EXPECT_EQ(m.q_lora_rank, 1536);
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.mla_qk_head_dim(), 192);
  EXPECT_EQ(m.moe_router_score_function, RouterScore::kSigmoid);
  EXPECT_TRUE(m.moe_router_enable_expert_bias);
  EXPECT_EQ(m.moe_router_num_groups, 8);
  EXPECT_EQ(m.moe_router_group_topk, 4);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 2048);
}

TEST(NewPresetsTest, DeepSeekV2AndLite) {
  const ModelSpec v2 = Preset("deepseek-v2");
  EXPECT_EQ(v2.num_moe_layers(), 59);
  EXPECT_FALSE(v2.IsMoeLayer(0));
  EXPECT_EQ(v2.moe_shared_expert_intermediate_size, 2 * 1536);
  EXPECT_EQ(v2.moe_router_num_groups, 8);
  EXPECT_EQ(v2.moe_router_group_topk, 3);
  EXPECT_EQ(v2.moe_router_score_function, RouterScore::kSoftmax);
  EXPECT_EQ(v2.mtp_num_layers, 0);
  const ModelSpec lite = Preset("deepseek-v2-lite");
  EXPECT_EQ(lite.q_lora_rank, 0);  // a full query projection
  EXPECT_EQ(lite.num_moe_layers(), 26);
  EXPECT_EQ(lite.kv_channels, 128);  // v_head_dim; MLA does not use it
}

TEST(NewPresetsTest, Nemotron3NanoPattern) {
  const ModelSpec m = Preset("nemotron3-nano");
  EXPECT_TRUE(m.is_hybrid());
  const std::vector<LayerKind> layers = m.DecoderLayers();
  ASSERT_EQ(layers.size(), 52u);
  const auto count = [&](LayerKind k) {
    return std::count(layers.begin(), layers.end(), k);
  };
  EXPECT_EQ(count({Mixer::kMamba, Mlp::kNone}), 23);
  EXPECT_EQ(count({Mixer::kAttention, Mlp::kNone}), 6);
  EXPECT_EQ(count({Mixer::kNone, Mlp::kMoe}), 23);
  EXPECT_EQ(m.num_moe_layers(), 23);
  EXPECT_EQ(layers.front(), (LayerKind{Mixer::kMamba, Mlp::kNone}));
  EXPECT_EQ(layers[5], (LayerKind{Mixer::kAttention, Mlp::kNone}));
  EXPECT_EQ(m.mamba_heads() * m.mamba_head_dim, 4096);  // != 2h = 5376
  EXPECT_EQ(m.mtp_num_layers, 0);
  EXPECT_TRUE(m.MtpDepthLayers().empty());
}

TEST(NewPresetsTest, Nemotron3SuperMtpFromPattern) {
  const ModelSpec m = Preset("nemotron3-super");
  EXPECT_EQ(m.num_layers, 88);
  EXPECT_EQ(m.num_moe_layers(), 40);
  EXPECT_EQ(m.mtp_num_layers, 2);  // '.../*E/*E'
  EXPECT_EQ(m.MtpDepthLayers(),
            std::vector<LayerKind>(
                {{Mixer::kAttention, Mlp::kNone}, {Mixer::kNone, Mlp::kMoe}}));
  EXPECT_EQ(m.moe_latent_size, 1024);
  EXPECT_EQ(m.expert_ffn_hidden_size(), 2688);
  EXPECT_EQ(m.mamba_heads() * m.mamba_head_dim, 2 * m.hidden_size);
}

TEST(NewPresetsTest, HybridDenseNemotronH) {
  for (const auto& [name, mamba, attention, mlp] :
       std::vector<std::tuple<std::string, int, int, int>>{
           {"nemotron-h-8b", 24, 4, 24}, {"nemotron-h-56b", 54, 10, 54}}) {
    SCOPED_TRACE(name);
    const ModelSpec m = Preset(name);
    const std::vector<LayerKind> layers = m.DecoderLayers();
    EXPECT_EQ(static_cast<int64_t>(layers.size()), m.num_layers);
    EXPECT_EQ(std::count(layers.begin(), layers.end(),
                         LayerKind{Mixer::kMamba, Mlp::kNone}),
              mamba);
    EXPECT_EQ(std::count(layers.begin(), layers.end(),
                         LayerKind{Mixer::kAttention, Mlp::kNone}),
              attention);
    EXPECT_EQ(std::count(layers.begin(), layers.end(),
                         LayerKind{Mixer::kNone, Mlp::kDense}),
              mlp);
    EXPECT_FALSE(m.is_moe());
    EXPECT_EQ(m.activation, Activation::kSquaredRelu);
  }
}

TEST(NewPresetsTest, LlamaFourMaverickAlternates) {
  const ModelSpec m = Preset("llama4-maverick");
  const std::vector<LayerKind> layers = m.DecoderLayers();
  ASSERT_EQ(layers.size(), 48u);
  for (size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(layers[i].mlp, i % 2 == 1 ? Mlp::kMoe : Mlp::kDense) << i;
    EXPECT_EQ(layers[i].mixer, Mixer::kAttention) << i;
  }
  EXPECT_EQ(m.num_moe_layers(), 24);
  EXPECT_EQ(Preset("llama4-scout").num_moe_layers(), 48);
}

TEST(NewPresetsTest, GptOssWindowsAndHeads) {
  for (const char* name : {"gpt-oss-20b", "gpt-oss-120b"}) {
    SCOPED_TRACE(name);
    const ModelSpec m = Preset(name);
    EXPECT_EQ(m.activation, Activation::kQuickGeglu);
    EXPECT_TRUE(m.has_linear_biases());
    EXPECT_EQ(m.window_size, 127);
    EXPECT_EQ(m.window_attn_skip_freq, 2);
    EXPECT_EQ(m.query_projection_size(), 4096);  // != h = 2880
  }
}

// The dev set's model column, as `tune accuracy` normalises it (case,
// spaces, '-', '_' and '.' ignored; tuner/accuracy/rules.cc), and as
// --model takes it (case only).
TEST(NewPresetsTest, DevSetSpellingsResolve) {
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"DeepSeekV3", "deepseek-v3"},
      {"DeepSeek-V3", "deepseek-v3"},
      {"Qwen3_30B_a3B", "qwen3-30b-a3b"},
      {"Nemotron_3_Nano", "nemotron3-nano"},
      {"Qwen3_235B_a22B", "qwen3-235b-a22b"},
      {"GPT-OSS-120B", "gpt-oss-120b"},
      {"nemotron3-super", "nemotron3-super"}};
  for (const auto& [spelling, name] : spellings) {
    StatusOr<ModelSpec> m = ResolveModel(spelling);
    ASSERT_TRUE(m.ok()) << spelling << ": " << m.status().message();
    EXPECT_EQ(m->name, name) << spelling;
  }
}

// Recipe defaults of the dev set's three new models (Megatron-Bridge
// docs/performance-summary.md, as in published_dev.csv).
TEST(NewPresetsTest, RecipeDefaultsOfDevSetModels) {
  EXPECT_EQ(Preset("deepseek-v3").seq_length, 4096);
  EXPECT_EQ(Preset("deepseek-v3").global_batch_size, 4096);
  EXPECT_EQ(Preset("qwen3-30b-a3b").seq_length, 4096);
  EXPECT_EQ(Preset("qwen3-30b-a3b").global_batch_size, 512);
  EXPECT_EQ(Preset("nemotron3-nano").seq_length, 8192);
  EXPECT_EQ(Preset("nemotron3-nano").global_batch_size, 512);
}

}  // namespace
}  // namespace meshtune::search_spaces
