// Selective recompute time per --recompute-modules entry
// (costmodel/compute_model.h SelectiveRecomputeTime_s), against the GEMM and
// elementwise times it is made of.
#include "costmodel/compute_model.h"

#include <gtest/gtest.h>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/model_options.h"
#include "search_spaces/presets/presets.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::Precision;

TEST(SelectiveRecompute, DenseMlpIsItsGemmsAndActivation) {
  const search_spaces::ClusterSpec h100 = testing::H100Cluster();
  const DatasheetCalibration cal(h100);
  const ModelOptions o;
  // LLaMA-3 8B shapes, one micro-batch of 4096 tokens, tp 1.
  const search_spaces::ModelSpec m =
      testing::Llama(32, 4096, 32, 8, 14336, 128256, 4096);
  search_spaces::ParallelConfig c;
  const LayerCompute lc =
      LayerComputeTime(m, c, 4096, Precision::kBf16,
                       LayerKind{Mixer::kAttention, Mlp::kDense}, cal, o);
  // fc1 (gate and up) [4096, 2·14336]·[4096], fc2 [4096, 4096]·[14336],
  // SwiGLU over 4096·14336 elements.
  const double mlp =
      cal.GemmTime_s(4096, 2 * 14336, 4096, Precision::kBf16, o) +
      cal.GemmTime_s(4096, 4096, 14336, Precision::kBf16, o) +
      cal.ElementwiseTime_s(ElementwiseOp::kSwiglu, 4096.0 * 14336, false, o);
  EXPECT_NEAR(SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeMlp), mlp,
              1e-15);
  EXPECT_DOUBLE_EQ(
      SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeCoreAttn),
      lc.attn_fwd_s);
  // Two blocks' RMSNorm over [4096, 4096].
  EXPECT_NEAR(
      SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeLayernorm),
      cal.ElementwiseTime_s(ElementwiseOp::kNorm, 2 * 4096.0 * 4096, false, o),
      1e-15);
  // Modules add up; a dense layer has no MoE parts.
  EXPECT_NEAR(
      SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeMlp |
                                       search_spaces::kRecomputeCoreAttn |
                                       search_spaces::kRecomputeMoe),
      mlp + lc.attn_fwd_s, 1e-15);
  EXPECT_LT(mlp + lc.attn_fwd_s, lc.fwd_s());
}

TEST(SelectiveRecompute, MoeBlockContainsItsActivationAndSharedExperts) {
  const search_spaces::ClusterSpec h100 = testing::H100Cluster();
  const DatasheetCalibration cal(h100);
  const ModelOptions o;
  search_spaces::ModelSpec m =
      testing::Llama(8, 2048, 16, 4, 6144, 32000, 4096);
  m.num_experts = 64;
  m.moe_router_topk = 6;
  m.moe_ffn_hidden_size = 1024;
  m.moe_shared_expert_intermediate_size = 2048;
  search_spaces::ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  const LayerCompute lc =
      LayerComputeTime(m, c, 4096, Precision::kBf16,
                       LayerKind{Mixer::kAttention, Mlp::kMoe}, cal, o);
  const double moe = SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeMoe);
  const double act =
      SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeMoeAct);
  const double shared =
      SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeSharedExperts);
  EXPECT_GT(act, 0.0);
  // Shared expert: a dense SwiGLU MLP of width 2048 on all 4096 tokens.
  EXPECT_NEAR(shared,
              cal.GemmTime_s(4096, 2 * 2048, 2048, Precision::kBf16, o) +
                  cal.GemmTime_s(4096, 2048, 2048, Precision::kBf16, o) +
                  cal.ElementwiseTime_s(ElementwiseOp::kSwiglu, 4096.0 * 2048,
                                        false, o),
              1e-15);
  EXPECT_GT(moe, act + shared);
  // moe already holds its activation and shared experts: not counted twice.
  EXPECT_DOUBLE_EQ(
      SelectiveRecomputeTime_s(lc, search_spaces::kRecomputeMoe |
                                       search_spaces::kRecomputeMoeAct |
                                       search_spaces::kRecomputeSharedExperts),
      moe);
  EXPECT_EQ(lc.mlp_fwd_s, 0.0);
}

// Mamba-2 mixer: the chunked scan is Megatron's 7·d_in·N FLOPs per token
// on the CUDA cores (Calibration::ScanTime_s), backward twice the forward;
// with the mamba_scan refinement off, a 16-bit GEMM of the same FLOPs.
TEST(MambaMixer, ScanRunsOnTheCudaCores) {
  const search_spaces::ClusterSpec h100 = testing::H100Cluster();
  const DatasheetCalibration cal(h100);
  // Nemotron 3 Nano's mixer: hidden 2688, 64 heads of 64 (d_in 4096),
  // 8 groups, state 128.
  search_spaces::ModelSpec m =
      testing::Llama(52, 2688, 32, 2, 1856, 131072, 8192);
  m.mamba_num_heads = 64;
  m.mamba_head_dim = 64;
  m.mamba_num_groups = 8;
  m.mamba_state_dim = 128;
  search_spaces::ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  const LayerKind mamba{Mixer::kMamba, Mlp::kNone};
  const LayerCompute lc = LayerComputeTime(
      m, c, 8192, Precision::kFp8Tensorwise, mamba, cal, ModelOptions());
  // 7 · 8192 tokens · 4096/2 channels · 128 = 15.03 GFLOP.
  const double scan_flops = 7.0 * 8192 * 2048 * 128;
  EXPECT_DOUBLE_EQ(lc.attn_fwd_s, cal.ScanTime_s(scan_flops, ModelOptions()));
  EXPECT_DOUBLE_EQ(lc.attn_bwd_s, 2 * lc.attn_fwd_s);
  // 15.03e9 / (67e12 · 0.38) = 0.590 ms.
  EXPECT_NEAR(lc.attn_fwd_s, 0.5904e-3, 1e-6);

  ModelOptions off;
  off.Disable(Refinement::kMambaScanCudaCores);
  const LayerCompute gemm =
      LayerComputeTime(m, c, 8192, Precision::kFp8Tensorwise, mamba, cal, off);
  // [8192, 448]·[448, 2048] in bf16 whatever the GEMM recipe.
  EXPECT_DOUBLE_EQ(gemm.attn_fwd_s,
                   cal.GemmTime_s(8192, 2048, 448, Precision::kBf16, off));
  // Off, the scan looks about 30× faster than it runs.
  EXPECT_GT(lc.attn_fwd_s / gemm.attn_fwd_s, 10.0);
}

// --qk-layernorm adds a norm over every local query and key head: for
// Qwen3-30B-A3B's attention (32 query heads and 4 KV groups of 128 on
// hidden 2048) at tp 2, 4096 tokens · (4096 + 512)/2 elements.
TEST(QkLayernorm, NormsTheLocalQueryAndKeyHeads) {
  const search_spaces::ClusterSpec h100 = testing::H100Cluster();
  const DatasheetCalibration cal(h100);
  const ModelOptions o;
  search_spaces::ModelSpec m =
      testing::Llama(48, 2048, 32, 4, 6144, 151936, 4096);
  m.kv_channels = 128;
  search_spaces::ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  const LayerKind dense{Mixer::kAttention, Mlp::kDense};
  const LayerCompute without =
      LayerComputeTime(m, c, 4096, Precision::kBf16, dense, cal, o);
  m.qk_layernorm = true;
  const LayerCompute with =
      LayerComputeTime(m, c, 4096, Precision::kBf16, dense, cal, o);
  const double elements = 4096.0 * (4096 + 512) / 2;
  EXPECT_NEAR(with.elem_fwd_s - without.elem_fwd_s,
              cal.ElementwiseTime_s(ElementwiseOp::kNorm, elements, false, o),
              1e-15);
  EXPECT_NEAR(with.elem_bwd_s - without.elem_bwd_s,
              cal.ElementwiseTime_s(ElementwiseOp::kNorm, elements, true, o),
              1e-15);
  EXPECT_EQ(with.gemm_fwd_s, without.gemm_fwd_s);
}

// --fp8-dot-product-attention: the core attention of attention and MLA
// layers at 1/1.6 of its 16-bit time (FlashAttention-3: 740 TFLOP/s BF16,
// ~1.2 PFLOP/s FP8); Mamba's scan, also in attn_*_s, keeps its time.
TEST(Fp8CoreAttention, DividesAttentionAndMlaCoreAttentionOnly) {
  EXPECT_EQ(kFp8AttentionSpeedup, 1.6);
  LayerCompute lc;
  lc.gemm_fwd_s = 1.0;
  lc.attn_fwd_s = 0.8;
  lc.attn_bwd_s = 1.6;
  LayerCompute gqa = lc;
  UseFp8CoreAttention({Mixer::kAttention, Mlp::kMoe}, &gqa);
  EXPECT_DOUBLE_EQ(gqa.attn_fwd_s, 0.5);
  EXPECT_DOUBLE_EQ(gqa.attn_bwd_s, 1.0);
  EXPECT_EQ(gqa.gemm_fwd_s, 1.0);
  LayerCompute mla = lc;
  UseFp8CoreAttention({Mixer::kMla, Mlp::kDense}, &mla);
  EXPECT_DOUBLE_EQ(mla.attn_fwd_s, 0.5);
  LayerCompute mamba = lc;
  UseFp8CoreAttention({Mixer::kMamba, Mlp::kNone}, &mamba);
  EXPECT_EQ(mamba.attn_fwd_s, 0.8);
  EXPECT_EQ(mamba.attn_bwd_s, 1.6);
}

// The expert GEMMs go through Calibration::GroupedGemmTime_s: on a B300
// without the op fuser they take 1.25x their dense time, with it (MXFP8)
// the dense time; nothing else in the layer moves.
TEST(ExpertGemms, FusedGroupedMlpReachesBlackwellUltrasEfficiency) {
  auto b300 = search_spaces::ResolveCluster("b300");
  ASSERT_TRUE(b300.ok());
  const DatasheetCalibration cal(*b300);
  const ModelOptions o;
  search_spaces::ModelSpec m =
      testing::Llama(48, 2048, 32, 4, 6144, 151936, 4096);
  m.kv_channels = 128;
  m.num_experts = 128;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 768;
  search_spaces::ParallelConfig c;
  c.ep = 8;
  c.mbs = 4;
  const LayerKind moe{Mixer::kAttention, Mlp::kMoe};
  const LayerCompute eager =
      LayerComputeTime(m, c, 4096, Precision::kMxfp8, moe, cal, o);
  m.use_transformer_engine_op_fuser = true;
  const LayerCompute fused =
      LayerComputeTime(m, c, 4096, Precision::kMxfp8, moe, cal, o);
  // 16 local experts, fc1 [T_e, 1536]·[2048] and fc2 [T_e, 2048]·[768]
  // forward, each expert's rows T_e = TokensPerLocalExpert.
  const int64_t te = static_cast<int64_t>(TokensPerLocalExpert(m, c, 4096, o));
  const double fwd =
      16 * (cal.GemmTime_s(te, 1536, 2048, Precision::kMxfp8, o) +
            cal.GemmTime_s(te, 2048, 768, Precision::kMxfp8, o));
  EXPECT_NEAR(eager.gemm_fwd_s - fused.gemm_fwd_s, fwd * (0.90 / 0.72 - 1),
              1e-12);
  EXPECT_EQ(eager.attn_fwd_s, fused.attn_fwd_s);
  EXPECT_EQ(eager.elem_fwd_s, fused.elem_fwd_s);
  // The CuTeDSL fusion is an MXFP8 kernel: other recipes keep GroupedLinear.
  EXPECT_EQ(LayerComputeTime(m, c, 4096, Precision::kFp8Tensorwise, moe, cal, o)
                .gemm_fwd_s,
            [&] {
              search_spaces::ModelSpec plain = m;
              plain.use_transformer_engine_op_fuser = false;
              return LayerComputeTime(plain, c, 4096, Precision::kFp8Tensorwise,
                                      moe, cal, o)
                  .gemm_fwd_s;
            }());
}

}  // namespace
}  // namespace meshtune::costmodel
