#include "search_spaces/model_spec.h"

#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/spec_validation.h"

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

int64_t ModelSpec::num_moe_layers() const {
  if (!is_moe() || num_layers <= 0) return 0;
  // Megatron-Core: with an integer moe_layer_freq n, layer i (0-based) is an
  // MoE layer iff i % n == 0, i.e. ceil(L / n) layers.
  const int64_t freq = moe_layer_freq > 0 ? moe_layer_freq : 1;
  return (num_layers + freq - 1) / freq;
}

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
  }
  return "?";
}

const char* ToString(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearnedAbsolute:
      return "learned_absolute";
    case PositionEmbedding::kRope:
      return "rope";
  }
  return "?";
}

}  // namespace meshtune::search_spaces
