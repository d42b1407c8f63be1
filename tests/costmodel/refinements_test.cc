// One test per fidelity refinement of issue 3, each against its formula:
// fp8 split accumulator, flash-attention backward efficiency, fp32
// cross-entropy bytes, interleaved p2p overlap, TP comm overlap
// (userbuffers), MoE load imbalance, GQA/SwiGLU/RoPE shapes, NVL72 domains.
#include <gtest/gtest.h>

#include <cmath>

#include "costmodel/comm_model.h"
#include "costmodel/compute_model.h"
#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "costmodel/model_options.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::Precision;
using search_spaces::TrainingSpec;

ModelOptions Without(Refinement r) {
  ModelOptions o;
  o.Disable(r);
  return o;
}

// LLaMA-2 7B shapes at tp1, mbs1, seq 4096.
ModelSpec Llama7b() {
  return testing::Llama(32, 4096, 32, 32, 11008, 32000, 4096);
}

TEST(Fp8SplitAccumulator, BackwardGemmsAre1_15xSlowerOnHopperOnly) {
  const DatasheetCalibration h100(testing::H100Cluster());
  const ModelSpec m = Llama7b();
  const ParallelConfig c;
  const LayerCompute on =
      LayerComputeTime(m, c, 4096, Precision::kFp8, false, h100, {});
  const LayerCompute off =
      LayerComputeTime(m, c, 4096, Precision::kFp8, false, h100,
                       Without(Refinement::kFp8SplitAccumulator));
  EXPECT_DOUBLE_EQ(on.gemm_fwd_s, off.gemm_fwd_s);
  EXPECT_NEAR(on.gemm_bwd_s / off.gemm_bwd_s,
              DatasheetCalibration::kHopperFp8SplitAccumulatorSlowdown, 1e-12);
  // bf16 GEMMs have no split-accumulator mode.
  const LayerCompute bf16 =
      LayerComputeTime(m, c, 4096, Precision::kBf16, false, h100, {});
  const LayerCompute bf16_off =
      LayerComputeTime(m, c, 4096, Precision::kBf16, false, h100,
                       Without(Refinement::kFp8SplitAccumulator));
  EXPECT_DOUBLE_EQ(bf16.gemm_bwd_s, bf16_off.gemm_bwd_s);
  // Blackwell (bf16 peak >= 1500 TFLOP/s) has no fast-accumulation mode.
  search_spaces::ClusterSpec b200 = testing::H100Cluster();
  b200.gpu.peak_bf16_tflops = 2250;
  b200.gpu.peak_fp8_tflops = 4500;
  EXPECT_EQ(DatasheetCalibration(b200).Fp8BackwardGemmSlowdown({}), 1.0);
  EXPECT_EQ(h100.Fp8BackwardGemmSlowdown({}), 1.15);
}

TEST(AttentionBackward, RunsAt63Over73OfTheForwardEfficiency) {
  const DatasheetCalibration cal(testing::H100Cluster());
  // Large enough that the size factor is ~1 for both directions.
  const int64_t bh = 64, s = 8192, d = 128;
  const double fwd = cal.AttentionForwardTime_s(bh, s, s, d, true, {});
  const double bwd = cal.AttentionBackwardTime_s(bh, s, s, d, true, {});
  const double bwd_off = cal.AttentionBackwardTime_s(
      bh, s, s, d, true, Without(Refinement::kAttentionBackwardEfficiency));
  // Backward = 2.5x the forward FLOPs at 0.86x the efficiency.
  EXPECT_NEAR(bwd / fwd, 2.5 / DatasheetCalibration::kAttentionBackwardRelative,
              0.01);
  EXPECT_NEAR(bwd / bwd_off,
              1.0 / DatasheetCalibration::kAttentionBackwardRelative, 1e-9);
  // Forward FLOPs 4·bh·s²·d·½ at 0.8 × ceiling × kernel efficiency, with
  // the size ramp F0 = 6.41 µs of the bf16 peak (6.34 GFLOP).
  const double eff =
      0.8 * (794.5 / 989) * DatasheetCalibration::kHopperKernelEfficiency;
  const double flops = 4.0 * bh * s * s * d * 0.5;
  EXPECT_NEAR(fwd, flops / (989e12 * eff) * (1 + 6.3397e9 / flops), 1e-9);
}

TEST(CrossEntropy, StreamsFp32LogitsAt38BytesForwardAnd14Backward) {
  const DatasheetCalibration cal(testing::H100Cluster());
  const ModelSpec m = testing::Llama(32, 4096, 32, 8, 14336, 128256, 8192);
  ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  const int64_t V = 128256;  // already a multiple of 128·2
  const LayerCompute lg =
      LogitsComputeTime(m, c, 8192, V, Precision::kFp8, cal, {});
  const double T = 8192, logits = T * V / 2;
  EXPECT_NEAR(lg.elem_fwd_s,
              cal.MemoryTime_s(38 * logits + 4 * T * 4096 / 2, {}), 1e-12);
  EXPECT_NEAR(lg.elem_bwd_s,
              cal.MemoryTime_s(14 * logits + 8 * T * 4096 / 2, {}), 1e-12);
  // The output GEMM stays in 16-bit in fp8 recipes: 2·T·V/t·h at bf16.
  EXPECT_NEAR(lg.gemm_fwd_s,
              cal.GemmTime_s(8192, V / 2, 4096, Precision::kBf16, {}), 1e-12);
}

// GPT-3 175B, tp8 pp8 on 64 H100s, gbs 64, SP + selective.
struct Pipeline {
  ModelSpec model = testing::Gpt(96, 12288, 96);
  search_spaces::ClusterSpec cluster = testing::H100Cluster();
  TrainingSpec training;
  ParallelConfig config;
  Pipeline() {
    training.num_gpus = 64;
    training.global_batch_size = 64;
    training.seq_length = 2048;
    config.tp = 8;
    config.pp = 8;
    config.sp = true;
    config.recompute.granularity =
        search_spaces::RecomputeGranularity::kSelective;
  }
};

TEST(PipelineP2p, InterleavedTransfersHideBehindTheNextChunk) {
  Pipeline p;
  const DatasheetCalibration cal(p.cluster);
  p.config.vpp = 3;
  const Estimate on =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal, {});
  const Estimate off =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal,
                     Without(Refinement::kPipelineP2pOverlap));
  const Estimate steady =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal,
                     Without(Refinement::kPipelineWarmupFlushP2p));
  // A 6 MiB activation crosses IB in ~0.1 ms; a 4-layer chunk takes ~10 ms:
  // the steady state hides every transfer.
  EXPECT_EQ(steady.time.pp_comm_s, 0.0);
  EXPECT_GT(off.time.pp_comm_s, 0.0);
  const CommGroup pp_group = AxisGroup(8, 8, 8);
  const double msg = cal.CollectiveTime_s(Collective::kSendRecv,
                                          2.0 * 2048 * 12288 / 8, pp_group, {});
  // The warm-up (2·7 + 2·8 = 30 chunk forwards on rank 0) and the flush
  // (30 backwards) wait for theirs (overlap_p2p_comm_warmup_flush off).
  EXPECT_NEAR(on.time.pp_comm_s, 2 * 30 * msg, 1e-12);
  // Exposed = 2·vpp messages per micro-batch without the overlap.
  EXPECT_NEAR(off.time.pp_comm_s, 64 * 2 * 3 * msg, 1e-9);
  // Without interleaving Megatron waits for its batched send/recv.
  p.config.vpp = 1;
  const Estimate plain =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal, {});
  EXPECT_NEAR(plain.time.pp_comm_s, 64 * 2 * msg, 1e-9);
}

TEST(TpCommOverlap, LeavesOneTpthOfTheSpCollectivesExposedAndAddsBuffers) {
  Pipeline p;
  const DatasheetCalibration cal(p.cluster);
  const Estimate plain =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal, {});
  p.training.tp_comm_overlap = true;
  const Estimate ub =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal, {});
  const Estimate ignored =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal,
                     Without(Refinement::kTpCommOverlapUserbuffers));
  EXPECT_DOUBLE_EQ(ignored.time.tp_comm_s, plain.time.tp_comm_s);
  EXPECT_LT(ub.time.tp_comm_s, 0.5 * plain.time.tp_comm_s);
  // Exactly 1/8 of the full (unhidden) per-layer volume: forward 2 AG + 2
  // RS, backward 4 AG + 2 RS of the [T, h] activation; the logits' three
  // small all-reduces stay as they are.
  const CommGroup tp = AxisGroup(1, 8, 8);
  const double act = 2.0 * 2048 * 12288;
  const double ag = cal.CollectiveTime_s(Collective::kAllGather, act, tp, {});
  const double rs =
      cal.CollectiveTime_s(Collective::kReduceScatter, act, tp, {});
  const double logits =
      3 * cal.CollectiveTime_s(Collective::kAllReduce, 4.0 * 2048, tp, {});
  const double per_mb = 12 * (6 * ag + 4 * rs) / 8 + logits;
  EXPECT_NEAR(ub.time.tp_comm_s, 64 * per_mb, 1e-9);
  // ... and registers ten [T, h] 16-bit userbuffers.
  EXPECT_DOUBLE_EQ(ub.memory.other_bytes - plain.memory.other_bytes,
                   10 * 2.0 * 2048 * 12288);
  EXPECT_DOUBLE_EQ(ignored.memory.other_bytes, plain.memory.other_bytes);
  // Without SP there is nothing for userbuffers to pipeline.
  p.config.sp = false;
  p.config.recompute.granularity = search_spaces::RecomputeGranularity::kFull;
  const Estimate no_sp =
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal, {});
  p.training.tp_comm_overlap = false;
  EXPECT_DOUBLE_EQ(
      no_sp.time.tp_comm_s,
      EstimateConfig(p.model, p.cluster, p.training, p.config, cal, {})
          .time.tp_comm_s);
}

TEST(MoeImbalance, BusiestExpertSetsTheExpertGemmTime) {
  const DatasheetCalibration cal(testing::H100Cluster());
  ModelSpec m = testing::Llama(32, 4096, 32, 8, 14336, 32000, 4096);
  m.num_experts = 8;
  m.moe_router_topk = 2;
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  const LayerCompute on =
      LayerComputeTime(m, c, 4096, Precision::kBf16, true, cal, {});
  const LayerCompute off =
      LayerComputeTime(m, c, 4096, Precision::kBf16, true, cal,
                       Without(Refinement::kMoeImbalance));
  // Mean load k·T·ep/E = 2·4096 tokens on the one local expert; the
  // busiest gets 1.2x: expert fc1 + fc2 forward at 9830 tokens.
  const double fe = 14336, h = 4096;
  const double router = cal.GemmTime_s(4096, 8, 4096, Precision::kBf16, {});
  const auto experts = [&](int64_t tokens) {
    return cal.GemmTime_s(tokens, 2 * fe, h, Precision::kBf16, {}) +
           cal.GemmTime_s(tokens, h, fe, Precision::kBf16, {});
  };
  const double attn_linears =
      cal.GemmTime_s(4096, (4096 + 2 * 1024), 4096, Precision::kBf16, {}) +
      cal.GemmTime_s(4096, 4096, 4096, Precision::kBf16, {});
  EXPECT_NEAR(on.gemm_fwd_s, attn_linears + router + experts(9831), 1e-12);
  EXPECT_NEAR(off.gemm_fwd_s, attn_linears + router + experts(8192), 1e-12);
}

TEST(GqaSwigluRope, LayerShapesFollowTheArchitecture) {
  const DatasheetCalibration cal(testing::A100Cluster());
  const ParallelConfig c;
  // GQA narrows the QKV GEMM to (a + 2g)·d_h columns; SwiGLU's fc1 has 2f.
  ModelSpec gqa = testing::Llama(1, 4096, 32, 8, 14336, 32000, 2048);
  const LayerCompute lc =
      LayerComputeTime(gqa, c, 2048, Precision::kBf16, false, cal, {});
  const double expect =
      cal.GemmTime_s(2048, 6144, 4096, Precision::kBf16, {}) +
      cal.GemmTime_s(2048, 4096, 4096, Precision::kBf16, {}) +
      cal.GemmTime_s(2048, 28672, 4096, Precision::kBf16, {}) +
      cal.GemmTime_s(2048, 4096, 14336, Precision::kBf16, {});
  EXPECT_NEAR(lc.gemm_fwd_s, expect, 1e-12);
  // Elementwise forward bytes: 2 RMSNorms 4 B + 2 residual adds 6 B per
  // h-element, SwiGLU 6 B per f-element, RoPE 4 B per q/k element.
  const double T = 2048;
  const double bytes =
      T * (2 * 4.0 * 4096 + 2 * 6.0 * 4096 + 6.0 * 14336 + 4.0 * (4096 + 1024));
  EXPECT_NEAR(lc.elem_fwd_s, cal.MemoryTime_s(bytes, {}), 1e-12);
}

TEST(Nvl72, TensorParallelGroupsUpTo72StayOnNvlink) {
  search_spaces::ClusterSpec gb200 = testing::H100Cluster();
  gb200.gpus_per_node = 4;
  gb200.nvlink_domain_gpus = 72;
  const CommGroup tp64 = AxisGroup(1, 64, gb200.nvlink_domain_gpus);
  EXPECT_EQ(tp64.nodes, 1);
  const DatasheetCalibration cal(gb200);
  const CommGroup across = AxisGroup(1, 64, 8);
  EXPECT_EQ(across.nodes, 8);
  // Inside the NVL72 domain the all-gather is one NVLink ring; spread over
  // 8-GPU nodes it pays the network stage on top of an NVLink stage.
  EXPECT_LT(cal.CollectiveTime_s(Collective::kAllGather, 1e9, tp64, {}),
            cal.CollectiveTime_s(Collective::kAllGather, 1e9, across, {}));
  EXPECT_NEAR(cal.CollectiveTime_s(Collective::kAllGather, 1e9, tp64, {}),
              63 * 3.4e-6 + 63.0 / 64 * (50e-6 + 1e9 / 370e9), 1e-9);
}

}  // namespace
}  // namespace meshtune::costmodel
