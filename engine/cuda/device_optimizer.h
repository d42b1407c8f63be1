// DeviceOptimizer: the CUDA engine's optimizer step over a rank's
// DeviceParams — data-parallel gradient reduction, global-norm clipping and
// AdamW, with or without Megatron's distributed optimizer (ZeRO-1). It does
// on the device what engine/optimizer.h does on the host, with the same
// semantics, so a CUDA run and a CPU run of one layout agree within fp32
// rounding:
//
// 1. Reduction over dp, averaged (sum, then ×1/dp).
//    Not distributed: all-reduce of the whole main-grad buffer. The trainer
//    may start buckets early (ReduceBucket) on the optimizer's own dp
//    stream while the last backward still runs (Megatron DDP's
//    overlap_grad_reduce); Step all-reduces whatever they did not cover.
//    Distributed: one reduce-scatter of the whole buffer in place, so dp
//    rank r's shard [r·N/dp, (r+1)·N/dp) of the main grads holds the sum
//    (DeviceParams documents the shard).
// 2. Gradient norm: Σ g² over the pieces this rank updates whose tensors
//    count in the norm (ParamInfo::counts_in_norm), fp64 on the device
//    (SumSquares), then summed on the host over groups->mp (tp × pp) and,
//    when distributed, over groups->dp (each dp rank holds a different
//    shard); √. A NaN/Inf norm skips the update on every rank (Megatron's
//    found_inf): parameters, moments and the step count stay as they were.
// 3. Clipping (clip_grad > 0 and norm > clip_grad): the gradients this rank
//    updates ×= clip/(norm + 1e-6) (clip_grads.py).
// 4. AdamW at LearningRate(config.optimizer, iteration, train_iters), bias
//    correction by the number of steps taken (skipped steps do not count,
//    as engine/optimizer.cc), over the shard; the kernel rewrites the bf16
//    weights of the shard.
// 5. Distributed, dp > 1: all-gather of the updated bf16 weights over dp
//    (in place), so every rank computes with every weight again.
//
// Streams: ReduceBucket's all-reduces run on the optimizer's dp stream; the
// rest of Step runs on the legacy default stream, and Step returns after
// the device finished it (errors surface there, naming the step).
//
// Checkpoints (engine/checkpoint.h writes and reads full per-tensor state
// through a host Optimizer): GatherState fills full master weights and
// moments on every dp rank (collective over dp when distributed);
// ScatterState takes full arrays on every rank, each keeps its shard.
#ifndef MESHTUNE_ENGINE_CUDA_DEVICE_OPTIMIZER_H_
#define MESHTUNE_ENGINE_CUDA_DEVICE_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/device_params.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/device.h"
#include "engine/optimizer.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// The checks of DeviceOptimizer::Create on what `params` would hold
// (`layout`, MakeParamLayout): pure, so they are tested without a device.
Status CheckDeviceOptimizerSetup(const TrainConfig& config,
                                 const ParamStore& store,
                                 const ParamLayout& layout,
                                 const ProcessGroups* groups,
                                 const DeviceCommunicator* dp);

// Records [begin, end) in `reduced` (sorted, disjoint ranges of a buffer of
// `total` elements) for ReduceBucket. Errors: begin > end, a range outside
// [0, total), an overlap with a recorded range. An empty range is Ok and
// not recorded.
Status AddReducedRange(int64_t begin, int64_t end, int64_t total,
                       std::vector<std::pair<int64_t, int64_t>>* reduced);
// The ranges of [0, total) that `reduced` (sorted, disjoint) leaves out, in
// order: what Step still all-reduces.
std::vector<std::pair<int64_t, int64_t>> UnreducedRanges(
    const std::vector<std::pair<int64_t, int64_t>>& reduced, int64_t total);

class DeviceOptimizer {
 public:
  // `params` holds `store` (DeviceParams::Create(store, dp size, dp rank,
  // config.parallel.dist_opt)); `groups` gives dp and mp; `dp` is the
  // device communicator over groups->dp, null when dp == 1. All outlive the
  // optimizer. Errors (one line each, with the fix): a null argument, a
  // store other than the one params holds, params sharded for another dp
  // size/rank or with the other dist_opt setting, a missing or mismatched
  // dp communicator.
  //
  // Expert parameters (ParamInfo::expert) form a region of their own when
  // expert parallelism changes who holds them (engine/optimizer.h,
  // ExpertsFormOwnRegion; `params` must then be laid out with an
  // ExpertSharding over edp): the dense region reduces over dp and the
  // expert region over groups->edp through `edp` (its device communicator;
  // null when edp has one rank), both scaled by 1/(dp·cp); distributed, each
  // region is reduce-scattered and all-gathered over its own group; the
  // expert squared norm is summed over groups->emp (and edp when
  // distributed). ReduceBucket is refused then: the trainer reduces at Step.
  static StatusOr<std::unique_ptr<DeviceOptimizer>> Create(
      const TrainConfig& config, const ParamStore& store, DeviceParams* params,
      ProcessGroups* groups, DeviceCommunicator* dp,
      DeviceCommunicator* edp = nullptr);
  ~DeviceOptimizer();
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  // Not distributed, dp > 1: all-reduces main grads [begin, end) (device
  // offsets, DeviceParams::Range) on the optimizer's dp stream, ordered
  // after the default stream's work so far, so it overlaps the backward
  // still running. Distributed or dp == 1: nothing (Step reduce-scatters the
  // whole buffer). Errors: a range outside [0, padded_numel) or one that
  // overlaps a range already reduced since the last Step (it would be
  // summed twice).
  Status ReduceBucket(int64_t begin, int64_t end);
  // The default stream waits for every reduction started so far (before
  // the trainer's own finalize reductions touch the same gradients).
  Status WaitForReductions();

  // After the backward and the trainer's finalize reductions (tp sequence-
  // parallel grads, the embedding group): steps 1-5 above for `iteration`
  // (1-based). Returns the lr, the norm before clipping and whether it was
  // finite.
  StatusOr<StepResult> Step(int64_t iteration);

  bool distributed() const { return params_->distributed(); }
  // Whether the expert parameters form a region of their own (Create).
  bool expert_region() const { return expert_region_; }
  // Steps that updated the parameters (AdamW's bias-correction step); a
  // loaded checkpoint sets it (engine/checkpoint.h's steps_taken).
  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }
  // Bytes of fp32 master weights and AdamW m, v this rank holds, shard
  // padding included: 12·padded_numel, or 12·padded_numel/dp distributed.
  int64_t state_bytes() const;

  // Full fp32 master weights into `store`, and full m, v into host arrays
  // of store.numel() floats each, on every dp rank. Collective over dp when
  // distributed (every dp rank calls it).
  Status GatherState(ParamStore* store, float* m, float* v) const;
  // The master weights only (the trainer's params()), collective likewise.
  Status GatherParams(ParamStore* store) const;
  // A loaded checkpoint: `store`'s weights and full m, v (store.numel()
  // floats each) on every rank; each keeps its shard. Not collective.
  Status ScatterState(const ParamStore& store, const float* m, const float* v);

 private:
  DeviceOptimizer(const TrainConfig& config, DeviceParams* params,
                  ProcessGroups* groups, DeviceCommunicator* dp)
      : config_(config), params_(params), groups_(groups), dp_(dp) {}
  // The dp reduction before the norm (step 1).
  Status Reduce();
  // Step 1 with an expert region: each tensor over dp or edp, then ×1/dp.
  Status ReduceByRegion();
  // This rank's Σ g² summed over the ranks that hold other parts (step 2).
  StatusOr<double> SumSquaresOverGroups();

  TrainConfig config_;
  DeviceParams* params_;
  ProcessGroups* groups_;
  DeviceCommunicator* dp_;             // null when dp == 1
  DeviceCommunicator* edp_ = nullptr;  // null when edp == 1
  bool expert_region_ = false;
  // With an expert region: the expert tensors' norm segments
  // (norm_segments_ then holds the dense ones only).
  std::vector<GradSegment> expert_norm_segments_;
  Stream dp_stream_ = nullptr;  // not distributed, dp > 1 only
  std::vector<AdamWSegment> adam_segments_;
  std::vector<GradSegment> norm_segments_;
  DeviceBuffer norm_;  // one double: Σ g² of this rank
  // Ranges ReduceBucket all-reduced since the last Step, sorted.
  std::vector<std::pair<int64_t, int64_t>> reduced_;
  int64_t steps_ = 0;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_DEVICE_OPTIMIZER_H_
