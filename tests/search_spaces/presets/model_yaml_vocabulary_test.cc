// The model YAML reader's 2025-26 vocabulary (docs/sources.md §2.2, §2.4):
// every new key with Megatron's name, the list form of moe_layer_freq, hybrid
// patterns (num_layers and mtp_num_layers taken from them), and the located
// errors of each.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

// A small GPT-style MoE model with every new key set away from its default
// (line numbers in the comments; errors below refer to them).
const char kAllKeys[] =
    "name: every-key\n"                           // 1
    "num_layers: 4\n"                             // 2
    "hidden_size: 512\n"                          // 3
    "num_attention_heads: 8\n"                    // 4
    "ffn_hidden_size: 1024\n"                     // 5
    "vocab_size: 1000\n"                          // 6
    "seq_length: 256\n"                           // 7
    "normalization: RMSNorm\n"                    // 8
    "activation: quick_geglu\n"                   // 9
    "position_embedding_type: none\n"             // 10
    "add_bias_linear: true\n"                     // 11
    "qk_layernorm: true\n"                        // 12
    "rotary_base: 500000\n"                       // 13
    "window_size: 127,0\n"                        // 14
    "window_attn_skip_freq: 2\n"                  // 15
    "multi_latent_attention: true\n"              // 16
    "q_lora_rank: 96\n"                           // 17
    "kv_lora_rank: 32\n"                          // 18
    "qk_head_dim: 48\n"                           // 19
    "qk_pos_emb_head_dim: 16\n"                   // 20
    "v_head_dim: 40\n"                            // 21
    "num_experts: 16\n"                           // 22
    "moe_router_topk: 4\n"                        // 23
    "moe_ffn_hidden_size: 256\n"                  // 24
    "moe_layer_freq: ([0]*1+[1]*3)\n"             // 25
    "moe_shared_expert_intermediate_size: 512\n"  // 26
    "moe_latent_size: 128\n"                      // 27
    "moe_router_score_function: sqrtsoftplus\n"   // 28
    "moe_router_pre_softmax: true\n"              // 29
    "moe_router_num_groups: 4\n"                  // 30
    "moe_router_group_topk: 2\n"                  // 31
    "moe_router_enable_expert_bias: true\n"       // 32
    "moe_expert_capacity_factor: 1.25\n"          // 33
    "moe_pad_expert_input_to_capacity: true\n"    // 34
    "moe_token_dispatcher_type: flex\n"           // 35
    "moe_grouped_gemm: false\n"                   // 36
    "mtp_num_layers: 2\n"                         // 37
    "use_transformer_engine_op_fuser: true\n";    // 38

// A hybrid model: 2 Mamba, 1 attention, 1 MLP, 1 MoE layer, one MTP depth.
const char kHybrid[] =
    "name: tiny-hybrid\n"               // 1
    "hybrid_layer_pattern: M*M-E/*E\n"  // 2
    "hidden_size: 256\n"                // 3
    "num_attention_heads: 4\n"          // 4
    "num_query_groups: 2\n"             // 5
    "kv_channels: 64\n"                 // 6
    "ffn_hidden_size: 512\n"            // 7
    "vocab_size: 1000\n"                // 8
    "seq_length: 128\n"                 // 9
    "activation: squared_relu\n"        // 10
    "num_experts: 8\n"                  // 11
    "moe_router_topk: 2\n"              // 12
    "mamba_state_dim: 64\n"             // 13
    "mamba_head_dim: 32\n"              // 14
    "mamba_num_groups: 2\n"             // 15
    "mamba_num_heads: 16\n"             // 16
    "mamba_conv_kernel: 3\n";           // 17

std::string Replace(std::string text, const std::string& from,
                    const std::string& to) {
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

Status ParseError(const std::string& text) {
  StatusOr<ModelSpec> m = ParseModelYaml(text, "m.yaml");
  EXPECT_FALSE(m.ok()) << "expected an error for:\n" << text;
  return m.status();
}

TEST(ModelYamlVocabularyTest, ReadsEveryKey) {
  StatusOr<ModelSpec> parsed = ParseModelYaml(kAllKeys, "m.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const ModelSpec& m = *parsed;
  EXPECT_EQ(m.activation, Activation::kQuickGeglu);
  EXPECT_TRUE(m.gated_mlp());
  EXPECT_EQ(m.position_embedding_type, PositionEmbedding::kNone);
  ASSERT_TRUE(m.add_bias_linear.has_value());
  EXPECT_TRUE(*m.add_bias_linear);
  // Biases although RMSNorm: the key wins over the family default.
  EXPECT_TRUE(m.has_linear_biases());
  EXPECT_TRUE(m.qk_layernorm);
  EXPECT_EQ(m.rotary_base, 500000);
  EXPECT_EQ(m.window_size, 127);
  EXPECT_EQ(m.window_attn_skip_freq, 2);
  EXPECT_TRUE(m.multi_latent_attention);
  EXPECT_EQ(m.q_lora_rank, 96);
  EXPECT_EQ(m.kv_lora_rank, 32);
  EXPECT_EQ(m.qk_head_dim, 48);
  EXPECT_EQ(m.qk_pos_emb_head_dim, 16);
  EXPECT_EQ(m.v_head_dim, 40);
  EXPECT_EQ(m.mla_qk_head_dim(), 64);
  // No kv_channels with MLA: v_head_dim (what NVIDIA's MLA lines pass).
  EXPECT_EQ(m.kv_channels, 40);
  EXPECT_EQ(m.num_experts, 16);
  EXPECT_EQ(m.moe_router_topk, 4);
  EXPECT_EQ(m.moe_ffn_hidden_size, 256);
  EXPECT_EQ(m.moe_layer_pattern, std::vector<uint8_t>({0, 1, 1, 1}));
  EXPECT_EQ(m.num_moe_layers(), 3);
  EXPECT_FALSE(m.IsMoeLayer(0));
  EXPECT_TRUE(m.IsMoeLayer(3));
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 512);
  EXPECT_EQ(m.moe_latent_size, 128);
  EXPECT_EQ(m.moe_router_score_function, RouterScore::kSqrtSoftplus);
  EXPECT_TRUE(m.moe_router_pre_softmax);
  EXPECT_EQ(m.moe_router_num_groups, 4);
  EXPECT_EQ(m.moe_router_group_topk, 2);
  EXPECT_TRUE(m.moe_router_enable_expert_bias);
  EXPECT_EQ(m.moe_expert_capacity_factor, 1.25);
  EXPECT_TRUE(m.moe_pad_expert_input_to_capacity);
  EXPECT_EQ(m.moe_token_dispatcher_type, TokenDispatcher::kFlex);
  EXPECT_FALSE(m.moe_grouped_gemm);
  EXPECT_EQ(m.mtp_num_layers, 2);
  EXPECT_TRUE(m.use_transformer_engine_op_fuser);
  EXPECT_FALSE(m.is_hybrid());
  // The MTP depth repeats the last decoder layer (an MLA + MoE layer).
  EXPECT_EQ(m.MtpDepthLayers(),
            std::vector<LayerKind>({{Mixer::kMla, Mlp::kMoe}}));
}

TEST(ModelYamlVocabularyTest, DefaultsAreMegatrons) {
  const std::string dense =
      "name: d\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n"
      "ffn_hidden_size: 128\nvocab_size: 100\nseq_length: 32\n";
  StatusOr<ModelSpec> m = ParseModelYaml(dense, "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->add_bias_linear.has_value());
  EXPECT_TRUE(m->has_linear_biases());  // LayerNorm: GPT-style biases
  EXPECT_FALSE(m->qk_layernorm);
  EXPECT_EQ(m->rotary_base, 10000);
  EXPECT_EQ(m->window_size, -1);
  EXPECT_EQ(m->window_attn_skip_freq, 0);
  EXPECT_FALSE(m->multi_latent_attention);
  EXPECT_EQ(m->mtp_num_layers, 0);
  EXPECT_EQ(m->mamba_state_dim, 128);
  EXPECT_EQ(m->mamba_head_dim, 64);
  EXPECT_EQ(m->mamba_num_groups, 8);
  EXPECT_EQ(m->mamba_num_heads, 0);
  EXPECT_EQ(m->mamba_conv_kernel, 4);
  EXPECT_FALSE(m->use_transformer_engine_op_fuser);

  m = ParseModelYaml(dense + "num_experts: 4\nmoe_router_topk: 1\n", "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->moe_router_score_function, RouterScore::kSoftmax);
  EXPECT_EQ(m->moe_token_dispatcher_type, TokenDispatcher::kAlltoall);
  EXPECT_TRUE(m->moe_grouped_gemm);
  EXPECT_EQ(m->moe_expert_capacity_factor, 0);  // dropless
  EXPECT_TRUE(m->moe_layer_pattern.empty());
  EXPECT_EQ(m->moe_layer_freq, 1);

  // Every activation and position spelling.
  m = ParseModelYaml(dense + "activation: squared_relu\n", "m.yaml");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->activation, Activation::kSquaredRelu);
  EXPECT_FALSE(m->gated_mlp());
  Status s = ParseError(dense + "activation: relu\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: activation: expected one of gelu, swiglu, squared_relu, "
            "quick_geglu, got 'relu'");
  s = ParseError(dense + "moe_token_dispatcher_type: deepep\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: moe_token_dispatcher_type is set but num_experts is 0");
}

TEST(ModelYamlVocabularyTest, MoeLayerFreqForms) {
  const std::string base =
      Replace(kAllKeys, "moe_layer_freq: ([0]*1+[1]*3)\n", "");
  // Megatron's expression quoted (it starts with '[', a YAML list otherwise).
  StatusOr<ModelSpec> m =
      ParseModelYaml(base + "moe_layer_freq: '[0,1]*2'\n", "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->moe_layer_pattern, std::vector<uint8_t>({0, 1, 0, 1}));
  // A YAML list of flags.
  m = ParseModelYaml(base + "moe_layer_freq: [1, 1, 0, 1]\n", "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->moe_layer_pattern, std::vector<uint8_t>({1, 1, 0, 1}));
  EXPECT_EQ(m->num_moe_layers(), 3);
  // An integer: layer i is MoE iff i % 2 == 0.
  m = ParseModelYaml(base + "moe_layer_freq: 2\n", "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->moe_layer_pattern.empty());
  EXPECT_EQ(m->moe_layer_freq, 2);
  EXPECT_EQ(m->num_moe_layers(), 2);
}

TEST(ModelYamlVocabularyTest, MoeLayerFreqErrorsAreLocated) {
  Status s = ParseError(Replace(kAllKeys, "([0]*1+[1]*3)", "([0]*1+[2]*3)"));
  EXPECT_EQ(s.message(),
            "m.yaml:25: moe_layer_freq '([0]*1+[2]*3)': layer flags must be 0 "
            "or 1 at position 10");
  EXPECT_EQ(s.hint(),
            "write an integer or Megatron's list expression, e.g. "
            "([0]*3+[1]*58) for 3 dense then 58 MoE layers");
  s = ParseError(Replace(kAllKeys, "([0]*1+[1]*3)", "([0]*1+[1]*3"));
  EXPECT_EQ(s.message(),
            "m.yaml:25: moe_layer_freq '([0]*1+[1]*3': expected ')' at "
            "position 13");
  // The list must cover num_layers (ValidateModel, located at the key).
  s = ParseError(Replace(kAllKeys, "([0]*1+[1]*3)", "([0]*1+[1]*4)"));
  EXPECT_EQ(s.message(),
            "m.yaml:25: moe_layer_freq lists 5 layers but num_layers is 4");
  s = ParseError(Replace(kAllKeys, "([0]*1+[1]*3)", "[0, 2, 1, 1]"));
  EXPECT_EQ(s.message(),
            "m.yaml:25: moe_layer_freq: list entries must be 0 (dense) or 1 "
            "(MoE), got '2'");
  s = ParseError(Replace(kAllKeys, "([0]*1+[1]*3)", "0"));
  EXPECT_EQ(s.message(),
            "m.yaml:25: moe_layer_freq: expected a positive integer, got '0'");
  s = ParseError(Replace(kAllKeys, "([0]*1+[1]*3)", "\"([0]*1\\n+[1]*3)\""));
  EXPECT_EQ(s.message(),
            "m.yaml:25: moe_layer_freq: unexpected character in "
            "'([0]*1\\n+[1]*3)'");
  s = ParseError(Replace(kAllKeys, "([0]*1+[1]*3)", "[]"));
  EXPECT_EQ(s.message(), "m.yaml:25: moe_layer_freq: the list is empty");
}

TEST(ModelYamlVocabularyTest, KeyConsistencyErrorsAreLocated) {
  Status s = ParseError(Replace(kAllKeys, "multi_latent_attention: true",
                                "multi_latent_attention: false"));
  EXPECT_EQ(s.message(),
            "m.yaml:17: q_lora_rank is set but multi_latent_attention is "
            "false");
  EXPECT_EQ(s.hint(),
            "add 'multi_latent_attention: true' for an MLA model, or remove "
            "the MLA ranks");
  s = ParseError(Replace(kAllKeys, "score_function: sqrtsoftplus",
                         "score_function: softmax"));
  EXPECT_EQ(s.message(),
            "m.yaml:32: moe_router_enable_expert_bias needs a sigmoid or "
            "sqrtsoftplus moe_router_score_function, not softmax");
  s = ParseError(
      Replace(kAllKeys, "capacity_factor: 1.25", "capacity_factor: 0"));
  EXPECT_EQ(s.message(),
            "m.yaml:34: moe_pad_expert_input_to_capacity needs a "
            "moe_expert_capacity_factor greater than 0");
  s = ParseError(Replace(kAllKeys, "window_size: 127,0", "window_size: 127,3"));
  EXPECT_EQ(s.message(),
            "m.yaml:14: window_size: right window 3 in '127,3'; a causal "
            "decoder attends to no later token");
  s = ParseError(Replace(kAllKeys, "window_size: 127,0", "window_size: wide"));
  EXPECT_EQ(s.message(),
            "m.yaml:14: window_size: expected -1 (full attention), a left "
            "window in tokens or Megatron's 'L,0', got 'wide'");
  // Below -1: ValidateModel's message, at the key's line.
  s = ParseError(Replace(kAllKeys, "window_size: 127,0", "window_size: -5"));
  EXPECT_EQ(s.message(),
            "m.yaml:14: window_size: expected -1 (full attention) or a window "
            "in tokens, got '-5'");
  s = ParseError(Replace(kAllKeys, "rotary_base: 500000", "rotary_base: 0"));
  EXPECT_EQ(s.message(),
            "m.yaml:13: rotary_base: expected a positive number, got '0'");
  s = ParseError(Replace(kAllKeys, "moe_router_group_topk: 2",
                         "moe_router_group_topk: 5"));
  EXPECT_EQ(s.message(),
            "m.yaml:30: moe_router_num_groups 4 must divide num_experts 16 and "
            "moe_router_group_topk must be 1 to it");
  s = ParseError(Replace(kAllKeys, "kv_lora_rank: 32\n", ""));
  EXPECT_EQ(s.message(),
            "m.yaml:1: multi_latent_attention needs kv_lora_rank, qk_head_dim "
            "and v_head_dim greater than 0");
  // Unknown keys stay errors, with the closest known key as the hint.
  s = ParseError(std::string(kAllKeys) + "mtp_num_layer: 1\n");
  EXPECT_EQ(s.message(), "m.yaml:39: unknown key 'mtp_num_layer' in model");
  EXPECT_EQ(s.hint(), "did you mean 'mtp_num_layers'?");
  s = ParseError(std::string(kAllKeys) + "moe_router_topk_scaling_factor: 2\n");
  EXPECT_EQ(s.message(),
            "m.yaml:39: unknown key 'moe_router_topk_scaling_factor' in model");
}

TEST(ModelYamlVocabularyTest, DenseModelRejectsMoeKeys) {
  const std::string dense =
      Replace(Replace(Replace(kAllKeys, "num_experts: 16\n", ""),
                      "moe_router_topk: 4\n", ""),
              "moe_ffn_hidden_size: 256\n", "");
  // The first MoE key in Megatron's order is named, at its line.
  Status s = ParseError(dense);
  EXPECT_EQ(s.message(),
            "m.yaml:22: moe_layer_freq is set but num_experts is 0");
  EXPECT_EQ(s.hint(),
            "set num_experts for an MoE model, or remove the MoE keys for a "
            "dense one");
}

TEST(ModelYamlVocabularyTest, HybridPatternGivesLayersAndMtp) {
  StatusOr<ModelSpec> parsed = ParseModelYaml(kHybrid, "m.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const ModelSpec& m = *parsed;
  EXPECT_TRUE(m.is_hybrid());
  EXPECT_EQ(m.num_layers, 5);      // M*M-E: one layer per symbol
  EXPECT_EQ(m.mtp_num_layers, 1);  // one '/' part
  EXPECT_EQ(m.activation, Activation::kSquaredRelu);
  EXPECT_EQ(m.mamba_state_dim, 64);
  EXPECT_EQ(m.mamba_head_dim, 32);
  EXPECT_EQ(m.mamba_num_groups, 2);
  EXPECT_EQ(m.mamba_num_heads, 16);
  EXPECT_EQ(m.mamba_heads(), 16);
  EXPECT_EQ(m.mamba_conv_kernel, 3);
  const std::vector<LayerKind> expected = {{Mixer::kMamba, Mlp::kNone},
                                           {Mixer::kAttention, Mlp::kNone},
                                           {Mixer::kMamba, Mlp::kNone},
                                           {Mixer::kNone, Mlp::kDense},
                                           {Mixer::kNone, Mlp::kMoe}};
  EXPECT_EQ(m.DecoderLayers(), expected);
  EXPECT_EQ(m.num_moe_layers(), 1);
  EXPECT_EQ(m.MtpDepthLayers(),
            std::vector<LayerKind>(
                {{Mixer::kAttention, Mlp::kNone}, {Mixer::kNone, Mlp::kMoe}}));

  // num_layers and mtp_num_layers may be given when they agree.
  StatusOr<ModelSpec> explicit_counts = ParseModelYaml(
      std::string(kHybrid) + "num_layers: 5\nmtp_num_layers: 1\n", "m.yaml");
  ASSERT_TRUE(explicit_counts.ok()) << explicit_counts.status().message();
  EXPECT_EQ(explicit_counts->num_layers, 5);

  // Megatron's deprecated spelling reads the same.
  StatusOr<ModelSpec> alias = ParseModelYaml(
      Replace(kHybrid, "hybrid_layer_pattern:", "hybrid_override_pattern:"),
      "m.yaml");
  ASSERT_TRUE(alias.ok()) << alias.status().message();
  EXPECT_EQ(alias->hybrid_layer_pattern, "M*M-E/*E");
  EXPECT_EQ(alias->num_layers, 5);
}

TEST(ModelYamlVocabularyTest, ARepeatedMtpLayerNeedsMtpDepths) {
  // Two depths of one shared block: weights of one depth (model_spec.h).
  StatusOr<ModelSpec> two =
      ParseModelYaml(Replace(kHybrid, "M*M-E/*E", "M*M-E/*E/*E") +
                         "mtp_use_repeated_layer: true\n",
                     "m.yaml");
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_EQ(two->mtp_num_layers, 2);
  EXPECT_TRUE(two->mtp_use_repeated_layer);
  EXPECT_EQ(two->mtp_weight_depths(), 1);
  const Status s = ParseError(Replace(kHybrid, "M*M-E/*E", "M*M-E") +
                              "mtp_use_repeated_layer: true\n");
  EXPECT_EQ(s.message(),
            "m.yaml:18: mtp_use_repeated_layer needs MTP depths "
            "(mtp_num_layers is 0)");
}

TEST(ModelYamlVocabularyTest, HybridErrorsAreLocated) {
  Status s = ParseError(Replace(kHybrid, "M*M-E/*E", "M*X-E/*E"));
  EXPECT_EQ(s.message(),
            "m.yaml:2: hybrid_layer_pattern 'M*X-E/*E': unknown symbol 'X' at "
            "position 3");
  EXPECT_EQ(s.hint(),
            "use M (Mamba), * (attention), - (MLP), E (MoE), | between "
            "pipeline segments and /<pattern> per MTP depth");
  s = ParseError(Replace(kHybrid, "M*M-E/*E", "\"M*\\tE\""));
  EXPECT_EQ(s.message(),
            "m.yaml:2: hybrid_layer_pattern: unexpected character in "
            "'M*\\tE'");
  // The same message at the deprecated key's line.
  s = ParseError(std::string("name: h\nhybrid_override_pattern: 'M*/*E/E'\n") +
                 "hidden_size: 64\n");
  EXPECT_EQ(s.message(),
            "m.yaml:2: hybrid_layer_pattern 'M*/*E/E': MTP depths differ "
            "('*E' vs 'E') at position 7");
  s = ParseError(std::string(kHybrid) + "num_layers: 6\n");
  EXPECT_EQ(s.message(),
            "m.yaml:2: hybrid_layer_pattern has 5 layers but num_layers is 6");
  s = ParseError(std::string(kHybrid) + "mtp_num_layers: 2\n");
  EXPECT_EQ(s.message(),
            "m.yaml:18: mtp_num_layers 2 but hybrid_layer_pattern has 1 MTP "
            "depths");
  s = ParseError(
      Replace(kHybrid, "hybrid_layer_pattern:", "hybrid_override_pattern:") +
      "hybrid_layer_pattern: M*\n");
  EXPECT_EQ(s.message(),
            "m.yaml:2: hybrid_override_pattern is Megatron's deprecated name "
            "of hybrid_layer_pattern, and both are given");
  s = ParseError(std::string(kHybrid) + "moe_layer_freq: 2\n");
  EXPECT_EQ(s.message(),
            "m.yaml:18: moe_layer_freq does not apply to a hybrid model: its E "
            "symbols place the MoE layers");
  s = ParseError(Replace(kHybrid, "num_experts: 8\nmoe_router_topk: 2\n", ""));
  EXPECT_EQ(s.message(),
            "m.yaml:1: hybrid_layer_pattern has E layers but num_experts is 0");
  // Mamba sizes without a pattern; Mamba groups that do not divide heads.
  s = ParseError(
      "name: g\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n"
      "ffn_hidden_size: 128\nvocab_size: 100\nseq_length: 32\n"
      "mamba_state_dim: 16\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: mamba_state_dim is set but the model has no "
            "hybrid_layer_pattern");
  s = ParseError(
      Replace(kHybrid, "mamba_num_groups: 2", "mamba_num_groups: 3"));
  EXPECT_EQ(s.message(),
            "m.yaml:16: Mamba-2 needs positive mamba_head_dim, mamba_state_dim "
            "and mamba_num_groups, and mamba_num_groups dividing the heads "
            "(16)");
  // Without a pattern, num_layers stays required.
  s = ParseError(
      "name: g\nhidden_size: 64\nnum_attention_heads: 4\n"
      "ffn_hidden_size: 128\nvocab_size: 100\nseq_length: 32\n");
  EXPECT_EQ(s.message(),
            "m.yaml:1: model is missing required key 'num_layers'");
}

}  // namespace
}  // namespace meshtune::search_spaces
