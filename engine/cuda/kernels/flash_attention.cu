// Fused causal attention, FlashAttention-2 style
// (engine/cuda/kernels/flash_attention.h).
//
// Forward: one block of 4 warps per (64-query tile, bi·heads + j). The
// query tile stays in shared memory; 64-key tiles of K and V stream
// through it, from key 0 up to the diagonal tile (tiles above it are
// skipped, the diagonal and the sequence tail are masked). Each warp owns
// 16 query rows: S = Q·Kᵀ on the tensor cores into fp32 shared memory, the
// online softmax row by row (running max m and sum l in fp32; the fp32
// output rows rescaled by exp(m_old − m_new)), then O += P·V on the tensor
// cores. At the end O /= l and L = m + log l.
//
// Backward: a pre-pass D = rowsum(dO ∘ O); then one block per (64-key
// tile, bi·groups + g). It keeps K, V and fp32 dK, dV accumulators of its
// keys in shared memory and visits the group's query heads and their
// 32-query tiles from the diagonal down: S = Q·Kᵀ and dP = dO·Vᵀ on the
// tensor cores, P = exp(scale·S − L), dS = P ∘ (dP − D), then dV += Pᵀ·dO,
// dK += dSᵀ·Q (the group's heads summed in shared memory) and dQ = dS·K,
// added into an fp32 [b·heads, s, d] accumulator with atomicAdd (the key
// tiles of one query row live in different blocks). A last pass writes the
// q columns of dqkv = scale·dQ; the block writes its k and v columns.
//
// Chunk pairs (FlashChunkAttention, context parallelism) run sibling
// kernels, ChunkForwardKernel and ChunkBackwardKernel: the same tiles,
// steps and numerics, with q, k and v at their own row strides, query and
// key row counts, and the global positions of both chunks' first rows (the
// causal mask and the dropout masks are position-based); fp32 outputs (out,
// lse; a row that sees no key gets 0 and −inf), dK and dV added to the
// caller's fp32 buffers and dQ accumulated in the caller's fp32
// [sq·b, heads·d] rows. They are kept apart from the full-sequence kernels
// because one parameterised pair cost the full backward 2-8 % on an H200
// (one block per SM at head_dim 128, so every instruction counts), and the
// one-rank path must not change.
//
// The shared-memory rows are padded (8 bf16 / 4 fp32 elements) against
// bank conflicts; wmma needs 32-byte aligned tile pointers and leading
// dimensions that are multiples of 8 (bf16) / 4 (fp32): every offset below
// is a multiple of 16 elements times a padded row length, which keeps both.
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/kernels/flash_attention.h"
#include "engine/cuda/kernels/kernel_util.cuh"

namespace meshtune::engine::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using Bf16Dev = __nv_bfloat16;

constexpr int kThreads = 128;  // 4 warps
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kFwdQueries = 64;  // query rows per forward block (16 per warp)
constexpr int kKeys = 64;        // key rows per tile (forward and backward)
constexpr int kBwdQueries = 32;  // query rows per backward step
constexpr int kFrag = 16;        // wmma tile edge
constexpr int kPadBf16 = 8, kPadFp32 = 4;
constexpr int kLdScore = kKeys + kPadFp32;  // fp32 score rows
constexpr int kLdProb = kKeys + kPadBf16;   // bf16 probability rows

// Shared-memory layouts, in bytes from the (128-byte aligned) start, for
// head_dim d; the same code sizes the launch on the host.
struct FwdSmem {
  int q, k, v, s, p, o, m, l, bytes;
  __host__ __device__ explicit FwdSmem(int d) {
    const int ld_h = d + kPadBf16, ld_f = d + kPadFp32;
    q = 0;                               // [64, ld_h] bf16
    k = q + kFwdQueries * ld_h * 2;      // [64, ld_h] bf16
    v = k + kKeys * ld_h * 2;            // [64, ld_h] bf16
    s = v + kKeys * ld_h * 2;            // [64, 68] fp32
    p = s + kFwdQueries * kLdScore * 4;  // [64, 72] bf16
    o = p + kFwdQueries * kLdProb * 2;   // [64, ld_f] fp32
    m = o + kFwdQueries * ld_f * 4;      // [64] fp32
    l = m + kFwdQueries * 4;             // [64] fp32
    bytes = l + kFwdQueries * 4;
  }
};

struct BwdSmem {
  int k, v, dk, dv, q, dout, s, dp, p, ds, dq, lse, drow, seed, bytes;
  __host__ __device__ explicit BwdSmem(int d) {
    const int ld_h = d + kPadBf16, ld_f = d + kPadFp32;
    k = 0;                                // [64, ld_h] bf16
    v = k + kKeys * ld_h * 2;             // [64, ld_h] bf16
    dk = v + kKeys * ld_h * 2;            // [64, ld_f] fp32
    dv = dk + kKeys * ld_f * 4;           // [64, ld_f] fp32
    q = dv + kKeys * ld_f * 4;            // [32, ld_h] bf16
    dout = q + kBwdQueries * ld_h * 2;    // [32, ld_h] bf16
    s = dout + kBwdQueries * ld_h * 2;    // [32, 68] fp32
    dp = s + kBwdQueries * kLdScore * 4;  // [32, 68] fp32
    p = dp + kBwdQueries * kLdScore * 4;  // [32, 72] bf16
    ds = p + kBwdQueries * kLdProb * 2;   // [32, 72] bf16
    dq = ds + kBwdQueries * kLdProb * 2;  // [32, ld_f] fp32
    lse = dq + kBwdQueries * ld_f * 4;    // [32] fp32
    drow = lse + kBwdQueries * 4;         // [32] fp32
    seed = drow + kBwdQueries * 4;        // [32] uint64
    bytes = seed + kBwdQueries * 8;
  }
};

using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, Bf16Dev,
                             wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, Bf16Dev,
                              wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, Bf16Dev,
                             wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, Bf16Dev,
                              wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

// Copies `rows` rows of d bf16 from global memory (row r at src_row(r),
// 16-byte aligned) into shared [rows, d + 8]; rows with valid(r) false
// become zeros (the sequence tail: masked scores must meet finite values).
template <typename RowPtr, typename Valid>
__device__ __forceinline__ void LoadTile(Bf16* dst, int rows, int d,
                                         RowPtr src_row, Valid valid) {
  const int chunks = d / 8;  // 16-byte chunks per row
  const int ld = d + kPadBf16;
  for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
    const int r = i / chunks, c = (i % chunks) * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (valid(r)) value = *reinterpret_cast<const uint4*>(src_row(r) + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = value;
  }
}

// Loads the 64-key tile starting at key k0 of kv group g of sample bi into
// shared K and V ([64, d + 8] each; keys past s become zeros): the k
// columns of group g start at (heads + g)·d, the v columns at
// (heads + groups + g)·d of each token's qkv row (token t·b + bi).
__device__ __forceinline__ void LoadKvTile(Bf16* sk, Bf16* sv, const Bf16* qkv,
                                           int64_t k0, int64_t s, int64_t b,
                                           int64_t bi, int64_t heads,
                                           int64_t groups, int64_t g, int d) {
  const int64_t width = (heads + 2 * groups) * d;
  auto valid = [&](int r) { return k0 + r < s; };
  LoadTile(
      sk, kKeys, d,
      [&](int r) {
        return qkv + ((k0 + r) * b + bi) * width + (heads + g) * d;
      },
      valid);
  LoadTile(
      sv, kKeys, d,
      [&](int r) {
        return qkv + ((k0 + r) * b + bi) * width + (heads + groups + g) * d;
      },
      valid);
}

// The attention-dropout factor of key u in the mask row `row_seed`: 1
// without dropout, else 0 (dropped) or 1/(1 − p) (kept), as the CPU op.
__device__ __forceinline__ float DropFactor(const cpu::DropoutSpec& dr,
                                            uint64_t row_seed, int64_t u) {
  if (!(dr.p > 0.0f)) return 1.0f;
  return cpu::DropoutUniform(row_seed, u) >= dr.p ? 1.0f / (1.0f - dr.p) : 0.0f;
}

// The mask row of query t of (sample bi, local head j): the CPU op's
// DropoutRowSeed(key, first_sample + bi, (first_head + j)·s + t).
__device__ __forceinline__ uint64_t MaskRowSeed(const cpu::DropoutSpec& dr,
                                                int64_t bi, int64_t j,
                                                int64_t s, int64_t t) {
  return cpu::DropoutRowSeed(dr.key, dr.first_sample + bi,
                             (dr.first_head + j) * s + t);
}

// acc[16, 16] (+)= A[16, kdim]·B[kdim, 16] with both from shared memory;
// A row-major (lda) or, with kTransA, read as the transpose of a row-major
// [kdim, 16] slab; B row-major [kdim, 16] or, with kTransB, the transpose
// of a row-major [16, kdim] slab.
template <bool kTransA, bool kTransB>
__device__ __forceinline__ void MmaTile(FragC& acc, const Bf16* a, int lda,
                                        const Bf16* b, int ldb, int kdim) {
  const auto* a_dev = reinterpret_cast<const Bf16Dev*>(a);
  const auto* b_dev = reinterpret_cast<const Bf16Dev*>(b);
  for (int kk = 0; kk < kdim; kk += kFrag) {
    // Element (m, k) of A: a[m·lda + k], or a[k·lda + m] transposed;
    // element (k, n) of B: b[k·ldb + n], or b[n·ldb + k] transposed.
    typename std::conditional<kTransA, FragAT, FragA>::type fa;
    typename std::conditional<kTransB, FragBT, FragB>::type fb;
    wmma::load_matrix_sync(fa, kTransA ? a_dev + kk * lda : a_dev + kk, lda);
    wmma::load_matrix_sync(fb, kTransB ? b_dev + kk : b_dev + kk * ldb, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// out[t·b + bi, j·d ..] and lse[bh·s + t] of one (query tile, bh = bi·heads
// + j); see the file comment.
__global__ void __launch_bounds__(kThreads)
    FlashForwardKernel(const Bf16* __restrict__ qkv, Bf16* __restrict__ out,
                       float* __restrict__ lse, int64_t s, int64_t b,
                       int64_t heads, int64_t groups, int d, float scale,
                       cpu::DropoutSpec dr) {
  extern __shared__ __align__(128) unsigned char smem[];
  const FwdSmem lay(d);
  Bf16* sq = reinterpret_cast<Bf16*>(smem + lay.q);
  Bf16* sk = reinterpret_cast<Bf16*>(smem + lay.k);
  Bf16* sv = reinterpret_cast<Bf16*>(smem + lay.v);
  float* ss = reinterpret_cast<float*>(smem + lay.s);
  Bf16* sp = reinterpret_cast<Bf16*>(smem + lay.p);
  float* so = reinterpret_cast<float*>(smem + lay.o);
  float* sm = reinterpret_cast<float*>(smem + lay.m);
  float* sl = reinterpret_cast<float*>(smem + lay.l);
  const int ld_h = d + kPadBf16, ld_f = d + kPadFp32;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  // Largest tiles (most key tiles) first, for a better tail balance.
  const int64_t q0 = (gridDim.x - 1 - blockIdx.x) * int64_t{kFwdQueries};
  const int64_t bh = blockIdx.y, bi = bh / heads, j = bh % heads;
  const int64_t g = j / (heads / groups);
  const int64_t width = (heads + 2 * groups) * d;

  LoadTile(
      sq, kFwdQueries, d,
      [&](int r) { return qkv + ((q0 + r) * b + bi) * width + j * d; },
      [&](int r) { return q0 + r < s; });
  for (int i = threadIdx.x; i < kFwdQueries * ld_f; i += kThreads) so[i] = 0;
  for (int i = threadIdx.x; i < kFwdQueries; i += kThreads) {
    sm[i] = -INFINITY;
    sl[i] = 0.0f;
  }

  // Key tiles up to the diagonal one: key u < q0 + 64 (and < s).
  const int64_t key_end = q0 + kFwdQueries < s ? q0 + kFwdQueries : s;
  const int row0 = warp * kFrag;  // this warp's first query row in the tile
  for (int64_t k0 = 0; k0 < key_end; k0 += kKeys) {
    __syncthreads();  // the previous tile's K and V are no longer read
    LoadKvTile(sk, sv, qkv, k0, s, b, bi, heads, groups, g, d);
    __syncthreads();

    // S[row0.., :] = Q[row0.., :]·Kᵀ (raw, unscaled).
    for (int nt = 0; nt < kKeys / kFrag; ++nt) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
      MmaTile<false, true>(acc, sq + row0 * ld_h, ld_h, sk + nt * kFrag * ld_h,
                           ld_h, d);
      wmma::store_matrix_sync(ss + row0 * kLdScore + nt * kFrag, acc, kLdScore,
                              wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of the warp's rows: lanes take keys lane, lane + 32.
    for (int r = row0; r < row0 + kFrag; ++r) {
      const int64_t t = q0 + r;
      const float* srow = ss + r * kLdScore;
      float x[2];
      bool valid[2];
      float row_max = -INFINITY;
      for (int h = 0; h < 2; ++h) {
        const int64_t u = k0 + lane + h * kWarpSize;
        valid[h] = u <= t && u < s;
        x[h] = srow[lane + h * kWarpSize] * scale;
        if (valid[h]) row_max = fmaxf(row_max, x[h]);
      }
      row_max = WarpMax(row_max);
      const float m_old = sm[r];
      // Finite: key 0 is visible to every row and tile 0 comes first.
      const float m_new = fmaxf(m_old, row_max);
      const float alpha = expf(m_old - m_new);  // 0 on the first tile
      const uint64_t seed = dr.p > 0.0f ? MaskRowSeed(dr, bi, j, s, t) : 0;
      float sum = 0.0f;
      for (int h = 0; h < 2; ++h) {
        const int c = lane + h * kWarpSize;
        const float p = valid[h] ? expf(x[h] - m_new) : 0.0f;
        sum += p;  // the softmax sum is over the undropped P
        Store(sp, r * kLdProb + c, p * DropFactor(dr, seed, k0 + c));
      }
      sum = WarpSum(sum);
      const float l_new = sl[r] * alpha + sum;
      for (int c = lane; c < d; c += kWarpSize) so[r * ld_f + c] *= alpha;
      __syncwarp();  // every lane has read sm[r], sl[r]
      if (lane == 0) {
        sm[r] = m_new;
        sl[r] = l_new;
      }
    }
    __syncwarp();

    // O[row0.., :] += P[row0.., :]·V.
    for (int nt = 0; nt < d / kFrag; ++nt) {
      FragC acc;
      float* o_tile = so + row0 * ld_f + nt * kFrag;
      wmma::load_matrix_sync(acc, o_tile, ld_f, wmma::mem_row_major);
      MmaTile<false, false>(acc, sp + row0 * kLdProb, kLdProb, sv + nt * kFrag,
                            ld_h, kKeys);
      wmma::store_matrix_sync(o_tile, acc, ld_f, wmma::mem_row_major);
    }
  }
  __syncwarp();

  // out = O / l; L = m + log l (the warp's own rows).
  for (int r = row0; r < row0 + kFrag; ++r) {
    const int64_t t = q0 + r;
    if (t >= s) break;
    const float inv = 1.0f / sl[r];
    Bf16* orow = out + (t * b + bi) * heads * d + j * d;
    for (int c = lane; c < d; c += kWarpSize) {
      Store(orow, c, so[r * ld_f + c] * inv);
    }
    if (lane == 0) lse[bh * s + t] = sm[r] + logf(sl[r]);
  }
}

// drow[bh·s + t] = Σ_c dout·out over head j's d columns of row t·b + bi.
// One warp per row.
__global__ void RowDotKernel(const Bf16* dout, const Bf16* out, float* drow,
                             int64_t s, int64_t b, int64_t heads, int d) {
  const int64_t rows = b * heads * s;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarpSize);
  for (int64_t row =
           (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarpSize;
       row < rows; row += warps) {
    const int64_t t = row % s, bh = row / s;
    const int64_t bi = bh / heads, j = bh % heads;
    const int64_t offset = (t * b + bi) * heads * d + j * d;
    float dot = 0.0f;
    for (int c = lane; c < d; c += kWarpSize) {
      dot += Load(dout, offset + c) * Load(out, offset + c);
    }
    dot = WarpSum(dot);
    if (lane == 0) drow[row] = dot;
  }
}

// One (key tile, bi·groups + g): see the file comment.
__global__ void __launch_bounds__(kThreads) FlashBackwardKernel(
    const Bf16* __restrict__ dout, const Bf16* __restrict__ qkv,
    const float* __restrict__ lse, const float* __restrict__ drow,
    float* __restrict__ dq, Bf16* __restrict__ dqkv, int64_t s, int64_t b,
    int64_t heads, int64_t groups, int d, float scale, cpu::DropoutSpec dr) {
  extern __shared__ __align__(128) unsigned char smem[];
  const BwdSmem lay(d);
  Bf16* sk = reinterpret_cast<Bf16*>(smem + lay.k);
  Bf16* sv = reinterpret_cast<Bf16*>(smem + lay.v);
  float* sdk = reinterpret_cast<float*>(smem + lay.dk);
  float* sdv = reinterpret_cast<float*>(smem + lay.dv);
  Bf16* sq = reinterpret_cast<Bf16*>(smem + lay.q);
  Bf16* sdo = reinterpret_cast<Bf16*>(smem + lay.dout);
  float* ss = reinterpret_cast<float*>(smem + lay.s);
  float* sdp = reinterpret_cast<float*>(smem + lay.dp);
  Bf16* sp = reinterpret_cast<Bf16*>(smem + lay.p);
  Bf16* sds = reinterpret_cast<Bf16*>(smem + lay.ds);
  float* sdq = reinterpret_cast<float*>(smem + lay.dq);
  float* slse = reinterpret_cast<float*>(smem + lay.lse);
  float* sdrow = reinterpret_cast<float*>(smem + lay.drow);
  uint64_t* sseed = reinterpret_cast<uint64_t*>(smem + lay.seed);
  const int ld_h = d + kPadBf16, ld_f = d + kPadFp32;
  const int warp = threadIdx.x / kWarpSize;
  const int dfrags = d / kFrag;

  const int64_t k0 = blockIdx.x * int64_t{kKeys};
  const int64_t bi = blockIdx.y / groups, g = blockIdx.y % groups;
  const int64_t per_group = heads / groups;
  const int64_t width = (heads + 2 * groups) * d;
  const int64_t out_width = heads * d;

  LoadKvTile(sk, sv, qkv, k0, s, b, bi, heads, groups, g, d);
  for (int i = threadIdx.x; i < kKeys * ld_f; i += kThreads) {
    sdk[i] = 0.0f;
    sdv[i] = 0.0f;
  }

  for (int64_t j = g * per_group; j < (g + 1) * per_group; ++j) {
    const int64_t bh = bi * heads + j;
    // Queries t < k0 see none of these keys: start at the diagonal.
    for (int64_t q0 = k0; q0 < s; q0 += kBwdQueries) {
      __syncthreads();  // the previous step's readers are done
      LoadTile(
          sq, kBwdQueries, d,
          [&](int r) { return qkv + ((q0 + r) * b + bi) * width + j * d; },
          [&](int r) { return q0 + r < s; });
      LoadTile(
          sdo, kBwdQueries, d,
          [&](int r) { return dout + ((q0 + r) * b + bi) * out_width + j * d; },
          [&](int r) { return q0 + r < s; });
      for (int r = threadIdx.x; r < kBwdQueries; r += kThreads) {
        const int64_t t = q0 + r;
        slse[r] = t < s ? lse[bh * s + t] : 0.0f;
        sdrow[r] = t < s ? drow[bh * s + t] : 0.0f;
        sseed[r] = dr.p > 0.0f ? MaskRowSeed(dr, bi, j, s, t) : 0;
      }
      __syncthreads();

      // S = Q·Kᵀ and dP = dO·Vᵀ, [32, 64] each: 8 tiles, 2 per warp.
      for (int f = warp; f < (kBwdQueries / kFrag) * (kKeys / kFrag);
           f += kWarps) {
        const int rf = f / (kKeys / kFrag), cf = f % (kKeys / kFrag);
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        MmaTile<false, true>(acc, sq + rf * kFrag * ld_h, ld_h,
                             sk + cf * kFrag * ld_h, ld_h, d);
        wmma::store_matrix_sync(ss + rf * kFrag * kLdScore + cf * kFrag, acc,
                                kLdScore, wmma::mem_row_major);
        wmma::fill_fragment(acc, 0.0f);
        MmaTile<false, true>(acc, sdo + rf * kFrag * ld_h, ld_h,
                             sv + cf * kFrag * ld_h, ld_h, d);
        wmma::store_matrix_sync(sdp + rf * kFrag * kLdScore + cf * kFrag, acc,
                                kLdScore, wmma::mem_row_major);
      }
      __syncthreads();

      // P = exp(scale·S − L) on the visible keys; with the mask factor M:
      // D(P) = P·M (for dV) and dS = P ∘ (M·dP − D).
      for (int i = threadIdx.x; i < kBwdQueries * kKeys; i += kThreads) {
        const int r = i / kKeys, c = i % kKeys;
        const int64_t t = q0 + r, u = k0 + c;
        float dropped = 0.0f, dscore = 0.0f;
        if (u <= t && t < s) {
          const float p = expf(ss[r * kLdScore + c] * scale - slse[r]);
          const float factor = DropFactor(dr, sseed[r], u);
          dropped = p * factor;
          dscore = p * (factor * sdp[r * kLdScore + c] - sdrow[r]);
        }
        Store(sp, r * kLdProb + c, dropped);
        Store(sds, r * kLdProb + c, dscore);
      }
      __syncthreads();

      // dV += D(P)ᵀ·dO and dK += dSᵀ·Q: warp w owns keys 16w .. 16w + 15.
      for (int nt = 0; nt < dfrags; ++nt) {
        FragC acc;
        float* dv_tile = sdv + warp * kFrag * ld_f + nt * kFrag;
        wmma::load_matrix_sync(acc, dv_tile, ld_f, wmma::mem_row_major);
        MmaTile<true, false>(acc, sp + warp * kFrag, kLdProb, sdo + nt * kFrag,
                             ld_h, kBwdQueries);
        wmma::store_matrix_sync(dv_tile, acc, ld_f, wmma::mem_row_major);
        float* dk_tile = sdk + warp * kFrag * ld_f + nt * kFrag;
        wmma::load_matrix_sync(acc, dk_tile, ld_f, wmma::mem_row_major);
        MmaTile<true, false>(acc, sds + warp * kFrag, kLdProb, sq + nt * kFrag,
                             ld_h, kBwdQueries);
        wmma::store_matrix_sync(dk_tile, acc, ld_f, wmma::mem_row_major);
      }
      // dQ tile = dS·K [32, d].
      for (int f = warp; f < (kBwdQueries / kFrag) * dfrags; f += kWarps) {
        const int rf = f / dfrags, nt = f % dfrags;
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        MmaTile<false, false>(acc, sds + rf * kFrag * kLdProb, kLdProb,
                              sk + nt * kFrag, ld_h, kKeys);
        wmma::store_matrix_sync(sdq + rf * kFrag * ld_f + nt * kFrag, acc, ld_f,
                                wmma::mem_row_major);
      }
      __syncthreads();
      for (int i = threadIdx.x; i < kBwdQueries * d; i += kThreads) {
        const int r = i / d, c = i % d;
        const int64_t t = q0 + r;
        if (t < s) atomicAdd(dq + (bh * s + t) * d + c, sdq[r * ld_f + c]);
      }
    }
  }
  __syncthreads();

  // This block's k and v columns of dqkv: scale·dK and dV.
  for (int i = threadIdx.x; i < kKeys * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const int64_t u = k0 + r;
    if (u >= s) continue;
    Bf16* row = dqkv + (u * b + bi) * width;
    Store(row, (heads + g) * d + c, sdk[r * ld_f + c] * scale);
    Store(row, (heads + groups + g) * d + c, sdv[r * ld_f + c]);
  }
}

// dqkv[t·b + bi, j·d + c] = scale·dq[(bh·s + t)·d + c].
__global__ void DqOutKernel(const float* dq, Bf16* dqkv, int64_t s, int64_t b,
                            int64_t heads, int64_t groups, int d, float scale) {
  const int64_t total = b * heads * s * d;
  const int64_t width = (heads + 2 * groups) * d;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = e % d, t = (e / d) % s, bh = e / (d * s);
    const int64_t bi = bh / heads, j = bh % heads;
    Store(dqkv, (t * b + bi) * width + j * d + c, dq[e] * scale);
  }
}

// Loads the 64-key tile starting at key row k0 of kv group g of sample bi
// into shared K and V ([64, d + 8] each; keys past sk become zeros): key
// row u of the sample is row u·b + bi of k and v (row stride kv_ld), group
// g's columns start at g·d.
__device__ __forceinline__ void LoadChunkKvTile(Bf16* sk, Bf16* sv,
                                                const Bf16* k, const Bf16* v,
                                                int64_t kv_ld, int64_t k0,
                                                int64_t key_rows, int64_t b,
                                                int64_t bi, int64_t g, int d) {
  auto valid = [&](int r) { return k0 + r < key_rows; };
  LoadTile(
      sk, kKeys, d,
      [&](int r) { return k + ((k0 + r) * b + bi) * kv_ld + g * d; }, valid);
  LoadTile(
      sv, kKeys, d,
      [&](int r) { return v + ((k0 + r) * b + bi) * kv_ld + g * d; }, valid);
}

// What the forward and backward kernels read, for the full sequence
// (FlashAttention) and for one (query chunk, key chunk) pair
// (FlashChunkAttention) alike. Positions: query row t (0 .. sq) is global
// position q_pos0 + t, key row u (0 .. sk) is k_pos0 + u; query t sees key
// u iff k_pos0 + u <= q_pos0 + t. `seq` is the whole sequence's length (the
// dropout mask rows).
struct FlashArgs {
  const Bf16* q;  // query row t of sample bi, head j: q + (t·b + bi)·q_ld + j·d
  const Bf16* k;  // key row u, group g: k + (u·b + bi)·kv_ld + g·d
  const Bf16* v;  // as k
  int64_t q_ld, kv_ld;
  int64_t sq, sk, q_pos0, k_pos0, seq;
  int64_t b, heads, groups;
  int d;
  float scale;
  cpu::DropoutSpec dr;
};

// FlashForwardKernel on a chunk pair: out[t·b + bi, j·d ..] (fp32) and
// lse[bh·sq + t] of one (query tile, bh = bi·heads + j). A query row that
// sees no key gets out 0 and lse −inf.
__global__ void __launch_bounds__(kThreads)
    ChunkForwardKernel(const FlashArgs a, float* __restrict__ out,
                       float* __restrict__ lse) {
  extern __shared__ __align__(128) unsigned char smem[];
  const FwdSmem lay(a.d);
  Bf16* sq = reinterpret_cast<Bf16*>(smem + lay.q);
  Bf16* sk = reinterpret_cast<Bf16*>(smem + lay.k);
  Bf16* sv = reinterpret_cast<Bf16*>(smem + lay.v);
  float* ss = reinterpret_cast<float*>(smem + lay.s);
  Bf16* sp = reinterpret_cast<Bf16*>(smem + lay.p);
  float* so = reinterpret_cast<float*>(smem + lay.o);
  float* sm = reinterpret_cast<float*>(smem + lay.m);
  float* sl = reinterpret_cast<float*>(smem + lay.l);
  const int d = a.d;
  const int64_t b = a.b, heads = a.heads, sqn = a.sq, skn = a.sk;
  const float scale = a.scale;
  const cpu::DropoutSpec& dr = a.dr;
  const int ld_h = d + kPadBf16, ld_f = d + kPadFp32;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  // Largest tiles (most key tiles) first, for a better tail balance.
  const int64_t q0 = (gridDim.x - 1 - blockIdx.x) * int64_t{kFwdQueries};
  const int64_t bh = blockIdx.y, bi = bh / heads, j = bh % heads;
  const int64_t g = j / (heads / a.groups);

  LoadTile(
      sq, kFwdQueries, d,
      [&](int r) { return a.q + ((q0 + r) * b + bi) * a.q_ld + j * d; },
      [&](int r) { return q0 + r < sqn; });
  for (int i = threadIdx.x; i < kFwdQueries * ld_f; i += kThreads) so[i] = 0;
  for (int i = threadIdx.x; i < kFwdQueries; i += kThreads) {
    sm[i] = -INFINITY;
    sl[i] = 0.0f;
  }

  // Key tiles up to the diagonal one: key rows u with k_pos0 + u <= the
  // tile's last query position (and u < sk).
  const int64_t q_end = q0 + kFwdQueries < sqn ? q0 + kFwdQueries : sqn;
  int64_t key_end = a.q_pos0 + q_end - a.k_pos0;
  if (key_end > skn) key_end = skn;
  const int row0 = warp * kFrag;  // this warp's first query row in the tile
  for (int64_t k0 = 0; k0 < key_end; k0 += kKeys) {
    __syncthreads();  // the previous tile's K and V are no longer read
    LoadChunkKvTile(sk, sv, a.k, a.v, a.kv_ld, k0, skn, b, bi, g, d);
    __syncthreads();

    // S[row0.., :] = Q[row0.., :]·Kᵀ (raw, unscaled).
    for (int nt = 0; nt < kKeys / kFrag; ++nt) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
      MmaTile<false, true>(acc, sq + row0 * ld_h, ld_h, sk + nt * kFrag * ld_h,
                           ld_h, d);
      wmma::store_matrix_sync(ss + row0 * kLdScore + nt * kFrag, acc, kLdScore,
                              wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of the warp's rows: lanes take keys lane, lane + 32.
    for (int r = row0; r < row0 + kFrag; ++r) {
      const int64_t t = a.q_pos0 + q0 + r;  // global query position
      const float* srow = ss + r * kLdScore;
      float x[2];
      bool valid[2];
      float row_max = -INFINITY;
      for (int h = 0; h < 2; ++h) {
        const int64_t u = k0 + lane + h * kWarpSize;  // key row
        valid[h] = a.k_pos0 + u <= t && u < skn;
        x[h] = srow[lane + h * kWarpSize] * scale;
        if (valid[h]) row_max = fmaxf(row_max, x[h]);
      }
      row_max = WarpMax(row_max);
      const float m_old = sm[r];
      // −inf while the row has seen no key (its P and O stay 0).
      const float m_new = fmaxf(m_old, row_max);
      // 0 on the row's first visible tile.
      const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
      const uint64_t seed = dr.p > 0.0f ? MaskRowSeed(dr, bi, j, a.seq, t) : 0;
      float sum = 0.0f;
      for (int h = 0; h < 2; ++h) {
        const int c = lane + h * kWarpSize;
        const float p = valid[h] ? expf(x[h] - m_new) : 0.0f;
        sum += p;  // the softmax sum is over the undropped P
        Store(sp, r * kLdProb + c, p * DropFactor(dr, seed, a.k_pos0 + k0 + c));
      }
      sum = WarpSum(sum);
      const float l_new = sl[r] * alpha + sum;
      for (int c = lane; c < d; c += kWarpSize) so[r * ld_f + c] *= alpha;
      __syncwarp();  // every lane has read sm[r], sl[r]
      if (lane == 0) {
        sm[r] = m_new;
        sl[r] = l_new;
      }
    }
    __syncwarp();

    // O[row0.., :] += P[row0.., :]·V.
    for (int nt = 0; nt < d / kFrag; ++nt) {
      FragC acc;
      float* o_tile = so + row0 * ld_f + nt * kFrag;
      wmma::load_matrix_sync(acc, o_tile, ld_f, wmma::mem_row_major);
      MmaTile<false, false>(acc, sp + row0 * kLdProb, kLdProb, sv + nt * kFrag,
                            ld_h, kKeys);
      wmma::store_matrix_sync(o_tile, acc, ld_f, wmma::mem_row_major);
    }
  }
  __syncwarp();

  // out = O / l; L = m + log l (the warp's own rows); a row that saw no
  // key (l = 0): out 0, L = −inf.
  for (int r = row0; r < row0 + kFrag; ++r) {
    const int64_t t = q0 + r;
    if (t >= sqn) break;
    const bool seen = sl[r] > 0.0f;
    const float inv = seen ? 1.0f / sl[r] : 0.0f;
    float* orow = out + (t * b + bi) * heads * d + j * d;
    for (int c = lane; c < d; c += kWarpSize) orow[c] = so[r * ld_f + c] * inv;
    if (lane == 0) lse[bh * sqn + t] = seen ? sm[r] + logf(sl[r]) : -INFINITY;
  }
}

// FlashBackwardKernel on a chunk pair, one (key tile, bi·groups + g):
// dout[t·b + bi, j·d ..] (row stride heads·d), lse and drow [bh·sq + t];
// dq[t·b + bi, j·d ..] (fp32, row stride heads·d) += scale·dS·K with
// atomics; dK and dV of key row u, group g at dk / dv + (u·b + bi)·dkv_ld +
// g·d (fp32) += scale·dSᵀ·Q and D(P)ᵀ·dO (one block per key tile, sample
// and group, so no other block writes them).
__global__ void __launch_bounds__(kThreads)
    ChunkBackwardKernel(const FlashArgs a, const Bf16* __restrict__ dout,
                        const float* __restrict__ lse,
                        const float* __restrict__ drow, float* __restrict__ dq,
                        float* __restrict__ dk_out, float* __restrict__ dv_out,
                        int64_t dkv_ld) {
  extern __shared__ __align__(128) unsigned char smem[];
  const BwdSmem lay(a.d);
  Bf16* sk = reinterpret_cast<Bf16*>(smem + lay.k);
  Bf16* sv = reinterpret_cast<Bf16*>(smem + lay.v);
  float* sdk = reinterpret_cast<float*>(smem + lay.dk);
  float* sdv = reinterpret_cast<float*>(smem + lay.dv);
  Bf16* sq = reinterpret_cast<Bf16*>(smem + lay.q);
  Bf16* sdo = reinterpret_cast<Bf16*>(smem + lay.dout);
  float* ss = reinterpret_cast<float*>(smem + lay.s);
  float* sdp = reinterpret_cast<float*>(smem + lay.dp);
  Bf16* sp = reinterpret_cast<Bf16*>(smem + lay.p);
  Bf16* sds = reinterpret_cast<Bf16*>(smem + lay.ds);
  float* sdq = reinterpret_cast<float*>(smem + lay.dq);
  float* slse = reinterpret_cast<float*>(smem + lay.lse);
  float* sdrow = reinterpret_cast<float*>(smem + lay.drow);
  uint64_t* sseed = reinterpret_cast<uint64_t*>(smem + lay.seed);
  const int d = a.d;
  const int64_t b = a.b, heads = a.heads, groups = a.groups;
  const int64_t sqn = a.sq, skn = a.sk;
  const float scale = a.scale;
  // The arguments as locals, as the kernel's scalar parameters were.
  const cpu::DropoutSpec dr = a.dr;
  const Bf16* const q_in = a.q;
  const int64_t q_ld = a.q_ld, q_pos0 = a.q_pos0, k_pos0 = a.k_pos0;
  const int ld_h = d + kPadBf16, ld_f = d + kPadFp32;
  const int warp = threadIdx.x / kWarpSize;
  const int dfrags = d / kFrag;

  const int64_t k0 = blockIdx.x * int64_t{kKeys};
  const int64_t bi = blockIdx.y / groups, g = blockIdx.y % groups;
  const int64_t per_group = heads / groups;
  const int64_t out_width = heads * d;

  LoadChunkKvTile(sk, sv, a.k, a.v, a.kv_ld, k0, skn, b, bi, g, d);
  for (int i = threadIdx.x; i < kKeys * ld_f; i += kThreads) {
    sdk[i] = 0.0f;
    sdv[i] = 0.0f;
  }

  // Query rows whose position is before the tile's first key see none of
  // its keys: start at the diagonal (row k0 over the full sequence).
  int64_t q_first = k_pos0 + k0 - q_pos0;
  if (q_first < 0) q_first = 0;
  for (int64_t j = g * per_group; j < (g + 1) * per_group; ++j) {
    const int64_t bh = bi * heads + j;
    float* const dq_head = dq + j * d;  // + (t·b + bi)·heads·d + c
    for (int64_t q0 = q_first; q0 < sqn; q0 += kBwdQueries) {
      __syncthreads();  // the previous step's readers are done
      LoadTile(
          sq, kBwdQueries, d,
          [&](int r) { return q_in + ((q0 + r) * b + bi) * q_ld + j * d; },
          [&](int r) { return q0 + r < sqn; });
      LoadTile(
          sdo, kBwdQueries, d,
          [&](int r) { return dout + ((q0 + r) * b + bi) * out_width + j * d; },
          [&](int r) { return q0 + r < sqn; });
      for (int r = threadIdx.x; r < kBwdQueries; r += kThreads) {
        const int64_t t = q0 + r;
        slse[r] = t < sqn ? lse[bh * sqn + t] : 0.0f;
        sdrow[r] = t < sqn ? drow[bh * sqn + t] : 0.0f;
        sseed[r] = dr.p > 0.0f ? MaskRowSeed(dr, bi, j, a.seq, q_pos0 + t) : 0;
      }
      __syncthreads();

      // S = Q·Kᵀ and dP = dO·Vᵀ, [32, 64] each: 8 tiles, 2 per warp.
      for (int f = warp; f < (kBwdQueries / kFrag) * (kKeys / kFrag);
           f += kWarps) {
        const int rf = f / (kKeys / kFrag), cf = f % (kKeys / kFrag);
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        MmaTile<false, true>(acc, sq + rf * kFrag * ld_h, ld_h,
                             sk + cf * kFrag * ld_h, ld_h, d);
        wmma::store_matrix_sync(ss + rf * kFrag * kLdScore + cf * kFrag, acc,
                                kLdScore, wmma::mem_row_major);
        wmma::fill_fragment(acc, 0.0f);
        MmaTile<false, true>(acc, sdo + rf * kFrag * ld_h, ld_h,
                             sv + cf * kFrag * ld_h, ld_h, d);
        wmma::store_matrix_sync(sdp + rf * kFrag * kLdScore + cf * kFrag, acc,
                                kLdScore, wmma::mem_row_major);
      }
      __syncthreads();

      // P = exp(scale·S − L) on the visible keys; with the mask factor M:
      // D(P) = P·M (for dV) and dS = P ∘ (M·dP − D).
      for (int i = threadIdx.x; i < kBwdQueries * kKeys; i += kThreads) {
        const int r = i / kKeys, c = i % kKeys;
        const int64_t t = q0 + r, u = k0 + c;  // query and key rows
        float dropped = 0.0f, dscore = 0.0f;
        const bool visible = k_pos0 + u <= q_pos0 + t && t < sqn && u < skn;
        if (visible) {
          const float p = expf(ss[r * kLdScore + c] * scale - slse[r]);
          const float factor = DropFactor(dr, sseed[r], k_pos0 + u);
          dropped = p * factor;
          dscore = p * (factor * sdp[r * kLdScore + c] - sdrow[r]);
        }
        Store(sp, r * kLdProb + c, dropped);
        Store(sds, r * kLdProb + c, dscore);
      }
      __syncthreads();

      // dV += D(P)ᵀ·dO and dK += dSᵀ·Q: warp w owns keys 16w .. 16w + 15.
      for (int nt = 0; nt < dfrags; ++nt) {
        FragC acc;
        float* dv_tile = sdv + warp * kFrag * ld_f + nt * kFrag;
        wmma::load_matrix_sync(acc, dv_tile, ld_f, wmma::mem_row_major);
        MmaTile<true, false>(acc, sp + warp * kFrag, kLdProb, sdo + nt * kFrag,
                             ld_h, kBwdQueries);
        wmma::store_matrix_sync(dv_tile, acc, ld_f, wmma::mem_row_major);
        float* dk_tile = sdk + warp * kFrag * ld_f + nt * kFrag;
        wmma::load_matrix_sync(acc, dk_tile, ld_f, wmma::mem_row_major);
        MmaTile<true, false>(acc, sds + warp * kFrag, kLdProb, sq + nt * kFrag,
                             ld_h, kBwdQueries);
        wmma::store_matrix_sync(dk_tile, acc, ld_f, wmma::mem_row_major);
      }
      // dQ tile = dS·K [32, d].
      for (int f = warp; f < (kBwdQueries / kFrag) * dfrags; f += kWarps) {
        const int rf = f / dfrags, nt = f % dfrags;
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        MmaTile<false, false>(acc, sds + rf * kFrag * kLdProb, kLdProb,
                              sk + nt * kFrag, ld_h, kKeys);
        wmma::store_matrix_sync(sdq + rf * kFrag * ld_f + nt * kFrag, acc, ld_f,
                                wmma::mem_row_major);
      }
      __syncthreads();
      for (int i = threadIdx.x; i < kBwdQueries * d; i += kThreads) {
        const int r = i / d, c = i % d;
        const int64_t t = q0 + r;
        if (t < sqn) {
          atomicAdd(dq_head + (t * b + bi) * heads * d + c,
                    sdq[r * ld_f + c] * scale);
        }
      }
    }
  }
  __syncthreads();

  // This block's keys: scale·dK and dV.
  for (int i = threadIdx.x; i < kKeys * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const int64_t u = k0 + r;
    if (u >= skn) continue;
    const int64_t e = (u * b + bi) * dkv_ld + g * d + c;
    dk_out[e] += sdk[r * ld_f + c] * scale;
    dv_out[e] += sdv[r * ld_f + c];
  }
}

bool Aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// fp32 src rows (src_ld apart) -> bf16 dst rows (dst_ld apart), `cols`
// elements each.
__global__ void CastRowsKernel(const float* src, int64_t src_ld, Bf16* dst,
                               int64_t dst_ld, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    Store(dst, r * dst_ld + c, src[r * src_ld + c]);
  }
}

// cpu::AttentionMerge on the device: one warp per (bh, t) row of lse
// [b·heads, sq]; out rows t·b + bi, head j's d columns (row stride
// heads·d). The weights come from the row's old and new lse, read by every
// lane before lane 0 writes the merged lse.
__global__ void MergeKernel(float* out, float* lse, const float* out2,
                            const float* lse2, int64_t sq, int64_t b,
                            int64_t heads, int d) {
  const int64_t rows = b * heads * sq;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarpSize);
  for (int64_t row =
           (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarpSize;
       row < rows; row += warps) {
    const float a = lse[row], c = lse2[row];
    if (c == -INFINITY) continue;  // the second part saw nothing
    const float m = fmaxf(a, c);
    const float merged = m + logf(expf(a - m) + expf(c - m));
    const float wa = a == -INFINITY ? 0.0f : expf(a - merged);
    const float wc = expf(c - merged);
    const int64_t t = row % sq, bh = row / sq;
    const int64_t bi = bh / heads, j = bh % heads;
    const int64_t offset = (t * b + bi) * heads * d + j * d;
    for (int x = lane; x < d; x += kWarpSize) {
      out[offset + x] = wa * out[offset + x] + wc * out2[offset + x];
    }
    __syncwarp();
    if (lane == 0) lse[row] = merged;
  }
}

// Checks the current device's opt-in shared memory against the kernels'
// need at head_dim d and raises every instance's limit to it.
Status PrepareDevice(int64_t head_dim) {
  MESHTUNE_RETURN_IF_ERROR(RequireDevice());
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess) {
    return LastError("flash_attention_device_attribute");
  }
  const int d = static_cast<int>(head_dim);
  const int fwd_bytes = FwdSmem(d).bytes, bwd_bytes = BwdSmem(d).bytes;
  if (bwd_bytes > optin || fwd_bytes > optin) {
    return Status::InvalidArgument(
        "flash attention: head_dim " + std::to_string(head_dim) + " needs " +
            std::to_string(bwd_bytes) +
            " bytes of shared memory per block; this GPU has " +
            std::to_string(optin),
        "use an sm_80 or newer data-center GPU, a smaller head_dim, or set "
        "MESHTUNE_CUDA_ATTENTION=unfused");
  }
  // The limit is per kernel, not per instance: raise it to the device's
  // maximum so that an instance with a smaller head_dim created later does
  // not lower it under one created earlier (the launch's own size decides
  // occupancy; the attribute only allows it).
  if (cudaFuncSetAttribute(FlashForwardKernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           optin) != cudaSuccess ||
      cudaFuncSetAttribute(FlashBackwardKernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           optin) != cudaSuccess ||
      cudaFuncSetAttribute(ChunkForwardKernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           optin) != cudaSuccess ||
      cudaFuncSetAttribute(ChunkBackwardKernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           optin) != cudaSuccess) {
    return LastError("flash_attention_set_shared_memory");
  }
  return Status::Ok();
}

cpu::DropoutSpec SpecOf(const cpu::DropoutSpec* dropout) {
  return dropout != nullptr ? *dropout : cpu::DropoutSpec();
}

// One (query chunk, key chunk) pair.
FlashArgs ChunkArgs(const FlashChunkAttention::QueryChunk& q,
                    const FlashChunkAttention::KvChunk& kv, int64_t seq,
                    int64_t b, int64_t heads, int64_t groups, int64_t d,
                    const cpu::DropoutSpec* dropout) {
  FlashArgs a;
  a.q = q.q;
  a.k = kv.k;
  a.v = kv.v;
  a.q_ld = q.ld;
  a.kv_ld = kv.ld;
  a.sq = q.len;
  a.sk = kv.len;
  a.q_pos0 = q.pos0;
  a.k_pos0 = kv.pos0;
  a.seq = seq;
  a.b = b;
  a.heads = heads;
  a.groups = groups;
  a.d = static_cast<int>(d);
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.dr = SpecOf(dropout);
  return a;
}

}  // namespace

Status FlashAttention::CheckShape(int64_t s, int64_t b, int64_t heads,
                                  int64_t groups, int64_t head_dim) {
  if (s <= 0 || b <= 0 || heads <= 0 || groups <= 0 || head_dim <= 0 ||
      heads % groups != 0) {
    return Status::InvalidArgument(
        "flash attention: sizes must be positive and heads a multiple of "
        "groups");
  }
  if (head_dim % kFrag != 0 || head_dim > kMaxHeadDim) {
    return Status::InvalidArgument(
        "flash attention: head_dim " + std::to_string(head_dim) +
            " is not a multiple of 16 up to 128",
        "choose hidden_size / num_attention_heads in 16, 32, ..., 128, or set "
        "MESHTUNE_CUDA_ATTENTION=unfused");
  }
  if (b * heads > 65535) {
    return Status::InvalidArgument(
        "flash attention: b·heads = " + std::to_string(b * heads) +
            " exceeds the grid limit 65535",
        "use a smaller micro-batch size");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<FlashAttention>> FlashAttention::Create(
    int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t head_dim) {
  MESHTUNE_RETURN_IF_ERROR(CheckShape(s, b, heads, groups, head_dim));
  MESHTUNE_RETURN_IF_ERROR(PrepareDevice(head_dim));
  std::unique_ptr<FlashAttention> a(new FlashAttention());
  a->s_ = s;
  a->b_ = b;
  a->heads_ = heads;
  a->groups_ = groups;
  a->d_ = head_dim;
  auto dq = DeviceBuffer::Allocate(sizeof(float) * b * heads * s * head_dim);
  if (!dq.ok()) return dq.status();
  a->dq_ = std::move(dq).value();
  auto drow = DeviceBuffer::Allocate(sizeof(float) * b * heads * s);
  if (!drow.ok()) return drow.status();
  a->drow_ = std::move(drow).value();
  return StatusOr<std::unique_ptr<FlashAttention>>(std::move(a));
}

Status FlashAttention::Forward(const Bf16* qkv, Bf16* out, float* lse,
                               Stream stream, const cpu::DropoutSpec* dropout) {
  if (!Aligned16(qkv) || !Aligned16(out)) {
    return Status::InvalidArgument(
        "flash attention: qkv and out must be 16-byte aligned",
        "pass device allocations (DeviceBuffer) or offsets that keep 16 bytes");
  }
  const cpu::DropoutSpec d = dropout != nullptr ? *dropout : cpu::DropoutSpec();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  const dim3 grid(static_cast<unsigned>((s_ + kFwdQueries - 1) / kFwdQueries),
                  static_cast<unsigned>(b_ * heads_));
  const int dim = static_cast<int>(d_);
  FlashForwardKernel<<<grid, kThreads, FwdSmem(dim).bytes, ToCuda(stream)>>>(
      qkv, out, lse, s_, b_, heads_, groups_, dim, scale, d);
  return LastError("flash_attention_forward");
}

Status FlashAttention::Backward(const Bf16* dout, const Bf16* qkv,
                                const Bf16* out, const float* lse, Bf16* dqkv,
                                Stream stream,
                                const cpu::DropoutSpec* dropout) {
  if (!Aligned16(dout) || !Aligned16(qkv)) {
    return Status::InvalidArgument(
        "flash attention: dout and qkv must be 16-byte aligned",
        "pass device allocations (DeviceBuffer) or offsets that keep 16 bytes");
  }
  const cpu::DropoutSpec d = dropout != nullptr ? *dropout : cpu::DropoutSpec();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  const int dim = static_cast<int>(d_);
  const int64_t rows = b_ * heads_ * s_;
  RowDotKernel<<<GridFor(rows * kWarpSize, 256), 256, 0, ToCuda(stream)>>>(
      dout, out, drow_.as<float>(), s_, b_, heads_, dim);
  MESHTUNE_RETURN_IF_ERROR(LastError("flash_attention_row_dot"));
  if (cudaMemsetAsync(dq_.data(), 0, dq_.size_bytes(), ToCuda(stream)) !=
      cudaSuccess) {
    return LastError("flash_attention_zero_dq");
  }
  const dim3 grid(static_cast<unsigned>((s_ + kKeys - 1) / kKeys),
                  static_cast<unsigned>(b_ * groups_));
  FlashBackwardKernel<<<grid, kThreads, BwdSmem(dim).bytes, ToCuda(stream)>>>(
      dout, qkv, lse, drow_.as<float>(), dq_.as<float>(), dqkv, s_, b_, heads_,
      groups_, dim, scale, d);
  MESHTUNE_RETURN_IF_ERROR(LastError("flash_attention_backward"));
  DqOutKernel<<<GridFor(rows * d_, 256), 256, 0, ToCuda(stream)>>>(
      dq_.as<float>(), dqkv, s_, b_, heads_, groups_, dim, scale);
  return LastError("flash_attention_dq");
}

// ---- Chunk pairs (context parallelism) ----

StatusOr<std::unique_ptr<FlashChunkAttention>> FlashChunkAttention::Create(
    int64_t seq, int64_t max_len, int64_t b, int64_t heads, int64_t groups,
    int64_t head_dim) {
  MESHTUNE_RETURN_IF_ERROR(
      FlashAttention::CheckShape(max_len, b, heads, groups, head_dim));
  if (seq < max_len) {
    return Status::InvalidArgument(
        "flash chunk attention: the sequence (" + std::to_string(seq) +
        ") is shorter than a chunk (" + std::to_string(max_len) + ")");
  }
  MESHTUNE_RETURN_IF_ERROR(PrepareDevice(head_dim));
  std::unique_ptr<FlashChunkAttention> a(new FlashChunkAttention());
  a->seq_ = seq;
  a->max_len_ = max_len;
  a->b_ = b;
  a->heads_ = heads;
  a->groups_ = groups;
  a->d_ = head_dim;
  MESHTUNE_ASSIGN_OR_RETURN(
      a->drow_, DeviceBuffer::Allocate(sizeof(float) * b * heads * max_len));
  return StatusOr<std::unique_ptr<FlashChunkAttention>>(std::move(a));
}

Status FlashChunkAttention::CheckChunks(const QueryChunk& q,
                                        const KvChunk& kv) const {
  if (q.len <= 0 || kv.len <= 0 || q.len > max_len_ || kv.len > max_len_ ||
      q.pos0 < 0 || kv.pos0 < 0 || q.pos0 + q.len > seq_ ||
      kv.pos0 + kv.len > seq_) {
    return Status::InvalidArgument(
        "flash chunk attention: chunks of " + std::to_string(q.len) + " and " +
        std::to_string(kv.len) + " positions at " + std::to_string(q.pos0) +
        " and " + std::to_string(kv.pos0) + " do not fit chunks of at most " +
        std::to_string(max_len_) + " in a sequence of " + std::to_string(seq_));
  }
  if (!Aligned16(q.q) || !Aligned16(kv.k) || !Aligned16(kv.v) ||
      q.ld % 8 != 0 || kv.ld % 8 != 0) {
    return Status::InvalidArgument(
        "flash chunk attention: q, k and v must be 16-byte aligned with row "
        "strides a multiple of 8 elements",
        "pass device allocations (DeviceBuffer) or offsets that keep 16 bytes");
  }
  return Status::Ok();
}

Status FlashChunkAttention::Forward(const QueryChunk& q, const KvChunk& kv,
                                    float* out, float* lse, Stream stream,
                                    const cpu::DropoutSpec* dropout) const {
  MESHTUNE_RETURN_IF_ERROR(CheckChunks(q, kv));
  const FlashArgs a = ChunkArgs(q, kv, seq_, b_, heads_, groups_, d_, dropout);
  const dim3 grid(static_cast<unsigned>((a.sq + kFwdQueries - 1) / kFwdQueries),
                  static_cast<unsigned>(a.b * a.heads));
  ChunkForwardKernel<<<grid, kThreads, FwdSmem(a.d).bytes, ToCuda(stream)>>>(
      a, out, lse);
  return LastError("flash_chunk_forward");
}

Status FlashChunkAttention::Backward(const Bf16* dout, const Bf16* out,
                                     const float* lse, const QueryChunk& q,
                                     const KvChunk& kv, float* dq, float* dk,
                                     float* dv, int64_t dkv_ld, Stream stream,
                                     const cpu::DropoutSpec* dropout) {
  MESHTUNE_RETURN_IF_ERROR(CheckChunks(q, kv));
  if (!Aligned16(dout)) {
    return Status::InvalidArgument(
        "flash chunk attention: dout must be 16-byte aligned",
        "pass device allocations (DeviceBuffer) or offsets that keep 16 bytes");
  }
  const FlashArgs a = ChunkArgs(q, kv, seq_, b_, heads_, groups_, d_, dropout);
  // D = rowsum(dout ∘ out) of the query rows, then the pair's blocks.
  const int64_t rows = a.b * a.heads * a.sq;
  RowDotKernel<<<GridFor(rows * kWarpSize, 256), 256, 0, ToCuda(stream)>>>(
      dout, out, drow_.as<float>(), a.sq, a.b, a.heads, a.d);
  MESHTUNE_RETURN_IF_ERROR(LastError("flash_chunk_row_dot"));
  const dim3 grid(static_cast<unsigned>((a.sk + kKeys - 1) / kKeys),
                  static_cast<unsigned>(a.b * a.groups));
  ChunkBackwardKernel<<<grid, kThreads, BwdSmem(a.d).bytes, ToCuda(stream)>>>(
      a, dout, lse, drow_.as<float>(), dq, dk, dv, dkv_ld);
  return LastError("flash_chunk_backward");
}

Status FlashChunkAttention::Merge(float* out, float* lse, const float* out2,
                                  const float* lse2, int64_t sq, int64_t b,
                                  int64_t heads, int64_t head_dim,
                                  Stream stream) {
  const int64_t rows = b * heads * sq;
  MergeKernel<<<GridFor(rows * kWarpSize, 256), 256, 0, ToCuda(stream)>>>(
      out, lse, out2, lse2, sq, b, heads, static_cast<int>(head_dim));
  return LastError("flash_attention_merge");
}

Status CastRowsToBf16(const float* src, int64_t src_ld, Bf16* dst,
                      int64_t dst_ld, int64_t rows, int64_t cols,
                      Stream stream) {
  if (rows * cols == 0) return Status::Ok();
  CastRowsKernel<<<GridFor(rows * cols, 256), 256, 0, ToCuda(stream)>>>(
      src, src_ld, dst, dst_ld, rows, cols);
  return LastError("cast_rows_to_bf16");
}

Status CopyRows(const Bf16* src, int64_t src_ld, Bf16* dst, int64_t dst_ld,
                int64_t rows, int64_t cols, Stream stream) {
  if (rows * cols == 0) return Status::Ok();
  if (cudaMemcpy2DAsync(dst, sizeof(Bf16) * dst_ld, src, sizeof(Bf16) * src_ld,
                        sizeof(Bf16) * cols, rows, cudaMemcpyDeviceToDevice,
                        ToCuda(stream)) != cudaSuccess) {
    return LastError("copy_rows");
  }
  return Status::Ok();
}

Status ZeroFloats(float* data, int64_t count, Stream stream) {
  if (count == 0) return Status::Ok();
  if (cudaMemsetAsync(data, 0, sizeof(float) * count, ToCuda(stream)) !=
      cudaSuccess) {
    return LastError("zero_floats");
  }
  return Status::Ok();
}

}  // namespace meshtune::engine::cuda
