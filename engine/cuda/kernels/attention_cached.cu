// Cached attention on the GPU (engine/cpu/attention_cached.h on the CPU):
// the keys and values of new positions appended to a bf16 cache
// [b, groups, capacity, d], and causal attention of the new positions'
// queries against it.
//
// One thread block per (query row, head): q in shared memory; the visible
// keys in tiles of kTile, each tile's scores in shared memory, merged into
// the running output with the online softmax (running max and sum, fp32;
// Milakov & Gimelshein 2018, as flash attention merges its blocks). Each
// thread owns up to kDimsPerThread output dimensions, so head_dim is at
// most kThreads·kDimsPerThread. Correctness first: a decode step's work is
// small; a long prefill runs here at a fraction of the flash kernel's
// speed (engine/cuda/kernels/flash_attention.h), which a later change can
// route through it.
#include <string>

#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kDimsPerThread = 2;
constexpr int kTile = 1024;

__global__ void AppendKernel(const Bf16* qkv, int64_t t, int64_t b,
                             int64_t heads, int64_t groups, int64_t d,
                             int64_t past, int64_t capacity, Bf16* k_cache,
                             Bf16* v_cache) {
  const int64_t width = (heads + 2 * groups) * d;
  const int64_t count = t * b * groups * d;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = e % d;
    const int64_t g = (e / d) % groups;
    const int64_t row = e / (d * groups);  // ti·b + bi
    const int64_t ti = row / b, bi = row % b;
    const int64_t at = ((bi * groups + g) * capacity + past + ti) * d + k;
    k_cache[at] = qkv[row * width + (heads + g) * d + k];
    v_cache[at] = qkv[row * width + (heads + groups + g) * d + k];
  }
}

__global__ void CachedAttentionKernel(const Bf16* qkv, const Bf16* k_cache,
                                      const Bf16* v_cache, Bf16* out, int64_t b,
                                      int64_t heads, int64_t groups, int64_t d,
                                      int64_t past, int64_t capacity,
                                      float scale) {
  extern __shared__ float smem[];
  float* q = smem;             // [d]
  float* p = q + d;            // [kTile] scores, then probabilities
  float* scratch = p + kTile;  // [32] block reductions
  const int64_t row = blockIdx.x, j = blockIdx.y;
  const int64_t ti = row / b, bi = row % b;
  const int64_t g = j / (heads / groups);
  const int64_t width = (heads + 2 * groups) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    q[i] = Load(qkv, row * width + j * d + i);
  }
  __syncthreads();
  const Bf16* keys = k_cache + (bi * groups + g) * capacity * d;
  const Bf16* values = v_cache + (bi * groups + g) * capacity * d;
  const int64_t seen = past + ti + 1;  // keys 0 .. past + ti
  float m = -INFINITY, l = 0.0f;
  float acc[kDimsPerThread] = {};
  for (int64_t u0 = 0; u0 < seen; u0 += kTile) {
    const int64_t n = seen - u0 < kTile ? seen - u0 : kTile;
    float local_max = -INFINITY;
    for (int64_t u = threadIdx.x; u < n; u += blockDim.x) {
      float s = 0.0f;
      for (int64_t k = 0; k < d; ++k) s += q[k] * Load(keys, (u0 + u) * d + k);
      p[u] = s * scale;
      local_max = fmaxf(local_max, p[u]);
    }
    const float m_new = fmaxf(m, BlockMax(local_max, scratch));
    const float correction = __expf(m - m_new);  // 0 on the first tile
    float local_sum = 0.0f;
    for (int64_t u = threadIdx.x; u < n; u += blockDim.x) {
      p[u] = __expf(p[u] - m_new);
      local_sum += p[u];
    }
    // BlockSum's barriers also publish every thread's p.
    l = l * correction + BlockSum(local_sum, scratch);
    for (int c = 0; c < kDimsPerThread; ++c) {
      const int64_t dim = threadIdx.x + int64_t{c} * blockDim.x;
      if (dim >= d) break;
      float a = acc[c] * correction;
      for (int64_t u = 0; u < n; ++u)
        a += p[u] * Load(values, (u0 + u) * d + dim);
      acc[c] = a;
    }
    m = m_new;
    __syncthreads();  // p is rewritten by the next tile
  }
  for (int c = 0; c < kDimsPerThread; ++c) {
    const int64_t dim = threadIdx.x + int64_t{c} * blockDim.x;
    if (dim >= d) break;
    Store(out, row * heads * d + j * d + dim, acc[c] / l);
  }
}

Status CheckShape(int64_t t, int64_t b, int64_t heads, int64_t groups,
                  int64_t d, int64_t past, int64_t capacity, const char* name) {
  if (t < 0 || b < 0 || heads <= 0 || groups <= 0 || heads % groups != 0 ||
      d <= 0 || d > int64_t{kThreads} * kDimsPerThread || past < 0 ||
      past + t > capacity) {
    return Status::InvalidArgument(
        std::string(name) +
        ": heads must be a positive multiple of groups, head_dim in [1, " +
        std::to_string(kThreads * kDimsPerThread) +
        "] and past + t within the capacity");
  }
  return Status::Ok();
}

}  // namespace

Status KvCacheAppend(const Bf16* qkv, int64_t t, int64_t b, int64_t heads,
                     int64_t groups, int64_t head_dim, int64_t past,
                     int64_t capacity, Bf16* k_cache, Bf16* v_cache,
                     Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(CheckShape(t, b, heads, groups, head_dim, past,
                                      capacity, "kv_cache_append"));
  const int64_t count = t * b * groups * head_dim;
  if (count == 0) return Status::Ok();
  AppendKernel<<<GridFor(count, 256), 256, 0, ToCuda(stream)>>>(
      qkv, t, b, heads, groups, head_dim, past, capacity, k_cache, v_cache);
  return LastError("kv_cache_append");
}

Status AttentionCachedForward(const Bf16* qkv, const Bf16* k_cache,
                              const Bf16* v_cache, int64_t t, int64_t b,
                              int64_t heads, int64_t groups, int64_t head_dim,
                              int64_t past, int64_t capacity, Bf16* out,
                              Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(CheckShape(t, b, heads, groups, head_dim, past,
                                      capacity, "attention_cached_forward"));
  if (t * b == 0) return Status::Ok();
  if (heads > kMaxGridY) {
    return Status::InvalidArgument(
        "attention_cached_forward: more than 65535 heads per rank");
  }
  const dim3 grid(static_cast<unsigned>(t * b), static_cast<unsigned>(heads));
  const size_t shared = (head_dim + kTile + 32) * sizeof(float);
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  CachedAttentionKernel<<<grid, kThreads, shared, ToCuda(stream)>>>(
      qkv, k_cache, v_cache, out, b, heads, groups, head_dim, past, capacity,
      scale);
  return LastError("attention_cached_forward");
}

}  // namespace meshtune::engine::cuda
