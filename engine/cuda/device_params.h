// The CUDA backend's copy of a ParamStore (engine/param_store.h), held on the
// GPU as Megatron's bf16 recipe keeps it: fp32 master weights, the bf16
// weights the model computes with, the fp32 main-grad buffer and AdamW's
// fp32 m and v. The tensors keep the store's order, but each starts on a
// multiple of kAlignElements (256 bytes of bf16), so cuBLASLt may use its
// vectorized tensor-core kernels on every weight (the store's offsets are
// packed, 2-byte aligned in bf16); the padding is zero.
//
// Without the distributed optimizer every rank holds everything: 18 bytes
// per parameter (the cost model's memory term for a non-distributed
// optimizer). With it (ZeRO-1, Megatron's distrib_optimizer.py) the flat
// buffer is padded further to a multiple of dp·kAlignElements and dp rank r
// owns the contiguous shard [r·N/dp, (r+1)·N/dp): the fp32 master weights
// and m, v exist only for that shard, while the bf16 weights and the fp32
// main grads stay full (the model needs every weight, the backward writes
// every gradient): 2 + 4 + 12/dp bytes per parameter. Shards start on a
// multiple of kAlignElements too, so every piece the optimizer touches stays
// aligned.
//
// Expert parameters (ParamInfo::expert) form a region of their own when
// expert parallelism changes who holds them (engine/optimizer.h,
// ExpertsFormOwnRegion): then the dense tensors come first (store order)
// and the expert tensors after them, each region padded and sharded on its
// own, the dense one over dp and the expert one over edp (Megatron's
// expert_dp sharding of the distributed optimizer). The master weights and
// m, v hold the dense shard, then the expert shard.
//
// The placement is pure arithmetic (ParamLayout, MakeParamLayout,
// ShardPieces: no device), so it is tested where there is no GPU.
#ifndef MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_
#define MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "engine/param_store.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// A run of the flat buffers whose gradients reduce over one group (dp, or
// edp for the expert region) and whose optimizer state is sharded over it.
struct ParamRegion {
  int64_t begin = 0, end = 0;  // device offsets; end padded (distributed)
  bool expert = false;
  int size = 1, rank = 0;  // the group's size and this rank's rank
  // This rank's shard [shard_begin, shard_end) (the whole region when not
  // distributed) and where it starts in the master weights and m, v.
  int64_t shard_begin = 0, shard_end = 0;
  int64_t state_offset = 0;
  int64_t shard_numel() const { return shard_end - shard_begin; }
  int64_t numel() const { return end - begin; }
};

// The expert region's group, when the experts form one (ParamLayout).
struct ExpertSharding {
  int edp_size = 1, edp_rank = 0;
};

// Where every tensor of a store lives in the device buffers, and the range
// of them whose optimizer state (fp32 master weights, m, v) this rank holds.
struct ParamLayout {
  int64_t numel = 0;             // the store's parameters
  int64_t padded_numel = 0;      // length of the flat device buffers
  std::vector<int64_t> offsets;  // device offset of each tensor
  bool distributed = false;      // optimizer state sharded over dp
  int dp_size = 1, dp_rank = 0;
  // The dense region's shard [shard_begin, shard_end) of the flat buffers
  // (the whole buffer [0, padded_numel) when not distributed and there is
  // no expert region).
  int64_t shard_begin = 0, shard_end = 0;
  // One region, or the dense then the expert one.
  std::vector<ParamRegion> regions;
  // Elements of optimizer state this rank holds (every region's shard).
  int64_t shard_numel() const {
    int64_t n = 0;
    for (const ParamRegion& r : regions) n += r.shard_numel();
    return n;
  }
  // True when every shard is its whole region (not distributed, or groups
  // of one): no collective is needed to see every tensor's state.
  bool holds_everything() const { return shard_numel() == padded_numel; }
  // Bytes of optimizer state this rank holds: fp32 master weights, m and v
  // over the shard (12 per parameter, 12/dp distributed; padding included,
  // as it is allocated).
  int64_t state_bytes() const { return 12 * shard_numel(); }
  // Bytes every rank holds in full: bf16 weights and fp32 main grads.
  int64_t replicated_bytes() const { return 6 * padded_numel; }
};

// Alignment of every tensor's device offset (elements): 256 bytes of bf16.
inline constexpr int64_t kParamAlignElements = 128;

// The layout of `store` (finalized) for dp rank `dp_rank` of `dp_size`;
// with `experts`, the expert tensors form a second region sharded over its
// edp group. Errors: an empty store, dp_size < 1, dp_rank outside
// [0, dp_size), the same for edp, `experts` for a store without experts.
StatusOr<ParamLayout> MakeParamLayout(const ParamStore& store, int dp_size,
                                      int dp_rank, bool distributed,
                                      const ExpertSharding* experts = nullptr);

// A piece of one tensor inside the shard: device offsets [begin, end) of
// tensor `tensor` (store index), real elements only (never the alignment
// padding). A tensor cut by a shard edge gives one piece on each side's
// rank; each piece keeps its tensor's weight decay and norm flag.
struct ShardPiece {
  int tensor = 0;
  int64_t begin = 0, end = 0;
  int region = 0;     // index into ParamLayout::regions
  int64_t state = 0;  // begin's index in the master weights and m, v
};
// The pieces of every tensor inside layout's shard, in store order.
std::vector<ShardPiece> ShardPieces(const ParamLayout& layout,
                                    const ParamStore& store);

class DeviceParams {
 public:
  static constexpr int64_t kAlignElements = kParamAlignElements;

  // Uploads `store`'s parameters (finalized and initialized) as the master
  // weights (this rank's shard of them when distributed) and their bf16
  // copy (all of them); gradients and moments start at zero. The defaults
  // are one rank without the distributed optimizer. Errors as
  // MakeParamLayout, and device allocation failures.
  static StatusOr<std::unique_ptr<DeviceParams>> Create(
      const ParamStore& store, int dp_size = 1, int dp_rank = 0,
      bool distributed = false, const ExpertSharding* experts = nullptr);

  const ParamLayout& layout() const { return layout_; }
  int64_t numel() const { return layout_.numel; }
  bool distributed() const { return layout_.distributed; }
  int dp_size() const { return layout_.dp_size; }
  int dp_rank() const { return layout_.dp_rank; }
  int64_t shard_begin() const { return layout_.shard_begin; }
  int64_t shard_end() const { return layout_.shard_end; }
  const std::vector<ParamRegion>& regions() const { return layout_.regions; }
  // The main-grad buffer as one flat range (padding included, zero), for
  // the data-parallel reductions.
  float* grad_buffer() const { return grads_.as<float>(); }
  // The bf16 weights as one flat range (the distributed optimizer's
  // all-gather writes every rank's shard into it).
  Bf16* weight_buffer() const { return weights_.as<Bf16>(); }
  int64_t padded_numel() const { return layout_.padded_numel; }
  // Device element range [begin, end) of tensors first..last (store
  // indices), padding included: one contiguous bucket of the main grads.
  std::pair<int64_t, int64_t> Range(int first, int last) const {
    const std::vector<int64_t>& offsets = layout_.offsets;
    const int64_t end = last + 1 < static_cast<int>(offsets.size())
                            ? offsets[last + 1]
                            : layout_.padded_numel;
    return {offsets[first], end};
  }

  const Bf16* weight(const ParamStore& store, int i) const {
    (void)store;
    return weights_.as<Bf16>() + layout_.offsets[i];
  }
  float* grad(const ParamStore& store, int i) const {
    (void)store;
    return grads_.as<float>() + layout_.offsets[i];
  }

  Status ZeroGrads();

  // Copies the full fp32 master weights into `store`. When this rank holds
  // only a shard (distributed, dp > 1) the other shards come from the dp
  // ranks: collective over `dp` (every dp rank calls it; the communicator
  // over the dp group, size dp_size() and rank dp_rank()), and for an
  // expert region sharded over edp > 1 over `edp` too. A communicator may
  // be null where its region's shard is the whole region.
  Status DownloadParams(ParamStore* store, DeviceCommunicator* dp = nullptr,
                        DeviceCommunicator* edp = nullptr) const;
  // AdamW's moments, full, to host arrays of numel() floats each in the
  // store's packed order (checkpoints go through the CPU engine's format,
  // engine/checkpoint.h); collective as DownloadParams.
  Status DownloadMoments(const ParamStore& store, float* m, float* v,
                         DeviceCommunicator* dp = nullptr,
                         DeviceCommunicator* edp = nullptr) const;
  // Replaces the master weights with `store`'s (and rewrites the bf16
  // copy, all of it) and the moments with m, v (full host arrays of
  // numel() floats): a loaded checkpoint. Every rank gets the full arrays
  // and keeps its shard, so this is not collective. The main grads are
  // zeroed (a distributed upload stages the fp32 weights in them).
  Status UploadState(const ParamStore& store, const float* m, const float* v);

  // One AdamW segment per shard piece with its tensor's weight decay (0 for
  // norms and biases, ParamInfo::weight_decay), and the gradient segments
  // of the pieces counted in the global norm (ParamInfo::counts_in_norm).
  // Not distributed: every tensor whole, as one piece each.
  std::vector<AdamWSegment> AdamSegments(const ParamStore& store,
                                         float weight_decay) const;
  std::vector<GradSegment> NormSegments(const ParamStore& store) const;
  // Those of region `region` only.
  std::vector<GradSegment> NormSegments(const ParamStore& store,
                                        int region) const;

 private:
  DeviceParams() = default;
  // `store`'s weights as the master weights (this rank's shard) and the
  // full bf16 copy; zeroes the main grads (used as staging when sharded).
  Status UploadWeights(const ParamStore& store);
  // Per tensor: copies between the store's packed flat buffer `host` and a
  // full-layout fp32 device array `device` (padded_numel floats), in
  // either direction.
  Status ToDevice(const ParamStore& store, const float* host,
                  float* device) const;
  Status ToHost(const ParamStore& store, const float* device,
                float* host) const;
  // Per shard piece: host full arrays <-> a shard-sized device array.
  Status ShardToDevice(const ParamStore& store, const float* host,
                       float* shard) const;
  // The full-layout values of a shard-sized array `shard` into `host`:
  // directly when this rank holds everything, else each region's shards
  // all-gathered over its group (`dp` or `edp`) into a temporary
  // full-layout device array first.
  Status GatherToHost(const ParamStore& store, const float* shard,
                      DeviceCommunicator* dp, DeviceCommunicator* edp,
                      float* host) const;
  // Ok when `dp` and `edp` can gather this rank's shards (or none is
  // needed); the error names `what` (the download) and the mismatch.
  Status CheckGroups(const DeviceCommunicator* dp,
                     const DeviceCommunicator* edp, const char* what) const;

  ParamLayout layout_;
  std::vector<ShardPiece> pieces_;
  DeviceBuffer master_;   // fp32 [shard_numel]
  DeviceBuffer weights_;  // bf16 [padded_numel]
  DeviceBuffer grads_;    // fp32 [padded_numel]
  DeviceBuffer m_, v_;    // fp32 [shard_numel]
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_DEVICE_PARAMS_H_
