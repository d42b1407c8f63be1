// ModelLayout: what one rank of a GPT or LLaMA-style decoder holds, and
// where: the chunks (virtual pipeline stages) of its pipeline rank, each a
// run of transformer layers with its recompute segments and parameters, the
// vocab-parallel word embedding (and learned positions) on the first
// virtual stage, the final norm and output layer on the last one, and the
// rank's rows of the padded vocabulary. Both backends build on it: the CPU
// model (engine/gpt_model.h) and the CUDA model (engine/cuda/gpt_model.h)
// run the same chunks, segments and parameters from the same initial
// weights, so their losses compare and their checkpoints are one format.
//
// Layer placement follows search_spaces::PipelineLayout (Megatron's
// virtual-stage order: chunk c of pipeline rank p is virtual stage c·pp + p).
// Tied embeddings with pp > 1 keep a copy of the word embedding on the last
// stage under the same name; their gradients are summed over the "embd"
// group (Megatron finalize_model_grads) so both copies stay identical.
#ifndef MESHTUNE_ENGINE_MODEL_LAYOUT_H_
#define MESHTUNE_ENGINE_MODEL_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "engine/param_store.h"
#include "engine/train_config.h"
#include "engine/transformer_layer.h"

namespace meshtune::engine {

class ModelLayout {
 public:
  // A run of layers of one chunk, kept or recomputed as a whole.
  struct Segment {
    int64_t begin, end;  // layer indices within the chunk
    bool recompute;      // full recompute: keep only the input
  };

  // Registers the parameters of tensor-parallel rank `tp_rank` of pipeline
  // rank `pp_rank` in `store` (not finalized: the caller finalizes it,
  // then calls Init); MoE layers hold the experts of expert-parallel rank
  // `ep_rank`, their shard `etp_rank`. `store` is not owned.
  ModelLayout(const TrainConfig& config, int tp_rank, int pp_rank,
              ParamStore* store, int ep_rank = 0, int etp_rank = 0);

  // Deterministic initialization of the registered parameters, identical
  // for every parallel layout (engine/param_init.h). `store` is the
  // constructor's, finalized.
  void Init(ParamStore* store) const;

  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  bool HasEmbedding(int chunk) const;  // first virtual stage
  bool HasHead(int chunk) const;       // last virtual stage
  // Global index of the first transformer layer of `chunk` and its count.
  int64_t FirstLayer(int chunk) const { return chunks_[chunk].first_layer; }
  int64_t NumLayers(int chunk) const {
    return static_cast<int64_t>(chunks_[chunk].layer_params.size());
  }
  // A chunk's recompute segments, in layer order, and its layers'
  // parameter indices.
  const std::vector<Segment>& Segments(int chunk) const {
    return chunks_[chunk].segments;
  }
  const LayerParams& LayerParamsOf(int chunk, int64_t layer) const {
    return chunks_[chunk].layer_params[layer];
  }
  // Store indices of the embeddings (first virtual stage), the final norm
  // and the output layer (last virtual stage; the word embedding's own
  // index or its last-stage copy when tied); −1 where this rank has none.
  int word_embedding() const { return word_emb_; }
  int position_embedding() const { return pos_emb_; }
  int final_norm_weight() const { return final_w_; }
  int final_norm_bias() const { return final_b_; }
  int output_weight() const { return output_; }
  // This rank's vocabulary rows [vocab_start, vocab_start + vocab_local) of
  // the padded vocabulary.
  int64_t vocab_start() const { return vocab_start_; }
  int64_t vocab_local() const { return vocab_local_; }

 private:
  struct Chunk {
    int64_t virtual_stage = 0;
    int64_t first_layer = 0;
    std::vector<LayerParams> layer_params;
    std::vector<Segment> segments;
  };

  TrainConfig config_;
  std::vector<Chunk> chunks_;
  int64_t padded_vocab_ = 0, vocab_local_ = 0, vocab_start_ = 0;
  int word_emb_ = -1, pos_emb_ = -1, final_w_ = -1, final_b_ = -1, output_ = -1;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_MODEL_LAYOUT_H_
