// Which sequence positions a context-parallel rank holds, with Megatron's
// load balancing for causal attention (megatron/training/utils.py
// get_batch_on_this_cp_rank, Transformer Engine's THD/BSHD CP layout): the
// sequence of length s is cut into 2·cp equal chunks of c = s/(2·cp)
// positions and cp rank r holds chunks r and 2·cp−1−r, so every rank gets
// one early (cheap) and one late (expensive) chunk of the causal mask.
//
// Local layout. A rank's s_local = s/cp positions are its two chunks in that
// order: local position l < c is global position r·c + l, local position
// l >= c is global (2·cp−1−r)·c + (l − c). Activations stay sequence-major
// (row = position·b + sample, engine/cpu/ops.h), so each chunk is one
// contiguous block of c·b rows and the local rows are [chunk r | chunk
// 2·cp−1−r]. With cp == 1 the rank holds the whole sequence in order.
#ifndef MESHTUNE_ENGINE_CONTEXT_PARALLEL_SEQUENCE_CHUNKS_H_
#define MESHTUNE_ENGINE_CONTEXT_PARALLEL_SEQUENCE_CHUNKS_H_

#include <cstdint>
#include <vector>

namespace meshtune::engine::context_parallel {

// Local positions [local_pos0, local_pos0 + len) that hold the global
// positions [global_pos0, global_pos0 + len), in order.
struct PositionRun {
  int64_t local_pos0 = 0;
  int64_t global_pos0 = 0;
  int64_t len = 0;
  bool operator==(const PositionRun& o) const {
    return local_pos0 == o.local_pos0 && global_pos0 == o.global_pos0 &&
           len == o.len;
  }
};

class SequenceChunks {
 public:
  // REQUIRES: cp >= 1, 0 <= rank < cp, seq >= 1, and seq % (2·cp) == 0
  // when cp > 1 (TrainConfig::Validate checks it).
  SequenceChunks(int64_t seq, int cp, int rank);

  int cp() const { return cp_; }
  int rank() const { return rank_; }
  int64_t seq() const { return seq_; }              // global length s
  int64_t local_len() const { return seq_ / cp_; }  // s/cp
  // Positions per local chunk: s/(2·cp), or s when cp == 1 (one chunk).
  int64_t chunk_len() const { return cp_ > 1 ? seq_ / (2 * cp_) : seq_; }
  // Local chunks: 2 when cp > 1, else 1.
  int num_local_chunks() const { return cp_ > 1 ? 2 : 1; }
  // Global position of the first position of local chunk i: r·c for i = 0,
  // (2·cp−1−r)·c for i = 1.
  int64_t ChunkStart(int i) const;
  // Global chunk index (0 .. 2·cp−1) of local chunk i.
  int GlobalChunk(int i) const;

  // Global position of local position `local_pos` (0 <= local_pos <
  // local_len()).
  int64_t GlobalPosition(int64_t local_pos) const;

  // The local positions [local_pos0, local_pos0 + len) as runs of
  // consecutive global positions (at most two; one when the range lies in
  // one chunk or the two chunks are adjacent, e.g. cp == 1 or the last
  // rank). A position-wise op (RoPE, position embedding, dropout masks) is
  // called once per run with that run's global offset.
  std::vector<PositionRun> Runs(int64_t local_pos0, int64_t len) const;

  // Copies this rank's rows out of a full sequence-major buffer:
  // full[s·b, width] -> local[s_local·b, width] (chunk r's c·b rows, then
  // chunk 2·cp−1−r's).
  template <typename T>
  void SelectRows(const T* full, T* local, int64_t b, int64_t width) const {
    for (const PositionRun& run : Runs(0, local_len())) {
      const T* src = full + run.global_pos0 * b * width;
      T* dst = local + run.local_pos0 * b * width;
      for (int64_t i = 0; i < run.len * b * width; ++i) dst[i] = src[i];
    }
  }

 private:
  int64_t seq_;
  int cp_;
  int rank_;
};

}  // namespace meshtune::engine::context_parallel

#endif  // MESHTUNE_ENGINE_CONTEXT_PARALLEL_SEQUENCE_CHUNKS_H_
