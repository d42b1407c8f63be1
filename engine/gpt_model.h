// GptModel: the part of a GPT or LLaMA-style decoder that one rank holds:
// the model chunks (virtual pipeline stages) of its pipeline rank, each a
// run of transformer layers, plus the vocab-parallel word embedding (and
// learned positions) on the first virtual stage and the final norm, the
// vocab-parallel output layer and cross-entropy on the last one.
//
// Layer placement follows search_spaces::PipelineLayout (Megatron's
// virtual-stage order: chunk c of pipeline rank p is virtual stage c·pp + p).
// Tied embeddings with pp > 1 keep a copy of the word embedding on the last
// stage under the same name; their gradients are summed over the "embd"
// group (Megatron finalize_model_grads) so both copies stay identical.
//
// Activations between stages are [s·b/tp, h] under sequence parallelism and
// [s·b, h] otherwise (rows sequence-major, see engine/cpu/ops.h).
#ifndef MESHTUNE_ENGINE_GPT_MODEL_H_
#define MESHTUNE_ENGINE_GPT_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"
#include "engine/transformer_layer.h"

namespace meshtune::engine {

// Saved state of one micro-batch through one chunk, from its forward to its
// backward.
struct ChunkState {
  // Global dataset index of the micro-batch's first sample (the caller sets
  // it before Forward): keys the dropout masks so that every layout drops
  // the same elements.
  int64_t first_sample = 0;
  std::vector<int32_t> tokens, targets;  // [s·b] each (sequence-major)
  std::vector<LayerCache> caches;        // per layer of the chunk
  std::vector<std::vector<float>> segment_inputs;  // full-recompute inputs
  // Output head (last virtual stage).
  std::vector<float> head_x, head_mean, head_rstd;  // final-norm input/stats
  std::vector<float> head_full;         // [s·b, h] gathered final-norm output
  std::vector<float> logits;            // [s·b, vocab/tp]
  std::vector<float> row_max, sum_exp;  // [s·b]
};

class GptModel {
 public:
  // Registers this rank's parameters in `store` (not finalized; the caller
  // finalizes, then calls Init). groups, store not owned.
  GptModel(const TrainConfig& config, ProcessGroups* groups, ParamStore* store);

  // Deterministic initialization, identical for every parallel layout.
  void Init();

  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  bool HasEmbedding(int chunk) const;  // first virtual stage
  bool HasHead(int chunk) const;       // last virtual stage
  // Rows × hidden of the activation passed between stages.
  int64_t ActivationCount() const;

  // Forward of `chunk` for one micro-batch. The first virtual stage reads
  // `tokens` [s·b] (input ids, sequence-major); others read `input`
  // [ActivationCount()]. The last virtual stage needs `targets` [s·b] and
  // adds the sum of the per-token losses of the whole micro-batch (the same
  // value on every tp rank) to *loss_sum; the others write `output`.
  void Forward(int chunk, const int32_t* tokens, const int32_t* targets,
               const float* input, float* output, ChunkState* state,
               double* loss_sum);
  // Backward of `chunk`: the last virtual stage starts from the loss scaled
  // by `loss_scale` per token; others read `doutput`. All but the first
  // virtual stage write `dinput`. Frees `state`.
  void Backward(int chunk, const float* doutput, float* dinput,
                ChunkState* state, float loss_scale);

  // Global index of the first transformer layer of `chunk` and its count.
  int64_t FirstLayer(int chunk) const { return chunks_[chunk].first_layer; }
  int64_t NumLayers(int chunk) const {
    return static_cast<int64_t>(chunks_[chunk].layers.size());
  }

  // The layout other backends build on (the CUDA model runs the same
  // chunks, segments and parameters): a chunk's recompute segments, in
  // layer order, and its layers' parameter indices.
  struct Segment {
    int64_t begin, end;  // layer indices within the chunk
    bool recompute;      // full recompute: keep only the input
  };
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
    std::vector<std::unique_ptr<TransformerLayer>> layers;
    std::vector<Segment> segments;
  };
  void Label(const std::string& label) const;
  void EmbeddingForward(const int32_t* tokens, float* x, int64_t first_sample);
  void EmbeddingBackward(const int32_t* tokens, const float* dx,
                         int64_t first_sample);
  // Megatron embedding_dropout (p = hidden_dropout) on [nl, h] in place.
  void EmbeddingDropout(float* x, int64_t first_sample) const;
  void HeadForward(const float* x, const int32_t* targets, ChunkState* st,
                   double* loss_sum);
  void HeadBackward(ChunkState* st, float loss_scale, float* dx);

  TrainConfig config_;
  ProcessGroups* groups_;
  ParamStore* store_;
  LayerShape shape_;
  std::vector<Chunk> chunks_;
  int64_t padded_vocab_ = 0, vocab_local_ = 0, vocab_start_ = 0;
  int word_emb_ = -1, pos_emb_ = -1, final_w_ = -1, final_b_ = -1, output_ = -1;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_GPT_MODEL_H_
