#include "engine/context_parallel/sequence_chunks.h"

#include <algorithm>

#include "search_spaces/status.h"

namespace meshtune::engine::context_parallel {

SequenceChunks::SequenceChunks(int64_t seq, int cp, int rank)
    : seq_(seq), cp_(cp), rank_(rank) {
  MESHTUNE_CHECK(cp >= 1 && rank >= 0 && rank < cp && seq >= 1);
  MESHTUNE_CHECK(cp == 1 || seq % (2 * cp) == 0);
}

int SequenceChunks::GlobalChunk(int i) const {
  MESHTUNE_CHECK(i >= 0 && i < num_local_chunks());
  return i == 0 ? rank_ : 2 * cp_ - 1 - rank_;
}

int64_t SequenceChunks::ChunkStart(int i) const {
  return GlobalChunk(i) * chunk_len();
}

int64_t SequenceChunks::GlobalPosition(int64_t local_pos) const {
  MESHTUNE_CHECK(local_pos >= 0 && local_pos < local_len());
  const int64_t c = chunk_len();
  const int i = static_cast<int>(local_pos / c);
  return ChunkStart(i) + local_pos % c;
}

std::vector<PositionRun> SequenceChunks::Runs(int64_t local_pos0,
                                              int64_t len) const {
  MESHTUNE_CHECK(local_pos0 >= 0 && len >= 0 &&
                 local_pos0 + len <= local_len());
  const int64_t c = chunk_len();
  std::vector<PositionRun> runs;
  for (int64_t l = local_pos0; l < local_pos0 + len;) {
    // The rest of the range within the chunk that holds l.
    const int64_t end = std::min(local_pos0 + len, (l / c + 1) * c);
    const PositionRun run{l, GlobalPosition(l), end - l};
    if (!runs.empty() &&
        runs.back().global_pos0 + runs.back().len == run.global_pos0) {
      runs.back().len += run.len;  // adjacent chunks: one run
    } else {
      runs.push_back(run);
    }
    l = end;
  }
  return runs;
}

}  // namespace meshtune::engine::context_parallel
