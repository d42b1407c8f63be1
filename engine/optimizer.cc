// Optimizer step: DP gradient reduction, global-norm clipping, AdamW and
// (with the distributed optimizer) the parameter all-gather.
//
// Sources: Megatron-LM megatron/core/distributed/param_and_grad_buffer.py
// (flat grad buffer, buckets, reduce-scatter/all-reduce per bucket),
// megatron/core/optimizer/distrib_optimizer.py (ZeRO-1 shards, param
// all-gather), megatron/core/optimizer/clip_grads.py (norm, clip factor),
// megatron/core/optimizer/optimizer.py (skip the step on a non-finite norm).
//
// Bucketing with the distributed optimizer. Megatron pads every bucket to a
// multiple of dp and reduce-scatters each bucket on its own, so a rank owns
// one slice per bucket: a non-contiguous set. Our contract (optimizer.h)
// has each rank own ONE contiguous range [r·S, (r+1)·S), S = padded/dp. We
// keep that and still issue one collective per bucket by building bucket k
// from the same window of every rank's shard: within-shard offsets
// [lo, hi) with hi − lo <= ceil(bucket/dp), taken from the end of the shard
// backwards. The reduce-scatter input is [shard0[lo:hi] | shard1[lo:hi] |
// ...], so rank r receives exactly its own shard[lo:hi]. The number of
// calls and the bytes per call are Megatron's (dp·ceil(bucket/dp) elements
// per bucket); only which parameters share a bucket differs, which matters
// for overlapping communication with backward, something this step (run
// after the whole backward) does not do.
#include "engine/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/lr_schedule.h"
#include "search_spaces/status.h"

namespace meshtune::engine {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Σ (g·mask)² over [0, count) in float64. The mask is 0/1, so this is the
// sum of squares of the elements that count in the norm.
double MaskedSumSquares(const float* g, const float* mask, int64_t count) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double x = static_cast<double>(g[i]) * mask[i];
    sum += x * x;
  }
  return sum;
}

// A half-open range [lo, hi) of buffer (or within-shard) offsets.
struct Window {
  int64_t lo, hi;
};

// Splits [0, count) into windows of `size` elements taken from the end
// backwards (Megatron's reverse bucket order); the first window of the
// buffer, last in the list, may be shorter. Empty when count == 0.
std::vector<Window> Windows(int64_t count, int64_t size) {
  std::vector<Window> out;
  for (int64_t hi = count; hi > 0; hi -= size) {
    out.push_back({std::max<int64_t>(0, hi - size), hi});
  }
  return out;
}

// Elements of each rank's shard in one distributed-optimizer bucket:
// ceil(bucket/dp) (the bucket padded to a multiple of dp, as Megatron pads
// its buckets), or the whole shard when no bucket size is set.
int64_t ShardPiece(int64_t shard, int64_t bucket, int64_t dp) {
  return bucket > 0 ? std::min(shard, CeilDiv(bucket, dp)) : shard;
}

}  // namespace

Optimizer::Optimizer(const OptimizerConfig& config, bool distributed,
                     int64_t train_iters, const ParamStore& store,
                     ProcessGroups* groups)
    : config_(config),
      distributed_(distributed),
      train_iters_(train_iters),
      groups_(groups) {
  MESHTUNE_CHECK(groups_ != nullptr && groups_->dp != nullptr &&
                 groups_->mp != nullptr);
  MESHTUNE_CHECK(config_.ddp_bucket_size >= 0);
  const int64_t numel = store.numel();
  const int64_t dp = groups_->dp->size();
  if (distributed_) {
    // Megatron pads the buffer so it splits evenly over dp.
    padded_numel_ = CeilDiv(numel, dp) * dp;
    const int64_t shard = padded_numel_ / dp;
    shard_begin_ = groups_->dp->rank() * shard;
    shard_end_ = shard_begin_ + shard;
    const int64_t piece = ShardPiece(shard, config_.ddp_bucket_size, dp);
    // [0, dp·piece): reduce-scatter input / all-gather output;
    // [dp·piece, (dp+1)·piece): this rank's piece (output / input).
    scratch_.assign((dp + 1) * piece, 0.0f);
  } else {
    padded_numel_ = numel;
    shard_begin_ = 0;
    shard_end_ = numel;
  }
  m_.assign(shard_end_ - shard_begin_, 0.0f);
  v_.assign(shard_end_ - shard_begin_, 0.0f);
}

// m and v of the whole shard, padding included: the padding floats (fewer
// than dp over the whole dp group) are allocated like Megatron's padded
// buffers, and they keep the formula equal to the memory actually held.
int64_t Optimizer::state_bytes() const {
  return 2 * static_cast<int64_t>(sizeof(float)) * (shard_end_ - shard_begin_);
}

StepResult Optimizer::Step(ParamStore& store, int64_t iteration) {
  // The store must be the one the optimizer was built for (same size).
  MESHTUNE_CHECK((distributed_ ? CeilDiv(store.numel(), groups_->dp->size()) *
                                     groups_->dp->size()
                               : store.numel()) == padded_numel_);
  Communicator& dp_comm = *groups_->dp;
  const int64_t numel = store.numel();
  const int64_t dp = dp_comm.size();
  const float inv_dp = 1.0f / static_cast<float>(dp);
  float* grads = store.flat_grads().data();
  float* params = store.flat_params().data();

  // The range this rank updates: its shard clipped to the real elements.
  const int64_t begin = std::min(shard_begin_, numel);
  const int64_t end = std::min(shard_end_, numel);
  const int64_t shard = shard_end_ - shard_begin_;
  const int64_t piece = ShardPiece(shard, config_.ddp_bucket_size, dp);

  // 1. Data-parallel gradient reduction, averaged (sum, then ×1/dp: the
  //    result Megatron gets from average_in_collective / its pre-scaling).
  if (!distributed_) {
    // Buckets from the end of the buffer backwards: backward produces the
    // last layers' gradients first (param_and_grad_buffer.py).
    const int64_t bucket =
        config_.ddp_bucket_size > 0 ? config_.ddp_bucket_size : numel;
    for (const Window& w : Windows(numel, bucket)) {
      dp_comm.AllReduceSum(grads + w.lo, w.hi - w.lo);
    }
    if (dp > 1) cpu::Scale(grads, numel, inv_dp);
  } else {
    float* staged = scratch_.data();
    float* mine = scratch_.data() + dp * piece;
    for (const Window& w : Windows(shard, piece)) {
      const int64_t lo = w.lo;
      const int64_t len = w.hi - w.lo;
      // [rank0 window | rank1 window | ...], zeros past numel (padding).
      for (int64_t r = 0; r < dp; ++r) {
        const int64_t src = r * shard + lo;
        const int64_t real = std::clamp<int64_t>(numel - src, 0, len);
        std::copy_n(grads + src, real, staged + r * len);
        std::fill(staged + r * len + real, staged + (r + 1) * len, 0.0f);
      }
      dp_comm.ReduceScatterSum(staged, mine, len);
      // Megatron reduce-scatters in place, so the buffer's own shard holds
      // the reduced gradients afterwards; do the same for the real part.
      const int64_t dst = shard_begin_ + lo;
      const int64_t real = std::clamp<int64_t>(numel - dst, 0, len);
      std::copy_n(mine, real, grads + dst);
    }
    if (dp > 1) cpu::Scale(grads + begin, end - begin, inv_dp);
  }

  // 2. Global gradient norm over what this rank is responsible for, in
  //    float64 (clip_grads.py get_grad_norm_fp32: model-parallel group, plus
  //    dp when the state is sharded since each dp rank then saw a part).
  StepResult result;
  result.lr = LearningRate(config_, iteration, train_iters_);
  double sum_sq = MaskedSumSquares(
      grads + begin, store.norm_mask().data() + begin, end - begin);
  groups_->mp->AllReduceSum(&sum_sq, 1);
  if (distributed_) dp_comm.AllReduceSum(&sum_sq, 1);
  result.grad_norm = std::sqrt(sum_sq);
  // A NaN/Inf norm means some gradient overflowed: Megatron skips the
  // update (found_inf). Every rank sees the same norm, so all skip together
  // and the all-gather below is skipped by all.
  if (!std::isfinite(result.grad_norm)) {
    result.finite = false;
    return result;
  }

  // 3. Clip (clip_grads.py clip_grad_by_total_norm_fp32).
  if (config_.clip_grad > 0 && result.grad_norm > config_.clip_grad) {
    const float clip_coeff = static_cast<float>(
        static_cast<double>(config_.clip_grad) / (result.grad_norm + 1e-6));
    cpu::Scale(grads + begin, end - begin, clip_coeff);
  }

  // 4. AdamW over this rank's range; m/v index from shard_begin_.
  ++steps_;
  cpu::AdamWUpdate(params + begin, grads + begin, m_.data(), v_.data(),
                   store.decay_mask().data() + begin, end - begin, result.lr,
                   config_.adam_beta1, config_.adam_beta2, config_.adam_eps,
                   config_.weight_decay, steps_);

  // 5. Distributed: gather the updated shards so every dp rank holds all
  //    parameters again, per bucket window, in forward order (first buffer
  //    elements first, as Megatron's param all-gather prefetches for the
  //    next forward).
  if (distributed_) {
    float* staged = scratch_.data();
    float* mine = scratch_.data() + dp * piece;
    const std::vector<Window> windows = Windows(shard, piece);
    for (auto w = windows.rbegin(); w != windows.rend(); ++w) {
      const int64_t len = w->hi - w->lo;
      const int64_t src = shard_begin_ + w->lo;
      const int64_t real = std::clamp<int64_t>(numel - src, 0, len);
      std::copy_n(params + src, real, mine);
      std::fill(mine + real, mine + len, 0.0f);
      dp_comm.AllGather(mine, staged, len);
      for (int64_t r = 0; r < dp; ++r) {
        const int64_t dst = r * shard + w->lo;
        const int64_t n = std::clamp<int64_t>(numel - dst, 0, len);
        std::copy_n(staged + r * len, n, params + dst);
      }
    }
  }
  return result;
}

}  // namespace meshtune::engine
