#include "search_spaces/model_spec.h"

#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/spec_validation.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {
namespace {

std::string Num(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

}  // namespace

std::string Located(const std::string& where, const std::string& message) {
  return where.empty() ? message : where + ": " + message;
}

bool ModelSpec::IsMoeLayer(int64_t i) const {
  if (!is_moe() || i < 0 || i >= num_layers) return false;
  if (is_hybrid()) {
    auto parsed = ParseHybridPattern(hybrid_layer_pattern);
    return parsed.ok() && i < static_cast<int64_t>(parsed->layers.size()) &&
           parsed->layers[i] == 'E';
  }
  if (!moe_layer_pattern.empty()) {
    return i < static_cast<int64_t>(moe_layer_pattern.size()) &&
           moe_layer_pattern[i] != 0;
  }
  // Megatron-Core: with an integer moe_layer_freq n, layer i (0-based) is an
  // MoE layer iff i % n == 0.
  const int64_t freq = moe_layer_freq > 0 ? moe_layer_freq : 1;
  return i % freq == 0;
}

int64_t ModelSpec::num_moe_layers() const {
  if (!is_moe() || num_layers <= 0) return 0;
  int64_t n = 0;
  for (const LayerKind& k : DecoderLayers()) n += k.mlp == Mlp::kMoe;
  return n;
}

namespace {

LayerKind HybridSymbolKind(char c, bool mla) {
  switch (c) {
    case 'M':
      return {Mixer::kMamba, Mlp::kNone};
    case '*':
      return {mla ? Mixer::kMla : Mixer::kAttention, Mlp::kNone};
    case '-':
      return {Mixer::kNone, Mlp::kDense};
    case 'E':
      return {Mixer::kNone, Mlp::kMoe};
  }
  return {Mixer::kNone, Mlp::kNone};
}

}  // namespace

std::vector<LayerKind> ModelSpec::DecoderLayers() const {
  std::vector<LayerKind> out;
  if (num_layers <= 0) return out;
  if (is_hybrid()) {
    auto parsed = ParseHybridPattern(hybrid_layer_pattern);
    if (!parsed.ok()) return out;
    for (char c : parsed->layers) {
      out.push_back(HybridSymbolKind(c, multi_latent_attention));
    }
    return out;
  }
  const Mixer mixer = multi_latent_attention ? Mixer::kMla : Mixer::kAttention;
  // Called for every estimate of a search: fill, then mark the MoE layers.
  out.assign(num_layers, LayerKind{mixer, Mlp::kDense});
  if (!is_moe()) return out;
  if (!moe_layer_pattern.empty()) {
    const int64_t n = std::min<int64_t>(
        num_layers, static_cast<int64_t>(moe_layer_pattern.size()));
    for (int64_t i = 0; i < n; ++i) {
      if (moe_layer_pattern[i] != 0) out[i].mlp = Mlp::kMoe;
    }
    return out;
  }
  // Integer moe_layer_freq n: layer i is MoE iff i % n == 0.
  const int64_t freq = moe_layer_freq > 0 ? moe_layer_freq : 1;
  for (int64_t i = 0; i < num_layers; i += freq) out[i].mlp = Mlp::kMoe;
  return out;
}

std::vector<LayerKind> ModelSpec::MtpDepthLayers() const {
  if (mtp_num_layers <= 0 || num_layers <= 0) return {};
  if (is_hybrid()) {
    auto parsed = ParseHybridPattern(hybrid_layer_pattern);
    std::vector<LayerKind> out;
    if (!parsed.ok()) return out;
    for (char c : parsed->mtp_depth) {
      out.push_back(HybridSymbolKind(c, multi_latent_attention));
    }
    return out;
  }
  // Megatron's MTP block uses the last decoder layer's spec.
  return {{multi_latent_attention ? Mixer::kMla : Mixer::kAttention,
           IsMoeLayer(num_layers - 1) ? Mlp::kMoe : Mlp::kDense}};
}

StatusOr<std::vector<uint8_t>> ParseMoeLayerFreq(const std::string& expr) {
  // Recursive descent over: sum := term ('+' term)*; term := atom ('*' int)*;
  // atom := '[' int (',' int)* ']' | '(' sum ')'.
  struct Parser {
    const std::string& s;
    size_t pos = 0;
    std::string error;
    void Skip() {
      while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
    }
    bool Fail(const std::string& what) {
      if (error.empty()) {
        error = what + " at position " + std::to_string(pos + 1);
      }
      return false;
    }
    bool Int(int64_t* v) {
      Skip();
      if (pos >= s.size() || s[pos] < '0' || s[pos] > '9') {
        return Fail("expected a number");
      }
      int64_t n = 0;
      while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
        n = n * 10 + (s[pos++] - '0');
        if (n > 1000000) return Fail("number too large");
      }
      *v = n;
      return true;
    }
    bool Atom(std::vector<uint8_t>* out) {
      Skip();
      if (pos < s.size() && s[pos] == '(') {
        ++pos;
        if (!Sum(out)) return false;
        Skip();
        if (pos >= s.size() || s[pos] != ')') return Fail("expected ')'");
        ++pos;
        return true;
      }
      if (pos >= s.size() || s[pos] != '[') return Fail("expected '[' or '('");
      ++pos;
      while (true) {
        int64_t v = 0;
        if (!Int(&v)) return false;
        if (v > 1) return Fail("layer flags must be 0 or 1");
        out->push_back(static_cast<uint8_t>(v));
        Skip();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == ']') {
          ++pos;
          return true;
        }
        return Fail("expected ',' or ']'");
      }
    }
    bool Term(std::vector<uint8_t>* out) {
      std::vector<uint8_t> base;
      if (!Atom(&base)) return false;
      while (true) {
        Skip();
        if (pos >= s.size() || s[pos] != '*') break;
        ++pos;
        int64_t n = 0;
        if (!Int(&n)) return false;
        if (base.size() * n > 10000)
          return Fail("list longer than 10000 layers");
        std::vector<uint8_t> rep;
        for (int64_t i = 0; i < n; ++i)
          rep.insert(rep.end(), base.begin(), base.end());
        base.swap(rep);
      }
      out->insert(out->end(), base.begin(), base.end());
      return out->size() <= 10000 || Fail("list longer than 10000 layers");
    }
    bool Sum(std::vector<uint8_t>* out) {
      if (!Term(out)) return false;
      while (true) {
        Skip();
        if (pos >= s.size() || s[pos] != '+') return true;
        ++pos;
        if (!Term(out)) return false;
      }
    }
  };
  Parser p{expr, 0, ""};
  std::vector<uint8_t> out;
  bool ok = p.Sum(&out);
  p.Skip();
  if (ok && p.pos != expr.size())
    ok = p.Fail("unexpected '" +
                yaml_util::Printable(std::string(1, expr[p.pos])) + "'");
  if (!ok) {
    return Status::InvalidArgument(
        "moe_layer_freq '" + yaml_util::Printable(expr) + "': " + p.error,
        "write an integer or Megatron's list expression, e.g. "
        "([0]*3+[1]*58) for 3 dense then 58 MoE layers");
  }
  return out;
}

std::string FormatMoeLayerFreq(const std::vector<uint8_t>& pattern) {
  std::string out;
  size_t i = 0;
  int runs = 0;
  while (i < pattern.size()) {
    size_t j = i;
    while (j < pattern.size() && pattern[j] == pattern[i]) ++j;
    if (runs++ > 0) out += "+";
    out += "[" + std::to_string(pattern[i]) + "]*" + std::to_string(j - i);
    i = j;
  }
  return "(" + out + ")";
}

StatusOr<HybridPattern> ParseHybridPattern(const std::string& pattern) {
  HybridPattern out;
  const size_t slash = pattern.find('/');
  const std::string main = pattern.substr(0, slash);
  auto bad = [&](size_t pos, const std::string& why) {
    return Status::InvalidArgument(
        "hybrid_layer_pattern '" + yaml_util::Printable(pattern) + "': " + why +
            " at position " + std::to_string(pos + 1),
        "use M (Mamba), * (attention), - (MLP), E (MoE), | between pipeline "
        "segments and /<pattern> per MTP depth");
  };
  for (size_t i = 0; i < main.size(); ++i) {
    const char c = main[i];
    if (c == '|') {
      ++out.segments;
    } else if (c == 'M' || c == '*' || c == '-' || c == 'E') {
      out.layers += c;
    } else {
      return bad(i, std::string("unknown symbol '") +
                        yaml_util::Printable(std::string(1, c)) + "'");
    }
  }
  if (out.layers.empty()) return bad(0, "no layers");
  if (slash != std::string::npos) {
    size_t start = slash + 1;
    while (true) {
      const size_t next = pattern.find('/', start);
      const std::string depth = pattern.substr(
          start, next == std::string::npos ? std::string::npos : next - start);
      for (size_t i = 0; i < depth.size(); ++i) {
        const char c = depth[i];
        if (c != 'M' && c != '*' && c != '-' && c != 'E') {
          return bad(start + i, std::string("unknown MTP symbol '") +
                                    yaml_util::Printable(std::string(1, c)) +
                                    "'");
        }
      }
      if (depth.empty()) return bad(start, "empty MTP depth");
      if (out.mtp_depths > 0 && depth != out.mtp_depth) {
        return bad(start, "MTP depths differ ('" + out.mtp_depth + "' vs '" +
                              depth + "')");
      }
      out.mtp_depth = depth;
      ++out.mtp_depths;
      if (next == std::string::npos) break;
      start = next + 1;
    }
  }
  return out;
}

namespace {

// The 2025-26 architecture keys (docs/sources.md §2): each one positive where
// it is used, the layer pattern as long as num_layers, and the divisibility
// Megatron-Core asserts.
Status ValidateArchitecture(const ModelSpec& m, const KeyLocator& where) {
  auto invalid = [&](const char* key, const std::string& what,
                     const std::string& hint) {
    return Status::InvalidArgument(Located(where(key), what), hint);
  };
  const std::vector<std::pair<const char*, int64_t>> non_negative = {
      {"moe_shared_expert_intermediate_size",
       m.moe_shared_expert_intermediate_size},
      {"moe_latent_size", m.moe_latent_size},
      {"moe_router_num_groups", m.moe_router_num_groups},
      {"moe_router_group_topk", m.moe_router_group_topk},
      {"window_attn_skip_freq", m.window_attn_skip_freq},
      {"q_lora_rank", m.q_lora_rank},
      {"kv_lora_rank", m.kv_lora_rank},
      {"qk_head_dim", m.qk_head_dim},
      {"qk_pos_emb_head_dim", m.qk_pos_emb_head_dim},
      {"v_head_dim", m.v_head_dim},
      {"mtp_num_layers", m.mtp_num_layers},
      {"mamba_num_heads", m.mamba_num_heads},
  };
  for (const auto& [key, value] : non_negative) {
    if (value < 0) {
      return invalid(key,
                     std::string(key) +
                         ": expected a non-negative integer, got '" +
                         std::to_string(value) + "'",
                     "use 0 to leave the feature off");
    }
    MESHTUNE_RETURN_IF_ERROR(
        CheckLimit(value, limits::kFfnHiddenSize, key, where(key)));
  }
  if (m.mtp_use_repeated_layer && m.mtp_num_layers <= 0) {
    return invalid("mtp_use_repeated_layer",
                   "mtp_use_repeated_layer needs MTP depths (mtp_num_layers "
                   "is 0)",
                   "give mtp_num_layers, or leave mtp_use_repeated_layer out");
  }
  if (m.window_size < -1) {
    return invalid("window_size",
                   "window_size: expected -1 (full attention) or a window "
                   "in tokens, got '" +
                       std::to_string(m.window_size) + "'",
                   "GPT-OSS uses window_size 128");
  }
  if (!(m.moe_expert_capacity_factor >= 0)) {
    return invalid("moe_expert_capacity_factor",
                   "moe_expert_capacity_factor: expected a non-negative "
                   "number, got '" +
                       Num(m.moe_expert_capacity_factor) + "'",
                   "use 0 for dropless MoE, 1.0 to 1.25 for token dropping");
  }
  const bool moe_keys = m.moe_shared_expert_intermediate_size > 0 ||
                        m.moe_latent_size > 0 || m.moe_router_num_groups > 0 ||
                        !m.moe_layer_pattern.empty();
  if (moe_keys && !m.is_moe()) {
    return invalid("num_experts", "MoE keys are set but num_experts is 0",
                   "set num_experts for an MoE model, or remove the MoE keys "
                   "for a dense one");
  }
  if (m.moe_router_num_groups > 0) {
    if (m.num_experts % m.moe_router_num_groups != 0 ||
        m.moe_router_group_topk < 1 ||
        m.moe_router_group_topk > m.moe_router_num_groups) {
      return invalid(
          "moe_router_num_groups",
          "moe_router_num_groups " + std::to_string(m.moe_router_num_groups) +
              " must divide num_experts " + std::to_string(m.num_experts) +
              " and moe_router_group_topk must be 1 to it",
          "DeepSeek-V3 uses 8 groups and group top-k 4");
    }
  }
  if (!m.moe_layer_pattern.empty() &&
      static_cast<int64_t>(m.moe_layer_pattern.size()) != m.num_layers) {
    return invalid(
        "moe_layer_freq",
        "moe_layer_freq lists " + std::to_string(m.moe_layer_pattern.size()) +
            " layers but num_layers is " + std::to_string(m.num_layers),
        "give one 0/1 flag per layer, e.g. ([0]*3+[1]*58) for 61 "
        "layers");
  }
  if (m.multi_latent_attention) {
    if (m.kv_lora_rank < 1 || m.qk_head_dim < 1 || m.v_head_dim < 1) {
      return invalid("kv_lora_rank",
                     "multi_latent_attention needs kv_lora_rank, qk_head_dim "
                     "and v_head_dim greater than 0",
                     "DeepSeek-V3 uses kv_lora_rank 512, qk_head_dim 128, "
                     "qk_pos_emb_head_dim 64, v_head_dim 128");
    }
  }
  if (m.is_hybrid()) {
    auto parsed = ParseHybridPattern(m.hybrid_layer_pattern);
    if (!parsed.ok()) {
      return Status::InvalidArgument(
          Located(where("hybrid_layer_pattern"), parsed.status().message()),
          parsed.status().hint());
    }
    if (static_cast<int64_t>(parsed->layers.size()) != m.num_layers) {
      return invalid(
          "hybrid_layer_pattern",
          "hybrid_layer_pattern has " + std::to_string(parsed->layers.size()) +
              " layers but num_layers is " + std::to_string(m.num_layers),
          "set num_layers to the number of M, *, - and E symbols "
          "before the first '/'");
    }
    if (parsed->mtp_depths != m.mtp_num_layers) {
      return invalid(
          "mtp_num_layers",
          "mtp_num_layers " + std::to_string(m.mtp_num_layers) +
              " but hybrid_layer_pattern has " +
              std::to_string(parsed->mtp_depths) + " MTP depths",
          "leave mtp_num_layers out: the pattern's '/' parts set it");
    }
    const bool has_moe = parsed->layers.find('E') != std::string::npos ||
                         parsed->mtp_depth.find('E') != std::string::npos;
    if (has_moe != m.is_moe()) {
      return invalid("num_experts",
                     has_moe ? "hybrid_layer_pattern has E layers but "
                               "num_experts is 0"
                             : "num_experts is set but hybrid_layer_pattern "
                               "has no E layer",
                     "set num_experts and moe_router_topk for E layers");
    }
    const int64_t heads = m.mamba_heads();
    if (m.mamba_head_dim < 1 || m.mamba_state_dim < 1 ||
        m.mamba_num_groups < 1 || heads < 1 ||
        heads % m.mamba_num_groups != 0) {
      return invalid("mamba_num_heads",
                     "Mamba-2 needs positive mamba_head_dim, mamba_state_dim "
                     "and mamba_num_groups, and mamba_num_groups dividing the "
                     "heads (" +
                         std::to_string(heads) + ")",
                     "Nemotron-H uses head_dim 64, state_dim 128 or 256, 8 "
                     "groups");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ModelSpec::Validate(const std::string& where) const {
  return ValidateModel(*this, [&where](const std::string&) { return where; });
}

Status ValidateModel(const ModelSpec& m, const KeyLocator& where) {
  if (m.name.empty()) {
    return Status::InvalidArgument(Located(where("name"), "model has no name"),
                                   "add a line 'name: my-model'");
  }
  const std::vector<std::pair<const char*, int64_t>> sizes = {
      {"num_layers", m.num_layers},
      {"hidden_size", m.hidden_size},
      {"num_attention_heads", m.num_attention_heads},
      {"num_query_groups", m.num_query_groups},
      {"kv_channels", m.kv_channels},
      {"ffn_hidden_size", m.ffn_hidden_size},
      {"vocab_size", m.vocab_size},
      {"seq_length", m.seq_length},
  };
  for (const auto& [key, value] : sizes) {
    if (value <= 0) {
      return Status::InvalidArgument(
          Located(where(key), std::string(key) +
                                  ": expected a positive integer, got '" +
                                  std::to_string(value) + "'"),
          "set " + std::string(key) + " to a value greater than 0");
    }
  }
  // Specs built in code (Megatron arguments, stored searches) meet the same
  // bounds as the YAML parser's (search_spaces/limits.h).
  const std::vector<std::tuple<const char*, int64_t, const SizeLimit*>>
      bounded = {
          {"num_layers", m.num_layers, &limits::kNumLayers},
          {"hidden_size", m.hidden_size, &limits::kHiddenSize},
          {"num_attention_heads", m.num_attention_heads,
           &limits::kAttentionHeads},
          {"num_query_groups", m.num_query_groups, &limits::kAttentionHeads},
          {"kv_channels", m.kv_channels, &limits::kKvChannels},
          {"ffn_hidden_size", m.ffn_hidden_size, &limits::kFfnHiddenSize},
          {"vocab_size", m.vocab_size, &limits::kVocabSize},
          {"seq_length", m.seq_length, &limits::kSeqLength},
          {"num_experts", m.num_experts, &limits::kNumExperts},
          {"moe_router_topk", m.moe_router_topk, &limits::kNumExperts},
          {"moe_ffn_hidden_size", m.moe_ffn_hidden_size,
           &limits::kFfnHiddenSize},
          {"moe_layer_freq", m.moe_layer_freq, &limits::kNumLayers},
          {"global_batch_size", m.global_batch_size, &limits::kGlobalBatchSize},
      };
  for (const auto& [key, value, limit] : bounded) {
    MESHTUNE_RETURN_IF_ERROR(CheckLimit(value, *limit, key, where(key)));
  }
  if (m.global_batch_size < 0) {
    return Status::InvalidArgument(
        Located(where("global_batch_size"),
                "global_batch_size: expected a non-negative integer, got '" +
                    std::to_string(m.global_batch_size) + "'"),
        "set global_batch_size to the recipe's batch in sequences, or 0 for "
        "none");
  }
  // Megatron-Core splits query heads evenly over key/value groups (GQA).
  if (m.num_attention_heads % m.num_query_groups != 0) {
    return Status::InvalidArgument(
        Located(where("num_query_groups"),
                "num_query_groups " + std::to_string(m.num_query_groups) +
                    " does not divide num_attention_heads " +
                    std::to_string(m.num_attention_heads)),
        "use a divisor of num_attention_heads (equal to it for multi-head "
        "attention, e.g. 8 for LLaMA-style GQA)");
  }
  if (m.num_experts < 0) {
    return Status::InvalidArgument(
        Located(where("num_experts"),
                "num_experts: expected a non-negative integer, got '" +
                    std::to_string(m.num_experts) + "'"),
        "set num_experts to 0 for a dense model");
  }
  if (m.moe_layer_freq < 1) {
    return Status::InvalidArgument(
        Located(where("moe_layer_freq"),
                "moe_layer_freq: expected a positive integer, got '" +
                    std::to_string(m.moe_layer_freq) + "'"),
        "use 1 for every layer MoE, 2 for every other layer");
  }
  if (!m.is_moe()) {
    if (m.moe_router_topk != 0 || m.moe_ffn_hidden_size != 0) {
      const char* key =
          m.moe_router_topk != 0 ? "moe_router_topk" : "moe_ffn_hidden_size";
      return Status::InvalidArgument(
          Located(where(key),
                  std::string(key) + " is set but num_experts is 0"),
          "set num_experts for an MoE model, or remove the MoE keys for a "
          "dense one");
    }
  } else {
    if (m.moe_router_topk < 1 || m.moe_router_topk > m.num_experts) {
      return Status::InvalidArgument(
          Located(where("moe_router_topk"),
                  "moe_router_topk " + std::to_string(m.moe_router_topk) +
                      " is not between 1 and num_experts " +
                      std::to_string(m.num_experts)),
          "set moe_router_topk to the experts each token is routed to (2 for "
          "Mixtral)");
    }
    if (m.moe_ffn_hidden_size < 0) {
      return Status::InvalidArgument(
          Located(where("moe_ffn_hidden_size"),
                  "moe_ffn_hidden_size: expected a positive integer, got '" +
                      std::to_string(m.moe_ffn_hidden_size) + "'"),
          "set the expert FFN size, or leave it out to use ffn_hidden_size");
    }
  }
  MESHTUNE_RETURN_IF_ERROR(ValidateArchitecture(m, where));
  if (m.published_params_b < 0) {
    return Status::InvalidArgument(
        Located(where("published_params_b"),
                "published_params_b: expected a non-negative number, got '" +
                    Num(m.published_params_b) + "'"),
        "give the published parameter count in billions, or 0 if unknown");
  }
  return Status::Ok();
}

const char* ToString(Normalization n) {
  switch (n) {
    case Normalization::kLayerNorm:
      return "LayerNorm";
    case Normalization::kRMSNorm:
      return "RMSNorm";
  }
  return "?";
}

const char* ToString(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kSwiglu:
      return "swiglu";
    case Activation::kSquaredRelu:
      return "squared_relu";
    case Activation::kQuickGeglu:
      return "quick_geglu";
  }
  return "?";
}

const char* ToString(RouterScore r) {
  switch (r) {
    case RouterScore::kSoftmax:
      return "softmax";
    case RouterScore::kSigmoid:
      return "sigmoid";
    case RouterScore::kSqrtSoftplus:
      return "sqrtsoftplus";
  }
  return "?";
}

const char* ToString(TokenDispatcher d) {
  switch (d) {
    case TokenDispatcher::kAllgather:
      return "allgather";
    case TokenDispatcher::kAlltoall:
      return "alltoall";
    case TokenDispatcher::kFlex:
      return "flex";
  }
  return "?";
}

const char* ToString(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearnedAbsolute:
      return "learned_absolute";
    case PositionEmbedding::kRope:
      return "rope";
    case PositionEmbedding::kNone:
      return "none";
  }
  return "?";
}

}  // namespace meshtune::search_spaces
