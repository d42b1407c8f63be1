// ParseModelYaml: Megatron-named model keys -> ModelSpec (docs/design.md
// §2). Every key is Megatron-LM's argument name with underscores
// (--moe-layer-freq -> moe_layer_freq); the 2025-26 keys (MoE routing, MLA,
// MTP, hybrid Mamba patterns) follow docs/sources.md §2.2
// and §2.4. Checks that need one key's line are made here; the consistency of
// the whole spec is ValidateModel's (search_spaces/model_spec.cc), which
// locates its messages through the same reader.
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/spec_validation.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {
namespace {

using yaml_util::MapReader;

// Megatron renamed --hybrid-override-pattern to --hybrid-layer-pattern and
// keeps the old name as a deprecated alias (docs/sources.md §2.0, MLM:args
// ~3660); Nemotron's published command lines still use the old one.
constexpr char kHybridPattern[] = "hybrid_layer_pattern";
constexpr char kHybridPatternAlias[] = "hybrid_override_pattern";

const std::vector<std::string>& ModelKeys() {
  static const std::vector<std::string> kKeys = {
      "name",
      "display_name",
      "aliases",
      "num_layers",
      "hidden_size",
      "num_attention_heads",
      "num_query_groups",
      "kv_channels",
      "ffn_hidden_size",
      "vocab_size",
      "seq_length",
      "normalization",
      "activation",
      "position_embedding_type",
      "untie_embeddings_and_output_weights",
      "add_bias_linear",
      "qk_layernorm",
      "rotary_base",
      "window_size",
      "window_attn_skip_freq",
      "multi_latent_attention",
      "q_lora_rank",
      "kv_lora_rank",
      "qk_head_dim",
      "qk_pos_emb_head_dim",
      "v_head_dim",
      "num_experts",
      "moe_router_topk",
      "moe_ffn_hidden_size",
      "moe_layer_freq",
      "moe_shared_expert_intermediate_size",
      "moe_latent_size",
      "moe_router_score_function",
      "moe_router_pre_softmax",
      "moe_router_num_groups",
      "moe_router_group_topk",
      "moe_router_enable_expert_bias",
      "moe_router_force_load_balancing",
      "moe_expert_capacity_factor",
      "moe_pad_expert_input_to_capacity",
      "moe_token_dispatcher_type",
      "moe_grouped_gemm",
      "use_transformer_engine_op_fuser",
      "mtp_num_layers",
      "mtp_use_repeated_layer",
      kHybridPattern,
      kHybridPatternAlias,
      "mamba_state_dim",
      "mamba_head_dim",
      "mamba_num_groups",
      "mamba_num_heads",
      "mamba_conv_kernel",
      "global_batch_size",
      "tokenizer_type",
      "tokenizer_model",
      "lr",
      "min_lr",
      "lr_warmup_iters",
      "recipe_config",
      "recipe_global_batch_size",
      "recipe_seq_length",
      "recipe_source",
      "published_params_b",
  };
  return kKeys;
}

// Keys that describe routed experts; with num_experts 0 they are an error
// (a dense model has nothing they could apply to).
const std::vector<std::string>& MoeKeys() {
  static const std::vector<std::string> kKeys = {
      "moe_router_topk",
      "moe_ffn_hidden_size",
      "moe_layer_freq",
      "moe_shared_expert_intermediate_size",
      "moe_latent_size",
      "moe_router_score_function",
      "moe_router_pre_softmax",
      "moe_router_num_groups",
      "moe_router_group_topk",
      "moe_router_enable_expert_bias",
      "moe_router_force_load_balancing",
      "moe_expert_capacity_factor",
      "moe_pad_expert_input_to_capacity",
      "moe_token_dispatcher_type",
      "moe_grouped_gemm",
  };
  return kKeys;
}

const std::vector<std::string>& MlaKeys() {
  static const std::vector<std::string> kKeys = {
      "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
      "v_head_dim"};
  return kKeys;
}

const std::vector<std::string>& MambaKeys() {
  static const std::vector<std::string> kKeys = {
      "mamba_state_dim", "mamba_head_dim", "mamba_num_groups",
      "mamba_num_heads", "mamba_conv_kernel"};
  return kKeys;
}

// "path/to/My-Model.yaml" -> "my-model": the name of an unnamed user file.
std::string StemName(const std::string& source) {
  return yaml_util::Lower(std::filesystem::path(source).stem().string());
}

// A whole decimal number ("8", "-1"); false for anything else, including
// Megatron's list expressions.
bool ParseWholeNumber(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

// Megatron's expressions and patterns are printable ASCII; anything else is
// refused here, quoted through Printable, because ParseMoeLayerFreq and
// ParseHybridPattern quote their input verbatim in their one-line messages.
Status CheckPrintableAscii(const MapReader& r, const std::string& key,
                           const std::string& value, const std::string& hint) {
  for (const char c : value) {
    if (c < 0x20 || c > 0x7e) {
      return Status::InvalidArgument(r.WhereKey(key) + ": " + key +
                                         ": unexpected character in '" +
                                         yaml_util::Printable(value) + "'",
                                     hint);
    }
  }
  return Status::Ok();
}

// tokenizer_type (one of kTokenizerTypes) and tokenizer_model. Both land in
// launch scripts, so the model is printable ASCII without quotes or spaces.
Status ReadTokenizer(const MapReader& r, ModelSpec* m) {
  MESHTUNE_RETURN_IF_ERROR(
      r.String("tokenizer_type", false, &m->tokenizer_type));
  if (r.Has("tokenizer_type")) {
    bool known = false;
    std::string names;
    for (const char* type : kTokenizerTypes) {
      known = known || m->tokenizer_type == type;
      names += names.empty() ? type : std::string(", ") + type;
    }
    if (!known) {
      return Status::InvalidArgument(
          r.WhereKey("tokenizer_type") + ": tokenizer_type: unknown type '" +
              yaml_util::Printable(m->tokenizer_type) + "'",
          "use one of Megatron's: " + names);
    }
  }
  MESHTUNE_RETURN_IF_ERROR(
      r.String("tokenizer_model", false, &m->tokenizer_model));
  for (const char c : m->tokenizer_model) {
    const bool ok = c > 0x20 && c < 0x7f && c != '\'' && c != '"' &&
                    c != '\\' && c != '$' && c != '`';
    if (!ok) {
      return Status::InvalidArgument(
          r.WhereKey("tokenizer_model") +
              ": tokenizer_model: unexpected character in '" +
              yaml_util::Printable(m->tokenizer_model) + "'",
          "give a Hugging Face id (meta-llama/Meta-Llama-3-8B) or a path "
          "without spaces, quotes, '$' or '`'");
    }
  }
  if (!m->tokenizer_model.empty() && m->tokenizer_type.empty()) {
    return Status::InvalidArgument(
        r.WhereKey("tokenizer_model") +
            ": tokenizer_model is given without tokenizer_type",
        "add tokenizer_type, e.g. HuggingFaceTokenizer");
  }
  return Status::Ok();
}

// lr, min_lr (0 < min_lr <= lr) and lr_warmup_iters.
Status ReadLrSchedule(const MapReader& r, ModelSpec* m) {
  MESHTUNE_RETURN_IF_ERROR(r.Double("lr", false, &m->lr));
  MESHTUNE_RETURN_IF_ERROR(r.Double("min_lr", false, &m->min_lr));
  MESHTUNE_RETURN_IF_ERROR(r.Int("lr_warmup_iters", false, 0,
                                 limits::kTrainIters, &m->lr_warmup_iters));
  if (r.Has("lr") && !(m->lr > 0 && m->lr < 1)) {
    return Status::InvalidArgument(
        r.WhereKey("lr") + ": lr: expected a learning rate in (0, 1)",
        "peak learning rates are 6e-5 (GPT-3 175B) to 6e-4 (small models)");
  }
  if (r.Has("min_lr") && !(m->min_lr >= 0 && m->min_lr <= m->lr)) {
    return Status::InvalidArgument(
        r.WhereKey("min_lr") + ": min_lr: expected 0 <= min_lr <= lr",
        "give lr too; min_lr is usually lr / 10");
  }
  return Status::Ok();
}

// --moe-layer-freq: an integer N (layer i is MoE iff i % N == 0), Megatron's
// list expression as a string ("([0]*3+[1]*58)"; quote it when it starts with
// '[', which YAML reads as a list), or a YAML list of 0/1 flags.
Status ReadMoeLayerFreq(const MapReader& r, const YAML::Node& value,
                        ModelSpec* m) {
  const char* key = "moe_layer_freq";
  if (value.IsSequence()) {
    // Read item by item: MapReader::IntList sorts and deduplicates (it reads
    // search axes), and the order of these flags is the layer order.
    for (const YAML::Node& item : value) {
      int64_t flag = -1;
      if (!item.IsScalar() || !ParseWholeNumber(item.Scalar(), &flag) ||
          (flag != 0 && flag != 1)) {
        return Status::InvalidArgument(
            r.WhereKey(key) +
                ": moe_layer_freq: list entries must be 0 (dense) or 1 "
                "(MoE), got " +
                (item.IsScalar()
                     ? "'" + yaml_util::Printable(item.Scalar()) + "'"
                     : std::string("a nested value")),
            "write one 0/1 flag per layer, e.g. [0, 1, 1, 1], or Megatron's "
            "expression '([0]*1+[1]*3)'");
      }
      if (m->moe_layer_pattern.size() >=
          static_cast<size_t>(limits::kNumLayers.max)) {
        return Status::InvalidArgument(
            r.WhereKey(key) + ": moe_layer_freq: more than " +
                std::to_string(limits::kNumLayers.max) + " layers",
            limits::kNumLayers.real);
      }
      m->moe_layer_pattern.push_back(static_cast<uint8_t>(flag));
    }
    if (m->moe_layer_pattern.empty()) {
      return Status::InvalidArgument(
          r.WhereKey(key) + ": moe_layer_freq: the list is empty",
          "write one 0/1 flag per layer, or an integer");
    }
    return Status::Ok();
  }
  int64_t n = 0;
  if (!value.IsScalar() || ParseWholeNumber(value.Scalar(), &n)) {
    return r.Int(key, false, 1, limits::kNumLayers, &m->moe_layer_freq);
  }
  MESHTUNE_RETURN_IF_ERROR(CheckPrintableAscii(
      r, key, value.Scalar(),
      "write an integer or Megatron's list expression, e.g. ([0]*3+[1]*58)"));
  StatusOr<std::vector<uint8_t>> pattern = ParseMoeLayerFreq(value.Scalar());
  if (!pattern.ok()) {
    return Status::InvalidArgument(
        r.WhereKey(key) + ": " + pattern.status().message(),
        pattern.status().hint());
  }
  m->moe_layer_pattern = std::move(pattern).value();
  return Status::Ok();
}

// --window-size: -1 (full attention), a left window in tokens, or Megatron's
// "L,R" tuple. Decoders are causal, so R must be 0 (GPT-OSS: "127,0").
Status ReadWindowSize(const MapReader& r, const YAML::Node& value,
                      int64_t* out) {
  const char* key = "window_size";
  auto bad = [&] {
    return Status::InvalidArgument(
        r.WhereKey(key) +
            ": window_size: expected -1 (full attention), a "
            "left window in tokens or Megatron's 'L,0', got " +
            (value.IsScalar()
                 ? "'" + yaml_util::Printable(value.Scalar()) + "'"
                 : std::string(value.IsSequence() ? "a list" : "a mapping")),
        "GPT-OSS uses window_size: 127 (Megatron --window-size 127,0)");
  };
  if (!value.IsScalar()) return bad();
  const std::string& s = value.Scalar();
  const size_t comma = s.find(',');
  int64_t left = 0;
  if (comma == std::string::npos) {
    if (!ParseWholeNumber(s, &left)) return bad();
  } else {
    int64_t right = 0;
    if (!ParseWholeNumber(s.substr(0, comma), &left) ||
        !ParseWholeNumber(s.substr(comma + 1), &right)) {
      return bad();
    }
    if (right != 0) {
      return Status::InvalidArgument(
          r.WhereKey(key) + ": window_size: right window " +
              std::to_string(right) + " in '" + yaml_util::Printable(s) +
              "'; a causal decoder attends to no later token",
          "write the left window only, e.g. 'window_size: 127' for 127,0");
    }
  }
  if (left > limits::kSeqLength.max) {
    return Status::InvalidArgument(
        r.WhereKey(key) + ": window_size: " + std::to_string(left) +
            " is above the limit of " + std::to_string(limits::kSeqLength.max),
        limits::kSeqLength.real);
  }
  // Values below -1 reach ValidateModel, which names them.
  *out = left;
  return Status::Ok();
}

// The first of `keys` present in the file, or nullptr.
const std::string* FirstPresent(const MapReader& r,
                                const std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    if (r.Has(k)) return &k;
  }
  return nullptr;
}

StatusOr<ModelSpec> ParseModelMap(const YAML::Node& node,
                                  const std::string& source) {
  const MapReader r(node, source, "model");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(ModelKeys()));

  ModelSpec m;
  m.name = StemName(source);
  MESHTUNE_RETURN_IF_ERROR(r.String("name", false, &m.name));
  m.display_name = m.name;
  MESHTUNE_RETURN_IF_ERROR(r.String("display_name", false, &m.display_name));
  MESHTUNE_RETURN_IF_ERROR(r.StringList("aliases", &m.aliases));

  // The hybrid pattern first: it makes num_layers optional (one layer per
  // symbol) and carries the MTP depths (docs/sources.md §2.4).
  if (r.Has(kHybridPattern) && r.Has(kHybridPatternAlias)) {
    return Status::InvalidArgument(
        r.WhereKey(kHybridPatternAlias) +
            ": hybrid_override_pattern is Megatron's deprecated name of "
            "hybrid_layer_pattern, and both are given",
        "keep only hybrid_layer_pattern");
  }
  const std::string pattern_key =
      r.Has(kHybridPatternAlias) ? kHybridPatternAlias : kHybridPattern;
  MESHTUNE_RETURN_IF_ERROR(
      r.String(pattern_key, false, &m.hybrid_layer_pattern));
  std::optional<HybridPattern> hybrid;
  if (!m.hybrid_layer_pattern.empty()) {
    MESHTUNE_RETURN_IF_ERROR(CheckPrintableAscii(
        r, pattern_key, m.hybrid_layer_pattern,
        "use M (Mamba), * (attention), - (MLP), E (MoE), | and /, e.g. "
        "M-M*-M-"));
    StatusOr<HybridPattern> parsed = ParseHybridPattern(m.hybrid_layer_pattern);
    if (!parsed.ok()) {
      return Status::InvalidArgument(
          r.WhereKey(pattern_key) + ": " + parsed.status().message(),
          parsed.status().hint());
    }
    hybrid = std::move(parsed).value();
  } else if (const std::string* key = FirstPresent(r, MambaKeys())) {
    return Status::InvalidArgument(
        r.WhereKey(*key) + ": " + *key +
            " is set but the model has no hybrid_layer_pattern",
        "Mamba sizes apply to the M layers of a hybrid model; add "
        "hybrid_layer_pattern or remove the mamba_ keys");
  }

  MESHTUNE_RETURN_IF_ERROR(r.Int("num_layers", !hybrid.has_value(), 1,
                                 limits::kNumLayers, &m.num_layers));
  if (hybrid && !r.Has("num_layers")) {
    m.num_layers = static_cast<int64_t>(hybrid->layers.size());
  }
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("hidden_size", true, 1, limits::kHiddenSize, &m.hidden_size));
  MESHTUNE_RETURN_IF_ERROR(r.Int("num_attention_heads", true, 1,
                                 limits::kAttentionHeads,
                                 &m.num_attention_heads));
  m.num_query_groups = m.num_attention_heads;  // MHA unless GQA is given
  MESHTUNE_RETURN_IF_ERROR(r.Int("num_query_groups", false, 1,
                                 limits::kAttentionHeads, &m.num_query_groups));

  // Multi-latent attention (docs/sources.md §1.3, §2.4). Megatron's CLI default
  // kv_lora_rank is 32, not DeepSeek's 512, so nothing here is defaulted.
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("multi_latent_attention", false, &m.multi_latent_attention));
  if (!m.multi_latent_attention) {
    if (const std::string* key = FirstPresent(r, MlaKeys())) {
      return Status::InvalidArgument(
          r.WhereKey(*key) + ": " + *key +
              " is set but multi_latent_attention is false",
          "add 'multi_latent_attention: true' for an MLA model, or remove "
          "the MLA ranks");
    }
  }
  for (const auto& [key, field] : std::vector<std::pair<const char*, int64_t*>>{
           {"q_lora_rank", &m.q_lora_rank},
           {"kv_lora_rank", &m.kv_lora_rank},
           {"qk_head_dim", &m.qk_head_dim},
           {"qk_pos_emb_head_dim", &m.qk_pos_emb_head_dim},
           {"v_head_dim", &m.v_head_dim}}) {
    MESHTUNE_RETURN_IF_ERROR(r.Int(key, false, 0, limits::kHiddenSize, field));
  }

  // kv_channels: 0 or absent means hidden_size / heads (model_spec.h), as
  // Megatron derives it. MLA shapes do not use it (docs/sources.md §1.3 note),
  // so an MLA model without it takes v_head_dim, the value NVIDIA's
  // DeepSeek-V3 and Kimi-K2 command lines pass, and needs no divisibility.
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("kv_channels", false, 0, limits::kKvChannels, &m.kv_channels));
  if (m.kv_channels == 0 && m.multi_latent_attention && m.v_head_dim > 0) {
    m.kv_channels = m.v_head_dim;
  }
  if (m.kv_channels == 0) {
    if (m.hidden_size % m.num_attention_heads != 0) {
      // Megatron asserts this only when --kv-channels is not given.
      return Status::InvalidArgument(
          r.WhereKey("num_attention_heads") + ": num_attention_heads " +
              std::to_string(m.num_attention_heads) +
              " does not divide hidden_size " + std::to_string(m.hidden_size),
          "choose a head count that divides hidden_size, or set kv_channels "
          "(the head size) explicitly");
    }
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  MESHTUNE_RETURN_IF_ERROR(r.Int("ffn_hidden_size", true, 1,
                                 limits::kFfnHiddenSize, &m.ffn_hidden_size));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("vocab_size", true, 1, limits::kVocabSize, &m.vocab_size));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("seq_length", true, 1, limits::kSeqLength, &m.seq_length));

  // Optional keys default to Megatron's argument defaults (GPT style).
  std::string s;
  if (r.Has("normalization")) {
    MESHTUNE_RETURN_IF_ERROR(
        r.Enum("normalization", true, {"LayerNorm", "RMSNorm"}, &s));
    m.normalization =
        s == "RMSNorm" ? Normalization::kRMSNorm : Normalization::kLayerNorm;
  }
  if (r.Has("activation")) {
    // squared_relu: Megatron --squared-relu (Nemotron-H, Nemotron 3);
    // quick_geglu: --quick-geglu, GPT-OSS's clamped gated GELU (§1.5).
    MESHTUNE_RETURN_IF_ERROR(
        r.Enum("activation", true,
               {"gelu", "swiglu", "squared_relu", "quick_geglu"}, &s));
    m.activation = s == "swiglu"         ? Activation::kSwiglu
                   : s == "squared_relu" ? Activation::kSquaredRelu
                   : s == "quick_geglu"  ? Activation::kQuickGeglu
                                         : Activation::kGelu;
  }
  if (r.Has("position_embedding_type")) {
    MESHTUNE_RETURN_IF_ERROR(r.Enum("position_embedding_type", true,
                                    {"learned_absolute", "rope", "none"}, &s));
    m.position_embedding_type = s == "rope" ? PositionEmbedding::kRope
                                : s == "none"
                                    ? PositionEmbedding::kNone
                                    : PositionEmbedding::kLearnedAbsolute;
  }
  MESHTUNE_RETURN_IF_ERROR(r.Bool("untie_embeddings_and_output_weights", false,
                                  &m.untie_embeddings_and_output_weights));
  if (r.Has("add_bias_linear")) {
    bool bias = false;
    MESHTUNE_RETURN_IF_ERROR(r.Bool("add_bias_linear", true, &bias));
    m.add_bias_linear = bias;
  }
  MESHTUNE_RETURN_IF_ERROR(r.Bool("qk_layernorm", false, &m.qk_layernorm));
  MESHTUNE_RETURN_IF_ERROR(r.Double("rotary_base", false, &m.rotary_base));
  if (!(m.rotary_base > 0)) {
    return Status::InvalidArgument(
        r.WhereKey("rotary_base") +
            ": rotary_base: expected a positive "
            "number, got '0'",
        "RoPE bases are 10000 (LLaMA-2) to 1000000 (Qwen3)");
  }
  if (r.Has("window_size")) {
    MESHTUNE_RETURN_IF_ERROR(
        ReadWindowSize(r, node["window_size"], &m.window_size));
  }
  MESHTUNE_RETURN_IF_ERROR(r.Int("window_attn_skip_freq", false, 0,
                                 limits::kNumLayers, &m.window_attn_skip_freq));

  MESHTUNE_RETURN_IF_ERROR(
      r.Int("num_experts", false, 0, limits::kNumExperts, &m.num_experts));
  if (m.num_experts == 0) {
    if (const std::string* key = FirstPresent(r, MoeKeys())) {
      return Status::InvalidArgument(
          r.WhereKey(*key) + ": " + *key + " is set but num_experts is 0",
          "set num_experts for an MoE model, or remove the MoE keys for a "
          "dense one");
    }
  }
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_router_topk", false, 1,
                                 limits::kNumExperts, &m.moe_router_topk));
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_ffn_hidden_size", false, 1,
                                 limits::kFfnHiddenSize,
                                 &m.moe_ffn_hidden_size));
  if (r.Has("moe_layer_freq")) {
    if (hybrid) {
      return Status::InvalidArgument(
          r.WhereKey("moe_layer_freq") +
              ": moe_layer_freq does not apply to a hybrid model: its E "
              "symbols place the MoE layers",
          "remove moe_layer_freq; write E in hybrid_layer_pattern where an "
          "MoE layer goes");
    }
    MESHTUNE_RETURN_IF_ERROR(ReadMoeLayerFreq(r, node["moe_layer_freq"], &m));
  }
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_shared_expert_intermediate_size", false,
                                 0, limits::kFfnHiddenSize,
                                 &m.moe_shared_expert_intermediate_size));
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_latent_size", false, 0,
                                 limits::kHiddenSize, &m.moe_latent_size));
  if (r.Has("moe_router_score_function")) {
    MESHTUNE_RETURN_IF_ERROR(r.Enum("moe_router_score_function", true,
                                    {"softmax", "sigmoid", "sqrtsoftplus"},
                                    &s));
    m.moe_router_score_function = s == "sigmoid" ? RouterScore::kSigmoid
                                  : s == "sqrtsoftplus"
                                      ? RouterScore::kSqrtSoftplus
                                      : RouterScore::kSoftmax;
  }
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("moe_router_pre_softmax", false, &m.moe_router_pre_softmax));
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_router_num_groups", false, 0,
                                 limits::kNumExperts,
                                 &m.moe_router_num_groups));
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_router_group_topk", false, 0,
                                 limits::kNumExperts,
                                 &m.moe_router_group_topk));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("moe_router_enable_expert_bias", false,
                                  &m.moe_router_enable_expert_bias));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("moe_router_force_load_balancing", false,
                                  &m.moe_router_force_load_balancing));
  // Megatron-Core: "Expert bias for aux-loss-free routing only supports
  // sigmoid score function" (MLM:tc; sqrtsoftplus added since, §2.2).
  if (m.moe_router_enable_expert_bias &&
      m.moe_router_score_function == RouterScore::kSoftmax) {
    return Status::InvalidArgument(
        r.WhereKey("moe_router_enable_expert_bias") +
            ": moe_router_enable_expert_bias needs a sigmoid or sqrtsoftplus "
            "moe_router_score_function, not softmax",
        "add 'moe_router_score_function: sigmoid' (DeepSeek-V3, Nemotron 3)");
  }
  MESHTUNE_RETURN_IF_ERROR(r.Double("moe_expert_capacity_factor", false,
                                    &m.moe_expert_capacity_factor));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("moe_pad_expert_input_to_capacity", false,
                                  &m.moe_pad_expert_input_to_capacity));
  // Megatron-Core asserts that padding has a capacity to pad to (MLM:tc).
  if (m.moe_pad_expert_input_to_capacity &&
      !(m.moe_expert_capacity_factor > 0)) {
    return Status::InvalidArgument(
        r.WhereKey("moe_pad_expert_input_to_capacity") +
            ": moe_pad_expert_input_to_capacity needs a "
            "moe_expert_capacity_factor greater than 0",
        "add e.g. 'moe_expert_capacity_factor: 1.0', or remove the padding "
        "for dropless MoE");
  }
  if (r.Has("moe_token_dispatcher_type")) {
    MESHTUNE_RETURN_IF_ERROR(r.Enum("moe_token_dispatcher_type", true,
                                    {"alltoall", "allgather", "flex"}, &s));
    m.moe_token_dispatcher_type = s == "allgather" ? TokenDispatcher::kAllgather
                                  : s == "flex"    ? TokenDispatcher::kFlex
                                                   : TokenDispatcher::kAlltoall;
  }
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("moe_grouped_gemm", false, &m.moe_grouped_gemm));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("use_transformer_engine_op_fuser", false,
                                  &m.use_transformer_engine_op_fuser));

  // MTP: a hybrid pattern's '/' parts give the depths (Megatron infers
  // --mtp-num-layers from them); an explicit value must agree (ValidateModel).
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("mtp_num_layers", false, 0, limits::kNumLayers, &m.mtp_num_layers));
  if (hybrid && !r.Has("mtp_num_layers")) {
    m.mtp_num_layers = hybrid->mtp_depths;
  }
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("mtp_use_repeated_layer", false, &m.mtp_use_repeated_layer));
  // Mamba-2 sizes; Megatron's defaults stay where a key is absent.
  MESHTUNE_RETURN_IF_ERROR(r.Int("mamba_state_dim", false, 1,
                                 limits::kHiddenSize, &m.mamba_state_dim));
  MESHTUNE_RETURN_IF_ERROR(r.Int("mamba_head_dim", false, 1,
                                 limits::kHiddenSize, &m.mamba_head_dim));
  MESHTUNE_RETURN_IF_ERROR(r.Int("mamba_num_groups", false, 1,
                                 limits::kAttentionHeads, &m.mamba_num_groups));
  MESHTUNE_RETURN_IF_ERROR(r.Int("mamba_num_heads", false, 0,
                                 limits::kAttentionHeads, &m.mamba_num_heads));
  MESHTUNE_RETURN_IF_ERROR(r.Int("mamba_conv_kernel", false, 1,
                                 limits::kKvChannels, &m.mamba_conv_kernel));

  // 0 = the recipe gives no batch (files written for such models say so).
  MESHTUNE_RETURN_IF_ERROR(r.Int("global_batch_size", false, 0,
                                 limits::kGlobalBatchSize,
                                 &m.global_batch_size));
  MESHTUNE_RETURN_IF_ERROR(ReadTokenizer(r, &m));
  MESHTUNE_RETURN_IF_ERROR(ReadLrSchedule(r, &m));
  // The config string is parsed where it is used (tuner/inputs/
  // compare_config.h); here it must be one printable line.
  MESHTUNE_RETURN_IF_ERROR(r.String("recipe_config", false, &m.recipe_config));
  MESHTUNE_RETURN_IF_ERROR(CheckPrintableAscii(
      r, "recipe_config", m.recipe_config,
      "write a configuration as tune compare reads it, e.g. \"tp8 pp4 mbs1 "
      "sp dist-opt\""));
  MESHTUNE_RETURN_IF_ERROR(r.Int("recipe_global_batch_size", false, 0,
                                 limits::kGlobalBatchSize,
                                 &m.recipe_global_batch_size));
  MESHTUNE_RETURN_IF_ERROR(r.Int("recipe_seq_length", false, 0,
                                 limits::kSeqLength, &m.recipe_seq_length));
  MESHTUNE_RETURN_IF_ERROR(r.String("recipe_source", false, &m.recipe_source));
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("published_params_b", false, &m.published_params_b));

  // ValidateModel names keys by their Megatron name; a file that spells the
  // pattern with the deprecated alias gets that line.
  MESHTUNE_RETURN_IF_ERROR(
      ValidateModel(m, [&r, &pattern_key](const std::string& key) {
        return r.WhereKey(key == kHybridPattern ? pattern_key : key);
      }));
  return m;
}

}  // namespace

std::string ModelToYaml(const ModelSpec& m, const std::string& indent) {
  std::ostringstream y;
  // The shortest text that reads back as the same double ("6e-05", "70.6").
  const auto number = [](double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
      return std::to_string(static_cast<int64_t>(v));
    }
    char buf[32];
    for (int digits = 1; digits <= 17; ++digits) {
      std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    return std::string(buf);
  };
  const auto quoted = [](const std::string& text) {
    return yaml_util::DoubleQuoted(text);
  };
  const auto line = [&](const char* key, const auto& value) {
    y << indent << key << ": " << value << "\n";
  };
  const auto flag = [&](const char* key, bool value) {
    line(key, value ? "true" : "false");
  };
  line("name", quoted(m.name));
  line("display_name", quoted(m.display_name));
  if (m.is_hybrid()) {
    line("hybrid_layer_pattern", quoted(m.hybrid_layer_pattern));
    line("mamba_state_dim", m.mamba_state_dim);
    line("mamba_head_dim", m.mamba_head_dim);
    line("mamba_num_groups", m.mamba_num_groups);
    line("mamba_num_heads", m.mamba_num_heads);
    line("mamba_conv_kernel", m.mamba_conv_kernel);
  }
  line("num_layers", m.num_layers);
  line("hidden_size", m.hidden_size);
  line("num_attention_heads", m.num_attention_heads);
  line("num_query_groups", m.num_query_groups);
  line("kv_channels", m.kv_channels);
  line("ffn_hidden_size", m.ffn_hidden_size);
  line("vocab_size", m.vocab_size);
  line("seq_length", m.seq_length);
  line("normalization", ToString(m.normalization));
  line("activation", ToString(m.activation));
  line("position_embedding_type", ToString(m.position_embedding_type));
  flag("untie_embeddings_and_output_weights",
       m.untie_embeddings_and_output_weights);
  if (m.add_bias_linear) flag("add_bias_linear", *m.add_bias_linear);
  flag("qk_layernorm", m.qk_layernorm);
  if (m.position_embedding_type == PositionEmbedding::kRope) {
    line("rotary_base", number(m.rotary_base));
  }
  if (m.window_size >= 0) {
    line("window_size", m.window_size);
    line("window_attn_skip_freq", m.window_attn_skip_freq);
  }
  if (m.multi_latent_attention) {
    flag("multi_latent_attention", true);
    line("q_lora_rank", m.q_lora_rank);
    line("kv_lora_rank", m.kv_lora_rank);
    line("qk_head_dim", m.qk_head_dim);
    line("qk_pos_emb_head_dim", m.qk_pos_emb_head_dim);
    line("v_head_dim", m.v_head_dim);
  }
  line("num_experts", m.num_experts);
  if (m.is_moe()) {
    line("moe_router_topk", m.moe_router_topk);
    if (m.moe_ffn_hidden_size > 0) {
      line("moe_ffn_hidden_size", m.moe_ffn_hidden_size);
    }
    // A hybrid model's E symbols place its MoE layers.
    if (!m.is_hybrid()) {
      if (m.moe_layer_pattern.empty()) {
        line("moe_layer_freq", m.moe_layer_freq);
      } else {
        line("moe_layer_freq", quoted(FormatMoeLayerFreq(m.moe_layer_pattern)));
      }
    }
    line("moe_shared_expert_intermediate_size",
         m.moe_shared_expert_intermediate_size);
    line("moe_latent_size", m.moe_latent_size);
    line("moe_router_score_function", ToString(m.moe_router_score_function));
    flag("moe_router_pre_softmax", m.moe_router_pre_softmax);
    line("moe_router_num_groups", m.moe_router_num_groups);
    line("moe_router_group_topk", m.moe_router_group_topk);
    flag("moe_router_enable_expert_bias", m.moe_router_enable_expert_bias);
    flag("moe_router_force_load_balancing", m.moe_router_force_load_balancing);
    line("moe_expert_capacity_factor", number(m.moe_expert_capacity_factor));
    flag("moe_pad_expert_input_to_capacity",
         m.moe_pad_expert_input_to_capacity);
    line("moe_token_dispatcher_type", ToString(m.moe_token_dispatcher_type));
    flag("moe_grouped_gemm", m.moe_grouped_gemm);
  }
  flag("use_transformer_engine_op_fuser", m.use_transformer_engine_op_fuser);
  line("mtp_num_layers", m.mtp_num_layers);
  if (m.mtp_num_layers > 0) {
    flag("mtp_use_repeated_layer", m.mtp_use_repeated_layer);
  }
  line("global_batch_size", m.global_batch_size);
  if (!m.tokenizer_type.empty()) {
    line("tokenizer_type", m.tokenizer_type);
    if (!m.tokenizer_model.empty()) {
      line("tokenizer_model", quoted(m.tokenizer_model));
    }
  }
  if (m.lr > 0) {
    line("lr", number(m.lr));
    line("min_lr", number(m.min_lr));
  }
  if (m.lr_warmup_iters > 0) line("lr_warmup_iters", m.lr_warmup_iters);
  if (!m.recipe_config.empty()) {
    line("recipe_config", quoted(m.recipe_config));
    line("recipe_global_batch_size", m.recipe_global_batch_size);
    line("recipe_seq_length", m.recipe_seq_length);
    line("recipe_source", quoted(m.recipe_source));
  }
  if (m.published_params_b > 0) {
    line("published_params_b", number(m.published_params_b));
  }
  return y.str();
}

StatusOr<ModelSpec> ParseModelYaml(const std::string& text,
                                   const std::string& source) {
  StatusOr<YAML::Node> root = yaml_util::Load(text, source);
  if (!root.ok()) return root.status();
  // A file written by `tune --out` holds the model under `model:` next to
  // other sections (parallelism, training, cluster) that are not ours here.
  if (root->IsMap() && (*root)["model"]) {
    const YAML::Node model = (*root)["model"];
    if (model.IsScalar() && !yaml_util::LooksLikePath(model.Scalar())) {
      return ResolveModel(model.Scalar());  // `model: gpt3-175b`
    }
    if (!model.IsMap()) {
      return Status::InvalidArgument(
          yaml_util::Where(source, model) +
              ": model: expected a mapping of model keys or a preset name",
          "write 'model: gpt3-175b' or indent the model keys under 'model:'");
    }
    return ParseModelMap(model, source);
  }
  return ParseModelMap(*root, source);
}

}  // namespace meshtune::search_spaces
