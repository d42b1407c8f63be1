// Checked vendor calls for the CUDA backend: CUDA_CHECK, CUBLAS_CHECK,
// NCCL_CHECK and CUPTI_CHECK. A failing call prints one line,
//   <file>:<line>: [<hostname>] <expression> failed: <library message>
// and aborts: a vendor error inside a benchmark is a broken invariant (bad
// driver, lost device), not user input (docs/design.md §3). The hostname is
// there because GPU jobs run on machines the user is not logged into.
// Conditions a user can cause (no device, a shape too big for memory, fp8 on
// a GPU without it) are checked before the call and returned as Status.
#ifndef MESHTUNE_PROFILER_CUDA_CUDA_CHECK_CUH_
#define MESHTUNE_PROFILER_CUDA_CUDA_CHECK_CUH_

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <nccl.h>

namespace meshtune::profiler::cuda {

// Prints the failure line (with gethostname()) to stderr and aborts.
[[noreturn]] void FailVendorCall(const char* expression, const char* file,
                                 int line, const char* message);

inline const char* CuptiMessage(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || !text) {
    return "unknown CUPTI error";
  }
  return text;
}

}  // namespace meshtune::profiler::cuda

#define CUDA_CHECK(expr)                                                 \
  do {                                                                   \
    const cudaError_t meshtune_err_ = (expr);                            \
    if (meshtune_err_ != cudaSuccess) {                                  \
      ::meshtune::profiler::cuda::FailVendorCall(                        \
          #expr, __FILE__, __LINE__, cudaGetErrorString(meshtune_err_)); \
    }                                                                    \
  } while (0)

#define CUBLAS_CHECK(expr)                                                   \
  do {                                                                       \
    const cublasStatus_t meshtune_st_ = (expr);                              \
    if (meshtune_st_ != CUBLAS_STATUS_SUCCESS) {                             \
      ::meshtune::profiler::cuda::FailVendorCall(                            \
          #expr, __FILE__, __LINE__, cublasLtGetStatusString(meshtune_st_)); \
    }                                                                        \
  } while (0)

#define NCCL_CHECK(expr)                                                \
  do {                                                                  \
    const ncclResult_t meshtune_nc_ = (expr);                           \
    if (meshtune_nc_ != ncclSuccess) {                                  \
      ::meshtune::profiler::cuda::FailVendorCall(                       \
          #expr, __FILE__, __LINE__, ncclGetErrorString(meshtune_nc_)); \
    }                                                                   \
  } while (0)

#define CUPTI_CHECK(expr)                                          \
  do {                                                             \
    const CUptiResult meshtune_cr_ = (expr);                       \
    if (meshtune_cr_ != CUPTI_SUCCESS) {                           \
      ::meshtune::profiler::cuda::FailVendorCall(                  \
          #expr, __FILE__, __LINE__,                               \
          ::meshtune::profiler::cuda::CuptiMessage(meshtune_cr_)); \
    }                                                              \
  } while (0)

#endif  // MESHTUNE_PROFILER_CUDA_CUDA_CHECK_CUH_
