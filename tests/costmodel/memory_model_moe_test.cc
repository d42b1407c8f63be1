// The memory model for MoE (EP, ETP, EDP, shared/latent experts), MLA,
// Mamba-2, hybrid layers, MTP, uneven layouts and precision recipes, against
// hand-computed values (docs/sources.md §4), and the allocated peak against the
// measured B200 runs of SimuMax v1.2 (github.com/MooreThreads/SimuMax,
// docs/b200/b200_release_v1.2_summary.json; docs/accuracy.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>

#include "costmodel/compute_model.h"
#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "costmodel/memory_model.h"
#include "search_spaces/pipeline_schedule.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/training_spec.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::PipelineSchedule;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// DeepSeek-V2 shapes (docs/sources.md §1), 4 layers: 1 dense + 3 MoE.
ModelSpec DeepSeekV2Layers4() {
  ModelSpec m = testing::Llama(4, 5120, 128, 128, 12288, 102400, 4096);
  m.multi_latent_attention = true;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_head_dim = 128;
  m.qk_pos_emb_head_dim = 64;
  m.v_head_dim = 128;
  m.qk_layernorm = true;
  m.num_experts = 160;
  m.moe_router_topk = 6;
  m.moe_ffn_hidden_size = 1536;
  m.moe_shared_expert_intermediate_size = 3072;
  m.moe_layer_pattern = {0, 1, 1, 1};
  m.moe_expert_capacity_factor = 1.0;
  m.moe_pad_expert_input_to_capacity = true;
  return m;
}

constexpr double h = 5120, n = 128, E = 160, fe = 1536, fs = 3072;
// MLA parameters of one layer (§4.2), all of them.
constexpr double kMla = h * 1536 + 1536 + 1536 * n * 192 + h * 576 + 512 +
                        512 * n * 256 + n * 128 * h;
static_assert(kMla == 149227520.0, "MLA layer parameters");

TEST(MoeStageParams, DeepSeekV2Pp2Ep4FromTheRealLayers) {
  const ModelSpec m = DeepSeekV2Layers4();
  const ModelStats st = ComputeModelStats(m, 102400, 4096);
  ParallelConfig c;
  c.pp = 2;
  c.dp = 4;
  c.ep = 4;
  // Stage 1 holds layers 2, 3 (MoE) and the output layer: MLA + shared
  // experts + router + two norms per layer, the final norm, the untied output
  // layer; the routed experts split over ep 4.
  const double moe_layer_dense = kMla + 3 * h * fs + E * h + 2 * h;
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, c, 1).dense,
                   2 * moe_layer_dense + h + 102400 * h);
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, c, 1).expert,
                   2 * E * 3 * h * fe / 4);
  // Stage 0: the dense layer 0 (MLP 3·h·12288), MoE layer 1 and the
  // embedding.
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, c, 0).dense,
                   kMla + 3 * h * 12288 + 2 * h + moe_layer_dense + 102400 * h);
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, c, 0).expert, E * 3 * h * fe / 4);
  const StageLayers sl = LayersOnStage(m, c, 0);
  EXPECT_EQ(sl.layers, 2);
  EXPECT_EQ(sl.moe, 1);
  ASSERT_EQ(sl.kinds.size(), 2u);
  EXPECT_EQ(sl.kinds[0].kind, (LayerKind{Mixer::kMla, Mlp::kDense}));
  EXPECT_EQ(sl.kinds[1].kind, (LayerKind{Mixer::kMla, Mlp::kMoe}));
}

TEST(MoeStageParams, ExpertOptimizerShardsOverTheFoldedEdp) {
  // tp 2, etp 1, ep 8 over 16 GPUs: edp = 16 / (1·8·1) = 2 (Megatron's
  // expert grid), not dp·cp/ep = 1.
  ModelSpec m = DeepSeekV2Layers4();
  const ModelStats st = ComputeModelStats(m, 102400, 4096);
  ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  c.etp = 1;
  c.ep = 8;
  c.dp = 8;
  c.dist_opt = true;
  EXPECT_EQ(ExpertDataParallelSize(c), 2);
  const LocalParams lp = StageLocalParams(m, st, c, 0);
  EXPECT_DOUBLE_EQ(lp.expert, 3 * E * 3 * h * fe / 8);  // /(ep·etp)
  const PipelineSchedule sched(1, 1, 4);
  const MemoryBreakdown mb =
      StageMemory(m, st, c, 4096, Precision::kBf16, sched, 0);
  EXPECT_NEAR(mb.optimizer_bytes, lp.dense * 12 / 8 + lp.expert * 12 / 2, 1);
}

TEST(MlaActivations, PerTokenHandCount) {
  const ModelSpec m = DeepSeekV2Layers4();
  ParallelConfig c;
  const MemoryRecipe r;
  // Dense MLP part of layer 0: norm2 in + fc1 in (4h) + 6f.
  const double mlp = 4 * h + 6 * 12288.0;
  // MLA: norm in + down-proj in (4h), q latent twice (2·2·1536), kv down
  // output (2·576), kv latent (2·512) | Q, K (2·n·192 each), V, O (2·n·128
  // each), LSE (4n).
  const double mla_repl = 4 * h + 4 * 1536 + 2 * 576 + 2 * 512;
  const double mla_shard = 4 * n * 192 + 4 * n * 128 + 4 * n;
  EXPECT_EQ(mla_repl + mla_shard, 193152);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16,
                                        LayerKind{Mixer::kMla, Mlp::kDense}, r),
                   4096 * (mla_repl + mla_shard + mlp));
  // mla_up_proj recompute drops Q, K and V (2·2·n·192 + 2·n·128).
  c.recompute.granularity = RecomputeGranularity::kSelective;
  c.recompute.modules =
      search_spaces::kRecomputeCoreAttn | search_spaces::kRecomputeMlaUpProj;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16,
                                        LayerKind{Mixer::kMla, Mlp::kNone}, r),
                   4096 * (mla_repl + mla_shard - 4 * n * 192 - 2 * n * 128));
}

TEST(MoeActivations, CapacityPaddedRowsSharedExpertsAndMoeAct) {
  const ModelSpec m = DeepSeekV2Layers4();
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  const MemoryRecipe r;
  // Capacity factor 1 with padding: every local expert holds
  // ceil(k·T·ep/E) = ceil(6·4096·8/160) = 1229 rows; 20 local experts.
  EXPECT_DOUBLE_EQ(RoutedRowsPerRank(m, c, 4096), 20 * 1229.0);
  const double rows = 20 * 1229.0;
  // Per row: fc1 in 2h, fc1 out 4fe, act out 2fe; the combine's unpermute
  // keeps nothing (probs applied in the activation, Megatron-Core >= 0.13);
  // per token: norm in + out (4h), fp32 scores 4E, shared experts 6fs.
  const double routed = rows * (2 * h + 4 * fe + 2 * fe);
  const double per_token = 4 * h + 4 * E + 6 * fs;
  const LayerKind moe{Mixer::kNone, Mlp::kMoe};
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16, moe, r),
                   4096 * per_token + routed);
  // moe_act recompute discards the activation output (2fe per row).
  c.recompute.granularity = RecomputeGranularity::kSelective;
  c.recompute.modules = search_spaces::kRecomputeMoeAct;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16, moe, r),
                   4096 * per_token + routed - rows * 2 * fe);
}

// Selective modules that checkpoint a whole block keep only its input
// (Megatron --recompute-modules moe, shared_experts, layernorm, mlp). Same
// DeepSeek-V2 layer as above, bf16, no dropout: per token norm in 2h, norm
// out 2h, fp32 scores 4E, shared experts 6fs; routed rows as above.
TEST(MoeActivations, SelectiveModulesKeepTheBlockInputOnly) {
  const ModelSpec m = DeepSeekV2Layers4();
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  c.recompute.granularity = RecomputeGranularity::kSelective;
  const MemoryRecipe r;
  const double rows = 20 * 1229.0;
  const double routed = rows * (2 * h + 4 * fe + 2 * fe);
  const LayerKind moe{Mixer::kNone, Mlp::kMoe};
  auto bytes = [&](uint32_t modules) {
    c.recompute.modules = modules;
    return LayerActivationBytes(m, c, 4096, Precision::kBf16, moe, r);
  };
  // moe: the norm's input and its output (the MoE input), nothing routed.
  EXPECT_DOUBLE_EQ(bytes(search_spaces::kRecomputeMoe), 4096 * 4 * h);
  // moe + layernorm: the norm output is freed as well.
  EXPECT_DOUBLE_EQ(
      bytes(search_spaces::kRecomputeMoe | search_spaces::kRecomputeLayernorm),
      4096 * 2 * h);
  // shared_experts: their 6fs per token go, the routed rows stay.
  EXPECT_DOUBLE_EQ(bytes(search_spaces::kRecomputeSharedExperts),
                   4096 * (4 * h + 4 * E) + routed);
  // core_attn changes nothing here.
  EXPECT_DOUBLE_EQ(bytes(search_spaces::kRecomputeCoreAttn),
                   4096 * (4 * h + 4 * E + 6 * fs) + routed);
  // mlp on the dense layer (gated, f = 12288): norm2 in 2h stays; fc1 in
  // 2h, fc1 out 4f and fc2 in 2f go.
  const LayerKind dense{Mixer::kNone, Mlp::kDense};
  c.recompute.modules = search_spaces::kRecomputeCoreAttn;
  const double f = 12288;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16, dense, r),
                   4096 * (2 * h + 2 * h + 4 * f + 2 * f));
  c.recompute.modules = search_spaces::kRecomputeMlp;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16, dense, r),
                   4096 * 2 * h);
}

// The tensors a selective module frees are rebuilt for one layer at a time
// in backward: the stage's activations fall by the layer's discarded bytes
// once per layer and in-flight micro-batch, and rise by one layer's worth.
TEST(MoeActivations, SelectiveRebuildsOneLayerInBackward) {
  const ModelSpec m = DeepSeekV2Layers4();
  const ModelStats st = ComputeModelStats(m, m.vocab_size, 4096);
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  const PipelineSchedule sched(1, 1, 4);
  const StagePeak none =
      MostLoadedStage(m, st, c, 4096, Precision::kBf16, sched);
  c.recompute.granularity = RecomputeGranularity::kSelective;
  c.recompute.modules = search_spaces::kRecomputeMoe;
  const StagePeak moe =
      MostLoadedStage(m, st, c, 4096, Precision::kBf16, sched);
  const double rows = 20 * 1229.0;
  const double discarded =
      4096 * (4 * E + 6 * fs) + rows * (2 * h + 4 * fe + 2 * fe);
  // Three MoE layers, one micro-batch in flight (pp 1); one layer rebuilt.
  EXPECT_NEAR(none.memory.activations_bytes - moe.memory.activations_bytes,
              3 * discarded - discarded, 1.0);
}

TEST(MoeActivations, Mxfp8DroplessRowsKeepNoCombineInput) {
  // DeepSeek-V2 shapes, dropless with forced balancing, MXFP8: each of the
  // 20 local experts gets ceil(6·4096·8/160) = 1229 rows. A saved linear
  // input keeps one MXFP8 copy, l = 1 + 1/32. Per row: fc1 in l·h, fc1 out
  // 4fe (bf16, gated), fc2 in l·fe; the combine's unpermute saves nothing
  // (probs applied in the activation). Per token: norm in + out (4h), the
  // shared fc1's quantised input l·h, fp32 scores 4E, shared experts
  // 4fs + l·fs.
  ModelSpec m = DeepSeekV2Layers4();
  m.moe_expert_capacity_factor = 0;
  m.moe_pad_expert_input_to_capacity = false;
  m.moe_router_force_load_balancing = true;
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  const double l = 1.0 + 1.0 / 32;
  const double rows = 20 * 1229.0;
  const double per_row = l * h + 4 * fe + l * fe;
  const double per_token = 4 * h + l * h + 4 * E + 4 * fs + l * fs;
  EXPECT_DOUBLE_EQ(per_row, 13008);  // 5280 + 6144 + 1584 (hand count)
  const LayerKind moe{Mixer::kNone, Mlp::kMoe};
  EXPECT_DOUBLE_EQ(
      LayerActivationBytes(m, c, 4096, Precision::kMxfp8, moe, MemoryRecipe()),
      4096 * per_token + rows * per_row);
}

TEST(MoeLoad, ForcedBalancingRoutesExactlyTheMean) {
  // DeepSeek-V2 shapes, dropless: T = 4096 tokens, k = 6 of E = 160, ep 8,
  // tp 1: the mean per local expert is k·T·ep/E = 6·4096·8/160 = 1228.8
  // rows; the busiest gets 1.2× that (ceil 1475), forced balancing exactly
  // the mean (ceil 1229).
  ModelSpec m = DeepSeekV2Layers4();
  m.moe_expert_capacity_factor = 0;
  m.moe_pad_expert_input_to_capacity = false;
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  EXPECT_DOUBLE_EQ(MoeLoadImbalance(m, ModelOptions()), 1.2);
  EXPECT_EQ(TokensPerLocalExpert(m, c, 4096, ModelOptions()), 1475);
  m.moe_router_force_load_balancing = true;
  EXPECT_DOUBLE_EQ(MoeLoadImbalance(m, ModelOptions()), 1.0);
  EXPECT_EQ(TokensPerLocalExpert(m, c, 4096, ModelOptions()), 1229);
}

TEST(MoeActivations, EpOverlapKeepsASecondMoeWorkingSet) {
  const ModelSpec m = DeepSeekV2Layers4();
  const ModelStats st = ComputeModelStats(m, 102400, 4096);
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  const PipelineSchedule sched(1, 1, 4);
  MemoryRecipe r;
  const double base =
      StageMemory(m, st, c, 4096, Precision::kBf16, sched, 0, true, r)
          .activations_bytes;
  r.moe_ep_overlap = true;
  const double rows = 20 * 1229.0;
  EXPECT_NEAR(StageMemory(m, st, c, 4096, Precision::kBf16, sched, 0, true, r)
                      .activations_bytes -
                  base,
              rows * (2 * h + 6 * fe), 1e-3);
}

TEST(MambaActivations, HybridBlocksHoldOneNormEach) {
  // Nemotron-H 8B shapes: h 4096, 128 heads of 64, 8 groups, state 128.
  ModelSpec m = testing::Llama(4, 4096, 32, 8, 21504, 131072, 8192);
  m.activation = search_spaces::Activation::kSquaredRelu;
  m.hybrid_layer_pattern = "M*M-";
  m.mamba_num_heads = 128;
  ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  const MemoryRecipe r;
  const double hh = 4096, H = 128, P = 64, GN = 8 * 128;
  // Norm in + in_proj in (4h, ÷t with SP) | in_proj output, fp32 dt and
  // decay (8H), fp32 chunk states (4·H·P·N/128), y, out_proj input (÷t).
  const double mamba = 4 * hh / 2 + (2 * (2 * H * P + 2 * GN + H) + 8 * H +
                                     4 * H * P * 128 / 128 + 4 * H * P) /
                                        2;
  EXPECT_DOUBLE_EQ(
      LayerActivationBytes(m, c, 8192, Precision::kBf16,
                           LayerKind{Mixer::kMamba, Mlp::kNone}, r),
      8192 * mamba);
  // A GPT layer is its attention block plus its MLP block, each with one
  // norm: the two hybrid layers '*' and '-' add up to it.
  const double attn =
      LayerActivationBytes(m, c, 8192, Precision::kBf16,
                           LayerKind{Mixer::kAttention, Mlp::kNone}, r);
  const double mlp = LayerActivationBytes(
      m, c, 8192, Precision::kBf16, LayerKind{Mixer::kNone, Mlp::kDense}, r);
  EXPECT_DOUBLE_EQ(
      attn + mlp,
      LayerActivationBytes(m, c, 8192, Precision::kBf16,
                           LayerKind{Mixer::kAttention, Mlp::kDense}, r));
  // Squared ReLU (not gated): norm in + fc1 in (4h ÷ t) | fc1 out 2f + fc2
  // in 2f (÷ t).
  EXPECT_DOUBLE_EQ(mlp, 8192 * (4 * hh + 4 * 21504.0) / 2);
}

TEST(PrecisionRecipes, QuantisedCopiesOfLinearInputsAndWeights) {
  EXPECT_DOUBLE_EQ(QuantizedBytesPerElement(Precision::kFp8), 1.0);
  EXPECT_DOUBLE_EQ(QuantizedBytesPerElement(Precision::kMxfp8), 2.0625);
  EXPECT_DOUBLE_EQ(QuantizedBytesPerElement(Precision::kNvfp4), 0.5625);
  EXPECT_DOUBLE_EQ(QuantizedBytesPerElement(Precision::kBf16), 2.0);
  const ModelSpec m = testing::Llama(8, 8192, 64, 8, 28672, 128256, 4096);
  ParallelConfig c;
  const MemoryRecipe r;
  const double hh = 8192, q = 8192, kv = 1024, f = 28672, a = 64;
  for (Precision p : {Precision::kFp8, Precision::kMxfp8, Precision::kNvfp4}) {
    // Saved linear inputs keep only their column-wise copy (MXFP8: one of
    // its two, 1 + 1/32 bytes; FP8 and NVFP4 have one).
    const double l =
        p == Precision::kMxfp8 ? 1.03125 : QuantizedBytesPerElement(p);
    EXPECT_DOUBLE_EQ(SavedInputBytesPerElement(p), l) << ToString(p);
    // Linear inputs as quantised copies (QKV, proj = O copy, fc1, fc2);
    // attention (Q, K, V, O, LSE) and norm inputs in 16 bits.
    EXPECT_DOUBLE_EQ(
        LayerActivationBytes(m, c, 4096, p,
                             LayerKind{Mixer::kAttention, Mlp::kDense}, r),
        4096 * (2 * hh + l * hh + 4 * q + 4 * kv + l * q + 4 * a + 2 * hh +
                l * hh + 4 * f + l * f))
        << ToString(p);
  }
  // Weights: bf16 + a quantised copy of every linear weight; with param
  // gather only the copy (norms stay 16-bit).
  const ModelStats st = ComputeModelStats(m, 128256, 4096);
  c.pp = 2;
  c.dp = 4;
  const PipelineSchedule sched(2, 1, 4);
  const LocalParams lp = StageLocalParams(m, st, c, 0);
  const double linear = 4 * (hh * (q + 2 * kv) + q * hh + 3 * hh * f);
  EXPECT_DOUBLE_EQ(lp.linear, linear);
  MemoryRecipe gather;
  EXPECT_DOUBLE_EQ(
      StageMemory(m, st, c, 4096, Precision::kMxfp8, sched, 0, true, r)
          .weights_bytes,
      2 * lp.dense + 2.0625 * linear);
  gather.quantized_param_gather = true;
  EXPECT_DOUBLE_EQ(
      StageMemory(m, st, c, 4096, Precision::kMxfp8, sched, 0, true, gather)
          .weights_bytes,
      2 * (lp.dense - linear) + 2.0625 * linear);
}

TEST(UnevenLayouts, MtpAndEdgeStagesFromTheLayout) {
  // DeepSeek-V3-like: 61 layers (3 dense + 58 MoE) + 1 MTP depth on pp 8 ×
  // vpp 4 "Et|(tt|)*30mL": first virtual stage 1 layer, last 0 + MTP.
  ModelSpec m = DeepSeekV2Layers4();
  m.num_layers = 61;
  m.moe_layer_pattern.assign(61, 1);
  for (int i = 0; i < 3; ++i) m.moe_layer_pattern[i] = 0;
  m.mtp_num_layers = 1;
  const ModelStats st = ComputeModelStats(m, 102400, 4096);
  ParallelConfig c;
  c.pp = 8;
  c.vpp = 4;
  c.ep = 8;
  c.dp = 8;
  c.layout_first_layers = 1;
  c.layout_last_layers = 0;
  const StageLayers s0 = LayersOnStage(m, c, 0);
  EXPECT_EQ(s0.layers, 1 + 3 * 2);  // chunk 0: 1, chunks 1-3: 2 each
  EXPECT_EQ(s0.moe, 7 - 1);         // layer 0 is dense; 16, 32, 48 pairs MoE
  EXPECT_EQ(s0.mtp_depths, 0);
  const StageLayers s7 = LayersOnStage(m, c, 7);
  EXPECT_EQ(s7.layers, 3 * 2);
  EXPECT_EQ(s7.mtp_depths, 1);
  // The last stage holds the MTP depth: its glue and one MoE layer.
  const LayerParams mtp_layer =
      ParamsOfLayer(m, LayerKind{Mixer::kMla, Mlp::kMoe});
  const LayerParams glue = MtpGlueParams(m);
  ParallelConfig no_mtp_c = c;
  ModelSpec no_mtp = m;
  no_mtp.mtp_num_layers = 0;
  EXPECT_NEAR(StageLocalParams(m, st, c, 7).dense -
                  StageLocalParams(no_mtp, st, no_mtp_c, 7).dense,
              mtp_layer.tp_sharded + mtp_layer.replicated + glue.total(), 1);
  EXPECT_NEAR(StageLocalParams(m, st, c, 7).expert -
                  StageLocalParams(no_mtp, st, no_mtp_c, 7).expert,
              mtp_layer.routed_experts / 8, 1);
}

TEST(UnevenLayouts, ARepeatedMtpLayerHoldsOneDepthsWeights) {
  // The same model with two MTP depths: separate depths hold two copies of
  // the MTP weights on the last stage, a repeated layer
  // (--mtp-use-repeated-layer, Nemotron 3 Super's) one, whose activations
  // are still two depths'.
  ModelSpec m = DeepSeekV2Layers4();
  m.num_layers = 8;
  m.moe_layer_pattern.assign(8, 1);
  m.mtp_num_layers = 2;
  const ModelStats st = ComputeModelStats(m, 102400, 4096);
  ParallelConfig c;
  c.pp = 2;
  c.ep = 8;
  c.dp = 8;
  ModelSpec repeated = m, none = m;
  repeated.mtp_use_repeated_layer = true;
  none.mtp_num_layers = 0;
  const StageLayers sl = LayersOnStage(repeated, c, 1);
  EXPECT_EQ(sl.mtp_depths, 2);
  EXPECT_EQ(sl.mtp_weight_depths, 1);
  EXPECT_EQ(LayersOnStage(m, c, 1).mtp_weight_depths, 2);
  const double two = StageLocalParams(m, st, c, 1).dense -
                     StageLocalParams(none, st, c, 1).dense;
  const double one = StageLocalParams(repeated, st, c, 1).dense -
                     StageLocalParams(none, st, c, 1).dense;
  EXPECT_GT(one, 0.0);
  EXPECT_NEAR(two, 2 * one, 1e-6 * two);
  EXPECT_NEAR(StageLocalParams(m, st, c, 1).expert -
                  StageLocalParams(none, st, c, 1).expert,
              2 * (StageLocalParams(repeated, st, c, 1).expert -
                   StageLocalParams(none, st, c, 1).expert),
              1);
}

TEST(Workspaces, TeDummyWgradIsOneWeightPerDistinctShape) {
  // LLaMA-3 70B, tp 1: QKV, proj, fc1, fc2 once each in bf16, however many
  // layers; plus two 32 MiB cuBLAS workspaces (PyTorch, TE).
  const ModelSpec m = testing::Llama(12, 8192, 64, 8, 28672, 128256, 4096);
  const ModelStats st = ComputeModelStats(m, 128256, 4096);
  ParallelConfig c;
  c.dp = 8;
  const PipelineSchedule sched(1, 1, 4);
  const double one_layer =
      8192.0 * 10240 + 8192.0 * 8192 + 57344.0 * 8192 + 8192.0 * 28672;
  EXPECT_DOUBLE_EQ(
      StageMemory(m, st, c, 4096, Precision::kBf16, sched, 0).workspace_bytes,
      2 * one_layer + 64.0 * 1024 * 1024);
  MemoryRecipe off;
  off.te_dummy_wgrad = false;
  EXPECT_DOUBLE_EQ(
      StageMemory(m, st, c, 4096, Precision::kBf16, sched, 0, true, off)
          .workspace_bytes,
      64.0 * 1024 * 1024);
}

TEST(Besides, FragmentationContextAndNcclStatedPerTerm) {
  MemoryBreakdown mb;
  mb.weights_bytes = 94.0 * kGiB;
  ParallelConfig c;
  c.tp = 2;
  c.dp = 4;  // communicators: tp, dp·cp
  AddMemoryBesidesModel(c, &mb);
  EXPECT_NEAR(mb.fragmentation_bytes, 6.0 * kGiB, 1e-6 * kGiB);  // /0.94
  EXPECT_DOUBLE_EQ(mb.cuda_context_bytes, 0.5 * kGiB);
  EXPECT_DOUBLE_EQ(mb.nccl_bytes, 2 * 256.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(mb.reserved_bytes(), 100.0 * kGiB);
  EXPECT_DOUBLE_EQ(mb.total_bytes(), 101.0 * kGiB);
}

// ---- Measured: SimuMax v1.2's B200 runs (max over 8 ranks of
// torch.cuda.max_memory_allocated), each distinct topology once.
struct MeasuredRun {
  const char* name;
  bool deepseek;
  int64_t tp, pp, dp, cp, ep, seq, gbs;
  double allocated_gib;
};
constexpr MeasuredRun kRuns[] = {
    {"llama tp1 pp2 dp4", false, 1, 2, 4, 1, 1, 4096, 16, 66.55},
    {"llama tp2 dp4", false, 2, 1, 4, 1, 1, 4096, 16, 60.68},
    {"llama tp4 dp2", false, 4, 1, 2, 1, 1, 4096, 8, 39.07},
    {"llama tp8", false, 8, 1, 1, 1, 1, 4096, 4, 28.29},
    {"deepseek ep8 dp8", true, 1, 1, 8, 1, 8, 4096, 32, 45.63},
    {"deepseek ep4 pp2 dp4", true, 1, 2, 4, 1, 4, 4096, 16, 44.70},
    {"llama tp2 cp4 32k", false, 2, 1, 1, 4, 1, 32768, 4, 68.43},
    {"llama cp8 32k", false, 1, 1, 1, 8, 1, 32768, 4, 104.51},
    {"llama tp2 cp4 128k", false, 2, 1, 1, 4, 1, 131072, 4, 112.67},
    {"llama cp8 128k", false, 1, 1, 1, 8, 1, 131072, 4, 147.99},
};

TEST(MeasuredB200, AllocatedPeakOfTheMostLoadedRankWithin3Percent) {
  auto llama = search_spaces::ResolveModel("llama3-70b");
  auto deepseek = search_spaces::ResolveModel("deepseek-v2");
  auto b200 = search_spaces::ResolveCluster("b200");
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  ASSERT_TRUE(deepseek.ok()) << deepseek.status().message();
  ASSERT_TRUE(b200.ok()) << b200.status().message();
  double sum_abs_pct = 0;
  for (const MeasuredRun& run : kRuns) {
    ModelSpec m = run.deepseek ? *deepseek : *llama;
    m.num_layers = run.deepseek ? 4 : 12;
    if (run.deepseek) {
      // The row's megatron_args.
      m.moe_layer_pattern = {0, 1, 1, 1};
      m.moe_expert_capacity_factor = 1.0;
      m.moe_pad_expert_input_to_capacity = true;
      m.moe_router_num_groups = run.ep;
      m.moe_router_group_topk = 3;
      m.qk_layernorm = true;
    }
    ASSERT_TRUE(m.Validate().ok()) << run.name;
    search_spaces::TrainingSpec t;
    t.num_gpus = 8;
    t.global_batch_size = run.gbs;
    t.seq_length = run.seq;
    t.precision = Precision::kBf16;
    ParallelConfig c;
    c.tp = run.tp;
    c.pp = run.pp;
    c.dp = run.dp;
    c.cp = run.cp;
    c.ep = run.ep;
    c.sp = run.tp > 1;
    c.mbs = 1;
    c.dist_opt = true;
    const DatasheetCalibration cal(*b200);
    const Estimate est = EstimateConfig(m, *b200, t, c, cal);
    // EstimateConfig's memory is the most loaded stage with the training's
    // recipe (Megatron defaults: no CE fusion, p2p CP).
    const ModelStats st =
        ComputeModelStats(m, PaddedVocabSize(m.vocab_size, c.tp),
                          std::max(m.seq_length, run.seq));
    const PipelineSchedule sched(c.pp, 1, run.gbs / run.dp);
    EXPECT_DOUBLE_EQ(est.memory.allocated_bytes(),
                     MostLoadedStage(m, st, c, run.seq, t.precision, sched,
                                     true, MemoryRecipeFor(t))
                         .memory.allocated_bytes())
        << run.name;
    // The runs' own flags: --cross-entropy-loss-fusion, CP a2a (TE 2.11).
    MemoryRecipe r = MemoryRecipeFor(t);
    r.cross_entropy_fusion = true;
    r.cp_all_to_all = true;
    const StagePeak peak =
        MostLoadedStage(m, st, c, run.seq, t.precision, sched, true, r);
    const double pred = peak.memory.allocated_bytes() / kGiB;
    const double err = 100 * (pred / run.allocated_gib - 1);
    sum_abs_pct += std::fabs(err);
    const MemoryBreakdown& mb = peak.memory;
    std::printf(
        "%-22s stage %lld: predicted %7.2f GiB measured %7.2f (%+.2f %%) = "
        "weights %.2f grads %.2f optimizer %.2f activations %.2f other %.2f "
        "workspace %.2f\n",
        run.name, static_cast<long long>(peak.stage), pred, run.allocated_gib,
        err, mb.weights_bytes / kGiB, mb.gradients_bytes / kGiB,
        mb.optimizer_bytes / kGiB, mb.activations_bytes / kGiB,
        mb.other_bytes / kGiB, mb.workspace_bytes / kGiB);
    EXPECT_LT(std::fabs(err), 3.0) << run.name;
  }
  const double mape = sum_abs_pct / std::size(kRuns);
  std::printf("allocated memory MAPE over %zu runs: %.2f %%\n",
              std::size(kRuns), mape);
  EXPECT_LE(mape, 3.0);
}

}  // namespace
}  // namespace meshtune::costmodel
