// The optimizer step on the device (semantics: device_optimizer.h and
// engine/optimizer.h). Differences from the CPU optimizer that do not change
// the result beyond fp32 rounding:
// - The distributed optimizer reduce-scatters the whole buffer in one call
//   instead of per bucket window. The CPU engine's windows exist to keep
//   one contiguous shard per rank while bucketing; on the device they would
//   cost a staging copy per rank per bucket, and with the step run after
//   the whole backward there is nothing for buckets to overlap with. The
//   bytes each rank sends and receives are the same.
// - Summation order of the norm (SumSquares' fp32 partials, fp64 totals)
//   and of the dp sums (NCCL's ring order) differs from the host loops.
#include "engine/cuda/device_optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "engine/lr_schedule.h"

namespace meshtune::engine::cuda {
namespace {

std::string RankOf(int rank, int size) {
  return std::to_string(rank) + " of " + std::to_string(size);
}

std::string RangeText(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

}  // namespace

Status CheckDeviceOptimizerSetup(const TrainConfig& config,
                                 const ParamStore& store,
                                 const ParamLayout& layout,
                                 const ProcessGroups* groups,
                                 const DeviceCommunicator* dp) {
  if (groups == nullptr || groups->dp == nullptr || groups->mp == nullptr) {
    return Status::InvalidArgument(
        "device optimizer: the process groups have no dp or mp communicator",
        "build them with MakeProcessGroups(world, config.parallel)");
  }
  if (layout.numel != store.numel()) {
    return Status::InvalidArgument(
        "device optimizer: the device params hold " +
            std::to_string(layout.numel) + " parameters but the store has " +
            std::to_string(store.numel()),
        "create the DeviceParams from the same ParamStore");
  }
  const Communicator& dp_group = *groups->dp;
  if (layout.dp_size != dp_group.size() || layout.dp_rank != dp_group.rank()) {
    return Status::InvalidArgument(
        "device optimizer: the device params are laid out for dp rank " +
            RankOf(layout.dp_rank, layout.dp_size) +
            " but this rank is dp rank " +
            RankOf(dp_group.rank(), dp_group.size()),
        "create the DeviceParams with groups->dp's size and rank");
  }
  if (layout.distributed != config.parallel.dist_opt) {
    return Status::InvalidArgument(
        std::string("device optimizer: the config has dist_opt = ") +
            (config.parallel.dist_opt ? "true" : "false") +
            " but the device params are " +
            (layout.distributed ? "sharded" : "not sharded"),
        "create the DeviceParams with distributed = config.parallel.dist_opt");
  }
  if (dp == nullptr && dp_group.size() > 1) {
    return Status::InvalidArgument(
        "device optimizer: dp = " + std::to_string(dp_group.size()) +
            " needs a device communicator over the dp group",
        "pass CreateDeviceCommunicator(groups->dp.get())");
  }
  if (dp != nullptr &&
      (dp->size() != dp_group.size() || dp->rank() != dp_group.rank())) {
    return Status::InvalidArgument(
        "device optimizer: device communicator '" + dp->name() + "' is rank " +
            RankOf(dp->rank(), dp->size()) + " but this rank is dp rank " +
            RankOf(dp_group.rank(), dp_group.size()),
        "pass the device communicator created over groups->dp");
  }
  return Status::Ok();
}

Status AddReducedRange(int64_t begin, int64_t end, int64_t total,
                       std::vector<std::pair<int64_t, int64_t>>* reduced) {
  if (begin < 0 || begin > end || end > total) {
    return Status::InvalidArgument(
        "reduce bucket: main grads " + RangeText(begin, end) +
            " are not a range inside the buffer " + RangeText(0, total),
        "pass DeviceParams::Range(first, last) of the bucket's tensors");
  }
  if (begin == end) return Status::Ok();
  // The first recorded range that ends after `begin` is the only one that
  // can overlap [begin, end) (the ranges are sorted and disjoint).
  auto it = std::upper_bound(
      reduced->begin(), reduced->end(), begin,
      [](int64_t value, const std::pair<int64_t, int64_t>& range) {
        return value < range.second;
      });
  if (it != reduced->end() && it->first < end) {
    return Status::InvalidArgument(
        "reduce bucket: main grads " + RangeText(begin, end) + " overlap " +
            RangeText(it->first, it->second) +
            ", already reduced this step (they would be summed twice)",
        "reduce each bucket once per step");
  }
  reduced->insert(it, {begin, end});
  return Status::Ok();
}

std::vector<std::pair<int64_t, int64_t>> UnreducedRanges(
    const std::vector<std::pair<int64_t, int64_t>>& reduced, int64_t total) {
  std::vector<std::pair<int64_t, int64_t>> gaps;
  int64_t next = 0;
  for (const auto& [begin, end] : reduced) {
    if (begin > next) gaps.push_back({next, begin});
    next = std::max(next, end);
  }
  if (next < total) gaps.push_back({next, total});
  return gaps;
}

StatusOr<std::unique_ptr<DeviceOptimizer>> DeviceOptimizer::Create(
    const TrainConfig& config, const ParamStore& store, DeviceParams* params,
    ProcessGroups* groups, DeviceCommunicator* dp, DeviceCommunicator* edp) {
  if (params == nullptr) {
    return Status::InvalidArgument(
        "device optimizer: no device params",
        "create them with DeviceParams::Create(store, dp size, dp rank, "
        "dist_opt)");
  }
  MESHTUNE_RETURN_IF_ERROR(
      CheckDeviceOptimizerSetup(config, store, params->layout(), groups, dp));
  std::unique_ptr<DeviceOptimizer> opt(
      new DeviceOptimizer(config, params, groups, dp));
  if (!params->distributed() && params->dp_size() > 1) {
    auto stream = CreateNonBlockingStream();
    if (!stream.ok()) return stream.status();
    opt->dp_stream_ = stream.value();
  }
  // The segments point into buffers that never move: build them once.
  opt->adam_segments_ =
      params->AdamSegments(store, config.optimizer.weight_decay);
  opt->norm_segments_ = params->NormSegments(store);
  // The expert region (engine/optimizer.h's rule): DeviceParams must have
  // been laid out with it (ExpertSharding over edp).
  opt->expert_region_ = ExpertsFormOwnRegion(store, *groups);
  const size_t want_regions = opt->expert_region_ ? 2 : 1;
  if (params->regions().size() != want_regions) {
    return Status::InvalidArgument(
        std::string("device optimizer: the device params have ") +
            std::to_string(params->regions().size()) +
            " regions but the layout needs " + std::to_string(want_regions) +
            " (expert parameters " +
            (opt->expert_region_ ? "form" : "do not form") +
            " a region of their own)",
        "create the DeviceParams with an ExpertSharding over edp exactly "
        "when ExpertsFormOwnRegion(store, groups)");
  }
  if (opt->expert_region_) {
    const ParamRegion& r = params->regions()[1];
    if ((r.size > 1) != (edp != nullptr) ||
        (edp != nullptr && (edp->size() != r.size || edp->rank() != r.rank))) {
      return Status::InvalidArgument(
          "device optimizer: expert parameters need the edp group's device "
          "communicator (edp has " +
              std::to_string(r.size) + " ranks, this is rank " +
              std::to_string(r.rank) + ")",
          "pass CreateDeviceCommunicator(groups->edp.get()) when edp > 1");
    }
    opt->edp_ = edp;
    opt->norm_segments_ = params->NormSegments(store, 0);
    opt->expert_norm_segments_ = params->NormSegments(store, 1);
  }
  auto norm = DeviceBuffer::Allocate(sizeof(double));
  if (!norm.ok()) return norm.status();
  opt->norm_ = std::move(norm).value();
  return StatusOr<std::unique_ptr<DeviceOptimizer>>(std::move(opt));
}

DeviceOptimizer::~DeviceOptimizer() { DestroyStream(dp_stream_); }

Status DeviceOptimizer::ReduceBucket(int64_t begin, int64_t end) {
  if (expert_region_) {
    return Status::Internal(
        "device optimizer: buckets cannot start early with an expert region "
        "(expert and dense tensors reduce over different groups; "
        "expert_region() tells)");
  }
  MESHTUNE_RETURN_IF_ERROR(
      AddReducedRange(begin, end, params_->padded_numel(), &reduced_));
  if (dp_stream_ == nullptr || begin == end) return Status::Ok();
  // The kernels that wrote these gradients are on the default stream.
  MESHTUNE_RETURN_IF_ERROR(WaitForStream(dp_stream_, nullptr));
  return dp_->AllReduceSum(params_->grad_buffer() + begin, end - begin,
                           dp_stream_);
}

Status DeviceOptimizer::WaitForReductions() {
  if (dp_stream_ == nullptr) return Status::Ok();
  return WaitForStream(nullptr, dp_stream_);
}

// Each region over its group: all-reduced whole, or (distributed)
// reduce-scattered in place so this rank's shard holds the sum; then the
// average over dp·cp (both regions: expert_gradient_scaling_factor).
Status DeviceOptimizer::ReduceByRegion() {
  reduced_.clear();
  float* grads = params_->grad_buffer();
  Status status = GroupStart();
  for (const ParamRegion& r : params_->regions()) {
    DeviceCommunicator* comm = r.expert ? edp_ : dp_;
    if (comm == nullptr || !status.ok()) continue;
    status =
        distributed()
            ? comm->ReduceScatterSum(grads + r.begin, grads + r.shard_begin,
                                     r.shard_numel(), nullptr)
            : comm->AllReduceSum(grads + r.begin, r.numel(), nullptr);
  }
  const Status end = GroupEnd();
  MESHTUNE_RETURN_IF_ERROR(status);
  MESHTUNE_RETURN_IF_ERROR(end);
  const int dp = params_->dp_size();
  if (dp == 1) return Status::Ok();
  for (const ParamRegion& r : params_->regions()) {
    MESHTUNE_RETURN_IF_ERROR(Scale(grads + r.shard_begin, r.shard_numel(),
                                   1.0f / static_cast<float>(dp), nullptr));
  }
  return Status::Ok();
}

StatusOr<double> DeviceOptimizer::SumSquaresOverGroups() {
  MESHTUNE_RETURN_IF_ERROR(norm_.Zero());
  MESHTUNE_RETURN_IF_ERROR(
      SumSquares(norm_segments_, norm_.as<double>(), nullptr));
  double sum_sq = 0;
  // Synchronous: also waits for the reduction and surfaces its errors.
  MESHTUNE_RETURN_IF_ERROR(norm_.CopyToHost(&sum_sq, sizeof(double)));
  groups_->mp->AllReduceSum(&sum_sq, 1);
  if (distributed()) groups_->dp->AllReduceSum(&sum_sq, 1);
  if (!expert_region_) {
    if (ExpertGroupsDiffer(*groups_)) {
      // No expert on this stage: join the expert norm's sums (optimizer.h).
      double expert_sq = 0;
      groups_->emp->AllReduceSum(&expert_sq, 1);
      if (distributed()) groups_->edp->AllReduceSum(&expert_sq, 1);
      sum_sq += expert_sq;
    }
    return sum_sq;
  }
  MESHTUNE_RETURN_IF_ERROR(norm_.Zero());
  MESHTUNE_RETURN_IF_ERROR(
      SumSquares(expert_norm_segments_, norm_.as<double>(), nullptr));
  double expert_sq = 0;
  MESHTUNE_RETURN_IF_ERROR(norm_.CopyToHost(&expert_sq, sizeof(double)));
  groups_->emp->AllReduceSum(&expert_sq, 1);
  if (distributed()) groups_->edp->AllReduceSum(&expert_sq, 1);
  return sum_sq + expert_sq;
}

Status DeviceOptimizer::Reduce() {
  if (expert_region_) return ReduceByRegion();
  const int dp = params_->dp_size();
  const int64_t total = params_->padded_numel();
  float* grads = params_->grad_buffer();
  const std::vector<std::pair<int64_t, int64_t>> gaps =
      UnreducedRanges(reduced_, total);
  reduced_.clear();
  if (dp == 1) return Status::Ok();
  const float inv_dp = 1.0f / static_cast<float>(dp);
  if (!params_->distributed()) {
    MESHTUNE_RETURN_IF_ERROR(WaitForStream(dp_stream_, nullptr));
    for (const auto& [begin, end] : gaps) {
      MESHTUNE_RETURN_IF_ERROR(
          dp_->AllReduceSum(grads + begin, end - begin, dp_stream_));
    }
    MESHTUNE_RETURN_IF_ERROR(WaitForStream(nullptr, dp_stream_));
    return Scale(grads, total, inv_dp, nullptr);
  }
  // In place: rank r's output is its own shard of the input (allowed by
  // both communicator kinds, as Megatron reduce-scatters its buffer).
  const int64_t shard = params_->shard_end() - params_->shard_begin();
  float* mine = grads + params_->shard_begin();
  MESHTUNE_RETURN_IF_ERROR(dp_->ReduceScatterSum(grads, mine, shard, nullptr));
  return Scale(mine, shard, inv_dp, nullptr);
}

StatusOr<StepResult> DeviceOptimizer::Step(int64_t iteration) {
  if (iteration < 1) {
    return Status::InvalidArgument(
        "device optimizer: iteration " + std::to_string(iteration) +
            " is not >= 1",
        "pass the 1-based iteration this step completes");
  }
  const OptimizerConfig& opt = config_.optimizer;
  MESHTUNE_RETURN_IF_ERROR(Reduce());

  StepResult result;
  result.lr = LearningRate(opt, iteration, config_.train_iters);
  double sum_sq = 0;
  MESHTUNE_ASSIGN_OR_RETURN(sum_sq, SumSquaresOverGroups());
  result.grad_norm = std::sqrt(sum_sq);
  // Every rank sees the same norm, so all skip together (and skip the
  // all-gather together).
  if (!std::isfinite(result.grad_norm)) {
    result.finite = false;
    return result;
  }

  if (opt.clip_grad > 0 && result.grad_norm > opt.clip_grad) {
    const float coeff = static_cast<float>(static_cast<double>(opt.clip_grad) /
                                           (result.grad_norm + 1e-6));
    // The gradients this rank updates; the others are not read again.
    for (const ParamRegion& r : params_->regions()) {
      MESHTUNE_RETURN_IF_ERROR(Scale(params_->grad_buffer() + r.shard_begin,
                                     r.shard_numel(), coeff, nullptr));
    }
  }
  MESHTUNE_RETURN_IF_ERROR(AdamWUpdate(adam_segments_, result.lr,
                                       opt.adam_beta1, opt.adam_beta2,
                                       opt.adam_eps, steps_ + 1, nullptr));
  ++steps_;
  if (distributed()) {
    // In place: this rank's block is its own shard of the bf16 weights.
    Bf16* weights = params_->weight_buffer();
    for (const ParamRegion& r : params_->regions()) {
      DeviceCommunicator* comm = r.expert ? edp_ : dp_;
      if (r.size == 1) continue;
      MESHTUNE_RETURN_IF_ERROR(comm->AllGather(weights + r.shard_begin,
                                               weights + r.begin,
                                               r.shard_numel(), nullptr));
    }
  }
  MESHTUNE_RETURN_IF_ERROR(Synchronize("device_optimizer_step"));
  return result;
}

int64_t DeviceOptimizer::state_bytes() const {
  return params_->layout().state_bytes();
}

Status DeviceOptimizer::GatherState(ParamStore* store, float* m,
                                    float* v) const {
  MESHTUNE_RETURN_IF_ERROR(params_->DownloadParams(store, dp_, edp_));
  return params_->DownloadMoments(*store, m, v, dp_, edp_);
}

Status DeviceOptimizer::GatherParams(ParamStore* store) const {
  return params_->DownloadParams(store, dp_, edp_);
}

Status DeviceOptimizer::ScatterState(const ParamStore& store, const float* m,
                                     const float* v) {
  return params_->UploadState(store, m, v);
}

}  // namespace meshtune::engine::cuda
