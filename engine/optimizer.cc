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
#include <utility>
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

bool ExpertGroupsDiffer(const ProcessGroups& groups) {
  return groups.edp != nullptr &&
         (groups.ep->size() > 1 || groups.etp->size() != groups.tp->size());
}

bool ExpertsFormOwnRegion(const ParamStore& store,
                          const ProcessGroups& groups) {
  return store.dense_numel() < store.numel() && ExpertGroupsDiffer(groups);
}

Optimizer::Optimizer(const OptimizerConfig& config, bool distributed,
                     int64_t train_iters, const ParamStore& store,
                     ProcessGroups* groups)
    : config_(config),
      distributed_(distributed),
      train_iters_(train_iters),
      groups_(groups),
      numel_(store.numel()) {
  MESHTUNE_CHECK(groups_ != nullptr && groups_->dp != nullptr &&
                 groups_->mp != nullptr);
  MESHTUNE_CHECK(config_.ddp_bucket_size >= 0);
  // The expert tail is a region of its own only when its replicas differ
  // from the dense ones' (the edp group is not the dp group).
  const bool split = ExpertsFormOwnRegion(store, *groups_);
  auto add = [&](int64_t begin, int64_t end, Communicator* grads,
                 Communicator* norm) {
    Region r;
    r.begin = begin;
    r.end = end;
    r.grads = grads;
    r.norm = norm;
    regions_.push_back(std::move(r));
  };
  add(0, split ? store.dense_numel() : numel_, groups_->dp.get(),
      groups_->mp.get());
  if (split) {
    add(store.dense_numel(), numel_, groups_->edp.get(), groups_->emp.get());
  }
  int64_t state = 0;
  for (Region& r : regions_) {
    const int64_t count = r.end - r.begin;
    const int64_t dp = r.grads->size();
    if (distributed_) {
      // Megatron pads the buffer so it splits evenly over dp.
      r.padded = CeilDiv(count, dp) * dp;
      const int64_t shard = r.padded / dp;
      r.shard_begin = r.begin + r.grads->rank() * shard;
      r.shard_end = r.shard_begin + shard;
      const int64_t piece = ShardPiece(shard, config_.ddp_bucket_size, dp);
      // [0, dp·piece): reduce-scatter input / all-gather output;
      // [dp·piece, (dp+1)·piece): this rank's piece (output / input).
      r.scratch.assign((dp + 1) * piece, 0.0f);
    } else {
      r.padded = count;
      r.shard_begin = r.begin;
      r.shard_end = r.end;
    }
    r.state_offset = state;
    state += r.shard_end - r.shard_begin;
  }
  m_.assign(state, 0.0f);
  v_.assign(state, 0.0f);
}

int64_t Optimizer::shard_begin() const {
  MESHTUNE_CHECK(regions_.size() == 1);
  return regions_[0].shard_begin;
}

int64_t Optimizer::shard_end() const {
  MESHTUNE_CHECK(regions_.size() == 1);
  return regions_[0].shard_end;
}

void Optimizer::GatherFlatState(std::vector<float>* exp_avg,
                                std::vector<float>* exp_avg_sq) const {
  exp_avg->assign(numel_, 0.0f);
  exp_avg_sq->assign(numel_, 0.0f);
  for (const Region& r : regions_) {
    const int64_t shard = r.shard_end - r.shard_begin;
    const int64_t count = r.end - r.begin;
    for (auto [mine, flat] :
         {std::pair<const float*, float*>{m_.data(), exp_avg->data()},
          std::pair<const float*, float*>{v_.data(), exp_avg_sq->data()}}) {
      if (!distributed_) {
        std::copy_n(mine + r.state_offset, count, flat + r.begin);
        continue;
      }
      // [g·shard] covers the region padded to the group.
      std::vector<float> all(shard * r.grads->size());
      r.grads->AllGather(mine + r.state_offset, all.data(), shard);
      std::copy_n(all.begin(), count, flat + r.begin);
    }
  }
}

void Optimizer::SetFlatState(const std::vector<float>& exp_avg,
                             const std::vector<float>& exp_avg_sq) {
  MESHTUNE_CHECK(static_cast<int64_t>(exp_avg.size()) == numel_ &&
                 static_cast<int64_t>(exp_avg_sq.size()) == numel_);
  for (const Region& r : regions_) {
    for (int64_t i = r.shard_begin; i < r.shard_end; ++i) {
      const int64_t o = r.state_offset + (i - r.shard_begin);
      m_[o] = i < r.end ? exp_avg[i] : 0.0f;
      v_[o] = i < r.end ? exp_avg_sq[i] : 0.0f;
    }
  }
}

// m and v of the whole shard, padding included: the padding floats (fewer
// than dp over the whole dp group) are allocated like Megatron's padded
// buffers, and they keep the formula equal to the memory actually held.
int64_t Optimizer::state_bytes() const {
  return 2 * static_cast<int64_t>(sizeof(float)) *
         static_cast<int64_t>(m_.size());
}

// Data-parallel gradient reduction of one region, summed, then ×scale (the
// result Megatron gets from average_in_collective / its pre-scaling).
void Optimizer::ReduceGrads(Region& r, ParamStore& store, float scale) {
  Communicator& comm = *r.grads;
  const int64_t dp = comm.size();
  float* grads = store.flat_grads().data() + r.begin;
  const int64_t count = r.end - r.begin;
  if (!distributed_) {
    // Buckets from the end of the buffer backwards: backward produces the
    // last layers' gradients first (param_and_grad_buffer.py).
    const int64_t bucket =
        config_.ddp_bucket_size > 0 ? config_.ddp_bucket_size : count;
    for (const Window& w : Windows(count, bucket)) {
      comm.AllReduceSum(grads + w.lo, w.hi - w.lo);
    }
    if (scale != 1.0f) cpu::Scale(grads, count, scale);
    return;
  }
  const int64_t shard = r.shard_end - r.shard_begin;
  const int64_t piece = ShardPiece(shard, config_.ddp_bucket_size, dp);
  const int64_t mine_at = r.shard_begin - r.begin;  // within the region
  float* staged = r.scratch.data();
  float* mine = r.scratch.data() + dp * piece;
  for (const Window& w : Windows(shard, piece)) {
    const int64_t lo = w.lo;
    const int64_t len = w.hi - w.lo;
    // [rank0 window | rank1 window | ...], zeros past the end (padding).
    for (int64_t q = 0; q < dp; ++q) {
      const int64_t src = q * shard + lo;
      const int64_t real = std::clamp<int64_t>(count - src, 0, len);
      std::copy_n(grads + src, real, staged + q * len);
      std::fill(staged + q * len + real, staged + (q + 1) * len, 0.0f);
    }
    comm.ReduceScatterSum(staged, mine, len);
    // Megatron reduce-scatters in place, so the buffer's own shard holds
    // the reduced gradients afterwards; do the same for the real part.
    const int64_t dst = mine_at + lo;
    const int64_t real = std::clamp<int64_t>(count - dst, 0, len);
    std::copy_n(mine, real, grads + dst);
  }
  const int64_t begin = std::min(mine_at, count);
  const int64_t end = std::min(mine_at + shard, count);
  if (scale != 1.0f) cpu::Scale(grads + begin, end - begin, scale);
}

// Distributed: gather the updated shards so every rank of the region's
// group holds all its parameters again, per bucket window, in forward order
// (first buffer elements first, as Megatron's param all-gather prefetches
// for the next forward).
void Optimizer::GatherParams(Region& r, ParamStore& store) {
  Communicator& comm = *r.grads;
  const int64_t dp = comm.size();
  float* params = store.flat_params().data() + r.begin;
  const int64_t count = r.end - r.begin;
  const int64_t shard = r.shard_end - r.shard_begin;
  const int64_t piece = ShardPiece(shard, config_.ddp_bucket_size, dp);
  const int64_t mine_at = r.shard_begin - r.begin;
  float* staged = r.scratch.data();
  float* mine = r.scratch.data() + dp * piece;
  const std::vector<Window> windows = Windows(shard, piece);
  for (auto w = windows.rbegin(); w != windows.rend(); ++w) {
    const int64_t len = w->hi - w->lo;
    const int64_t src = mine_at + w->lo;
    const int64_t real = std::clamp<int64_t>(count - src, 0, len);
    std::copy_n(params + src, real, mine);
    std::fill(mine + real, mine + len, 0.0f);
    comm.AllGather(mine, staged, len);
    for (int64_t q = 0; q < dp; ++q) {
      const int64_t dst = q * shard + w->lo;
      const int64_t n = std::clamp<int64_t>(count - dst, 0, len);
      std::copy_n(staged + q * len, n, params + dst);
    }
  }
}

StepResult Optimizer::Step(ParamStore& store, int64_t iteration) {
  // The store must be the one the optimizer was built for (same size).
  MESHTUNE_CHECK(store.numel() == numel_);
  // 1. Data-parallel gradient reduction, averaged over dp·cp (the dense
  //    group's size; for experts too, see optimizer.h).
  const int64_t dp = groups_->dp->size();
  const float inv_dp = dp > 1 ? 1.0f / static_cast<float>(dp) : 1.0f;
  for (Region& r : regions_) ReduceGrads(r, store, inv_dp);

  // 2. Global gradient norm over what this rank is responsible for, in
  //    float64 (clip_grads.py get_grad_norm_fp32: model-parallel group, plus
  //    dp when the state is sharded since each dp rank then saw a part).
  float* grads = store.flat_grads().data();
  float* params = store.flat_params().data();
  StepResult result;
  result.lr = LearningRate(config_, iteration, train_iters_);
  double total_sq = 0;
  for (Region& r : regions_) {
    const int64_t begin = std::min(r.shard_begin, r.end);
    const int64_t end = std::min(r.shard_end, r.end);
    double sum_sq = MaskedSumSquares(
        grads + begin, store.norm_mask().data() + begin, end - begin);
    r.norm->AllReduceSum(&sum_sq, 1);
    if (distributed_) r.grads->AllReduceSum(&sum_sq, 1);
    total_sq += sum_sq;
  }
  if (regions_.size() == 1 && ExpertGroupsDiffer(*groups_)) {
    // No expert on this stage: join the expert norm's sums (optimizer.h).
    double expert_sq = 0;
    groups_->emp->AllReduceSum(&expert_sq, 1);
    if (distributed_) groups_->edp->AllReduceSum(&expert_sq, 1);
    total_sq += expert_sq;
  }
  result.grad_norm = std::sqrt(total_sq);
  // A NaN/Inf norm means some gradient overflowed: Megatron skips the
  // update (found_inf). Every rank sees the same norm, so all skip together
  // and the all-gather below is skipped by all.
  if (!std::isfinite(result.grad_norm)) {
    result.finite = false;
    return result;
  }

  // 3. Clip (clip_grads.py clip_grad_by_total_norm_fp32).
  const bool clip =
      config_.clip_grad > 0 && result.grad_norm > config_.clip_grad;
  const float clip_coeff = static_cast<float>(
      static_cast<double>(config_.clip_grad) / (result.grad_norm + 1e-6));

  // 4. AdamW over this rank's range of each region; m/v index from the
  //    region's shard start.
  ++steps_;
  for (Region& r : regions_) {
    const int64_t begin = std::min(r.shard_begin, r.end);
    const int64_t end = std::min(r.shard_end, r.end);
    if (clip) cpu::Scale(grads + begin, end - begin, clip_coeff);
    cpu::AdamWUpdate(params + begin, grads + begin, m_.data() + r.state_offset,
                     v_.data() + r.state_offset,
                     store.decay_mask().data() + begin, end - begin, result.lr,
                     config_.adam_beta1, config_.adam_beta2, config_.adam_eps,
                     config_.weight_decay, steps_);
  }

  // 5. Distributed: every rank holds all parameters again.
  if (distributed_) {
    for (Region& r : regions_) GatherParams(r, store);
  }
  return result;
}

}  // namespace meshtune::engine
