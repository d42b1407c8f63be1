// Vocab-parallel token embedding and learned absolute positions
// (engine/cpu/ops.h).
//
// The token lookup follows Megatron's VocabParallelEmbedding
// (megatron/core/tensor_parallel/layers.py): a rank holds rows
// [vocab_start, vocab_start + vocab_local) of the table, writes zeros for
// tokens it does not own, and the tensor-parallel all-reduce sums the
// shards into the full lookup. Backward scatters the output gradient rows
// of owned tokens into dtable. Both backward scatters run over column
// blocks, each walking the rows in order, so a table row that receives
// many tokens gets its additions in row order whatever the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

// Columns per task in the backward scatters.
constexpr int64_t kColumnsPerTask = 64;

bool Owned(int32_t token, int64_t vocab_start, int64_t vocab_local) {
  return token >= vocab_start && token < vocab_start + vocab_local;
}

}  // namespace

void EmbeddingForward(const int32_t* tokens, const float* table, float* out,
                      int64_t n, int64_t h, int64_t vocab_start,
                      int64_t vocab_local) {
  MESHTUNE_CHECK(n >= 0 && h > 0 && vocab_start >= 0 && vocab_local >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* out_row = out + i * h;  // [h]
    if (Owned(tokens[i], vocab_start, vocab_local)) {
      const float* row = table + (tokens[i] - vocab_start) * h;
      std::memcpy(out_row, row, static_cast<size_t>(h) * sizeof(float));
    } else {
      std::fill(out_row, out_row + h, 0.0f);
    }
  }
}

void EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable,
                       int64_t n, int64_t h, int64_t vocab_start,
                       int64_t vocab_local) {
  MESHTUNE_CHECK(n >= 0 && h > 0 && vocab_start >= 0 && vocab_local >= 0);
  const int64_t tasks = (h + kColumnsPerTask - 1) / kColumnsPerTask;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t j0 = t * kColumnsPerTask;
    const int64_t j1 = std::min(h, j0 + kColumnsPerTask);
    for (int64_t i = 0; i < n; ++i) {
      if (!Owned(tokens[i], vocab_start, vocab_local)) continue;
      float* dst = dtable + (tokens[i] - vocab_start) * h;
      const float* src = dout + i * h;
      for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
    }
  }
}

void PositionEmbeddingForward(const float* pos_table, float* x, int64_t s,
                              int64_t b, int64_t h, int64_t pos_offset) {
  MESHTUNE_CHECK(s >= 0 && b >= 0 && h > 0 && pos_offset >= 0);
  const int64_t rows = s * b;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* pos_row = pos_table + (r / b + pos_offset) * h;  // row si·b+bi
    float* x_row = x + r * h;
    for (int64_t j = 0; j < h; ++j) x_row[j] += pos_row[j];
  }
}

void PositionEmbeddingBackward(const float* dout, float* dpos_table, int64_t s,
                               int64_t b, int64_t h, int64_t pos_offset) {
  MESHTUNE_CHECK(s >= 0 && b >= 0 && h > 0 && pos_offset >= 0);
  // Position si receives rows si·b .. si·b + b − 1: one task per position,
  // the b rows summed in order in float64.
#pragma omp parallel for schedule(static)
  for (int64_t si = 0; si < s; ++si) {
    float* dst = dpos_table + (si + pos_offset) * h;
    for (int64_t j = 0; j < h; ++j) {
      double sum = dst[j];
      for (int64_t bi = 0; bi < b; ++bi) sum += dout[(si * b + bi) * h + j];
      dst[j] = static_cast<float>(sum);
    }
  }
}

}  // namespace meshtune::engine::cpu
