// Optimizer: DP gradient reduction (plain and distributed, bucketed),
// global-norm clipping, AdamW, the skipped step on a non-finite norm, and
// the state size. Ranks are threads (RunLocalRanks); ParamStores are tiny
// and built by hand.
#include "engine/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/lr_schedule.h"
#include "engine/process_groups.h"

namespace meshtune::engine {
namespace {

// weight [5, 3] (decayed), bias [5] and norm weight [7] (not decayed):
// 27 elements, odd, so the distributed optimizer pads one element at dp = 2.
ParamStore MakeStore() {
  ParamStore store;
  ParamInfo w;
  w.name = "decoder.layers.0.mlp.linear_fc1.weight";
  w.global_shape = {5, 3};
  store.Add(w);
  ParamInfo b;
  b.name = "decoder.layers.0.mlp.linear_fc1.bias";
  b.global_shape = {5};
  b.weight_decay = false;
  store.Add(b);
  ParamInfo n;
  n.name = "decoder.final_layernorm.weight";
  n.global_shape = {7};
  n.weight_decay = false;
  store.Add(n);
  store.Finalize();
  for (int64_t i = 0; i < store.numel(); ++i) {
    store.flat_params()[i] = 0.1f * std::cos(0.5f * static_cast<float>(i));
  }
  return store;
}

// The gradient dp rank `rank` produced at `step`: distinct per rank, so the
// average matters; large enough that clip 1.0 is active.
float Grad(int rank, int64_t step, int64_t i) {
  return 0.5f * std::sin(0.37f * static_cast<float>(i) + 1.3f * rank +
                         0.71f * static_cast<float>(step));
}

OptimizerConfig TestConfig() {
  OptimizerConfig c;
  c.lr = 1e-2f;
  c.min_lr = 1e-3f;
  c.lr_warmup_iters = 2;
  c.weight_decay = 0.1f;
  c.clip_grad = 1.0f;
  return c;
}
constexpr int64_t kSteps = 5;

struct RunResult {
  std::vector<float> params;  // full flat parameters after kSteps
  std::vector<float> m, v;    // this rank's AdamW state
  std::vector<StepResult> steps;
};

// kSteps steps on `dp` data-parallel ranks, each feeding Grad(rank, ...).
std::vector<RunResult> RunDp(int dp, bool distributed, int64_t bucket,
                             CommLog* log = nullptr) {
  std::vector<RunResult> out(dp);
  RunLocalRanks(
      dp,
      [&](Communicator& world) {
        search_spaces::ParallelConfig pc;
        pc.dp = dp;
        pc.dist_opt = distributed;
        ProcessGroups groups = MakeProcessGroups(&world, pc);
        ParamStore store = MakeStore();
        OptimizerConfig config = TestConfig();
        config.ddp_bucket_size = bucket;
        Optimizer opt(config, distributed, kSteps, store, &groups);
        RunResult& r = out[world.rank()];
        for (int64_t it = 1; it <= kSteps; ++it) {
          for (int64_t i = 0; i < store.numel(); ++i) {
            store.flat_grads()[i] = Grad(world.rank(), it, i);
          }
          r.steps.push_back(opt.Step(store, it));
        }
        r.params = store.flat_params();
        r.m = opt.exp_avg();
        r.v = opt.exp_avg_sq();
      },
      log);
  return out;
}

// One rank fed the dp-average of the two ranks' gradients, computed the way
// the all-reduce does: sum in rank order, then ×1/2.
RunResult RunSingleOnAverage() {
  RunResult r;
  RunLocalRanks(1, [&](Communicator& world) {
    ProcessGroups groups =
        MakeProcessGroups(&world, search_spaces::ParallelConfig{});
    ParamStore store = MakeStore();
    Optimizer opt(TestConfig(), false, kSteps, store, &groups);
    for (int64_t it = 1; it <= kSteps; ++it) {
      for (int64_t i = 0; i < store.numel(); ++i) {
        store.flat_grads()[i] = (Grad(0, it, i) + Grad(1, it, i)) * 0.5f;
      }
      r.steps.push_back(opt.Step(store, it));
    }
    r.params = store.flat_params();
    r.m = opt.exp_avg();
    r.v = opt.exp_avg_sq();
  });
  return r;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], rel * std::max(1e-6f, std::fabs(want[i])))
        << what << " element " << i;
  }
}

TEST(OptimizerTest, PlainDpMatchesSingleRankOnAveragedGradients) {
  const RunResult single = RunSingleOnAverage();
  const std::vector<RunResult> dp = RunDp(2, false, 0);
  // Clipping was active (norm > 1) so the test covers it.
  EXPECT_GT(single.steps[0].grad_norm, 1.0);
  for (int r = 0; r < 2; ++r) {
    // Same sums in the same order, ×0.5 is exact: bit-identical.
    EXPECT_EQ(dp[r].params, single.params) << "rank " << r;
    EXPECT_EQ(dp[r].m, single.m);
    EXPECT_EQ(dp[r].v, single.v);
    for (int64_t s = 0; s < kSteps; ++s) {
      EXPECT_EQ(dp[r].steps[s].grad_norm, single.steps[s].grad_norm);
      EXPECT_FLOAT_EQ(dp[r].steps[s].lr,
                      LearningRate(TestConfig(), s + 1, kSteps));
    }
  }
  // The parameters moved.
  EXPECT_NE(single.params, MakeStore().flat_params());
}

TEST(OptimizerTest, DistributedMatchesPlainAndShardsConcatenate) {
  const std::vector<RunResult> plain = RunDp(2, false, 0);
  const std::vector<RunResult> dist = RunDp(2, true, 0);
  // The sharded norm sums Σg² per shard and then over dp, a different float64
  // order than one pass over the buffer, so the clip factor can differ in its
  // last float bit: agreement to 1e-6 relative, not bit-for-bit.
  for (int r = 0; r < 2; ++r) {
    ExpectNear(dist[r].params, plain[0].params, 1e-6, "params");
    for (int64_t s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(dist[r].steps[s].grad_norm, plain[0].steps[s].grad_norm,
                  1e-12 * plain[0].steps[s].grad_norm);
    }
  }
  // Both dp ranks hold exactly the same (all-gathered) parameters.
  EXPECT_EQ(dist[0].params, dist[1].params);
  // 27 elements → shards of 14; rank 1's last element is padding (m = v = 0).
  ASSERT_EQ(dist[0].m.size(), 14u);
  ASSERT_EQ(dist[1].m.size(), 14u);
  std::vector<float> m = dist[0].m, v = dist[0].v;
  m.insert(m.end(), dist[1].m.begin(), dist[1].m.end());
  v.insert(v.end(), dist[1].v.begin(), dist[1].v.end());
  EXPECT_EQ(m.back(), 0.0f);
  EXPECT_EQ(v.back(), 0.0f);
  m.pop_back();
  v.pop_back();
  ExpectNear(m, plain[0].m, 1e-6, "exp_avg");
  ExpectNear(v, plain[0].v, 1e-6, "exp_avg_sq");
}

TEST(OptimizerTest, ShardRangesAndStateBytes) {
  RunLocalRanks(2, [](Communicator& world) {
    search_spaces::ParallelConfig pc;
    pc.dp = 2;
    ProcessGroups groups = MakeProcessGroups(&world, pc);
    ParamStore store;
    ParamInfo p;
    p.name = "decoder.layers.0.mlp.linear_fc2.weight";
    p.global_shape = {4, 2};
    store.Add(p);
    store.Finalize();
    const Optimizer plain(TestConfig(), false, 1, store, &groups);
    const Optimizer dist(TestConfig(), true, 1, store, &groups);
    EXPECT_EQ(plain.shard_begin(), 0);
    EXPECT_EQ(plain.shard_end(), 8);
    EXPECT_EQ(plain.state_bytes(), 2 * 4 * 8);
    EXPECT_EQ(dist.shard_begin(), 4 * world.rank());
    EXPECT_EQ(dist.shard_end(), 4 * world.rank() + 4);
    EXPECT_EQ(dist.state_bytes(), plain.state_bytes() / 2);
  });
}

// Bucket sizes change only how the reduction is cut into calls.
TEST(OptimizerTest, BucketSizesGiveIdenticalResults) {
  for (bool distributed : {false, true}) {
    const std::vector<RunResult> one = RunDp(2, distributed, 0);
    for (int64_t bucket : {1, 4, 10, 27, 100}) {
      const std::vector<RunResult> cut = RunDp(2, distributed, bucket);
      for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(cut[r].params, one[r].params)
            << "distributed " << distributed << " bucket " << bucket;
        EXPECT_EQ(cut[r].m, one[r].m);
      }
    }
  }
}

// Bytes of the dp records of one kind, sorted (both ranks record into the
// one log, interleaved).
std::vector<int64_t> DpBytes(const CommLog& log, CommKind kind) {
  std::vector<int64_t> bytes;
  for (const CommRecord& rec : log.records()) {
    if (rec.group == "dp" && rec.kind == kind) {
      EXPECT_EQ(rec.group_size, 2);
      bytes.push_back(rec.bytes);
    }
  }
  std::sort(bytes.begin(), bytes.end());
  return bytes;
}

TEST(OptimizerTest, PlainBucketsAllReduceFromTheEnd) {
  // 27 elements in buckets of 10: [17, 27), [7, 17), [0, 7) per step.
  CommLog log;
  RunDp(2, false, 10, &log);
  std::vector<int64_t> want;
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t s = 0; s < kSteps; ++s) {
      want.insert(want.end(), {40, 40, 28});
    }
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(DpBytes(log, CommKind::kAllReduce), want);
  EXPECT_TRUE(DpBytes(log, CommKind::kReduceScatter).empty());
  EXPECT_TRUE(DpBytes(log, CommKind::kAllGather).empty());
}

TEST(OptimizerTest, DistributedBucketsReduceScatterAndGather) {
  // Padded 28 → shards of 14; bucket 10 → 5 elements of each shard per
  // call: windows [9, 14), [4, 9), [0, 4) → 40, 40, 32 bytes (nccl-tests
  // convention: the full input of the reduce-scatter, the gathered output).
  CommLog log;
  RunDp(2, true, 10, &log);
  std::vector<int64_t> want;
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t s = 0; s < kSteps; ++s) {
      want.insert(want.end(), {40, 40, 32});
    }
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(DpBytes(log, CommKind::kReduceScatter), want);
  EXPECT_EQ(DpBytes(log, CommKind::kAllGather), want);
  // The only dp all-reduce is the float64 squared norm, once per step.
  EXPECT_EQ(DpBytes(log, CommKind::kAllReduce),
            std::vector<int64_t>(2 * kSteps, 8));
}

// Wraps a group and remembers where each all-reduce started (offset into
// `base`) and what each reduce-scatter was handed, forwarding the call.
class SpyCommunicator : public Communicator {
 public:
  SpyCommunicator(std::unique_ptr<Communicator> inner, const float* base)
      : Communicator(inner->rank(), inner->size(), inner->name()),
        inner_(std::move(inner)),
        base_(base) {}
  std::vector<int64_t> all_reduce_offsets;
  std::vector<std::vector<float>> reduce_scatter_inputs;

 protected:
  void DoAllReduceSum(float* data, int64_t count) override {
    all_reduce_offsets.push_back(data - base_);
    inner_->AllReduceSum(data, count);
  }
  void DoAllReduceSum(double* data, int64_t count) override {
    inner_->AllReduceSum(data, count);
  }
  void DoAllReduceMax(float* data, int64_t count) override {
    inner_->AllReduceMax(data, count);
  }
  void DoAllGather(const float* in, float* out, int64_t count) override {
    inner_->AllGather(in, out, count);
  }
  void DoReduceScatterSum(const float* in, float* out, int64_t count) override {
    reduce_scatter_inputs.emplace_back(in, in + count * size());
    inner_->ReduceScatterSum(in, out, count);
  }
  void DoBroadcast(float* data, int64_t count, int root) override {
    inner_->Broadcast(data, count, root);
  }
  void DoSend(const float* data, int64_t count, int peer) override {
    inner_->Send(data, count, peer);
  }
  void DoRecv(float* data, int64_t count, int peer) override {
    inner_->Recv(data, count, peer);
  }
  void DoBarrier() override { inner_->Barrier(); }
  std::unique_ptr<Communicator> DoSplit(int color, int key,
                                        const std::string& name) override {
    return inner_->Split(color, key, name);
  }

 private:
  std::unique_ptr<Communicator> inner_;
  const float* base_;
};

// Which elements each bucket holds: buckets start at the END of the buffer
// (plain), and each distributed bucket is the same window of every rank's
// shard, the last window first.
TEST(OptimizerTest, BucketsStartAtTheEndOfTheBuffer) {
  std::vector<std::vector<int64_t>> offsets(2);
  std::vector<std::vector<std::vector<float>>> rs_inputs(2);
  std::vector<std::vector<float>> grads(2);
  for (bool distributed : {false, true}) {
    RunLocalRanks(2, [&](Communicator& world) {
      search_spaces::ParallelConfig pc;
      pc.dp = 2;
      ProcessGroups groups = MakeProcessGroups(&world, pc);
      ParamStore store = MakeStore();
      auto spy = std::make_unique<SpyCommunicator>(std::move(groups.dp),
                                                   store.flat_grads().data());
      SpyCommunicator* seen = spy.get();
      groups.dp = std::move(spy);
      OptimizerConfig config = TestConfig();
      config.ddp_bucket_size = 10;
      Optimizer opt(config, distributed, kSteps, store, &groups);
      for (int64_t i = 0; i < store.numel(); ++i) {
        store.flat_grads()[i] = Grad(world.rank(), 1, i);
      }
      grads[world.rank()] = store.flat_grads();
      opt.Step(store, 1);
      if (distributed) {
        rs_inputs[world.rank()] = seen->reduce_scatter_inputs;
      } else {
        offsets[world.rank()] = seen->all_reduce_offsets;
      }
    });
  }
  // Plain, 27 elements in buckets of 10: [17, 27), [7, 17), [0, 7).
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(offsets[r], (std::vector<int64_t>{17, 7, 0}));
  }
  // Distributed, shards [0, 14) and [14, 28) (27 is padding), 5 elements of
  // each per bucket: windows [9, 14), [4, 9), [0, 4) of both shards.
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(rs_inputs[r].size(), 3u);
    const std::vector<float>& g = grads[r];
    std::vector<float> first(g.begin() + 9, g.begin() + 14);
    first.insert(first.end(), g.begin() + 23, g.begin() + 27);
    first.push_back(0.0f);  // padding
    EXPECT_EQ(rs_inputs[r][0], first) << "rank " << r;
    std::vector<float> last(g.begin(), g.begin() + 4);
    last.insert(last.end(), g.begin() + 14, g.begin() + 18);
    EXPECT_EQ(rs_inputs[r][2], last) << "rank " << r;
  }
}

// One parameter [2] with gradient (3, 4): norm 5.
TEST(OptimizerTest, ClipScalesByClipOverNormPlusEpsilon) {
  RunLocalRanks(1, [](Communicator& world) {
    ProcessGroups groups =
        MakeProcessGroups(&world, search_spaces::ParallelConfig{});
    ParamStore store;
    ParamInfo p;
    p.name = "decoder.layers.0.self_attention.linear_proj.bias";
    p.global_shape = {2};
    store.Add(p);
    // A copy another rank also counts (e.g. the tied output layer): its huge
    // gradient must not enter the norm.
    ParamInfo dup;
    dup.name = "output_layer.weight";
    dup.global_shape = {1};
    dup.counts_in_norm = false;
    store.Add(dup);
    store.Finalize();
    store.flat_grads() = {3.0f, 4.0f, 100.0f};
    OptimizerConfig config = TestConfig();
    config.clip_grad = 1.0f;
    Optimizer opt(config, false, 10, store, &groups);
    const StepResult r = opt.Step(store, 1);
    EXPECT_TRUE(r.finite);
    EXPECT_DOUBLE_EQ(r.grad_norm, 5.0);
    // Clipping multiplies the gradients in place (clip_grads.py), all of
    // them, the uncounted copy included.
    const float coeff = static_cast<float>(1.0 / (5.0 + 1e-6));
    EXPECT_FLOAT_EQ(store.flat_grads()[0], 3.0f * coeff);
    EXPECT_FLOAT_EQ(store.flat_grads()[1], 4.0f * coeff);
    EXPECT_FLOAT_EQ(store.flat_grads()[2], 100.0f * coeff);
    // Below the threshold nothing is scaled.
    store.flat_grads() = {0.3f, 0.4f, 100.0f};
    EXPECT_NEAR(opt.Step(store, 2).grad_norm, 0.5, 1e-7);
    EXPECT_EQ(store.flat_grads()[0], 0.3f);
  });
}

// tp = 2: a column-parallel shard per rank (grad 3 on rank 0, 4 on rank 1)
// and a replicated bias [2] with identical grads (12, 0) counted on tp rank
// 0 only. The norm sums over the mp group: √(9 + 16 + 144) = 13 on both.
// With dp = 2 (and both optimizers) the replicated bias must stay
// bit-identical across tp ranks step after step.
TEST(OptimizerTest, NormSumsOverModelParallelAndReplicasStayIdentical) {
  for (bool distributed : {false, true}) {
    std::vector<std::vector<float>> bias(4);
    RunLocalRanks(4, [&](Communicator& world) {
      search_spaces::ParallelConfig pc;
      pc.tp = 2;
      pc.dp = 2;
      pc.dist_opt = distributed;
      ProcessGroups groups = MakeProcessGroups(&world, pc);
      const int tp_rank = groups.tp_rank();
      ParamStore store;
      ParamInfo col;
      col.name = "decoder.layers.0.mlp.linear_fc1.weight";
      col.global_shape = {2, 1};
      col.split = TpSplit::kColumn;
      col.tp_rank = tp_rank;
      col.tp_size = 2;
      store.Add(col);
      ParamInfo rep;
      rep.name = "decoder.layers.0.mlp.linear_fc2.bias";
      rep.global_shape = {2};
      rep.tp_rank = tp_rank;
      rep.tp_size = 2;
      rep.weight_decay = false;
      rep.counts_in_norm = tp_rank == 0;
      store.Add(rep);
      store.Finalize();
      store.flat_params() = {0.5f, 0.25f, -0.75f};
      Optimizer opt(TestConfig(), distributed, kSteps, store, &groups);
      for (int64_t it = 1; it <= kSteps; ++it) {
        // Same on both dp ranks, so the dp average leaves it unchanged.
        const float scale = 1.0f / static_cast<float>(it);
        store.flat_grads() = {(tp_rank == 0 ? 3.0f : 4.0f) * scale,
                              12.0f * scale, 0.0f};
        const StepResult r = opt.Step(store, it);
        // 3·(1/it) etc. are rounded to float first: 1e-6 relative.
        EXPECT_NEAR(r.grad_norm, 13.0 * scale, 1e-6 * 13.0 * scale)
            << "step " << it;
      }
      bias[world.rank()] = {store.param(1), store.param(1) + 2};
    });
    // World rank = tp_rank + 2·dp_rank (tp fastest, Megatron order).
    EXPECT_EQ(bias[0], bias[1]) << "distributed " << distributed;
    EXPECT_EQ(bias[2], bias[3]) << "distributed " << distributed;
    EXPECT_EQ(bias[0], bias[2]) << "distributed " << distributed;
    EXPECT_NE(bias[0][0], 0.25f);  // it moved
  }
}

TEST(OptimizerTest, NonFiniteGradientSkipsTheStep) {
  for (bool distributed : {false, true}) {
    std::vector<std::vector<float>> params(2);
    std::vector<StepResult> results(2);
    std::vector<int64_t> steps(2);
    RunLocalRanks(2, [&](Communicator& world) {
      search_spaces::ParallelConfig pc;
      pc.dp = 2;
      ProcessGroups groups = MakeProcessGroups(&world, pc);
      ParamStore store = MakeStore();
      Optimizer opt(TestConfig(), distributed, kSteps, store, &groups);
      for (int64_t i = 0; i < store.numel(); ++i) {
        store.flat_grads()[i] = Grad(world.rank(), 1, i);
      }
      // Only rank 1 overflows, in rank 0's shard when distributed.
      if (world.rank() == 1) {
        store.flat_grads()[3] = std::numeric_limits<float>::infinity();
      }
      results[world.rank()] = opt.Step(store, 1);
      params[world.rank()] = store.flat_params();
      steps[world.rank()] = opt.steps_taken();
      EXPECT_EQ(opt.exp_avg(), std::vector<float>(opt.exp_avg().size(), 0));
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_FALSE(results[r].finite) << "distributed " << distributed;
      EXPECT_FALSE(std::isfinite(results[r].grad_norm));
      EXPECT_EQ(params[r], MakeStore().flat_params());
      EXPECT_EQ(steps[r], 0);
    }
  }
}

// With zero gradients AdamW only decays: p −= lr·wd·p where decay_mask is 1.
// Checks the mask lines up with the shard offsets under the distributed
// optimizer too.
TEST(OptimizerTest, WeightDecayFollowsTheDecayMask) {
  for (bool distributed : {false, true}) {
    std::vector<std::vector<float>> params(2);
    RunLocalRanks(2, [&](Communicator& world) {
      search_spaces::ParallelConfig pc;
      pc.dp = 2;
      ProcessGroups groups = MakeProcessGroups(&world, pc);
      ParamStore store = MakeStore();
      std::fill(store.flat_params().begin(), store.flat_params().end(), 2.0f);
      OptimizerConfig config = TestConfig();
      config.lr_warmup_iters = 0;
      config.lr_decay_style = OptimizerConfig::DecayStyle::kConstant;
      config.lr = 0.1f;
      config.weight_decay = 0.5f;
      Optimizer opt(config, distributed, 10, store, &groups);
      store.ZeroGrads();
      opt.Step(store, 1);
      params[world.rank()] = store.flat_params();
    });
    for (int r = 0; r < 2; ++r) {
      for (int64_t i = 0; i < 27; ++i) {
        // Elements [0, 15) are the decayed weight; bias and norm follow.
        const float want = i < 15 ? 2.0f - 0.1f * 0.5f * 2.0f : 2.0f;
        EXPECT_FLOAT_EQ(params[r][i], want)
            << "distributed " << distributed << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace meshtune::engine
