// ParamStore: every parameter a rank holds (its tensor-parallel shards of
// the layers of its pipeline chunks), in one flat float32 buffer with a
// matching flat gradient buffer (Megatron DDP's contiguous grad buffer,
// llm.c's single allocation). The optimizer, the DP gradient reduction and
// checkpoints work on the flat buffers; the model reads tensors by index.
//
// Each parameter knows its global (unsharded) shape and which slice this
// rank holds, so checkpoints can be saved from one layout and loaded into
// another.
#ifndef MESHTUNE_ENGINE_PARAM_STORE_H_
#define MESHTUNE_ENGINE_PARAM_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace meshtune::engine {

// How a parameter is split over the tensor-parallel group.
enum class TpSplit {
  kReplicated,  // every tp rank holds the whole tensor
  // Split along dim 0 (output rows of a column-parallel linear). The tensor
  // is a stack of `parts` (e.g. q|k|v or gate|up); each part is split in tp
  // equal row blocks and rank r holds [part0_r; part1_r; ...].
  kColumn,
  kRow,  // split along dim 1 (input columns of a row-parallel linear)
  // Vocabulary rows: global rows padded to padded_rows (a multiple of tp);
  // rank r holds rows [r·padded_rows/tp, (r+1)·padded_rows/tp). Only rows
  // < global_shape[0] exist in checkpoints; padding rows are never looked
  // up and their logits are masked.
  kVocab,
};
const char* ToString(TpSplit s);

struct ParamInfo {
  // Megatron-Core state-dict name, e.g.
  // "decoder.layers.3.mlp.linear_fc1.weight",
  // "embedding.word_embeddings.weight", "output_layer.weight".
  std::string name;
  std::vector<int64_t> global_shape;  // 1-D [n] or 2-D [rows, cols]
  TpSplit split = TpSplit::kReplicated;
  std::vector<int64_t> parts;  // kColumn: row counts of the stacked parts
  int64_t padded_rows = 0;     // kVocab: padded vocabulary size
  int tp_rank = 0, tp_size = 1;
  std::vector<int64_t> local_shape;
  int64_t offset = 0;  // into the flat buffers
  int64_t numel = 0;   // Π local_shape

  bool weight_decay = true;  // false for norms and biases (Megatron)
  // Replicated over tp but its gradient differs per tp rank under sequence
  // parallelism (norm weights/biases, row-parallel biases): all-reduced over
  // tp before the optimizer (Megatron _allreduce_layernorm_grads).
  bool sequence_parallel = false;
  // Word embedding or its tied output-layer copy: gradient all-reduced over
  // the embedding group (first and last stage) when pp > 1.
  bool tied_embedding = false;
  // A routed expert's weight (engine/moe/): held by one expert-parallel
  // rank, split over etp (tp_rank/tp_size are then the etp rank and size),
  // its gradient averaged over the expert data-parallel group instead of
  // dp. Expert parameters sit after all dense ones in the flat buffers.
  bool expert = false;
  // Counted in the global gradient norm on this rank: false for copies that
  // another rank also counts (replicated params on tp_rank > 0, the output
  // copy of a tied embedding on the last stage when pp > 1).
  bool counts_in_norm = true;

  // Global row range [first, last) and column range of this rank's shard for
  // kColumn part `p` (or the whole tensor for other splits with p = 0):
  // local rows [local_row0, +rows) hold global rows [global_row0, +rows).
  struct Block {
    int64_t local_row0, global_row0, rows;
    int64_t local_col0, global_col0, cols;
  };
  // The blocks that tile this rank's shard (one per part for kColumn; one
  // otherwise; rows beyond global_shape[0] of kVocab excluded).
  std::vector<Block> Blocks() const;
};

class ParamStore {
 public:
  // Registers a parameter; returns its index. `info.tp_rank/tp_size` must be
  // set; local_shape/offset/numel are computed here.
  int Add(ParamInfo info);
  // Assigns offsets (dense parameters first, in registration order, then
  // the expert ones) and allocates the flat buffers (params zero, grads
  // zero). After this no more Add; offsets are valid only after it.
  void Finalize();

  int size() const { return static_cast<int>(infos_.size()); }
  const ParamInfo& info(int i) const { return infos_[i]; }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  // Index of a parameter by name, or −1.
  int Find(const std::string& name) const;

  float* param(int i) { return params_.data() + infos_[i].offset; }
  const float* param(int i) const { return params_.data() + infos_[i].offset; }
  float* grad(int i) { return grads_.data() + infos_[i].offset; }
  const float* grad(int i) const { return grads_.data() + infos_[i].offset; }

  std::vector<float>& flat_params() { return params_; }
  const std::vector<float>& flat_params() const { return params_; }
  std::vector<float>& flat_grads() { return grads_; }
  const std::vector<float>& flat_grads() const { return grads_; }
  int64_t numel() const { return static_cast<int64_t>(params_.size()); }
  // Elements of the dense parameters: [0, dense_numel()) is dense,
  // [dense_numel(), numel()) expert.
  int64_t dense_numel() const { return dense_numel_; }

  // Per-element masks over the flat buffer (1 = yes): weight decay applies,
  // counts in the gradient norm.
  const std::vector<float>& decay_mask() const { return decay_mask_; }
  const std::vector<float>& norm_mask() const { return norm_mask_; }

  void ZeroGrads();

 private:
  std::vector<ParamInfo> infos_;
  std::vector<float> params_, grads_, decay_mask_, norm_mask_;
  int64_t dense_numel_ = 0;
  bool finalized_ = false;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_PARAM_STORE_H_
