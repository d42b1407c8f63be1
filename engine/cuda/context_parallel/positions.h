// The CUDA backend's position-wise ops (engine/cuda/kernels/ops.h) at the
// GLOBAL positions of a context-parallel rank's rows, as the CPU engine
// calls its ops (engine/transformer_layer.cc, engine/gpt_model.cc): a rank
// holds two chunks of the sequence (engine/context_parallel/
// sequence_chunks.h), so each op runs once per run of consecutive global
// positions with that run's offset (Megatron-Core passes each cp rank its
// chunks' position ids: get_pos_emb_on_this_cp_rank, and the dropout masks
// follow the single-rank rows). `chunks` null: no context parallelism, the
// plain ops.h call. Rows are sequence-major (position·b + sample); all work
// on `stream`.
#ifndef MESHTUNE_ENGINE_CUDA_CONTEXT_PARALLEL_POSITIONS_H_
#define MESHTUNE_ENGINE_CUDA_CONTEXT_PARALLEL_POSITIONS_H_

#include <cstdint>

#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// HiddenDropout on x[rows, h], the local rows [d.first_row, + rows) (an SP
// shard starts past 0): each run draws the masks of its global rows.
Status HiddenDropoutAt(const context_parallel::SequenceChunks* chunks, Bf16* x,
                       int64_t rows, int64_t h, int64_t b,
                       const cpu::DropoutSpec& d, Stream stream);

// RopeForward / RopeBackward on qkv[s·b, (heads + 2·groups)·head_dim], the
// local positions [0, s): each run rotates by its global positions.
Status RopeAt(const context_parallel::SequenceChunks* chunks, bool forward,
              Bf16* qkv, int64_t s, int64_t b, int64_t heads, int64_t groups,
              int64_t head_dim, float base, Stream stream);

// PositionEmbeddingForward (x += table rows) or, with dx non-null,
// PositionEmbeddingBackward (dtable += dx rows) for the local positions
// [local_pos0, local_pos0 + s) held in x / dx [s·b, h]: the table rows of
// their global positions.
Status PositionEmbeddingAt(const context_parallel::SequenceChunks* chunks,
                           const Bf16* table, Bf16* x, const Bf16* dx,
                           float* dtable, int64_t local_pos0, int64_t s,
                           int64_t b, int64_t h, Stream stream);

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_CONTEXT_PARALLEL_POSITIONS_H_
