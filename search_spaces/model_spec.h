// ModelSpec: the architecture of a decoder-only transformer, in Megatron-LM's
// vocabulary (argument names with underscores, docs/design.md §2).
//
// Covers GPT (LayerNorm, GELU, learned positions, tied embeddings) and
// LLaMA-style models (RMSNorm, SwiGLU, RoPE, GQA, untied embeddings), dense and
// MoE. A ModelSpec is a plain value; Validate() checks its internal
// consistency (sizes positive, heads divide hidden, ...).
#ifndef MESHTUNE_SEARCH_SPACES_MODEL_SPEC_H_
#define MESHTUNE_SEARCH_SPACES_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

enum class Normalization { kLayerNorm, kRMSNorm };
enum class Activation { kGelu, kSwiglu };
enum class PositionEmbedding { kLearnedAbsolute, kRope };

struct ModelSpec {
  // Identity. `name` is the canonical preset name ("gpt3-175b"); aliases are
  // extra names it answers to ("175b", "gpt3"). display_name is for reports.
  std::string name;
  std::string display_name;
  std::vector<std::string> aliases;

  // Megatron architecture keys.
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_query_groups = 0;  // = num_attention_heads for MHA
  int64_t kv_channels = 0;       // head dim; hidden_size / heads when 0 in YAML
  int64_t ffn_hidden_size = 0;
  int64_t vocab_size = 0;  // as given; padding is applied by the cost model
  int64_t seq_length = 0;  // default sequence length of the recipe
  Normalization normalization = Normalization::kLayerNorm;
  Activation activation = Activation::kGelu;
  PositionEmbedding position_embedding_type =
      PositionEmbedding::kLearnedAbsolute;
  bool untie_embeddings_and_output_weights = false;

  // MoE (num_experts == 0 means dense).
  int64_t num_experts = 0;
  int64_t moe_router_topk = 0;
  int64_t moe_ffn_hidden_size = 0;  // expert FFN size; ffn_hidden_size if 0
  int64_t moe_layer_freq = 1;       // layer i is MoE iff i % freq == 0

  // Training defaults of the recipe (overridable from the command line).
  int64_t global_batch_size = 0;

  // Published parameter count in billions, for reports and tests (0 = unknown).
  double published_params_b = 0.0;

  bool is_moe() const { return num_experts > 0; }
  // Number of MoE layers: layers i in [0, num_layers) with i % freq == 0.
  int64_t num_moe_layers() const;
  int64_t num_dense_layers() const { return num_layers - num_moe_layers(); }
  // Query projection width a·d_h (usually == hidden_size).
  int64_t query_projection_size() const {
    return num_attention_heads * kv_channels;
  }
  int64_t expert_ffn_hidden_size() const {
    return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn_hidden_size;
  }

  // Checks sizes and divisibility. `where` prefixes messages ("file.yaml:3").
  Status Validate(const std::string& where = "") const;
};

const char* ToString(Normalization n);
const char* ToString(Activation a);
const char* ToString(PositionEmbedding p);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_MODEL_SPEC_H_
