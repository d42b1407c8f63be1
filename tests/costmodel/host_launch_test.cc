// Host launches (costmodel/host_launch.h): the per-layer launch times by
// hand from the constants, which modules CUDA graphs remove, and the
// estimator's host_s: the launches beyond each phase's GPU work, zero for a
// GPU-bound dense model and for a full-iteration graph.
#include "costmodel/host_launch.h"

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "costmodel/model_options.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::CudaGraphImpl;
using search_spaces::CudaGraphs;
using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::TokenDispatcher;

// Qwen3-30B-A3B's MoE shapes: 48 layers, h 2048, 128 experts top-8 of
// f_e 768, GQA 32/4 with head dim 128.
ModelSpec Qwen3Moe() {
  ModelSpec m = testing::Llama(48, 2048, 32, 4, 768, 151936, 4096);
  m.kv_channels = 128;
  m.num_experts = 128;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 768;
  m.moe_token_dispatcher_type = TokenDispatcher::kAlltoall;
  return m;
}

constexpr LayerKind kMoeLayer{Mixer::kAttention, Mlp::kMoe};

// Qwen3Moe's step on 8 GPUs at mbs 1: gbs 64 of 4096 tokens, ep8 dp8 with
// the distributed optimizer (8 micro-batches per step).
struct Mbs1Step {
  search_spaces::TrainingSpec training;
  ParallelConfig config;
};
Mbs1Step Qwen3Mbs1Step() {
  Mbs1Step s;
  s.training.num_gpus = 8;
  s.training.global_batch_size = 64;
  s.training.seq_length = 4096;
  s.config.dp = 8;
  s.config.ep = 8;
  s.config.dist_opt = true;
  return s;
}

TEST(HostLaunch, EagerMoeLayerPaysEveryModuleAndEachLocalExpert) {
  ParallelConfig c;
  c.ep = 8;
  const HostLaunch h = LayerHostLaunch(Qwen3Moe(), c, kMoeLayer, {}, false);
  // attention + router + preprocess at 0.7 ms, 128/8 = 16 experts at
  // 0.12 ms: 2.1 + 1.92 = 4.02 ms; backward twice that.
  EXPECT_NEAR(h.fwd_s, 4.02e-3, 1e-12);
  EXPECT_NEAR(h.bwd_s, 8.04e-3, 1e-12);
  // The alltoall dispatcher waits on the host for the split sizes.
  EXPECT_NEAR(h.sync_fwd_s, 1.0e-3, 1e-12);
}

// The EP overlap's combined 1F1B launches the eager modules once more in
// backward (schedule nodes and the delayed weight-gradient pass).
TEST(HostLaunch, EpOverlapAddsABackwardLaunchPass) {
  ParallelConfig c;
  c.ep = 8;
  const HostLaunch h = LayerHostLaunch(Qwen3Moe(), c, kMoeLayer, {}, true);
  EXPECT_NEAR(h.fwd_s, 4.02e-3, 1e-12);
  // (2 + 1) · 4.02 ms.
  EXPECT_NEAR(h.bwd_s, 12.06e-3, 1e-12);
  EXPECT_NEAR(h.sync_fwd_s, 1.0e-3, 1e-12);
  // Nothing eager, nothing to launch again.
  const CudaGraphs step{CudaGraphImpl::kLocal,
                        search_spaces::kGraphFullIteration};
  EXPECT_EQ(LayerHostLaunch(Qwen3Moe(), c, kMoeLayer, step, true).bwd_s, 0.0);
}

// A slower host (Grace: ClusterSpec::host_launch_factor 1.5) takes longer
// for every launch, the sync's included.
TEST(HostLaunch, HostFactorScalesEveryTerm) {
  ParallelConfig c;
  c.ep = 8;
  const HostLaunch h =
      LayerHostLaunch(Qwen3Moe(), c, kMoeLayer, {}, false, 1.5);
  EXPECT_NEAR(h.fwd_s, 1.5 * 4.02e-3, 1e-12);
  EXPECT_NEAR(h.bwd_s, 1.5 * 8.04e-3, 1e-12);
  EXPECT_NEAR(h.sync_fwd_s, 1.5e-3, 1e-12);
}

TEST(HostLaunch, GraphsRemoveTheModulesTheyCapture) {
  ParallelConfig c;
  c.ep = 16;
  ModelSpec m = Qwen3Moe();
  m.moe_token_dispatcher_type = TokenDispatcher::kFlex;
  const CudaGraphs te{CudaGraphImpl::kTransformerEngine,
                      search_spaces::kGraphAttn |
                          search_spaces::kGraphMoeRouter |
                          search_spaces::kGraphMoePreprocess};
  const HostLaunch h = LayerHostLaunch(m, c, kMoeLayer, te, false);
  // Only the 8 local experts stay eager; flex has no host sync.
  EXPECT_NEAR(h.fwd_s, 8 * 0.12e-3, 1e-12);
  EXPECT_EQ(h.sync_fwd_s, 0.0);
  // Padded capacity lets a whole-layer graph hold the experts too.
  m.moe_expert_capacity_factor = 1.0;
  m.moe_pad_expert_input_to_capacity = true;
  const CudaGraphs layers{CudaGraphImpl::kTransformerEngine, 0};
  EXPECT_EQ(LayerHostLaunch(m, c, kMoeLayer, layers, false).fwd_s, 0.0);
  const CudaGraphs step{CudaGraphImpl::kLocal,
                        search_spaces::kGraphFullIteration};
  const HostLaunch none =
      LayerHostLaunch(Qwen3Moe(), c, kMoeLayer, step, false);
  EXPECT_EQ(none.fwd_s + none.bwd_s + none.sync_fwd_s, 0.0);
}

TEST(HostLaunch, DenseAndMambaLayers) {
  const ModelSpec m = testing::Llama(32, 4096, 32, 8, 14336, 32000, 4096);
  const HostLaunch dense =
      LayerHostLaunch(m, {}, {Mixer::kAttention, Mlp::kDense}, {}, false);
  EXPECT_NEAR(dense.fwd_s, 1.4e-3, 1e-12);
  EXPECT_EQ(dense.sync_fwd_s, 0.0);
  const CudaGraphs mamba{CudaGraphImpl::kTransformerEngine,
                         search_spaces::kGraphMamba};
  EXPECT_EQ(
      LayerHostLaunch(m, {}, {Mixer::kMamba, Mlp::kNone}, mamba, false).fwd_s,
      0.0);
  EXPECT_NEAR(
      LayerHostLaunch(m, {}, {Mixer::kMamba, Mlp::kNone}, {}, false).fwd_s,
      0.7e-3, 1e-12);
}

TEST(HostLaunch, HostWaitIsTheExcessOverTheGpuWork) {
  EXPECT_DOUBLE_EQ(HostWait_s(3e-3, 1e-3), 2e-3);
  EXPECT_EQ(HostWait_s(1e-3, 3e-3), 0.0);
}

// Qwen3-30B-A3B at mbs 1 on 8 H100s (ep8): each layer's GPU work is a few
// milliseconds, shorter than its eager launches, so the estimate waits for
// the host; CUDA graphs shorten the wait and a full-iteration graph
// removes it, and the refinement switched off leaves the rest unchanged.
TEST(HostLaunch, SmallMoeAtMbs1WaitsForTheHost) {
  const DatasheetCalibration cal(testing::H100Cluster());
  const ModelSpec m = Qwen3Moe();
  auto [t, c] = Qwen3Mbs1Step();
  const auto cluster = testing::H100Cluster();
  const Estimate eager = EstimateConfig(m, cluster, t, c, cal, {});
  ModelOptions off;
  off.Disable(Refinement::kHostLaunch);
  const Estimate ignored = EstimateConfig(m, cluster, t, c, cal, off);
  EXPECT_GT(eager.time.host_s, 0.0);
  EXPECT_EQ(ignored.time.host_s, 0.0);
  EXPECT_NEAR(eager.step_time_s - ignored.step_time_s, eager.time.host_s, 1e-9);
  // At least the alltoall syncs: 48 layers x 8 micro-batches x 1 ms.
  EXPECT_GE(eager.time.host_s, 48 * 8 * 1e-3);

  t.cuda_graphs = {CudaGraphImpl::kTransformerEngine,
                   search_spaces::kGraphAttn | search_spaces::kGraphMoeRouter |
                       search_spaces::kGraphMoePreprocess};
  const Estimate partial = EstimateConfig(m, cluster, t, c, cal, {});
  EXPECT_LT(partial.time.host_s, eager.time.host_s);
  t.cuda_graphs = {CudaGraphImpl::kLocal, search_spaces::kGraphFullIteration};
  const Estimate graphed = EstimateConfig(m, cluster, t, c, cal, {});
  EXPECT_EQ(graphed.time.host_s, 0.0);
  EXPECT_NEAR(graphed.step_time_s, ignored.step_time_s, 1e-12);
}

// The estimator takes the host's speed from the cluster: on a host twice
// as slow every layer phase is still host-bound at mbs 1 and waits longer.
TEST(HostLaunch, EstimatorUsesTheClustersHostFactor) {
  const auto x86 = testing::H100Cluster();
  auto slow = x86;
  slow.host_launch_factor = 2.0;
  const DatasheetCalibration cal(x86);
  const auto [t, c] = Qwen3Mbs1Step();
  const Estimate fast = EstimateConfig(Qwen3Moe(), x86, t, c, cal, {});
  const Estimate grace = EstimateConfig(Qwen3Moe(), slow, t, c, cal, {});
  // host_s = Σ(launches − GPU work) + syncs: doubling the launches adds at
  // least one more copy of them beyond the GPU work.
  EXPECT_GT(grace.time.host_s, 2.0 * fast.time.host_s);
  EXPECT_NEAR(grace.step_time_s - fast.step_time_s,
              grace.time.host_s - fast.time.host_s, 1e-9);
}

TEST(HostLaunch, LargeDenseLayersAreGpuBound) {
  const DatasheetCalibration cal(testing::H100Cluster());
  const ModelSpec m = testing::Llama(80, 8192, 64, 8, 28672, 128256, 4096);
  search_spaces::TrainingSpec t;
  t.num_gpus = 64;
  t.global_batch_size = 128;
  t.seq_length = 4096;
  ParallelConfig c;
  c.tp = 8;
  c.sp = true;
  c.pp = 4;
  c.dp = 2;
  c.dist_opt = true;
  const Estimate e = EstimateConfig(m, testing::H100Cluster(), t, c, cal, {});
  EXPECT_EQ(e.time.host_s, 0.0);
}

}  // namespace
}  // namespace meshtune::costmodel
