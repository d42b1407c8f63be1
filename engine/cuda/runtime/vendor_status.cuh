// Vendor return codes as Status, for the CUDA backend's .cu files: one
// helper per library, each returning Internal with the library's own
// message, "<library> <what> failed: <message>". The engine's communicators
// are blocking (ncclCommInitRank), so ncclInProgress never means success.
// Internal to engine/cuda/: public headers stay free of CUDA types.
#ifndef MESHTUNE_ENGINE_CUDA_RUNTIME_VENDOR_STATUS_CUH_
#define MESHTUNE_ENGINE_CUDA_RUNTIME_VENDOR_STATUS_CUH_

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

inline Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::Internal("cuda " + what +
                          " failed: " + cudaGetErrorString(err));
}

inline Status NcclStatus(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status::Ok();
  return Status::Internal("NCCL " + what +
                          " failed: " + ncclGetErrorString(result));
}

inline Status LtStatus(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Internal("cuBLASLt " + what +
                          " failed: " + cublasLtGetStatusString(status));
}

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_RUNTIME_VENDOR_STATUS_CUH_
