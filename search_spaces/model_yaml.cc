// ParseModelYaml: Megatron-named model keys -> ModelSpec (docs/design.md
// §2).
#include <filesystem>
#include <string>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/presets.h"
#include "search_spaces/spec_validation.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {
namespace {

using yaml_util::MapReader;

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
      "num_experts",
      "moe_router_topk",
      "moe_ffn_hidden_size",
      "moe_layer_freq",
      "global_batch_size",
      "published_params_b",
  };
  return kKeys;
}

// "path/to/My-Model.yaml" -> "my-model": the name of an unnamed user file.
std::string StemName(const std::string& source) {
  return yaml_util::Lower(std::filesystem::path(source).stem().string());
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

  MESHTUNE_RETURN_IF_ERROR(
      r.Int("num_layers", true, 1, limits::kNumLayers, &m.num_layers));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("hidden_size", true, 1, limits::kHiddenSize, &m.hidden_size));
  MESHTUNE_RETURN_IF_ERROR(r.Int("num_attention_heads", true, 1,
                                 limits::kAttentionHeads,
                                 &m.num_attention_heads));
  m.num_query_groups = m.num_attention_heads;  // MHA unless GQA is given
  MESHTUNE_RETURN_IF_ERROR(r.Int("num_query_groups", false, 1,
                                 limits::kAttentionHeads, &m.num_query_groups));
  // kv_channels: 0 or absent means hidden_size / heads (model_spec.h).
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("kv_channels", false, 0, limits::kKvChannels, &m.kv_channels));
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
    MESHTUNE_RETURN_IF_ERROR(
        r.Enum("activation", true, {"gelu", "swiglu"}, &s));
    m.activation = s == "swiglu" ? Activation::kSwiglu : Activation::kGelu;
  }
  if (r.Has("position_embedding_type")) {
    MESHTUNE_RETURN_IF_ERROR(r.Enum("position_embedding_type", true,
                                    {"learned_absolute", "rope"}, &s));
    m.position_embedding_type = s == "rope"
                                    ? PositionEmbedding::kRope
                                    : PositionEmbedding::kLearnedAbsolute;
  }
  MESHTUNE_RETURN_IF_ERROR(r.Bool("untie_embeddings_and_output_weights", false,
                                  &m.untie_embeddings_and_output_weights));

  MESHTUNE_RETURN_IF_ERROR(
      r.Int("num_experts", false, 0, limits::kNumExperts, &m.num_experts));
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_router_topk", false, 1,
                                 limits::kNumExperts, &m.moe_router_topk));
  MESHTUNE_RETURN_IF_ERROR(r.Int("moe_ffn_hidden_size", false, 1,
                                 limits::kFfnHiddenSize,
                                 &m.moe_ffn_hidden_size));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("moe_layer_freq", false, 1, limits::kNumLayers, &m.moe_layer_freq));
  if (m.num_experts == 0) {
    for (const char* key :
         {"moe_router_topk", "moe_ffn_hidden_size", "moe_layer_freq"}) {
      if (r.Has(key)) {
        return Status::InvalidArgument(
            r.WhereKey(key) + ": " + key + " is set but num_experts is 0",
            "set num_experts for an MoE model, or remove the MoE keys for a "
            "dense one");
      }
    }
  }

  // 0 = the recipe gives no batch (files written for such models say so).
  MESHTUNE_RETURN_IF_ERROR(r.Int("global_batch_size", false, 0,
                                 limits::kGlobalBatchSize,
                                 &m.global_batch_size));
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("published_params_b", false, &m.published_params_b));

  MESHTUNE_RETURN_IF_ERROR(ValidateModel(
      m, [&r](const std::string& key) { return r.WhereKey(key); }));
  return m;
}

}  // namespace

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
