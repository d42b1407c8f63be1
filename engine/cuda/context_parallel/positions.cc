// Position-wise ops at a cp rank's global positions
// (engine/cuda/context_parallel/positions.h).
#include "engine/cuda/context_parallel/positions.h"

#include <vector>

#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

// The local positions [local_pos0, + len) as runs of global positions; one
// run at the same positions without cp.
std::vector<context_parallel::PositionRun> RunsOf(
    const context_parallel::SequenceChunks* chunks, int64_t local_pos0,
    int64_t len) {
  if (chunks == nullptr) return {{local_pos0, local_pos0, len}};
  return chunks->Runs(local_pos0, len);
}

}  // namespace

Status HiddenDropoutAt(const context_parallel::SequenceChunks* chunks, Bf16* x,
                       int64_t rows, int64_t h, int64_t b,
                       const cpu::DropoutSpec& d, Stream stream) {
  if (chunks == nullptr) return HiddenDropout(x, rows, h, b, d, stream);
  const int64_t first_pos = d.first_row / b;
  for (const context_parallel::PositionRun& run :
       RunsOf(chunks, first_pos, rows / b)) {
    cpu::DropoutSpec part = d;
    part.first_row = run.global_pos0 * b;
    MESHTUNE_RETURN_IF_ERROR(
        HiddenDropout(x + (run.local_pos0 - first_pos) * b * h, run.len * b, h,
                      b, part, stream));
  }
  return Status::Ok();
}

Status RopeAt(const context_parallel::SequenceChunks* chunks, bool forward,
              Bf16* qkv, int64_t s, int64_t b, int64_t heads, int64_t groups,
              int64_t head_dim, float base, Stream stream) {
  const int64_t qw = (heads + 2 * groups) * head_dim;
  for (const context_parallel::PositionRun& run : RunsOf(chunks, 0, s)) {
    Bf16* rows = qkv + run.local_pos0 * b * qw;
    MESHTUNE_RETURN_IF_ERROR(
        forward ? RopeForward(rows, run.len, b, heads, groups, head_dim, base,
                              run.global_pos0, stream)
                : RopeBackward(rows, run.len, b, heads, groups, head_dim, base,
                               run.global_pos0, stream));
  }
  return Status::Ok();
}

Status PositionEmbeddingAt(const context_parallel::SequenceChunks* chunks,
                           const Bf16* table, Bf16* x, const Bf16* dx,
                           float* dtable, int64_t local_pos0, int64_t s,
                           int64_t b, int64_t h, Stream stream) {
  for (const context_parallel::PositionRun& run :
       RunsOf(chunks, local_pos0, s)) {
    const int64_t offset = (run.local_pos0 - local_pos0) * b * h;
    if (dx != nullptr) {
      MESHTUNE_RETURN_IF_ERROR(PositionEmbeddingBackward(
          dx + offset, dtable, run.len, b, h, run.global_pos0, stream));
    } else {
      MESHTUNE_RETURN_IF_ERROR(PositionEmbeddingForward(
          table, x + offset, run.len, b, h, run.global_pos0, stream));
    }
  }
  return Status::Ok();
}

}  // namespace meshtune::engine::cuda
