#include "engine/model_layout.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/param_init.h"
#include "search_spaces/pipeline_layout.h"

namespace meshtune::engine {

using search_spaces::PipelineLayout;
using search_spaces::PositionEmbedding;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;

ModelLayout::ModelLayout(const TrainConfig& config, int tp_rank, int pp_rank,
                         ParamStore* store, int ep_rank, int etp_rank)
    : config_(config) {
  const auto& m = config.model;
  const auto& par = config.parallel;
  const int tp = static_cast<int>(par.tp);
  const int64_t pp = par.pp, vpp = par.vpp, stage = pp_rank;
  const LayerShape layer_shape = MakeLayerShape(config);
  padded_vocab_ = config.padded_vocab_size();
  vocab_local_ = padded_vocab_ / tp;
  vocab_start_ = tp_rank * vocab_local_;
  const PipelineLayout layout(m.num_layers, pp, vpp);
  const bool tied = !m.untie_embeddings_and_output_weights;

  auto vocab_param = [&](const std::string& name, bool first_copy) {
    ParamInfo info;
    info.name = name;
    info.global_shape = {m.vocab_size, m.hidden_size};
    info.split = TpSplit::kVocab;
    info.padded_rows = padded_vocab_;
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    info.tied_embedding = tied && pp > 1;
    // The last stage's copy of a tied embedding is counted by the first.
    info.counts_in_norm = first_copy;
    return store->Add(std::move(info));
  };
  auto replicated = [&](const std::string& name, std::vector<int64_t> shape,
                        bool decay) {
    ParamInfo info;
    info.name = name;
    info.global_shape = std::move(shape);
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    info.weight_decay = decay;
    info.sequence_parallel = layer_shape.sp;
    info.counts_in_norm = tp_rank == 0;
    return store->Add(std::move(info));
  };

  for (int64_t c = 0; c < vpp; ++c) {
    Chunk chunk;
    chunk.virtual_stage = c * pp + stage;
    for (int64_t v = 0; v < chunk.virtual_stage; ++v) {
      chunk.first_layer += layout.LayersInChunk(v % pp, v / pp);
    }
    if (chunk.virtual_stage == 0) {
      word_emb_ = vocab_param("embedding.word_embeddings.weight", true);
      if (m.position_embedding_type == PositionEmbedding::kLearnedAbsolute) {
        pos_emb_ = replicated("embedding.position_embeddings.weight",
                              {m.seq_length, m.hidden_size}, true);
      }
    }
    const int64_t count = layout.LayersInChunk(stage, c);
    for (int64_t l = 0; l < count; ++l) {
      chunk.layer_params.push_back(AddLayerParams(
          *store, config, chunk.first_layer + l, tp_rank, ep_rank, etp_rank));
    }
    // Full recompute (Megatron --recompute-method): uniform checkpoints
    // groups of num_layers layers; block checkpoints the first num_layers
    // layers of each chunk one by one and keeps the rest.
    const auto& rc = par.recompute;
    if (rc.granularity == RecomputeGranularity::kFull &&
        rc.method == RecomputeMethod::kUniform) {
      for (int64_t l = 0; l < count; l += rc.num_layers) {
        chunk.segments.push_back({l, std::min(count, l + rc.num_layers), true});
      }
    } else {
      const bool block = rc.granularity == RecomputeGranularity::kFull;
      for (int64_t l = 0; l < count; ++l) {
        chunk.segments.push_back({l, l + 1, block && l < rc.num_layers});
      }
    }
    if (chunk.virtual_stage == pp * vpp - 1) {
      final_w_ =
          replicated("decoder.final_layernorm.weight", {m.hidden_size}, false);
      if (!layer_shape.rmsnorm) {
        final_b_ =
            replicated("decoder.final_layernorm.bias", {m.hidden_size}, false);
      }
      if (!tied) {
        output_ = vocab_param("output_layer.weight", true);
      } else if (word_emb_ >= 0) {
        output_ = word_emb_;  // pp == 1: one tensor serves both ends
      } else {
        output_ = vocab_param("embedding.word_embeddings.weight", false);
      }
    }
    chunks_.push_back(std::move(chunk));
  }
}

void ModelLayout::Init(ParamStore* store) const {
  const uint64_t seed = config_.seed;
  const float std = config_.init_method_std;
  if (word_emb_ >= 0)
    InitParam(*store, word_emb_, InitKind::kNormal, std, seed);
  if (pos_emb_ >= 0) InitParam(*store, pos_emb_, InitKind::kNormal, std, seed);
  if (output_ >= 0 && output_ != word_emb_) {
    InitParam(*store, output_, InitKind::kNormal, std, seed);
  }
  if (final_w_ >= 0) InitParam(*store, final_w_, InitKind::kOnes, 0, seed);
  if (final_b_ >= 0) InitParam(*store, final_b_, InitKind::kZeros, 0, seed);
  for (const Chunk& chunk : chunks_) {
    for (const LayerParams& lp : chunk.layer_params) {
      InitLayerParams(*store, lp, config_);
    }
  }
}

bool ModelLayout::HasEmbedding(int chunk) const {
  return chunks_[chunk].virtual_stage == 0;
}

bool ModelLayout::HasHead(int chunk) const {
  return chunks_[chunk].virtual_stage ==
         config_.parallel.pp * config_.parallel.vpp - 1;
}

}  // namespace meshtune::engine
