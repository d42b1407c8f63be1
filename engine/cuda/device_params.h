// The CUDA backend's copy of a ParamStore (engine/param_store.h), held on the
// GPU as Megatron's bf16 recipe keeps it: fp32 master weights, the bf16
// weights the model computes with, the fp32 main-grad buffer and AdamW's
// fp32 m and v — 18 bytes per parameter (the cost model's memory term for a
// non-distributed optimizer). The tensors keep the store's order, but each
// starts on a multiple of kAlignElements (256 bytes of bf16), so cuBLASLt
// may use its vectorized tensor-core kernels on every weight (the store's
// offsets are packed, 2-byte aligned in bf16); the padding is zero.
#ifndef MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_
#define MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cuda/bf16.h"
#include "engine/cuda/device.h"
#include "engine/cuda/ops.h"
#include "engine/param_store.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class DeviceParams {
 public:
  static constexpr int64_t kAlignElements = 128;

  // Uploads `store`'s parameters (finalized and initialized) as the master
  // weights and their bf16 copy; gradients and moments start at zero.
  static StatusOr<std::unique_ptr<DeviceParams>> Create(
      const ParamStore& store);

  int64_t numel() const { return numel_; }
  // The main-grad buffer as one flat range (padding included, zero), for
  // the data-parallel all-reduce.
  float* grad_buffer() const { return grads_.as<float>(); }
  int64_t padded_numel() const { return padded_numel_; }
  // Device element range [begin, end) of tensors first..last (store
  // indices), padding included: one contiguous bucket of the main grads.
  std::pair<int64_t, int64_t> Range(int first, int last) const {
    const int64_t end = last + 1 < static_cast<int>(offsets_.size())
                            ? offsets_[last + 1]
                            : padded_numel_;
    return {offsets_[first], end};
  }

  const Bf16* weight(const ParamStore& store, int i) const {
    (void)store;
    return weights_.as<Bf16>() + offsets_[i];
  }
  float* grad(const ParamStore& store, int i) const {
    (void)store;
    return grads_.as<float>() + offsets_[i];
  }

  Status ZeroGrads();
  // Every gradient ×= coeff (global-norm clipping).
  Status ScaleGrads(float coeff);
  // Copies the fp32 master weights into `store`.
  Status DownloadParams(ParamStore* store) const;
  // AdamW's moments to / from host arrays of numel() floats each
  // (checkpoints go through the CPU engine's format, engine/checkpoint.h).
  Status DownloadMoments(const ParamStore& store, float* m, float* v) const;
  // Replaces the master weights with `store`'s (and rewrites the bf16
  // copy) and the moments with m, v: a loaded checkpoint.
  Status UploadState(const ParamStore& store, const float* m, const float* v);

  // One AdamW segment per parameter with its weight decay (0 for norms and
  // biases, ParamInfo::weight_decay), and the gradient segments counted in
  // the global norm (ParamInfo::counts_in_norm).
  std::vector<AdamWSegment> AdamSegments(const ParamStore& store,
                                         float weight_decay) const;
  std::vector<GradSegment> NormSegments(const ParamStore& store) const;

 private:
  DeviceParams() = default;
  // Per tensor: copies between the store's packed flat buffer `host` and
  // the device buffer `device` (fp32), in either direction.
  Status ToDevice(const ParamStore& store, const float* host,
                  const DeviceBuffer& device) const;
  Status ToHost(const ParamStore& store, const DeviceBuffer& device,
                float* host) const;

  int64_t numel_ = 0;             // the store's parameters
  int64_t padded_numel_ = 0;      // with the alignment padding
  std::vector<int64_t> offsets_;  // device offset of each tensor
  DeviceBuffer master_;           // fp32 [padded_numel]
  DeviceBuffer weights_;          // bf16 [padded_numel]
  DeviceBuffer grads_;            // fp32 [padded_numel]
  DeviceBuffer m_, v_;            // fp32 [padded_numel]
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_
