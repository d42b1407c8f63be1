// GptModel: the CPU model of what one rank holds (engine/model_layout.h: its
// chunks, layers, segments and parameters): forward and backward of each
// chunk in fp32, the vocab-parallel embedding on the first virtual stage and
// the final norm, vocab-parallel output layer and cross-entropy on the last.
//
// Activations between stages are [s·b/tp, h] under sequence parallelism and
// [s·b, h] otherwise (rows sequence-major, see engine/cpu/ops.h), where s is
// the rank's share of the sequence: seq/cp under context parallelism (its
// two chunks, engine/context_parallel/sequence_chunks.h), else seq.
#ifndef MESHTUNE_ENGINE_GPT_MODEL_H_
#define MESHTUNE_ENGINE_GPT_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model_layout.h"
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
  std::vector<int32_t> tokens, targets;            // [s·b] each (s = seq/cp)
  std::vector<LayerCache> caches;                  // per layer of the chunk
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

  // The chunks, segments and parameters this rank holds.
  const ModelLayout& layout() const { return layout_; }

  // Rows × hidden of the activation passed between stages.
  int64_t ActivationCount() const;

  // Forward of `chunk` for one micro-batch. The first virtual stage reads
  // `tokens` [s·b] (input ids of this cp rank's chunks, sequence-major,
  // s = seq/cp); others read `input` [ActivationCount()]. The last virtual
  // stage needs `targets` [s·b] and adds the sum of the per-token losses of
  // the micro-batch's tokens on this cp rank (the same value on every tp
  // rank) to *loss_sum; the others write `output`.
  void Forward(int chunk, const int32_t* tokens, const int32_t* targets,
               const float* input, float* output, ChunkState* state,
               double* loss_sum);
  // The sum of the MoE layers' aux losses of every Forward since the last
  // call (this rank's partials; recomputed forwards not counted), and
  // resets it.
  double TakeAuxLossSum();
  // Once per step, after the backward of every micro-batch: each MoE
  // layer's aux-loss-free expert bias takes its step (TransformerLayer::
  // UpdateExpertBias over tp and dp·cp). Collective; nothing without it.
  void UpdateExpertBias(float rate);
  // Backward of `chunk`: the last virtual stage starts from the loss scaled
  // by `loss_scale` per token; others read `doutput`. All but the first
  // virtual stage write `dinput`. Frees `state`.
  void Backward(int chunk, const float* doutput, float* dinput,
                ChunkState* state, float loss_scale);

 private:
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
  ModelLayout layout_;
  // [chunk][layer within the chunk], built by Init.
  std::vector<std::vector<std::unique_ptr<TransformerLayer>>> layers_;
  double aux_loss_sum_ = 0;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_GPT_MODEL_H_
