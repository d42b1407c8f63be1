// ModelSpec validation, enum names and the model YAML parser's messages.
#include "search_spaces/model_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

// A minimal valid dense model file; tests edit one line at a time.
const char kDense[] =
    "name: tiny\n"              // 1
    "num_layers: 4\n"           // 2
    "hidden_size: 256\n"        // 3
    "num_attention_heads: 8\n"  // 4
    "ffn_hidden_size: 1024\n"   // 5
    "vocab_size: 1000\n"        // 6
    "seq_length: 128\n";        // 7

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

TEST(ModelYamlTest, MinimalFileGetsMegatronDefaults) {
  StatusOr<ModelSpec> m = ParseModelYaml(kDense, "dir/Tiny.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "tiny");
  EXPECT_EQ(m->display_name, "tiny");
  EXPECT_EQ(m->num_query_groups, 8);  // MHA
  EXPECT_EQ(m->kv_channels, 32);      // 256 / 8
  EXPECT_EQ(m->normalization, Normalization::kLayerNorm);
  EXPECT_EQ(m->activation, Activation::kGelu);
  EXPECT_EQ(m->position_embedding_type, PositionEmbedding::kLearnedAbsolute);
  EXPECT_FALSE(m->untie_embeddings_and_output_weights);
  EXPECT_FALSE(m->is_moe());
  EXPECT_EQ(m->global_batch_size, 0);
  // 0 = no recipe batch, as written back for such models.
  m = ParseModelYaml(std::string(kDense) + "global_batch_size: 0\n", "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->global_batch_size, 0);
}

TEST(ModelYamlTest, UnnamedFileTakesItsStem) {
  const std::string text = Replace(kDense, "name: tiny\n", "");
  StatusOr<ModelSpec> m = ParseModelYaml(text, "some/dir/My-Model.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "my-model");
}

TEST(ModelYamlTest, LlamaStyleKeys) {
  std::string text = std::string(kDense) +
                     "num_query_groups: 2\n"
                     "kv_channels: 64\n"
                     "normalization: rmsnorm\n"
                     "activation: SwiGLU\n"
                     "position_embedding_type: rope\n"
                     "untie_embeddings_and_output_weights: true\n";
  StatusOr<ModelSpec> m = ParseModelYaml(text, "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->num_query_groups, 2);
  EXPECT_EQ(m->kv_channels, 64);
  EXPECT_EQ(m->query_projection_size(), 512);
  EXPECT_EQ(m->normalization, Normalization::kRMSNorm);
  EXPECT_EQ(m->activation, Activation::kSwiglu);
  EXPECT_EQ(m->position_embedding_type, PositionEmbedding::kRope);
  EXPECT_TRUE(m->untie_embeddings_and_output_weights);
}

TEST(ModelYamlTest, UnknownKeySuggestsClosest) {
  Status s = ParseError(Replace(kDense, "hidden_size:", "hiden_size:"));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "m.yaml:3: unknown key 'hiden_size' in model");
  EXPECT_EQ(s.hint(), "did you mean 'hidden_size'?");
}

TEST(ModelYamlTest, DuplicateKey) {
  Status s = ParseError(std::string(kDense) + "num_layers: 8\n");
  EXPECT_EQ(s.message(), "m.yaml:8: duplicate key 'num_layers' in model");
}

TEST(ModelYamlTest, WrongType) {
  Status s =
      ParseError(Replace(kDense, "hidden_size: 256", "hidden_size: abc"));
  EXPECT_EQ(s.message(),
            "m.yaml:3: hidden_size: expected a positive integer, got 'abc'");
  EXPECT_EQ(s.hint(),
            "write a whole number greater than 0, e.g. "
            "'hidden_size: 8'");
  s = ParseError(Replace(kDense, "hidden_size: 256", "hidden_size: 256.5"));
  EXPECT_EQ(s.message(),
            "m.yaml:3: hidden_size: expected a positive integer, got '256.5'");
  s = ParseError(Replace(kDense, "hidden_size: 256", "hidden_size: [1, 2]"));
  EXPECT_EQ(s.message(),
            "m.yaml:3: hidden_size: expected a positive integer, got a list");
  s = ParseError(Replace(kDense, "hidden_size: 256", "hidden_size:"));
  EXPECT_EQ(s.message(),
            "m.yaml:3: hidden_size: expected a positive integer, got nothing");
}

TEST(ModelYamlTest, ZeroAndNegativeSizes) {
  Status s = ParseError(Replace(kDense, "num_layers: 4", "num_layers: 0"));
  EXPECT_EQ(s.message(),
            "m.yaml:2: num_layers: expected a positive integer, got '0'");
  s = ParseError(Replace(kDense, "vocab_size: 1000", "vocab_size: -5"));
  EXPECT_EQ(s.message(),
            "m.yaml:6: vocab_size: expected a positive integer, got '-5'");
  s = ParseError(std::string(kDense) + "num_experts: -1\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: num_experts: expected a non-negative integer, got '-1'");
}

TEST(ModelYamlTest, BadEnumAndBool) {
  Status s = ParseError(std::string(kDense) + "normalization: BatchNorm\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: normalization: expected one of LayerNorm, RMSNorm, got "
            "'BatchNorm'");
  EXPECT_EQ(s.hint(), "write e.g. 'normalization: LayerNorm'");
  s = ParseError(std::string(kDense) +
                 "untie_embeddings_and_output_weights: maybe\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: untie_embeddings_and_output_weights: expected true or "
            "false, got 'maybe'");
}

TEST(ModelYamlTest, HeadsMustDivideHiddenUnlessKvChannelsGiven) {
  const std::string text =
      Replace(kDense, "num_attention_heads: 8", "num_attention_heads: 7");
  Status s = ParseError(text);
  EXPECT_EQ(s.message(),
            "m.yaml:4: num_attention_heads 7 does not divide hidden_size 256");
  EXPECT_EQ(s.hint(),
            "choose a head count that divides hidden_size, or set kv_channels "
            "(the head size) explicitly");
  // Megatron allows it when the head size is explicit.
  StatusOr<ModelSpec> m = ParseModelYaml(text + "kv_channels: 32\n", "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->query_projection_size(), 224);
  // kv_channels: 0 means "derive it", so the divisibility rule applies.
  s = ParseError(text + "kv_channels: 0\n");
  EXPECT_EQ(s.message(),
            "m.yaml:4: num_attention_heads 7 does not divide hidden_size 256");
  s = ParseError(text + "kv_channels: -1\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: kv_channels: expected a non-negative integer, got '-1'");
}

TEST(ModelYamlTest, QueryGroupsMustDivideHeads) {
  Status s = ParseError(std::string(kDense) + "num_query_groups: 3\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: num_query_groups 3 does not divide "
            "num_attention_heads 8");
}

TEST(ModelYamlTest, MoeConsistency) {
  Status s = ParseError(std::string(kDense) +
                        "num_experts: 2\n"
                        "moe_router_topk: 4\n");
  EXPECT_EQ(s.message(),
            "m.yaml:9: moe_router_topk 4 is not between 1 and num_experts 2");
  // MoE without topk: reported at the mapping (line 1).
  s = ParseError(std::string(kDense) + "num_experts: 2\n");
  EXPECT_EQ(s.message(),
            "m.yaml:1: moe_router_topk 0 is not between 1 and num_experts 2");
  s = ParseError(std::string(kDense) + "moe_layer_freq: 2\n");
  EXPECT_EQ(s.message(),
            "m.yaml:8: moe_layer_freq is set but num_experts is 0");
  EXPECT_EQ(s.hint(),
            "set num_experts for an MoE model, or remove the MoE keys for a "
            "dense one");
  StatusOr<ModelSpec> m = ParseModelYaml(std::string(kDense) +
                                             "num_experts: 8\n"
                                             "moe_router_topk: 2\n"
                                             "moe_ffn_hidden_size: 512\n"
                                             "moe_layer_freq: 3\n",
                                         "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->num_moe_layers(), 2);  // layers 0 and 3 of 4
  EXPECT_EQ(m->num_dense_layers(), 2);
  EXPECT_EQ(m->expert_ffn_hidden_size(), 512);
}

TEST(ModelYamlTest, MissingRequiredKey) {
  Status s = ParseError(Replace(kDense, "ffn_hidden_size: 1024\n", ""));
  EXPECT_EQ(s.message(),
            "m.yaml:1: model is missing required key 'ffn_hidden_size'");
  EXPECT_EQ(s.hint(), "add a line 'ffn_hidden_size: <integer>'");
}

TEST(ModelYamlTest, MalformedYamlReportsItsLine) {
  Status s = ParseError("name: x\nnum_layers: 4\nhidden_size: [1, 2\n");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  // The text after the prefix is yaml-cpp's own and varies by version.
  EXPECT_EQ(s.message().rfind("m.yaml:3: malformed YAML: ", 0), 0u)
      << s.message();
  s = ParseError("name: x\n  bad: indentation\n");
  EXPECT_EQ(s.message().rfind("m.yaml:2: malformed YAML: ", 0), 0u)
      << s.message();
}

TEST(ModelYamlTest, NotAMapping) {
  Status s = ParseError("- 1\n- 2\n");
  EXPECT_EQ(s.message(),
            "m.yaml:1: expected a model mapping (key: value lines), got a "
            "list");
  s = ParseError("");
  EXPECT_EQ(s.message(),
            "m.yaml: expected a model mapping (key: value lines), got nothing");
}

TEST(ModelSpecTest, ValidateProgrammaticSpec) {
  StatusOr<ModelSpec> parsed = ParseModelYaml(kDense, "m.yaml");
  ASSERT_TRUE(parsed.ok());
  ModelSpec m = *parsed;
  EXPECT_TRUE(m.Validate().ok());
  m.kv_channels = 0;
  Status s = m.Validate("cli");
  EXPECT_EQ(s.message(),
            "cli: kv_channels: expected a positive integer, got '0'");
  m = *parsed;
  m.num_query_groups = 3;
  EXPECT_EQ(m.Validate().message(),
            "num_query_groups 3 does not divide num_attention_heads 8");
  m = *parsed;
  m.moe_router_topk = 2;
  EXPECT_EQ(m.Validate().message(),
            "moe_router_topk is set but num_experts is 0");
  m = *parsed;
  m.name.clear();
  EXPECT_EQ(m.Validate().message(), "model has no name");
}

TEST(ModelSpecTest, NumMoeLayers) {
  ModelSpec m;
  m.num_layers = 10;
  EXPECT_EQ(m.num_moe_layers(), 0);  // dense
  m.num_experts = 8;
  m.moe_layer_freq = 1;
  EXPECT_EQ(m.num_moe_layers(), 10);
  m.moe_layer_freq = 2;
  EXPECT_EQ(m.num_moe_layers(), 5);  // 0, 2, 4, 6, 8
  m.moe_layer_freq = 3;
  EXPECT_EQ(m.num_moe_layers(), 4);  // 0, 3, 6, 9
  EXPECT_EQ(m.num_dense_layers(), 6);
}

TEST(ModelSpecTest, EnumNames) {
  EXPECT_STREQ(ToString(Normalization::kLayerNorm), "LayerNorm");
  EXPECT_STREQ(ToString(Normalization::kRMSNorm), "RMSNorm");
  EXPECT_STREQ(ToString(Activation::kGelu), "gelu");
  EXPECT_STREQ(ToString(Activation::kSwiglu), "swiglu");
  EXPECT_STREQ(ToString(PositionEmbedding::kLearnedAbsolute),
               "learned_absolute");
  EXPECT_STREQ(ToString(PositionEmbedding::kRope), "rope");
}

// Megatron's --moe-layer-freq list expressions (docs/sources.md §2.2): the
// expansions below are the Python values of the same expressions.
TEST(MoeLayerFreqTest, ExpandsMegatronExpressions) {
  StatusOr<std::vector<uint8_t>> p = ParseMoeLayerFreq("([0]*3+[1]*58)");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 61u);
  EXPECT_EQ(std::count(p->begin(), p->end(), 1), 58);
  EXPECT_EQ((*p)[2], 0);
  EXPECT_EQ((*p)[3], 1);
  // Without parentheses, as NVIDIA's DeepSeek-R1.sh writes it.
  EXPECT_EQ(ParseMoeLayerFreq("[0]*3+[1]*58").value(), *p);
  // Llama-4 Maverick: MoE on odd layers.
  p = ParseMoeLayerFreq("([0,1]*24)");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 48u);
  for (size_t i = 0; i < p->size(); ++i) EXPECT_EQ((*p)[i], i % 2) << i;
  EXPECT_EQ(ParseMoeLayerFreq("[1, 1, 0]").value(),
            std::vector<uint8_t>({1, 1, 0}));
  EXPECT_EQ(ParseMoeLayerFreq("([0]+[1]*2)*2").value(),
            std::vector<uint8_t>({0, 1, 1, 0, 1, 1}));
}

TEST(MoeLayerFreqTest, FormatRoundTrips) {
  EXPECT_EQ(FormatMoeLayerFreq(ParseMoeLayerFreq("[0]*3+[1]*58").value()),
            "([0]*3+[1]*58)");
  EXPECT_EQ(FormatMoeLayerFreq({1, 1, 0}), "([1]*2+[0]*1)");
  for (const char* expr : {"([0,1]*24)", "([1]*10)", "[0,0,1,0,1,1,1]",
                           "([0]+[1]*26)", "([1,1,0]*5+[0]*2)"}) {
    SCOPED_TRACE(expr);
    const std::vector<uint8_t> pattern = ParseMoeLayerFreq(expr).value();
    const std::string text = FormatMoeLayerFreq(pattern);
    StatusOr<std::vector<uint8_t>> back = ParseMoeLayerFreq(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status().message();
    EXPECT_EQ(*back, pattern) << text;
  }
  // Alternating flags have one run per layer.
  EXPECT_EQ(FormatMoeLayerFreq({0, 1, 0}), "([0]*1+[1]*1+[0]*1)");
}

TEST(MoeLayerFreqTest, ErrorsNameThePosition) {
  StatusOr<std::vector<uint8_t>> p = ParseMoeLayerFreq("([0]*3+[2]*58)");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "moe_layer_freq '([0]*3+[2]*58)': layer flags must be 0 or 1 at "
            "position 10");
  EXPECT_EQ(p.status().hint(),
            "write an integer or Megatron's list expression, e.g. "
            "([0]*3+[1]*58) for 3 dense then 58 MoE layers");
  EXPECT_EQ(ParseMoeLayerFreq("([0]*3+[1]*58").status().message(),
            "moe_layer_freq '([0]*3+[1]*58': expected ')' at position 14");
  EXPECT_EQ(ParseMoeLayerFreq("[0]*3-[1]").status().message(),
            "moe_layer_freq '[0]*3-[1]': unexpected '-' at position 6");
  EXPECT_EQ(ParseMoeLayerFreq("[0]*x").status().message(),
            "moe_layer_freq '[0]*x': expected a number at position 5");
  EXPECT_EQ(ParseMoeLayerFreq("").status().message(),
            "moe_layer_freq '': expected '[' or '(' at position 1");
  EXPECT_EQ(ParseMoeLayerFreq("[1]*20000").status().message(),
            "moe_layer_freq '[1]*20000': list longer than 10000 layers at "
            "position 10");
}

TEST(HybridPatternTest, SplitsLayersSegmentsAndMtp) {
  StatusOr<HybridPattern> p = ParseHybridPattern("M*-E|M*-E/*E/*E");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->layers, "M*-EM*-E");
  EXPECT_EQ(p->segments, 2);
  EXPECT_EQ(p->mtp_depth, "*E");
  EXPECT_EQ(p->mtp_depths, 2);
  p = ParseHybridPattern("M-M*-");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->segments, 1);
  EXPECT_EQ(p->mtp_depths, 0);
  EXPECT_EQ(p->mtp_depth, "");
}

TEST(HybridPatternTest, ErrorsNameSymbolAndPosition) {
  const std::string hint =
      "use M (Mamba), * (attention), - (MLP), E (MoE), | between pipeline "
      "segments and /<pattern> per MTP depth";
  StatusOr<HybridPattern> p = ParseHybridPattern("M-X*");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "hybrid_layer_pattern 'M-X*': unknown symbol 'X' at position 3");
  EXPECT_EQ(p.status().hint(), hint);
  EXPECT_EQ(ParseHybridPattern("M*/*Q").status().message(),
            "hybrid_layer_pattern 'M*/*Q': unknown MTP symbol 'Q' at "
            "position 5");
  EXPECT_EQ(ParseHybridPattern("M*//*E").status().message(),
            "hybrid_layer_pattern 'M*//*E': empty MTP depth at position 4");
  EXPECT_EQ(ParseHybridPattern("M*/*E/*-").status().message(),
            "hybrid_layer_pattern 'M*/*E/*-': MTP depths differ ('*E' vs "
            "'*-') at position 7");
  EXPECT_EQ(ParseHybridPattern("|").status().message(),
            "hybrid_layer_pattern '|': no layers at position 1");
  EXPECT_EQ(ParseHybridPattern("/*E").status().message(),
            "hybrid_layer_pattern '/*E': no layers at position 1");
}

TEST(ModelSpecTest, NewEnumNames) {
  EXPECT_STREQ(ToString(Activation::kSquaredRelu), "squared_relu");
  EXPECT_STREQ(ToString(Activation::kQuickGeglu), "quick_geglu");
  EXPECT_STREQ(ToString(PositionEmbedding::kNone), "none");
  EXPECT_STREQ(ToString(RouterScore::kSoftmax), "softmax");
  EXPECT_STREQ(ToString(RouterScore::kSigmoid), "sigmoid");
  EXPECT_STREQ(ToString(RouterScore::kSqrtSoftplus), "sqrtsoftplus");
  EXPECT_STREQ(ToString(TokenDispatcher::kAllgather), "allgather");
  EXPECT_STREQ(ToString(TokenDispatcher::kAlltoall), "alltoall");
  EXPECT_STREQ(ToString(TokenDispatcher::kFlex), "flex");
}

TEST(ModelSpecTest, WindowLayersFollowMegatronsSkipFrequency) {
  // GPT-OSS's pattern: window_size 127, every 2nd layer (1-based) full.
  ModelSpec m;
  m.window_size = 127;
  m.window_attn_skip_freq = 2;
  EXPECT_TRUE(m.IsWindowLayer(1));
  EXPECT_FALSE(m.IsWindowLayer(2));
  EXPECT_TRUE(m.IsWindowLayer(3));
  // No skip frequency: every layer windowed; no window: none.
  m.window_attn_skip_freq = 0;
  EXPECT_TRUE(m.IsWindowLayer(2));
  m.window_size = -1;
  EXPECT_FALSE(m.IsWindowLayer(1));
}
}  // namespace
}  // namespace meshtune::search_spaces
