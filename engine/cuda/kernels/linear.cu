// cuBLASLt linear layers (engine/cuda/kernels/linear.h says the layout
// mapping).
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/vendor_status.cuh"

namespace meshtune::engine::cuda {
namespace {

constexpr int kBiasThreads = 256;
constexpr int64_t kBiasRowsPerChunk = 256;

#define LT_RETURN_IF_ERROR(expr) \
  MESHTUNE_RETURN_IF_ERROR(LtStatus((expr), #expr))

// The largest power of two (at most 256) dividing the address: what the
// heuristic may assume about a pointer (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*).
uint32_t Alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// dbias[j] += Σ_rows dout[row, j]: one thread per column of a chunk of rows,
// one atomic per column per chunk (coalesced reads along the row).
__global__ void BiasGradKernel(const Bf16* dout, float* dbias, int64_t n,
                               int64_t m) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= m) return;
  // Chunks stride by gridDim.y: grid.y stops at 65535 (more than 16.7 M
  // rows would otherwise be an invalid launch).
  for (int64_t first = blockIdx.y * int64_t{kBiasRowsPerChunk}; first < n;
       first += int64_t{gridDim.y} * kBiasRowsPerChunk) {
    const int64_t last = min(n, first + kBiasRowsPerChunk);
    float sum = 0.0f;
    for (int64_t row = first; row < last; ++row) sum += Load(dout, row * m + j);
    atomicAdd(&dbias[j], sum);
  }
}

// One GEMM in column-major terms: D[M, N] = op(A)·op(B) (+ beta·C, C = D).
struct Gemm {
  cublasOperation_t trans_a, trans_b;
  int64_t m, n, k;  // op(A) is M×K, op(B) K×N
  int64_t lda, ldb, ldd;
  cudaDataType_t d_type;  // CUDA_R_16BF or CUDA_R_32F (A and B are bf16)
  cublasLtEpilogue_t epilogue;
  const void* a;
  const void* b;
  void* d;
  const void* bias;  // bf16 [M], with a BIAS epilogue
  void* aux;         // bf16 [M, N] ld M, with GELU_AUX
  float beta;
  float alpha = 1.0f;
  int64_t batch = 1;  // strided batch: matrix i at i·stride elements
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
};

using AlgoKey =
    std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
               int, int, uint32_t, uint32_t, uint32_t, uint32_t, int64_t>;

// Sets a layout's strided-batch attributes (no-op for a single matrix).
cublasStatus_t SetBatch(cublasLtMatrixLayout_t layout, int64_t batch,
                        int64_t stride) {
  if (batch == 1) return CUBLAS_STATUS_SUCCESS;
  const int32_t count = static_cast<int32_t>(batch);
  cublasStatus_t st = cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
      sizeof(stride));
}

// A row-major batched product as the column-major GEMM cuBLASLt runs:
// C = op(A)·op(B) is Cᵀ = op(B)ᵀ·op(A)ᵀ, so the operands swap and a
// row-major [r, c] matrix is the column-major [c, r] with ld c.
Gemm RowMajorBatched(bool trans_a, bool trans_b, int64_t m, int64_t n,
                     int64_t k, const void* a, int64_t stride_a, const void* b,
                     int64_t stride_b, void* c, int64_t stride_c, int64_t batch,
                     float alpha, cudaDataType_t c_type) {
  Gemm g{trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
         trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
         n,
         m,
         k,
         trans_b ? k : n,  // B stored [N, K] (ld K) or [K, N] (ld N)
         trans_a ? m : k,  // A stored [K, M] (ld M) or [M, K] (ld K)
         n,
         c_type,
         CUBLASLT_EPILOGUE_DEFAULT,
         b,
         a,
         c,
         nullptr,
         nullptr,
         0.0f};
  g.alpha = alpha;
  g.batch = batch;
  g.stride_a = stride_b;
  g.stride_b = stride_a;
  g.stride_d = stride_c;
  return g;
}

}  // namespace

struct GemmContext::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algorithms;

  ~Impl() {
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  Status Run(const Gemm& g, Stream stream) {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    Status st = RunWith(g, stream, &desc, &la, &lb, &ld);
    if (ld != nullptr) cublasLtMatrixLayoutDestroy(ld);
    if (lb != nullptr) cublasLtMatrixLayoutDestroy(lb);
    if (la != nullptr) cublasLtMatrixLayoutDestroy(la);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    return st;
  }

 private:
  Status RunWith(const Gemm& g, Stream stream, cublasLtMatmulDesc_t* desc,
                 cublasLtMatrixLayout_t* la, cublasLtMatrixLayout_t* lb,
                 cublasLtMatrixLayout_t* ld) {
    LT_RETURN_IF_ERROR(
        cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        *desc, CUBLASLT_MATMUL_DESC_TRANSA, &g.trans_a, sizeof(g.trans_a)));
    LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        *desc, CUBLASLT_MATMUL_DESC_TRANSB, &g.trans_b, sizeof(g.trans_b)));
    LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        *desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof(g.epilogue)));
    if (g.bias != nullptr) {
      const cudaDataType_t bias_type = CUDA_R_16BF;
      LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          *desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
      LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          *desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
          sizeof(bias_type)));
    }
    if (g.aux != nullptr) {
      // The auxiliary output's type defaults to D's (bf16).
      const int64_t aux_ld = g.m;
      LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          *desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux,
          sizeof(g.aux)));
      LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          *desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
          sizeof(aux_ld)));
    }
    // Stored (pre-op) shapes: A is M×K, or K×M when transposed; likewise B.
    const bool ta = g.trans_a == CUBLAS_OP_T, tb = g.trans_b == CUBLAS_OP_T;
    LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(
        la, CUDA_R_16BF, ta ? g.k : g.m, ta ? g.m : g.k, g.lda));
    LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(
        lb, CUDA_R_16BF, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb));
    LT_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(ld, g.d_type, g.m, g.n, g.ldd));
    LT_RETURN_IF_ERROR(SetBatch(*la, g.batch, g.stride_a));
    LT_RETURN_IF_ERROR(SetBatch(*lb, g.batch, g.stride_b));
    LT_RETURN_IF_ERROR(SetBatch(*ld, g.batch, g.stride_d));

    const AlgoKey key{g.trans_a,
                      g.trans_b,
                      g.m,
                      g.n,
                      g.k,
                      g.lda,
                      g.ldb,
                      g.ldd,
                      g.d_type,
                      g.epilogue,
                      Alignment(g.a),
                      Alignment(g.b),
                      Alignment(g.d),
                      g.aux != nullptr ? Alignment(g.aux) : 0u,
                      g.batch};
    auto it = algorithms.find(key);
    if (it == algorithms.end()) {
      cublasLtMatmulPreference_t pref = nullptr;
      LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t ws = workspace.size_bytes();
      const uint32_t align_a = Alignment(g.a), align_b = Alignment(g.b),
                     align_d = Alignment(g.d);
      cublasLtMatmulHeuristicResult_t result = {};
      int returned = 0;
      cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
      if (status == CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
            sizeof(align_a));
        cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
            sizeof(align_b));
        cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
            sizeof(align_d));
        cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
            sizeof(align_d));
        status = cublasLtMatmulAlgoGetHeuristic(
            handle, *desc, *la, *lb, *ld, *ld, pref, 1, &result, &returned);
      }
      cublasLtMatmulPreferenceDestroy(pref);
      // cuBLASLt reports "no algorithm" as NOT_SUPPORTED rather than as
      // success with nothing returned; both get the shape in the message.
      if (status == CUBLAS_STATUS_NOT_SUPPORTED)
        returned = 0;
      else
        LT_RETURN_IF_ERROR(status);
      if (returned == 0) {
        return Status::Internal(
            "cuBLASLt has no algorithm for a " + std::to_string(g.m) + "x" +
            std::to_string(g.n) + "x" + std::to_string(g.k) +
            " bf16 GEMM with this epilogue");
      }
      it = algorithms.emplace(key, result.algo).first;
    }
    LT_RETURN_IF_ERROR(cublasLtMatmul(handle, *desc, &g.alpha, g.a, *la, g.b,
                                      *lb, &g.beta, g.d, *ld, g.d, *ld,
                                      &it->second, workspace.data(),
                                      workspace.size_bytes(), ToCuda(stream)));
    return Status::Ok();
  }
};

GemmContext::GemmContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmContext::~GemmContext() = default;

StatusOr<std::unique_ptr<GemmContext>> GemmContext::Create(
    size_t workspace_bytes) {
  auto workspace = DeviceBuffer::Allocate(workspace_bytes);
  if (!workspace.ok()) return workspace.status();
  auto impl = std::make_unique<Impl>();
  impl->workspace = std::move(workspace).value();
  MESHTUNE_RETURN_IF_ERROR(
      LtStatus(cublasLtCreate(&impl->handle), "cublasLtCreate"));
  return std::unique_ptr<GemmContext>(new GemmContext(std::move(impl)));
}

Status GemmContext::BatchedMatmul(bool trans_a, bool trans_b, int64_t m,
                                  int64_t n, int64_t k, const Bf16* a,
                                  int64_t stride_a, const Bf16* b,
                                  int64_t stride_b, Bf16* c, int64_t stride_c,
                                  int64_t batch, float alpha, Stream stream) {
  if (batch == 0 || m == 0 || n == 0) return Status::Ok();
  return impl_->Run(
      RowMajorBatched(trans_a, trans_b, m, n, k, a, stride_a, b, stride_b, c,
                      stride_c, batch, alpha, CUDA_R_16BF),
      stream);
}

Status GemmContext::BatchedMatmul(bool trans_a, bool trans_b, int64_t m,
                                  int64_t n, int64_t k, const Bf16* a,
                                  int64_t stride_a, const Bf16* b,
                                  int64_t stride_b, float* c, int64_t stride_c,
                                  int64_t batch, float alpha, Stream stream) {
  if (batch == 0 || m == 0 || n == 0) return Status::Ok();
  return impl_->Run(
      RowMajorBatched(trans_a, trans_b, m, n, k, a, stride_a, b, stride_b, c,
                      stride_c, batch, alpha, CUDA_R_32F),
      stream);
}

int64_t GemmContext::cached_algorithms() const {
  return static_cast<int64_t>(impl_->algorithms.size());
}

Status GemmContext::LinearForward(const Bf16* in, const Bf16* weight,
                                  const Bf16* bias, Bf16* out, int64_t n,
                                  int64_t k, int64_t m, Stream stream) {
  if (n == 0 || m == 0) return Status::Ok();
  // outᵀ[m, n] = W[m, k]·inᵀ[k, n]: W is stored as the column-major [k, m].
  const Gemm g{
      CUBLAS_OP_T,
      CUBLAS_OP_N,
      m,
      n,
      k,
      k,
      k,
      m,
      CUDA_R_16BF,
      bias != nullptr ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT,
      weight,
      in,
      out,
      bias,
      nullptr,
      0.0f};
  return impl_->Run(g, stream);
}

Status GemmContext::LinearGeluForward(const Bf16* in, const Bf16* weight,
                                      const Bf16* bias, Bf16* pre_gelu,
                                      Bf16* out, int64_t n, int64_t k,
                                      int64_t m, Stream stream) {
  if (n == 0 || m == 0) return Status::Ok();
  if (m % 8 != 0 || bias == nullptr) {
    MESHTUNE_RETURN_IF_ERROR(
        LinearForward(in, weight, bias, pre_gelu, n, k, m, stream));
    return GeluForward(pre_gelu, out, n * m, stream);
  }
  const Gemm g{CUBLAS_OP_T, CUBLAS_OP_N,
               m,           n,
               k,           k,
               k,           m,
               CUDA_R_16BF, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
               weight,      in,
               out,         bias,
               pre_gelu,    0.0f};
  return impl_->Run(g, stream);
}

Status GemmContext::LinearBackward(const Bf16* dout, const Bf16* in,
                                   const Bf16* weight, Bf16* din,
                                   float* dweight, float* dbias, int64_t n,
                                   int64_t k, int64_t m, Stream stream) {
  if (n == 0) return Status::Ok();
  if (din != nullptr) {
    // dinᵀ[k, n] = Wᵀ[k, m]·doutᵀ[m, n]; Wᵀ is W's column-major storage.
    const Gemm g{
        CUBLAS_OP_N, CUBLAS_OP_N, k,   n,           m,
        k,           m,           k,   CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT,
        weight,      dout,        din, nullptr,     nullptr,
        0.0f};
    MESHTUNE_RETURN_IF_ERROR(impl_->Run(g, stream));
  }
  // dWᵀ[k, m] += inᵀ[k, n]·dout[n, m] (fp32, beta = 1: accumulation).
  const Gemm g{
      CUBLAS_OP_N, CUBLAS_OP_T, k,       m,          n,
      k,           m,           k,       CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT,
      in,          dout,        dweight, nullptr,    nullptr,
      1.0f};
  MESHTUNE_RETURN_IF_ERROR(impl_->Run(g, stream));
  if (dbias != nullptr) {
    const dim3 grid(
        static_cast<unsigned>((m + kBiasThreads - 1) / kBiasThreads),
        static_cast<unsigned>(std::min<int64_t>(
            kMaxGridY, (n + kBiasRowsPerChunk - 1) / kBiasRowsPerChunk)));
    BiasGradKernel<<<grid, kBiasThreads, 0, ToCuda(stream)>>>(dout, dbias, n,
                                                              m);
    MESHTUNE_RETURN_IF_ERROR(LastError("linear_bias_grad"));
  }
  return Status::Ok();
}

}  // namespace meshtune::engine::cuda
