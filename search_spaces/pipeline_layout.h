// PipelineLayout: which decoder layers each pipeline stage and virtual chunk
// holds.
//
// Virtual stages are numbered chunk-major, as Megatron-Core does: virtual
// stage v = chunk·pp + stage, and layers are assigned to v = 0, 1, ... in
// order (megatron/core/transformer/pipeline_parallel_layer_layout.py).
//
// Even split: num_layers / (pp·vpp) layers per virtual stage. When that does
// not divide, --account-for-embedding-in-pipeline-split and
// --account-for-loss-in-pipeline-split count the embedding and the output
// layer + loss as one layer each: num_layers + 2 units are split evenly, and
// the first virtual stage (rank 0, chunk 0) and the last one (last rank, last
// chunk) hold one transformer layer fewer (transformer_layer.py
// get_transformer_layer_offset; NeMo's LLaMA-3 405B and Qwen3-235B recipes:
// 126 + 2 = 128 units over pp 16).
//
// NVIDIA's uneven recipes interleave at most 8 chunks per rank
// (kMaxUnevenVpp); deeper interleaving of thin stages buys bubble that the
// per-chunk p2p latency takes back.
//
// Uneven layouts (ParallelConfig::layout_first_layers/_last_layers): the
// first virtual stage holds `first` layers besides the embedding, the last
// one `last` besides the MTP layers and the loss, and the S − 2 others an
// equal share m of the rest, with first, last <= m — the family of every
// --pipeline-model-parallel-layout in NVIDIA's recipes: DeepSeek-V3 61 layers
// as "Et|(tt|)*30mL" (pp 8 x vpp 4: 1, 30 x 2, 0 + MTP) and
// "Et*4|(t*4|)*14tmL" (16 stages: 4, 14 x 4, 1 + MTP), Kimi-K2
// "Et|(tt|)*30L" (Megatron-Bridge perf_recipes/deepseek, /kimi).
#ifndef MESHTUNE_SEARCH_SPACES_PIPELINE_LAYOUT_H_
#define MESHTUNE_SEARCH_SPACES_PIPELINE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"

namespace meshtune::search_spaces {

class PipelineLayout {
 public:
  // True when the even (or embedding/loss-accounted) layout of num_layers
  // over pp·vpp virtual stages exists.
  static bool Valid(int64_t num_layers, int64_t pp, int64_t vpp);
  // True when the layout needs the embedding/loss accounting flags.
  static bool AccountsEmbeddingAndLoss(int64_t num_layers, int64_t pp,
                                       int64_t vpp);
  // True when the uneven layout (first, m..., last) exists: pp·vpp >= 2,
  // first, last >= 0, and the rest splits evenly into m >= max(first, last,
  // 1) layers per middle virtual stage (two stages: first + last =
  // num_layers).
  static bool ValidUneven(int64_t num_layers, int64_t pp, int64_t vpp,
                          int64_t first, int64_t last);
  // The uneven layouts searched for (pp, vpp) when the even split (and its
  // embedding/loss accounting) does not exist: the balanced middle depth
  // m = ceil(L / S) and the remainder r = L − (S−2)·m split first-heavy
  // (first = min(m, r)) and last-heavy (last = min(m, r)), as NVIDIA's
  // DeepSeek-V3 layouts do; (first, last) pairs, first-heavy first. Empty
  // when pp·vpp < 2, vpp > kMaxUnevenVpp or no member fits.
  static constexpr int64_t kMaxUnevenVpp = 8;
  static std::vector<std::pair<int64_t, int64_t>> UnevenFamily(
      int64_t num_layers, int64_t pp, int64_t vpp);
  // The config's layout exists: its explicit uneven layout, or (fields -1)
  // the even split, or else the first member of UnevenFamily, which is
  // what a config without layout fields means.
  static bool Valid(int64_t num_layers, const ParallelConfig& c);

  // REQUIRES: Valid(num_layers, pp, vpp).
  PipelineLayout(int64_t num_layers, int64_t pp, int64_t vpp);
  // REQUIRES: Valid(num_layers, c).
  PipelineLayout(int64_t num_layers, const ParallelConfig& c);

  bool accounts_embedding_and_loss() const { return accounts_; }
  bool uneven() const { return uneven_; }
  // Layers of a middle virtual stage: (num_layers [+ 2]) / (pp·vpp) for the
  // even layouts, m for the uneven ones.
  int64_t units_per_chunk() const { return units_per_chunk_; }
  // Transformer layers in chunk `chunk` of pipeline rank `stage`, and the
  // index of the first of them.
  int64_t LayersInChunk(int64_t stage, int64_t chunk) const;
  int64_t FirstLayerOfChunk(int64_t stage, int64_t chunk) const;
  // Transformer layers on pipeline rank `stage` (all its chunks).
  int64_t LayersOnStage(int64_t stage) const;
  // The most transformer layers any stage holds.
  int64_t MaxLayersOnStage() const;

  // Megatron --pipeline-model-parallel-layout for this layout with
  // `mtp_layers` MTP layers on the last virtual stage ("Et|(tt|)*30mL").
  std::string MegatronString(int64_t mtp_layers) const;

 private:
  // Every virtual stage units_per_chunk_ layers, the first `first` and the
  // last `last`; fills counts_ and starts_.
  void SetCounts(int64_t first, int64_t last);

  int64_t pp_, vpp_;
  bool accounts_ = false;
  bool uneven_ = false;
  int64_t units_per_chunk_ = 0;
  std::vector<int64_t> counts_;  // [pp·vpp] layers per virtual stage
  std::vector<int64_t> starts_;  // [pp·vpp] first layer per virtual stage
};

// A Megatron --pipeline-model-parallel-layout string read back: the number
// of virtual stages per rank and the family's (first, last) counts, or an
// error naming what does not fit (unknown symbol, E not first, L not last,
// t count != num_layers, m count != mtp_layers, stage count not a multiple of
// pp, middle stages unequal). Symbols: E embedding, t decoder layer, m MTP
// layer, L loss, '|' between virtual stages, "(...)*n" and "x*n" repeats,
// commas and spaces ignored.
struct ParsedLayout {
  int64_t vpp = 1;
  int64_t first_layers = 0;
  int64_t last_layers = 0;
  bool even = false;  // the even split: no uneven fields needed
};
StatusOr<ParsedLayout> ParsePipelineLayout(const std::string& layout,
                                           int64_t num_layers, int64_t pp,
                                           int64_t mtp_layers);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_PIPELINE_LAYOUT_H_
