// Vocab-parallel token embedding and learned absolute position embedding,
// forward and backward (CPU counterparts: engine/cpu/embedding.cc).
#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row, threads over the h columns (coalesced row copy).
__global__ void EmbeddingForwardKernel(const int32_t* tokens, const Bf16* table,
                                       Bf16* out, int64_t h,
                                       int64_t vocab_start,
                                       int64_t vocab_local) {
  const int64_t row = blockIdx.x;
  const int64_t local = static_cast<int64_t>(tokens[row]) - vocab_start;
  const bool in_range = local >= 0 && local < vocab_local;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    Store(out, row * h + j, in_range ? Load(table, local * h + j) : 0.0f);
  }
}

// One block per row; a token that repeats adds into the same table row from
// several blocks, hence fp32 atomics.
__global__ void EmbeddingBackwardKernel(const int32_t* tokens, const Bf16* dout,
                                        float* dtable, int64_t h,
                                        int64_t vocab_start,
                                        int64_t vocab_local) {
  const int64_t row = blockIdx.x;
  const int64_t local = static_cast<int64_t>(tokens[row]) - vocab_start;
  if (local < 0 || local >= vocab_local) return;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    atomicAdd(&dtable[local * h + j], Load(dout, row * h + j));
  }
}

// One block per position si; threads over columns, looping over b rows.
__global__ void PositionForwardKernel(const Bf16* pos_table, Bf16* x, int64_t b,
                                      int64_t h, int64_t pos_offset) {
  const int64_t si = blockIdx.x;
  const Bf16* pos = pos_table + (si + pos_offset) * h;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float p = Load(pos, j);
    for (int64_t bi = 0; bi < b; ++bi) {
      const int64_t i = (si * b + bi) * h + j;
      Store(x, i, Load(x, i) + p);
    }
  }
}

__global__ void PositionBackwardKernel(const Bf16* dout, float* dpos_table,
                                       int64_t b, int64_t h,
                                       int64_t pos_offset) {
  const int64_t si = blockIdx.x;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    float sum = 0.0f;
    for (int64_t bi = 0; bi < b; ++bi) sum += Load(dout, (si * b + bi) * h + j);
    dpos_table[(si + pos_offset) * h + j] += sum;
  }
}

}  // namespace

Status EmbeddingForward(const int32_t* tokens, const Bf16* table, Bf16* out,
                        int64_t n, int64_t h, int64_t vocab_start,
                        int64_t vocab_local, Stream stream) {
  if (n == 0) return Status::Ok();
  EmbeddingForwardKernel<<<static_cast<unsigned>(n), kThreads, 0,
                           ToCuda(stream)>>>(tokens, table, out, h, vocab_start,
                                             vocab_local);
  return LastError("embedding_forward");
}

Status EmbeddingBackward(const int32_t* tokens, const Bf16* dout, float* dtable,
                         int64_t n, int64_t h, int64_t vocab_start,
                         int64_t vocab_local, Stream stream) {
  if (n == 0) return Status::Ok();
  EmbeddingBackwardKernel<<<static_cast<unsigned>(n), kThreads, 0,
                            ToCuda(stream)>>>(tokens, dout, dtable, h,
                                              vocab_start, vocab_local);
  return LastError("embedding_backward");
}

Status PositionEmbeddingForward(const Bf16* pos_table, Bf16* x, int64_t s,
                                int64_t b, int64_t h, int64_t pos_offset,
                                Stream stream) {
  if (s == 0) return Status::Ok();
  PositionForwardKernel<<<static_cast<unsigned>(s), kThreads, 0,
                          ToCuda(stream)>>>(pos_table, x, b, h, pos_offset);
  return LastError("position_embedding_forward");
}

Status PositionEmbeddingBackward(const Bf16* dout, float* dpos_table, int64_t s,
                                 int64_t b, int64_t h, int64_t pos_offset,
                                 Stream stream) {
  if (s == 0) return Status::Ok();
  PositionBackwardKernel<<<static_cast<unsigned>(s), kThreads, 0,
                           ToCuda(stream)>>>(dout, dpos_table, b, h,
                                             pos_offset);
  return LastError("position_embedding_backward");
}

}  // namespace meshtune::engine::cuda
