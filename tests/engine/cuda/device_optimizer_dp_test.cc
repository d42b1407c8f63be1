// DeviceOptimizer over data parallelism on ONE GPU: thread ranks
// (RunLocalRanks) whose dp device communicator is the staged kind
// (CreateDeviceCommunicator picks it when members share a device). dp = 2
// without and with the distributed optimizer, and dp = 3 distributed (a
// shard edge cuts a tensor), each against one CPU rank fed the averaged
// gradients; the shard sizes and state bytes; the gather/scatter round trip
// of checkpoints. Label gpu; every test skips without a device.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/device_optimizer.h"
#include "engine/cuda/device_params.h"
#include "engine/cuda/runtime/device.h"
#include "engine/optimizer.h"
#include "engine/process_groups.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"
#include "tests/engine/cuda/device_optimizer_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using testing::CloseFp32;
using testing::MakeOptimizerStore;
using testing::OptimizerTestConfig;
using testing::OptimizerTestGrad;

constexpr int64_t kSteps = 4;

// One dp rank's device state and what its steps returned.
struct DpRank {
  std::string comm_kind;
  int64_t shard_begin = 0, shard_end = 0, state_bytes = 0;
  std::vector<StepResult> steps;
  std::vector<float> params, m, v;  // full, gathered over dp
  std::vector<float> bf16_weights;  // this rank's bf16 copy, store order
  std::string error;                // the first failure, empty if none
};

// Everything a rank builds: groups, the store, params, the dp
// communicator and the optimizer.
struct RankSetup {
  ProcessGroups groups;
  ParamStore store;
  std::unique_ptr<DeviceParams> params;
  std::unique_ptr<DeviceCommunicator> dp;
  std::unique_ptr<DeviceOptimizer> opt;
};

Status SetUpRank(Communicator& world, const TrainConfig& config, RankSetup* s) {
  MESHTUNE_RETURN_IF_ERROR(SetDevice(0));
  s->groups = MakeProcessGroups(&world, config.parallel);
  s->store = MakeOptimizerStore();
  auto params =
      DeviceParams::Create(s->store, s->groups.dp->size(), s->groups.dp_rank(),
                           config.parallel.dist_opt);
  if (!params.ok()) return params.status();
  s->params = std::move(params).value();
  auto dp = CreateDeviceCommunicator(s->groups.dp.get());
  if (!dp.ok()) return dp.status();
  s->dp = std::move(dp).value();
  auto opt = DeviceOptimizer::Create(config, s->store, s->params.get(),
                                     &s->groups, s->dp.get());
  if (!opt.ok()) return opt.status();
  s->opt = std::move(opt).value();
  return Status::Ok();
}

// Writes rank `rank`'s OptimizerTestGrad for `step` into the device grads.
Status UploadGrads(const RankSetup& s, int rank, int64_t step) {
  std::vector<float> g(s.store.numel());
  for (int64_t i = 0; i < s.store.numel(); ++i) {
    g[i] = OptimizerTestGrad(rank, step, i);
  }
  for (int t = 0; t < s.store.size(); ++t) {
    const ParamInfo& info = s.store.info(t);
    MESHTUNE_RETURN_IF_ERROR(CopyHostToDevice(
        s.params->grad(s.store, t), g.data() + info.offset, 4 * info.numel));
  }
  return Status::Ok();
}

// kSteps steps on `dp` thread ranks sharing GPU 0. With `buckets`, the
// weight's and the final norm's gradients are reduced early (as the
// trainer does per layer during the last backward) and the step reduces
// the rest.
Status RunRank(Communicator& world, const TrainConfig& config, bool buckets,
               DpRank* out) {
  RankSetup s;
  MESHTUNE_RETURN_IF_ERROR(SetUpRank(world, config, &s));
  out->comm_kind = s.dp->kind();
  out->shard_begin = s.params->shard_begin();
  out->shard_end = s.params->shard_end();
  out->state_bytes = s.opt->state_bytes();
  for (int64_t it = 1; it <= kSteps; ++it) {
    MESHTUNE_RETURN_IF_ERROR(s.params->ZeroGrads());
    MESHTUNE_RETURN_IF_ERROR(UploadGrads(s, world.rank(), it));
    if (buckets) {
      const auto [wb, we] = s.params->Range(0, 0);
      MESHTUNE_RETURN_IF_ERROR(s.opt->ReduceBucket(wb, we));
      const auto [nb, ne] = s.params->Range(2, 2);
      MESHTUNE_RETURN_IF_ERROR(s.opt->ReduceBucket(nb, ne));
      MESHTUNE_RETURN_IF_ERROR(s.opt->WaitForReductions());
    }
    auto result = s.opt->Step(it);
    if (!result.ok()) return result.status();
    out->steps.push_back(result.value());
  }
  out->m.resize(s.store.numel());
  out->v.resize(s.store.numel());
  MESHTUNE_RETURN_IF_ERROR(
      s.opt->GatherState(&s.store, out->m.data(), out->v.data()));
  out->params = s.store.flat_params();
  for (int t = 0; t < s.store.size(); ++t) {
    const ParamInfo& info = s.store.info(t);
    std::vector<Bf16> w(info.numel);
    MESHTUNE_RETURN_IF_ERROR(CopyDeviceToHost(
        w.data(), s.params->weight(s.store, t), 2 * info.numel));
    for (const Bf16& x : w) out->bf16_weights.push_back(Bf16ToFloat(x));
  }
  return Status::Ok();
}

std::vector<DpRank> RunDp(int dp, bool distributed, bool buckets) {
  TrainConfig config = OptimizerTestConfig(true, distributed);
  config.parallel.dp = dp;
  std::vector<DpRank> out(dp);
  RunLocalRanks(dp, [&](Communicator& world) {
    DpRank& r = out[world.rank()];
    const Status st = RunRank(world, config, buckets, &r);
    if (!st.ok()) r.error = st.message();
  });
  return out;
}

void ExpectMatchesCpu(int dp, bool distributed, bool buckets) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const testing::CpuRun cpu =
      testing::RunCpuOptimizer(OptimizerTestConfig(true, false), kSteps, dp);
  const std::vector<DpRank> ranks = RunDp(dp, distributed, buckets);
  for (int r = 0; r < dp; ++r) {
    const DpRank& got = ranks[r];
    ASSERT_EQ(got.error, "") << "rank " << r;
    EXPECT_EQ(got.comm_kind, "staged") << "one GPU: the staged kind";
    ASSERT_EQ(got.steps.size(), static_cast<size_t>(kSteps));
    for (int64_t k = 0; k < kSteps; ++k) {
      EXPECT_EQ(got.steps[k].lr, cpu.steps[k].lr);
      EXPECT_NEAR(got.steps[k].grad_norm, cpu.steps[k].grad_norm,
                  1e-6 * cpu.steps[k].grad_norm)
          << "rank " << r << " step " << k + 1;
      EXPECT_TRUE(got.steps[k].finite);
    }
    EXPECT_TRUE(CloseFp32(got.params, cpu.params)) << "rank " << r;
    EXPECT_TRUE(CloseFp32(got.m, cpu.m)) << "rank " << r;
    EXPECT_TRUE(CloseFp32(got.v, cpu.v)) << "rank " << r;
    // Every rank computes with every updated weight (the all-gather when
    // distributed): its bf16 copy is the rounded full master weights.
    ASSERT_EQ(got.bf16_weights.size(), got.params.size());
    for (size_t i = 0; i < got.params.size(); ++i) {
      ASSERT_EQ(got.bf16_weights[i], RoundToBf16(got.params[i]))
          << "rank " << r << " element " << i;
    }
  }
}

TEST(DeviceOptimizerDpTest, TwoRanksMatchOneRankOnAveragedGradients) {
  ExpectMatchesCpu(2, false, false);
}

TEST(DeviceOptimizerDpTest, EarlyBucketsMatchOneRankOnAveragedGradients) {
  ExpectMatchesCpu(2, false, true);
}

TEST(DeviceOptimizerDpTest, DistributedMatchesOneRankOnAveragedGradients) {
  ExpectMatchesCpu(2, true, false);
}

// dp = 3 cuts the weight between ranks 0 and 1 (MakeParamLayout's test).
TEST(DeviceOptimizerDpTest, DistributedWithACutTensorMatchesOneRank) {
  ExpectMatchesCpu(3, true, true);
}

TEST(DeviceOptimizerDpTest, DistributedShardsAndStateBytes) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  for (const bool distributed : {false, true}) {
    const std::vector<DpRank> ranks = RunDp(2, distributed, false);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(ranks[r].error, "");
      // The 768-element buffer: whole, or halves of 384.
      EXPECT_EQ(ranks[r].shard_begin, distributed ? 384 * r : 0);
      EXPECT_EQ(ranks[r].shard_end, distributed ? 384 * (r + 1) : 768);
      EXPECT_EQ(ranks[r].state_bytes, distributed ? 12 * 384 : 12 * 768);
    }
  }
}

// Checkpoint path: state gathered from one set of ranks, scattered into
// fresh ones, gathered again: the same full arrays, bit for bit. A sharded
// download without the dp communicator is an error.
TEST(DeviceOptimizerDpTest, GatherScatterRoundTrips) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  TrainConfig config = OptimizerTestConfig(true, true);
  config.parallel.dp = 2;
  std::vector<std::string> errors(2);
  std::vector<std::string> no_comm(2);
  RunLocalRanks(2, [&](Communicator& world) {
    const int r = world.rank();
    auto run = [&]() -> Status {
      RankSetup a;
      MESHTUNE_RETURN_IF_ERROR(SetUpRank(world, config, &a));
      for (int64_t it = 1; it <= 2; ++it) {
        MESHTUNE_RETURN_IF_ERROR(UploadGrads(a, r, it));
        MESHTUNE_RETURN_IF_ERROR(a.opt->Step(it).status());
      }
      const int64_t n = a.store.numel();
      std::vector<float> m(n), v(n);
      MESHTUNE_RETURN_IF_ERROR(
          a.opt->GatherState(&a.store, m.data(), v.data()));
      const std::vector<float> params = a.store.flat_params();
      no_comm[r] = a.params->DownloadParams(&a.store).message();

      RankSetup b;
      MESHTUNE_RETURN_IF_ERROR(SetUpRank(world, config, &b));
      b.store.flat_params() = params;
      MESHTUNE_RETURN_IF_ERROR(
          b.opt->ScatterState(b.store, m.data(), v.data()));
      b.store.flat_params().assign(n, 0.0f);
      std::vector<float> m2(n), v2(n);
      MESHTUNE_RETURN_IF_ERROR(
          b.opt->GatherState(&b.store, m2.data(), v2.data()));
      if (b.store.flat_params() != params) return Status::Internal("params");
      if (m2 != m) return Status::Internal("m");
      if (v2 != v) return Status::Internal("v");
      // The moments moved: the round trip is not of zeros.
      if (v == std::vector<float>(n, 0.0f)) return Status::Internal("zero v");
      return Status::Ok();
    };
    const Status st = run();
    if (!st.ok()) errors[r] = st.message();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(no_comm[r],
              "download params: this rank holds 1/2 of the optimizer state "
              "(distributed optimizer) and needs the dp communicator to "
              "gather the rest");
  }
}

}  // namespace
}  // namespace meshtune::engine::cuda
