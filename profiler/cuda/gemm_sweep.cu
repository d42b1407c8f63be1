// gemm_sweep: times cuBLASLt GEMMs at given shapes on one GPU.
//
// The first piece of the GPU profiler (measurements issue): it measures what
// the cost model's GEMM efficiency curve predicts, so the curve can be checked
// against a real device. Reads "label m n k" lines on stdin (C[m,n] =
// A[m,k]·B[k,n]), runs each in bf16 or fp8 (E4M3 inputs, bf16 output, fp32
// accumulate, the Transformer Engine recipe) and prints CSV:
//   label,dtype,m,n,k,time_us,tflops
// Timing: CUDA events around each call after warm-up; the median of the
// repetitions is reported. CUPTI kernel timing and the results store come with
// `tune profile`.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#define CUDA_CHECK(expr)                                                 \
  do {                                                                   \
    cudaError_t err_ = (expr);                                           \
    if (err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, \
                   #expr, cudaGetErrorString(err_));                     \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

#define CUBLAS_CHECK(expr)                                            \
  do {                                                                \
    cublasStatus_t st_ = (expr);                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                               \
      std::fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, \
                   __LINE__, #expr, static_cast<int>(st_));           \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

namespace {

// Deterministic pseudo-random values in [-1, 1) so the tensor cores see
// realistic bit patterns (zeros would understate power and time).
__device__ float HashToUnit(uint64_t i) {
  i ^= i >> 33;
  i *= 0xff51afd7ed558ccdULL;
  i ^= i >> 33;
  return static_cast<float>(i & 0xffffff) / static_cast<float>(0x800000) - 1.f;
}

__global__ void FillBf16(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = __float2bfloat16(HashToUnit(i + seed));
  }
}

__global__ void FillFp8(__nv_fp8_e4m3* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = __nv_fp8_e4m3(HashToUnit(i + seed));
  }
}

struct Shape {
  std::string label;
  int64_t m, n, k;
};

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times C[m,n] = A[m,k]·B[k,n] in the "TN" layout cuBLASLt needs for fp8
// (column-major: A stored k×m and transposed, B stored k×n).
double TimeGemmUs(cublasLtHandle_t lt, const Shape& s, bool fp8,
                  void* workspace, size_t workspace_bytes, int warmup,
                  int reps) {
  const size_t elem = fp8 ? 1 : 2;
  void *a = nullptr, *b = nullptr, *d = nullptr;
  CUDA_CHECK(cudaMalloc(&a, s.m * s.k * elem));  // [k, m] column-major
  CUDA_CHECK(cudaMalloc(&b, s.k * s.n * elem));  // [k, n] column-major
  CUDA_CHECK(cudaMalloc(&d, s.m * s.n * 2));     // [m, n] bf16
  if (fp8) {
    FillFp8<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(a), s.m * s.k, 1);
    FillFp8<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(b), s.k * s.n, 2);
  } else {
    FillBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a), s.m * s.k, 1);
    FillBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(b), s.k * s.n, 2);
  }
  CUDA_CHECK(cudaGetLastError());

  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  cublasLtMatmulDesc_t desc;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                              &op_t, sizeof(op_t)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                              &op_n, sizeof(op_n)));
  cublasLtMatrixLayout_t la, lb, ld;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, in_type, s.k, s.m, s.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, in_type, s.k, s.n, s.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, s.m, s.n, s.m));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  // "No algorithm" comes back as CUBLAS_STATUS_NOT_SUPPORTED: a -1 row.
  const cublasStatus_t heuristic_status = cublasLtMatmulAlgoGetHeuristic(
      lt, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);
  if (heuristic_status == CUBLAS_STATUS_NOT_SUPPORTED) {
    found = 0;
  } else {
    CUBLAS_CHECK(heuristic_status);
  }
  double median_us = -1;
  if (found > 0) {
    const float alpha = 1.f, beta = 0.f;
    auto run = [&] {
      CUBLAS_CHECK(cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld,
                                  d, ld, &heuristic.algo, workspace,
                                  workspace_bytes, 0));
    };
    for (int i = 0; i < warmup; ++i) run();
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
      CUDA_CHECK(cudaEventRecord(start));
      run();
      CUDA_CHECK(cudaEventRecord(stop));
      CUDA_CHECK(cudaEventSynchronize(stop));
      CUDA_CHECK(cudaEventElapsedTime(&ms[i], start, stop));
    }
    median_us = Median(ms) * 1e3;
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  CUDA_CHECK(cudaFree(d));
  return median_us;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dtype = "bf16";
  int warmup = 5, reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dtype" && i + 1 < argc) {
      dtype = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: gemm_sweep [--dtype bf16|fp8] [--reps N] < shapes\n"
                   "  shapes: one 'label m n k' per line\n");
      return 2;
    }
  }
  if ((dtype != "bf16" && dtype != "fp8") || reps < 1) {
    std::fprintf(stderr, "gemm_sweep: error: --dtype must be bf16 or fp8\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gemm_sweep: error: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(stderr, "# device %s, cuBLASLt %zu, dtype %s, median of %d\n",
               prop.name, cublasLtGetVersion(), dtype.c_str(), reps);

  std::vector<Shape> shapes;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    Shape s;
    if (!(in >> s.label >> s.m >> s.n >> s.k) || s.m <= 0 || s.n <= 0 ||
        s.k <= 0) {
      std::fprintf(stderr, "gemm_sweep: error: bad shape line '%s'\n",
                   line.c_str());
      return 2;
    }
    shapes.push_back(s);
  }

  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  const size_t workspace_bytes = 32u << 20;
  void* workspace = nullptr;
  CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  std::printf("label,dtype,m,n,k,time_us,tflops\n");
  for (const Shape& s : shapes) {
    const double us = TimeGemmUs(lt, s, dtype == "fp8", workspace,
                                 workspace_bytes, warmup, reps);
    const double tflops =
        us > 0 ? 2.0 * s.m * s.n * s.k / (us * 1e-6) / 1e12 : 0.0;
    std::printf("%s,%s,%lld,%lld,%lld,%.3f,%.1f\n", s.label.c_str(),
                dtype.c_str(), static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), us,
                tflops);
    std::fflush(stdout);
  }
  CUDA_CHECK(cudaFree(workspace));
  cublasLtDestroy(lt);
  return 0;
}
