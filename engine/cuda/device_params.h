// The CUDA backend's copy of a ParamStore (engine/param_store.h): the same
// flat layout and offsets, held on the GPU as Megatron's bf16 recipe keeps
// it: fp32 master weights, the bf16 weights the model computes with, the
// fp32 main-grad buffer and AdamW's fp32 m and v — 18 bytes per parameter
// (the cost model's memory term for a non-distributed optimizer).
#ifndef MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_
#define MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cuda/bf16.h"
#include "engine/cuda/device.h"
#include "engine/cuda/ops.h"
#include "engine/param_store.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class DeviceParams {
 public:
  // Uploads `store`'s parameters (finalized and initialized) as the master
  // weights and their bf16 copy; gradients and moments start at zero.
  static StatusOr<std::unique_ptr<DeviceParams>> Create(
      const ParamStore& store);

  int64_t numel() const { return numel_; }
  // Bytes held on the device: 18 per parameter.
  int64_t bytes() const { return 18 * numel_; }

  const Bf16* weight(const ParamStore& store, int i) const {
    return weights_.as<Bf16>() + store.info(i).offset;
  }
  float* grad(const ParamStore& store, int i) const {
    return grads_.as<float>() + store.info(i).offset;
  }

  Status ZeroGrads();
  // Every gradient ×= coeff (global-norm clipping).
  Status ScaleGrads(float coeff);
  // Copies the fp32 master weights (or the main grads) into `store`.
  Status DownloadParams(ParamStore* store) const;
  Status DownloadGrads(ParamStore* store) const;
  // AdamW's moments to / from host arrays of numel() floats each
  // (checkpoints go through the CPU engine's format, engine/checkpoint.h).
  Status DownloadMoments(float* m, float* v) const;
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
  int64_t numel_ = 0;
  DeviceBuffer master_;   // fp32 [numel]
  DeviceBuffer weights_;  // bf16 [numel]
  DeviceBuffer grads_;    // fp32 [numel]
  DeviceBuffer m_, v_;    // fp32 [numel]
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_
