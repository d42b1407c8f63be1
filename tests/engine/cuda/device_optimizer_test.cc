// DeviceOptimizer and the sharded DeviceParams (engine/cuda/
// device_optimizer.h, device_params.h).
// Without a device (suites *HostOnlyTest, no gpu label, so CI runs them):
// the shard arithmetic (layouts, pieces, state bytes), the bucket
// bookkeeping and Create's setup checks, with their exact error messages.
// With a device (skipped otherwise): sharded DeviceParams' segments and
// downloads on one rank; one rank's step against the CPU Optimizer's step
// on the same store and gradients, with and without clipping, both
// weight-decay groups, a tensor outside the norm, and the skipped step on
// a non-finite norm. The dp runs on one GPU are in
// device_optimizer_dp_test.cc.
#include "engine/cuda/device_optimizer.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/comm/local_communicator.h"
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
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// ---- Shard arithmetic (no device) ----

// The store's tensors have 300, 5, 7 and 9 elements: aligned to 128 they
// start at 0, 384, 512 and 640, and the buffer is 768 long.
TEST(ParamLayoutHostOnlyTest, NotDistributedHoldsEveryTensorWhole) {
  const ParamStore store = MakeOptimizerStore();
  auto layout = MakeParamLayout(store, 2, 1, false);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->offsets, (std::vector<int64_t>{0, 384, 512, 640}));
  EXPECT_EQ(layout->numel, 321);
  EXPECT_EQ(layout->padded_numel, 768);
  EXPECT_EQ(layout->shard_begin, 0);
  EXPECT_EQ(layout->shard_end, 768);
  EXPECT_TRUE(layout->holds_everything());
  EXPECT_EQ(layout->state_bytes(), 12 * 768);
  const std::vector<ShardPiece> pieces = ShardPieces(*layout, store);
  ASSERT_EQ(pieces.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(pieces[i].tensor, i);
    EXPECT_EQ(pieces[i].begin, layout->offsets[i]);
    EXPECT_EQ(pieces[i].end, layout->offsets[i] + store.info(i).numel);
  }
}

// With an expert region: tensors 1 and 3 of 300, 5, 7, 9 marked expert.
// Dense first (300 at 0, 7 at 384: region [0, 512)), then the experts (5 at
// 512, 9 at 640: [512, 768)). Distributed over dp 2 and edp 2, the dense
// region stays 512 (a multiple of 2·128: shards of 256) and the expert one
// pads to 256 (shards of 128); rank (1, 1)'s state is the dense shard
// [256, 512) then the expert shard [640, 768).
TEST(ParamLayoutHostOnlyTest, ExpertsFormARegionShardedOverEdp) {
  ParamStore store;
  for (int i = 0; i < 4; ++i) {
    ParamInfo t;
    t.name = "t" + std::to_string(i);
    t.global_shape = {std::vector<int64_t>{300, 5, 7, 9}[i]};
    t.expert = i % 2 == 1;
    store.Add(t);
  }
  store.Finalize();
  const ExpertSharding edp{2, 1};
  auto whole = MakeParamLayout(store, 2, 1, false, &edp);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->offsets, (std::vector<int64_t>{0, 512, 384, 640}));
  EXPECT_EQ(whole->padded_numel, 768);
  ASSERT_EQ(whole->regions.size(), 2u);
  EXPECT_TRUE(whole->holds_everything());
  EXPECT_EQ(whole->regions[1].state_offset, 512);

  auto sharded = MakeParamLayout(store, 2, 1, true, &edp);
  ASSERT_TRUE(sharded.ok()) << sharded.status().message();
  const ParamRegion& dense = sharded->regions[0];
  const ParamRegion& expert = sharded->regions[1];
  EXPECT_EQ(dense.begin, 0);
  EXPECT_EQ(dense.end, 512);
  EXPECT_EQ(dense.shard_begin, 256);
  EXPECT_EQ(dense.shard_end, 512);
  EXPECT_TRUE(expert.expert);
  EXPECT_EQ(expert.begin, 512);
  EXPECT_EQ(expert.end, 768);
  EXPECT_EQ(expert.shard_begin, 640);
  EXPECT_EQ(expert.shard_end, 768);
  EXPECT_EQ(expert.state_offset, 256);
  EXPECT_EQ(sharded->shard_numel(), 384);
  EXPECT_FALSE(sharded->holds_everything());
  // Rank (1, 1) holds tensor 0's tail [256, 300), tensor 2 whole and
  // tensor 3 whole, at state indices 0, 128 and 256.
  const std::vector<ShardPiece> pieces = ShardPieces(*sharded, store);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].tensor, 0);
  EXPECT_EQ(pieces[0].begin, 256);
  EXPECT_EQ(pieces[0].end, 300);
  EXPECT_EQ(pieces[0].state, 0);
  EXPECT_EQ(pieces[1].tensor, 2);
  EXPECT_EQ(pieces[1].state, 128);
  EXPECT_EQ(pieces[2].tensor, 3);
  EXPECT_EQ(pieces[2].region, 1);
  EXPECT_EQ(pieces[2].state, 256);

  // Asking for an expert region without experts, or a bad edp rank.
  const ParamStore dense_only = MakeOptimizerStore();
  EXPECT_EQ(MakeParamLayout(dense_only, 1, 0, true, &edp).status().message(),
            "device params: an expert region was asked for but the store has "
            "no expert parameters");
  const ExpertSharding bad{2, 2};
  EXPECT_EQ(MakeParamLayout(store, 1, 0, true, &bad).status().message(),
            "device params: edp rank 2 is outside [0, 2)");
}

// dp = 3: 768 is a multiple of 3·128, so shards of 256; the first tensor
// (300 elements) is cut at 256 between ranks 0 and 1.
TEST(ParamLayoutHostOnlyTest, DistributedShardsCutTensorsAtTheEdges) {
  const ParamStore store = MakeOptimizerStore();
  std::vector<std::vector<ShardPiece>> pieces;
  for (int r = 0; r < 3; ++r) {
    auto layout = MakeParamLayout(store, 3, r, true);
    ASSERT_TRUE(layout.ok()) << layout.status().message();
    EXPECT_EQ(layout->padded_numel, 768);
    EXPECT_EQ(layout->shard_begin, 256 * r);
    EXPECT_EQ(layout->shard_end, 256 * (r + 1));
    EXPECT_FALSE(layout->holds_everything());
    // Megatron's 2 + 4 + 12/dp bytes per (padded) parameter.
    EXPECT_EQ(layout->state_bytes(), 12 * 768 / 3);
    EXPECT_EQ(layout->replicated_bytes(), 6 * 768);
    pieces.push_back(ShardPieces(*layout, store));
  }
  auto same = [](const ShardPiece& p, int tensor, int64_t b, int64_t e) {
    return p.tensor == tensor && p.begin == b && p.end == e;
  };
  ASSERT_EQ(pieces[0].size(), 1u);
  EXPECT_TRUE(same(pieces[0][0], 0, 0, 256));
  ASSERT_EQ(pieces[1].size(), 2u);
  EXPECT_TRUE(same(pieces[1][0], 0, 256, 300));
  EXPECT_TRUE(same(pieces[1][1], 1, 384, 389));
  ASSERT_EQ(pieces[2].size(), 2u);
  EXPECT_TRUE(same(pieces[2][0], 2, 512, 519));
  EXPECT_TRUE(same(pieces[2][1], 3, 640, 649));
}

// Padding to dp·128: at dp = 2 the 768-element buffer stays 768 (3·256);
// at dp = 4 it grows to 1024 and the last shard holds only padding.
TEST(ParamLayoutHostOnlyTest, DistributedPadsToDpTimesTheAlignment) {
  const ParamStore store = MakeOptimizerStore();
  for (const auto& [dp, padded] : std::vector<std::pair<int, int64_t>>{
           {1, 768}, {2, 768}, {4, 1024}, {5, 1280}}) {
    int64_t covered = 0;
    for (int r = 0; r < dp; ++r) {
      auto layout = MakeParamLayout(store, dp, r, true);
      ASSERT_TRUE(layout.ok());
      EXPECT_EQ(layout->padded_numel, padded) << "dp " << dp;
      EXPECT_EQ(layout->shard_begin % DeviceParams::kAlignElements, 0);
      for (const ShardPiece& p : ShardPieces(*layout, store)) {
        covered += p.end - p.begin;
      }
    }
    // Every real element is in exactly one rank's pieces.
    EXPECT_EQ(covered, store.numel()) << "dp " << dp;
  }
  auto last = MakeParamLayout(store, 4, 3, true);
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(ShardPieces(*last, store).empty());
}

TEST(ParamLayoutHostOnlyTest, BadInputIsAnErrorNamingIt) {
  const ParamStore store = MakeOptimizerStore();
  auto zero_dp = MakeParamLayout(store, 0, 0, true);
  ASSERT_FALSE(zero_dp.ok());
  EXPECT_EQ(zero_dp.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(zero_dp.status().message(), "device params: dp size 0 is not >= 1");
  EXPECT_EQ(zero_dp.status().hint(),
            "pass the dp group's size (1 without data parallelism)");
  auto rank = MakeParamLayout(store, 2, 2, false);
  ASSERT_FALSE(rank.ok());
  EXPECT_EQ(rank.status().message(),
            "device params: dp rank 2 is outside [0, 2)");
  ParamStore empty;
  empty.Finalize();
  auto none = MakeParamLayout(empty, 1, 0, false);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "device params: the parameter store is empty");
}

// ---- Bucket bookkeeping (no device) ----

TEST(ReducedRangesHostOnlyTest, BucketsInAnyOrderLeaveTheRestForTheStep) {
  Ranges reduced;
  ASSERT_TRUE(AddReducedRange(512, 768, 1000, &reduced).ok());
  ASSERT_TRUE(AddReducedRange(128, 384, 1000, &reduced).ok());
  ASSERT_TRUE(AddReducedRange(384, 512, 1000, &reduced).ok());
  ASSERT_TRUE(AddReducedRange(900, 900, 1000, &reduced).ok());  // empty
  EXPECT_EQ(reduced, (Ranges{{128, 384}, {384, 512}, {512, 768}}));
  EXPECT_EQ(UnreducedRanges(reduced, 1000), (Ranges{{0, 128}, {768, 1000}}));
  EXPECT_EQ(UnreducedRanges({}, 1000), (Ranges{{0, 1000}}));
  EXPECT_EQ(UnreducedRanges({{0, 1000}}, 1000), Ranges{});
}

TEST(ReducedRangesHostOnlyTest, OverlapsAndOutsideRangesAreErrors) {
  Ranges reduced{{128, 384}};
  Status overlap = AddReducedRange(300, 400, 1000, &reduced);
  EXPECT_EQ(overlap.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(overlap.message(),
            "reduce bucket: main grads [300, 400) overlap [128, 384), already "
            "reduced this step (they would be summed twice)");
  EXPECT_EQ(overlap.hint(), "reduce each bucket once per step");
  EXPECT_EQ(AddReducedRange(0, 129, 1000, &reduced).message(),
            "reduce bucket: main grads [0, 129) overlap [128, 384), already "
            "reduced this step (they would be summed twice)");
  Status outside = AddReducedRange(900, 1001, 1000, &reduced);
  EXPECT_EQ(outside.message(),
            "reduce bucket: main grads [900, 1001) are not a range inside the "
            "buffer [0, 1000)");
  EXPECT_EQ(outside.hint(),
            "pass DeviceParams::Range(first, last) of the bucket's tensors");
  EXPECT_EQ(AddReducedRange(10, 5, 1000, &reduced).message(),
            "reduce bucket: main grads [10, 5) are not a range inside the "
            "buffer [0, 1000)");
  EXPECT_EQ(reduced, (Ranges{{128, 384}}));  // nothing recorded
}

// ---- Create's setup checks (no device) ----

// A device communicator that only has a rank and a size (the checks read
// nothing else); every collective is an error.
class FakeDeviceCommunicator : public DeviceCommunicator {
 public:
  FakeDeviceCommunicator(int rank, int size)
      : DeviceCommunicator(rank, size, "dp") {}
  const char* kind() const override { return "fake"; }
  Status AllReduceSum(float*, int64_t, Stream) override { return Fail(); }
  Status AllReduceSum(Bf16*, int64_t, Stream) override { return Fail(); }
  Status AllReduceMax(float*, int64_t, Stream) override { return Fail(); }
  Status AllGather(const Bf16*, Bf16*, int64_t, Stream) override {
    return Fail();
  }
  Status AllGather(const float*, float*, int64_t, Stream) override {
    return Fail();
  }
  Status ReduceScatterSum(const Bf16*, Bf16*, int64_t, Stream) override {
    return Fail();
  }
  Status ReduceScatterSum(const float*, float*, int64_t, Stream) override {
    return Fail();
  }
  Status Send(const Bf16*, int64_t, int, Stream) override { return Fail(); }
  Status Recv(Bf16*, int64_t, int, Stream) override { return Fail(); }
  Status Send(const float*, int64_t, int, Stream) override { return Fail(); }
  Status Recv(float*, int64_t, int, Stream) override { return Fail(); }
  Status AllToAllV(const Bf16*, const std::vector<int64_t>&, Bf16*,
                   const std::vector<int64_t>&, Stream) override {
    return Fail();
  }

 private:
  static Status Fail() { return Status::Internal("fake communicator"); }
};

// The check's message on dp rank 1 of two thread ranks, for params laid
// out by (dp_size, dp_rank, distributed) and the device communicator `dp`.
std::string SetupErrorOnRank1(bool dist_opt, int dp_size, int dp_rank,
                              bool distributed, DeviceCommunicator* dp) {
  std::string message;
  RunLocalRanks(2, [&](Communicator& world) {
    search_spaces::ParallelConfig pc;
    pc.dp = 2;
    ProcessGroups groups = MakeProcessGroups(&world, pc);
    const ParamStore store = MakeOptimizerStore();
    const TrainConfig config = OptimizerTestConfig(true, dist_opt);
    auto layout = MakeParamLayout(store, dp_size, dp_rank, distributed);
    MESHTUNE_CHECK(layout.ok());
    const Status st =
        CheckDeviceOptimizerSetup(config, store, *layout, &groups, dp);
    if (world.rank() == 1) message = st.ok() ? "ok" : st.message();
  });
  return message;
}

TEST(DeviceOptimizerSetupHostOnlyTest, MatchingSetupIsOk) {
  FakeDeviceCommunicator dp(1, 2);
  EXPECT_EQ(SetupErrorOnRank1(true, 2, 1, true, &dp), "ok");
  EXPECT_EQ(SetupErrorOnRank1(false, 2, 1, false, &dp), "ok");
}

TEST(DeviceOptimizerSetupHostOnlyTest, MismatchesAreErrorsNamingBothSides) {
  FakeDeviceCommunicator dp(1, 2);
  EXPECT_EQ(SetupErrorOnRank1(true, 4, 1, true, &dp),
            "device optimizer: the device params are laid out for dp rank 1 "
            "of 4 but this rank is dp rank 1 of 2");
  EXPECT_EQ(SetupErrorOnRank1(true, 2, 0, true, &dp),
            "device optimizer: the device params are laid out for dp rank 0 "
            "of 2 but this rank is dp rank 1 of 2");
  EXPECT_EQ(SetupErrorOnRank1(true, 2, 1, false, &dp),
            "device optimizer: the config has dist_opt = true but the device "
            "params are not sharded");
  EXPECT_EQ(SetupErrorOnRank1(false, 2, 1, true, &dp),
            "device optimizer: the config has dist_opt = false but the device "
            "params are sharded");
  EXPECT_EQ(SetupErrorOnRank1(false, 2, 1, false, nullptr),
            "device optimizer: dp = 2 needs a device communicator over the dp "
            "group");
  FakeDeviceCommunicator wrong_rank(0, 2);
  EXPECT_EQ(SetupErrorOnRank1(false, 2, 1, false, &wrong_rank),
            "device optimizer: device communicator 'dp' is rank 0 of 2 but "
            "this rank is dp rank 1 of 2");
}

TEST(DeviceOptimizerSetupHostOnlyTest, MissingGroupsAndOtherStoresAreErrors) {
  const ParamStore store = MakeOptimizerStore();
  auto layout = MakeParamLayout(store, 1, 0, false);
  ASSERT_TRUE(layout.ok());
  const TrainConfig config = OptimizerTestConfig(true, false);
  const Status no_groups =
      CheckDeviceOptimizerSetup(config, store, *layout, nullptr, nullptr);
  EXPECT_EQ(no_groups.message(),
            "device optimizer: the process groups have no dp or mp "
            "communicator");
  EXPECT_EQ(no_groups.hint(),
            "build them with MakeProcessGroups(world, config.parallel)");
  RunLocalRanks(1, [&](Communicator& world) {
    ProcessGroups groups =
        MakeProcessGroups(&world, search_spaces::ParallelConfig{});
    ParamStore other;
    ParamInfo w;
    w.name = "decoder.final_layernorm.weight";
    w.global_shape = {4};
    other.Add(w);
    other.Finalize();
    const Status st =
        CheckDeviceOptimizerSetup(config, other, *layout, &groups, nullptr);
    EXPECT_EQ(st.message(),
              "device optimizer: the device params hold 321 parameters but "
              "the store has 4");
    EXPECT_EQ(st.hint(), "create the DeviceParams from the same ParamStore");
  });
}

// ---- Sharded DeviceParams on one rank (device; no collective needed) ----

// dp = 3, as ParamLayoutHostOnlyTest: each rank's AdamW and norm segments
// are its pieces, with their tensors' weight decay and norm flag.
TEST(DeviceParamsShardTest, SegmentsAreTheShardPieces) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const ParamStore store = MakeOptimizerStore();
  struct Want {
    std::vector<int64_t> adam_counts;
    std::vector<float> decays;
    std::vector<int64_t> norm_counts;
  };
  const std::vector<Want> want = {
      {{256}, {0.1f}, {256}},
      {{44, 5}, {0.1f, 0.0f}, {44, 5}},
      // The replicated copy [9] is updated but not counted in the norm.
      {{7, 9}, {0.0f, 0.0f}, {7}},
  };
  for (int r = 0; r < 3; ++r) {
    auto params = DeviceParams::Create(store, 3, r, true);
    ASSERT_TRUE(params.ok()) << params.status().message();
    EXPECT_EQ((*params)->shard_begin(), 256 * r);
    EXPECT_EQ((*params)->shard_end(), 256 * (r + 1));
    const std::vector<AdamWSegment> adam = (*params)->AdamSegments(store, 0.1f);
    const std::vector<GradSegment> norm = (*params)->NormSegments(store);
    ASSERT_EQ(adam.size(), want[r].adam_counts.size()) << "rank " << r;
    for (size_t k = 0; k < adam.size(); ++k) {
      EXPECT_EQ(adam[k].count, want[r].adam_counts[k]) << "rank " << r;
      EXPECT_EQ(adam[k].weight_decay, want[r].decays[k]) << "rank " << r;
      // Gradients and bf16 weights index the full buffers; the master
      // weights and moments the shard.
      EXPECT_EQ(adam[k].grad - (*params)->grad_buffer(),
                adam[k].param_bf16 - (*params)->weight_buffer());
      EXPECT_EQ(adam[k].param - adam[0].param, adam[k].m - adam[0].m);
    }
    ASSERT_EQ(norm.size(), want[r].norm_counts.size()) << "rank " << r;
    for (size_t k = 0; k < norm.size(); ++k) {
      EXPECT_EQ(norm[k].count, want[r].norm_counts[k]) << "rank " << r;
    }
  }
}

// Downloads of a shard need the dp communicator of that shard's rank.
TEST(DeviceParamsShardTest, ShardedDownloadsNeedTheDpCommunicator) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  ParamStore store = MakeOptimizerStore();
  auto params = DeviceParams::Create(store, 2, 1, true);
  ASSERT_TRUE(params.ok()) << params.status().message();
  const Status none = (*params)->DownloadParams(&store);
  EXPECT_EQ(none.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(none.message(),
            "download params: this rank holds 1/2 of the optimizer state "
            "(distributed optimizer) and needs the dp communicator to gather "
            "the rest");
  EXPECT_EQ(none.hint(), "pass the device communicator over the dp group");
  FakeDeviceCommunicator wrong(0, 2);
  std::vector<float> m(store.numel()), v(store.numel());
  EXPECT_EQ(
      (*params)->DownloadMoments(store, m.data(), v.data(), &wrong).message(),
      "download moments: communicator 'dp' is rank 0 of 2 but the "
      "parameters are sharded as dp rank 1 of 2");
  // Unsharded: no communicator needed, the master weights come back.
  auto whole = DeviceParams::Create(store, 2, 1, false);
  ASSERT_TRUE(whole.ok());
  const std::vector<float> uploaded = store.flat_params();
  store.flat_params().assign(store.numel(), 0.0f);
  ASSERT_TRUE((*whole)->DownloadParams(&store).ok());
  EXPECT_EQ(store.flat_params(), uploaded);
}

// ---- One rank on the device against the CPU optimizer ----

// Writes rank `rank`'s OptimizerTestGrad for `step` into the device grads
// (padding stays zero).
Status UploadGrads(const ParamStore& store, const DeviceParams& params,
                   int rank, int64_t step) {
  std::vector<float> g(store.numel());
  for (int64_t i = 0; i < store.numel(); ++i) {
    g[i] = OptimizerTestGrad(rank, step, i);
  }
  for (int t = 0; t < store.size(); ++t) {
    const ParamInfo& info = store.info(t);
    MESHTUNE_RETURN_IF_ERROR(CopyHostToDevice(
        params.grad(store, t), g.data() + info.offset, 4 * info.numel));
  }
  return Status::Ok();
}

constexpr int64_t kSteps = 4;

void ExpectOneRankMatchesCpu(bool clip) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const TrainConfig config = OptimizerTestConfig(clip, false);
  const testing::CpuRun cpu = testing::RunCpuOptimizer(config, kSteps, 1);
  RunLocalRanks(1, [&](Communicator& world) {
    ProcessGroups groups = MakeProcessGroups(&world, config.parallel);
    ParamStore store = MakeOptimizerStore();
    auto params = DeviceParams::Create(store);
    ASSERT_TRUE(params.ok()) << params.status().message();
    auto opt =
        DeviceOptimizer::Create(config, store, params->get(), &groups, nullptr);
    ASSERT_TRUE(opt.ok()) << opt.status().message();
    EXPECT_EQ((*opt)->state_bytes(), 12 * 768);
    for (int64_t it = 1; it <= kSteps; ++it) {
      ASSERT_TRUE(UploadGrads(store, **params, 0, it).ok());
      auto step = (*opt)->Step(it);
      ASSERT_TRUE(step.ok()) << step.status().message();
      const StepResult& want = cpu.steps[it - 1];
      EXPECT_EQ(step->lr, want.lr) << "step " << it;
      EXPECT_NEAR(step->grad_norm, want.grad_norm, 1e-6 * want.grad_norm);
      EXPECT_TRUE(step->finite);
      // Norm ≈ 6: the clip_grad = 1 run clips every step.
      EXPECT_GT(step->grad_norm, 1.0);
    }
    EXPECT_EQ((*opt)->steps_taken(), kSteps);
    std::vector<float> m(store.numel()), v(store.numel());
    ASSERT_TRUE((*opt)->GatherState(&store, m.data(), v.data()).ok());
    EXPECT_TRUE(CloseFp32(store.flat_params(), cpu.params));
    EXPECT_TRUE(CloseFp32(m, cpu.m));
    EXPECT_TRUE(CloseFp32(v, cpu.v));
    // The bf16 copy the model reads is the rounded master weights.
    for (int t = 0; t < store.size(); ++t) {
      const ParamInfo& info = store.info(t);
      std::vector<Bf16> w(info.numel);
      ASSERT_TRUE(CopyDeviceToHost(w.data(), (*params)->weight(store, t),
                                   2 * info.numel)
                      .ok());
      for (int64_t k = 0; k < info.numel; ++k) {
        ASSERT_EQ(Bf16ToFloat(w[k]),
                  RoundToBf16(store.flat_params()[info.offset + k]))
            << info.name << " element " << k;
      }
    }
  });
}

TEST(DeviceOptimizerTest, OneRankMatchesCpuOptimizerWithClipping) {
  ExpectOneRankMatchesCpu(true);
}

TEST(DeviceOptimizerTest, OneRankMatchesCpuOptimizerWithoutClipping) {
  ExpectOneRankMatchesCpu(false);
}

TEST(DeviceOptimizerTest, NonFiniteNormSkipsTheUpdate) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const TrainConfig config = OptimizerTestConfig(true, false);
  RunLocalRanks(1, [&](Communicator& world) {
    ProcessGroups groups = MakeProcessGroups(&world, config.parallel);
    ParamStore store = MakeOptimizerStore();
    const std::vector<float> before = store.flat_params();
    auto params = DeviceParams::Create(store);
    ASSERT_TRUE(params.ok());
    auto opt =
        DeviceOptimizer::Create(config, store, params->get(), &groups, nullptr);
    ASSERT_TRUE(opt.ok());
    ASSERT_TRUE(UploadGrads(store, **params, 0, 1).ok());
    const float nan = std::numeric_limits<float>::quiet_NaN();
    ASSERT_TRUE(CopyHostToDevice((*params)->grad(store, 1), &nan, 4).ok());
    auto step = (*opt)->Step(1);
    ASSERT_TRUE(step.ok());
    EXPECT_FALSE(step->finite);
    EXPECT_EQ((*opt)->steps_taken(), 0);
    std::vector<float> m(store.numel()), v(store.numel());
    ASSERT_TRUE((*opt)->GatherState(&store, m.data(), v.data()).ok());
    EXPECT_EQ(store.flat_params(), before);
    EXPECT_EQ(m, std::vector<float>(store.numel(), 0.0f));
    EXPECT_EQ(v, std::vector<float>(store.numel(), 0.0f));
  });
}

TEST(DeviceOptimizerTest, BadArgumentsAreErrors) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const TrainConfig config = OptimizerTestConfig(true, false);
  RunLocalRanks(1, [&](Communicator& world) {
    ProcessGroups groups = MakeProcessGroups(&world, config.parallel);
    ParamStore store = MakeOptimizerStore();
    auto none =
        DeviceOptimizer::Create(config, store, nullptr, &groups, nullptr);
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.status().message(), "device optimizer: no device params");
    auto params = DeviceParams::Create(store);
    ASSERT_TRUE(params.ok());
    auto opt =
        DeviceOptimizer::Create(config, store, params->get(), &groups, nullptr);
    ASSERT_TRUE(opt.ok());
    auto step = (*opt)->Step(0);
    ASSERT_FALSE(step.ok());
    EXPECT_EQ(step.status().message(),
              "device optimizer: iteration 0 is not >= 1");
    EXPECT_EQ((*opt)->ReduceBucket(0, 769).message(),
              "reduce bucket: main grads [0, 769) are not a range inside the "
              "buffer [0, 768)");
  });
}

}  // namespace
}  // namespace meshtune::engine::cuda
