// The row-mapping rules of `tune accuracy` that read notes and apply the
// documented defaults of NVIDIA's recipes.
#include "tuner/accuracy/rules.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "search_spaces/presets/presets.h"

namespace meshtune::tuner {
namespace {

using search_spaces::CrossEntropyFusionImpl;
using search_spaces::Precision;
using search_spaces::TrainingSpec;

TEST(FsdpSizeFromNotes, ReadsTheShardingGroupSize) {
  EXPECT_EQ(FsdpSizeFromNotes("container NeMo 26.04.01; VP=n/a; EP=n/a; "
                              "FSDP=64 (0=DDP; >0 Megatron-FSDP sharding "
                              "group size, older pages used 1=on)"),
            64);
  EXPECT_EQ(FsdpSizeFromNotes("container NeMo 25.04; FSDP=1; GA=2"), 1);
  EXPECT_EQ(FsdpSizeFromNotes("FSDP=0 (0=DDP; >0 Megatron-FSDP ...)"), 0);
  EXPECT_EQ(FsdpSizeFromNotes("fsdp=8"), 8);
  EXPECT_FALSE(FsdpSizeFromNotes("GA=32; src: examples/llama").has_value());
  // Another flag that ends in FSDP is not the column.
  EXPECT_FALSE(FsdpSizeFromNotes("MEGATRON_FSDP=1").has_value());
  EXPECT_FALSE(FsdpSizeFromNotes("FSDP=n/a").has_value());
}

TEST(GradientAccumulationFromNotes, ReadsTheGaColumn) {
  EXPECT_EQ(GradientAccumulationFromNotes("container NeMo 25.09; FSDP=0 "
                                          "(0=DDP); GA=16; parenthesised"),
            16);
  EXPECT_EQ(GradientAccumulationFromNotes("ga=2"), 2);
  EXPECT_FALSE(GradientAccumulationFromNotes("OMEGA=3").has_value());
  EXPECT_FALSE(GradientAccumulationFromNotes("FSDP=1").has_value());
}

// gbs = dp · mbs · GA: Megatron-Bridge 25.09's LLaMA-3 70B on 64 GB200
// (tp2 pp4, dp 8, gbs 128) prints mbs 2 and GA 16; 128 / (8 · 16) = 1.
TEST(MicroBatchFromAccumulation, TheIdentityDecides) {
  EXPECT_EQ(MicroBatchFromAccumulation(128, 8, 2, 16), 1);
  EXPECT_EQ(MicroBatchFromAccumulation(128, 8, 1, 16), 1);  // agrees
  EXPECT_EQ(MicroBatchFromAccumulation(128, 8, 2, std::nullopt), 2);
  EXPECT_EQ(MicroBatchFromAccumulation(128, 8, 2, 3), 2);  // 128/24: no
  EXPECT_EQ(MicroBatchFromAccumulation(128, 8, 2, 0), 2);
  EXPECT_EQ(MicroBatchFromAccumulation(256, 16, 1, 4), 4);
}

TEST(ApplyRecipeDefaults, MegatronBridgeFusesTheCrossEntropy) {
  const auto llama = FindModelPreset("LLAMA3_70B");
  ASSERT_TRUE(llama.has_value());
  TrainingSpec t;
  ApplyRecipeDefaults("MegatronBridge_26.04_perf_summary", *llama, "h100", &t);
  EXPECT_TRUE(t.cross_entropy_loss_fusion);
  EXPECT_EQ(t.cpu_offloading_num_layers, 0);  // not Megatron-FSDP
  // Transformer Engine's kernel in every Megatron-Bridge table (25.09's
  // YAML files already set it), Megatron's native one for other sources.
  EXPECT_EQ(t.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kTe);
  for (const char* te : {"MegatronBridge_25.11_perf_summary",
                         "MegatronBridge_25.09_perf_summary"}) {
    TrainingSpec bridge;
    ApplyRecipeDefaults(te, *llama, "h100", &bridge);
    EXPECT_EQ(bridge.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kTe)
        << te;
  }
  for (const char* native :
       {"NeMo_25.04_perf_summary", "MegatronLM_examples_llama_FP8"}) {
    TrainingSpec before;
    ApplyRecipeDefaults(native, *llama, "h100", &before);
    EXPECT_TRUE(before.cross_entropy_loss_fusion) << native;
    EXPECT_EQ(before.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kNative)
        << native;
  }
  TrainingSpec first_te;
  ApplyRecipeDefaults("MegatronBridge_26.02_perf_summary", *llama, "b200",
                      &first_te);
  EXPECT_EQ(first_te.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kTe);
  // NeMo 2.0 (24.09 on; DGX Cloud's v24.11 recipes ran it) fuses it in
  // GPTConfig; NeMo 1.0 tables (24.07, the 24.03 long-sequence table) did
  // not.
  for (const char* nemo2 :
       {"NeMo_25.04_perf_summary", "DGXC_benchmarking_v24.11.1"}) {
    TrainingSpec nemo;
    ApplyRecipeDefaults(nemo2, *llama, "gb200", &nemo);
    EXPECT_TRUE(nemo.cross_entropy_loss_fusion) << nemo2;
  }
  for (const char* nemo1 :
       {"NeMo_24.07_perf_summary", "NeMo_long_sequence_CP_table"}) {
    TrainingSpec nemo;
    ApplyRecipeDefaults(nemo1, *llama, "h100", &nemo);
    EXPECT_FALSE(nemo.cross_entropy_loss_fusion) << nemo1;
  }
}

TEST(ApplyRecipeDefaults, Llama3_70bFsdpRecipesOffloadActivations) {
  const auto llama = FindModelPreset("LLAMA3_70B");
  ASSERT_TRUE(llama.has_value());
  struct Case {
    const char* gpu;
    Precision precision;
    int64_t layers;
  };
  // scripts/performance/configs/llama/llama3_workload_base_configs.py.
  for (const Case& k : {Case{"gb200", Precision::kFp8Tensorwise, 40},
                        Case{"gb200", Precision::kBf16, 20},
                        Case{"gb300", Precision::kFp8Tensorwise, 20},
                        Case{"gb300", Precision::kBf16, 30},
                        Case{"gb300", Precision::kNvfp4, 0}}) {
    TrainingSpec t;
    t.precision = k.precision;
    t.megatron_fsdp = true;
    ApplyRecipeDefaults("MegatronBridge_26.02_perf_summary", *llama, k.gpu, &t);
    EXPECT_EQ(t.cpu_offloading_num_layers, k.layers) << k.gpu;
  }
  // DDP runs of the same tables, and older (NeMo) sources: no offloading.
  TrainingSpec ddp;
  ddp.precision = Precision::kFp8Tensorwise;
  ApplyRecipeDefaults("MegatronBridge_26.02_perf_summary", *llama, "gb200",
                      &ddp);
  EXPECT_EQ(ddp.cpu_offloading_num_layers, 0);
  TrainingSpec nemo;
  nemo.precision = Precision::kFp8Tensorwise;
  nemo.megatron_fsdp = true;
  ApplyRecipeDefaults("NeMo_25.04_perf_summary", *llama, "gb200", &nemo);
  EXPECT_EQ(nemo.cpu_offloading_num_layers, 0);
}

TEST(ForceBalancedFromNotes, ReadsTheMegatronBridgeFootnote) {
  EXPECT_TRUE(ForceBalancedFromNotes(
      "container NeMo 26.04; MoE benchmarks force-balance tokens across "
      "experts, dropless (page footnote)"));
  EXPECT_TRUE(ForceBalancedFromNotes("Force-Balance tokens"));
  EXPECT_FALSE(ForceBalancedFromNotes("container NeMo 25.04; FSDP=0"));
  EXPECT_FALSE(ForceBalancedFromNotes(""));
}

TEST(IsNvidiaRecipeSource, MegatronLmLlamaExamplesRunTheNemoRecipe) {
  // Megatron-LM examples/llama: train_llama3_8b_h100_fp8.sh passes
  // --use-distributed-optimizer, --fp8-param-gather, --grad-reduce-in-bf16
  // and --cross-entropy-loss-fusion.
  EXPECT_TRUE(IsNvidiaRecipeSource("MegatronLM_examples_llama_FP8"));
  EXPECT_TRUE(IsNvidiaRecipeSource("MegatronBridge_26.04_perf_summary"));
  EXPECT_FALSE(IsNvidiaRecipeSource("MegatronLM_2023_README"));
  EXPECT_FALSE(IsNvidiaRecipeSource("SimuMax_B200_v1.2"));
  const auto llama = FindModelPreset("LLAMA3-8B");
  ASSERT_TRUE(llama.has_value());
  TrainingSpec t;
  ApplyRecipeDefaults("MegatronLM_examples_llama_FP8", *llama, "h100", &t);
  EXPECT_TRUE(t.cross_entropy_loss_fusion);
  EXPECT_EQ(t.cpu_offloading_num_layers, 0);
}

TEST(RecipeRecompute, DeepSeekV3RecipesRecomputeTheirModules) {
  const auto dsv3 = FindModelPreset("DeepSeekV3");
  ASSERT_TRUE(dsv3.has_value());
  const std::string mb = "MegatronBridge_26.04.01_perf_summary";
  search_spaces::ParallelConfig c;
  c.tp = 1;
  c.pp = 2;
  c.vpp = 8;
  c.ep = 32;
  c.mbs = 2;
  // GB300 pp2 vpp8 ep32 mbs2 (DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_V1).
  const auto gb300 = RecipeRecompute(mb, *dsv3, "gb300", Precision::kMxfp8, c);
  ASSERT_TRUE(gb300.has_value());
  EXPECT_EQ(gb300->granularity,
            search_spaces::RecomputeGranularity::kSelective);
  EXPECT_EQ(gb300->modules, search_spaces::kRecomputeMlaUpProj);
  // The same GPU with mbs 1 is another recipe (full-iteration CUDA graphs,
  // no recompute): not mapped.
  c.mbs = 1;
  EXPECT_FALSE(
      RecipeRecompute(mb, *dsv3, "gb300", Precision::kMxfp8, c).has_value());
  // GB200 pp4 vpp4 ep64: bf16 always mla_up_proj; the fp8 recipes changed.
  c.pp = 4;
  c.vpp = 4;
  c.ep = 64;
  EXPECT_EQ(RecipeRecompute("MegatronBridge_25.11_perf_summary", *dsv3, "gb200",
                            Precision::kBf16, c)
                ->modules,
            search_spaces::kRecomputeMlaUpProj);
  EXPECT_FALSE(
      RecipeRecompute(mb, *dsv3, "gb200", Precision::kMxfp8, c).has_value());
  // B200 pp8 vpp2 ep32 MXFP8: mla_up_proj and mlp.
  c.pp = 8;
  c.vpp = 2;
  c.ep = 32;
  EXPECT_EQ(RecipeRecompute(mb, *dsv3, "b200", Precision::kMxfp8, c)->modules,
            search_spaces::kRecomputeMlaUpProj | search_spaces::kRecomputeMlp);
  // H100 tp2 pp8 vpp4 ep64: mla_up_proj and mlp.
  c.tp = 2;
  c.vpp = 4;
  c.ep = 64;
  EXPECT_EQ(RecipeRecompute("MegatronBridge_25.09_perf_summary", *dsv3, "h100",
                            Precision::kFp8Tensorwise, c)
                ->modules,
            search_spaces::kRecomputeMlaUpProj | search_spaces::kRecomputeMlp);
  // Not Megatron-Bridge, or not DeepSeek-V3: nothing.
  EXPECT_FALSE(RecipeRecompute("NeMo_25.04_perf_summary", *dsv3, "h100",
                               Precision::kFp8Tensorwise, c)
                   .has_value());
  const auto llama = FindModelPreset("LLAMA3_70B");
  ASSERT_TRUE(llama.has_value());
  EXPECT_FALSE(RecipeRecompute("MegatronBridge_25.09_perf_summary", *llama,
                               "h100", Precision::kFp8Tensorwise, c)
                   .has_value());
}

// Two H100 Qwen3-30B-A3B rows print another release's layout; the recipe's
// is restored only for that printed layout (tuner/accuracy/rules.h).
TEST(ApplyRecipeLayout, RestoresTheRecipeWhereTheTableIsStale) {
  const auto qwen = FindModelPreset("Qwen3_30B_a3B");
  ASSERT_TRUE(qwen.has_value());
  search_spaces::ParallelConfig printed;
  printed.pp = 2;
  printed.vpp = 24;
  printed.ep = 8;
  printed.dp = 8;
  printed.mbs = 2;
  // 25.11 prints 25.09's vpp24 mbs2; Megatron-Bridge 0.2.0 ran vpp12 mbs1.
  search_spaces::ParallelConfig c = printed;
  EXPECT_TRUE(ApplyRecipeLayout("MegatronBridge_25.11_perf_summary", *qwen,
                                "h100", Precision::kFp8Tensorwise, &c));
  EXPECT_EQ(c.vpp, 12);
  EXPECT_EQ(c.mbs, 1);
  EXPECT_EQ(c.pp, 2);
  EXPECT_EQ(c.ep, 8);
  // 25.09 ran what it printed.
  c = printed;
  EXPECT_FALSE(ApplyRecipeLayout("MegatronBridge_25.09_perf_summary", *qwen,
                                 "h100", Precision::kFp8Tensorwise, &c));
  EXPECT_EQ(c.vpp, 24);
  // 26.02.01 prints 26.02's pp2 vpp12 ep8; 0.3.1 ran pp1 ep16 (PR #2477).
  printed.vpp = 12;
  printed.mbs = 1;
  c = printed;
  EXPECT_TRUE(ApplyRecipeLayout("MegatronBridge_26.02.01_perf_summary", *qwen,
                                "h100", Precision::kFp8Tensorwise, &c));
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.vpp, 1);
  EXPECT_EQ(c.ep, 16);
  EXPECT_EQ(c.dp, 16);
  EXPECT_EQ(c.mbs, 1);
  // 26.02 ran what it printed; so did other GPUs and models.
  c = printed;
  EXPECT_FALSE(ApplyRecipeLayout("MegatronBridge_26.02_perf_summary", *qwen,
                                 "h100", Precision::kFp8Tensorwise, &c));
  EXPECT_FALSE(ApplyRecipeLayout("MegatronBridge_26.02.01_perf_summary", *qwen,
                                 "b200", Precision::kFp8Tensorwise, &c));
  const auto dsv3 = FindModelPreset("DeepSeekV3");
  ASSERT_TRUE(dsv3.has_value());
  EXPECT_FALSE(ApplyRecipeLayout("MegatronBridge_26.02.01_perf_summary", *dsv3,
                                 "h100", Precision::kFp8Tensorwise, &c));
  EXPECT_EQ(c.pp, 2);
  EXPECT_EQ(c.ep, 8);
  // LLaMA-3 70B on 64 GB300 in 26.02.01: NVFP4 and MXFP8 ran pp4 vpp5 mbs1.
  const auto llama = FindModelPreset("LLAMA3_70B");
  ASSERT_TRUE(llama.has_value());
  const std::string mb = "MegatronBridge_26.02.01_perf_summary";
  c = search_spaces::ParallelConfig{};
  c.dp = 64;
  c.mbs = 2;
  EXPECT_TRUE(ApplyRecipeLayout(mb, *llama, "gb300", Precision::kNvfp4, &c));
  EXPECT_EQ(c.pp, 4);
  EXPECT_EQ(c.vpp, 5);
  EXPECT_EQ(c.dp, 16);
  EXPECT_EQ(c.mbs, 1);
  // The FP8-CS row of that layout is Megatron-FSDP and ran as printed.
  c = search_spaces::ParallelConfig{};
  c.dp = 64;
  c.mbs = 2;
  EXPECT_FALSE(
      ApplyRecipeLayout(mb, *llama, "gb300", Precision::kFp8Tensorwise, &c));
  EXPECT_EQ(c.dp, 64);
  c.pp = 4;
  c.dp = 16;
  EXPECT_TRUE(ApplyRecipeLayout(mb, *llama, "gb300", Precision::kMxfp8, &c));
  EXPECT_EQ(c.vpp, 5);
  EXPECT_EQ(c.mbs, 1);
}

// The recipes' CUDA graphs per container and GPU (tuner/accuracy/rules.h).
TEST(ApplyRecipeCudaGraphs, ScopesFollowTheRecipes) {
  using search_spaces::CudaGraphImpl;
  using search_spaces::CudaGraphs;
  constexpr uint32_t kRouter =
      search_spaces::kGraphMoeRouter | search_spaces::kGraphMoePreprocess;
  constexpr uint32_t kAttn = search_spaces::kGraphAttn;
  const CudaGraphs none;
  const CudaGraphs full{CudaGraphImpl::kLocal,
                        search_spaces::kGraphFullIteration};
  auto te = [](uint32_t scope) {
    return CudaGraphs{CudaGraphImpl::kTransformerEngine, scope};
  };
  auto apply = [](const std::string& source, const std::string& preset,
                  const std::string& gpu, Precision p) {
    auto model = FindModelPreset(preset);
    EXPECT_TRUE(model.has_value()) << preset;
    search_spaces::TrainingSpec t;
    t.precision = p;
    ApplyRecipeCudaGraphs(source, *model, gpu, &t);
    return t.cuda_graphs;
  };
  const std::string mb2604 = "MegatronBridge_26.04_perf_summary";
  // Qwen3-30B-A3B on H100: the FP8-CS recipe has none, bf16 the router.
  EXPECT_EQ(apply(mb2604, "Qwen3_30B_a3B", "h100", Precision::kFp8Tensorwise),
            none);
  EXPECT_EQ(apply(mb2604, "Qwen3_30B_a3B", "h100", Precision::kBf16),
            te(kRouter));
  // B200 added attention in 26.02.01; MXFP8 became one graph in 26.06.01.
  EXPECT_EQ(apply("MegatronBridge_26.02_perf_summary", "Qwen3_30B_a3B", "b200",
                  Precision::kMxfp8),
            te(kRouter));
  EXPECT_EQ(apply(mb2604, "Qwen3_30B_a3B", "b200", Precision::kMxfp8),
            te(kAttn | kRouter));
  EXPECT_EQ(apply("MegatronBridge_26.06_perf_summary", "Qwen3_30B_a3B", "b200",
                  Precision::kMxfp8),
            te(kAttn | kRouter));
  EXPECT_EQ(apply("MegatronBridge_26.06.01_perf_summary", "Qwen3_30B_a3B",
                  "b200", Precision::kMxfp8),
            full);
  EXPECT_EQ(apply("MegatronBridge_26.06_perf_summary", "Qwen3_30B_a3B", "gb300",
                  Precision::kMxfp8),
            full);
  // DeepSeek-V3 GB300: none in MXFP8, attention and router in bf16.
  EXPECT_EQ(apply(mb2604, "DeepSeekV3", "gb300", Precision::kMxfp8), none);
  EXPECT_EQ(apply(mb2604, "DeepSeekV3", "gb300", Precision::kBf16),
            te(kAttn | kRouter));
  EXPECT_EQ(apply(mb2604, "DeepSeekV3", "h100", Precision::kBf16), none);
  // ... but the 25.11 GB300 table ran one recipe for every precision
  // (Megatron-Bridge d19cb73c8 "gb300 changes": pp2 vpp4 ep32, gbs 4096).
  EXPECT_EQ(apply("MegatronBridge_25.11_perf_summary", "DeepSeekV3", "gb300",
                  Precision::kMxfp8),
            te(kAttn | kRouter));
  // GB200 added attention to the router's graphs in 26.02.
  EXPECT_EQ(apply("MegatronBridge_25.11_perf_summary", "DeepSeekV3", "gb200",
                  Precision::kBf16),
            te(kRouter));
  EXPECT_EQ(apply(mb2604, "DeepSeekV3", "gb200", Precision::kBf16),
            te(kAttn | kRouter));
  // Nemotron 3 Nano on H100 FP8-CS graphs only the Mamba mixers.
  EXPECT_EQ(apply(mb2604, "Nemotron_3_Nano", "h100", Precision::kFp8Tensorwise),
            te(search_spaces::kGraphMamba));
  EXPECT_EQ(apply(mb2604, "Nemotron_3_Nano", "gb200", Precision::kBf16),
            te(kAttn | search_spaces::kGraphMamba | kRouter));
  // Other sources and dense models keep Megatron's default.
  EXPECT_EQ(apply("NeMo_25.04_perf_summary", "Qwen3_30B_a3B", "h100",
                  Precision::kBf16),
            none);
  EXPECT_EQ(apply(mb2604, "LLAMA3_70B", "gb200", Precision::kBf16), none);
}

// FP8 attention arrived with the 26.06 MXFP8 recipes' full-iteration
// graphs (tuner/accuracy/rules.h): Qwen3 on GB200/GB300/B300 from 26.06 and
// B200 from 26.06.01, DeepSeek-V3 on GB300 from 26.06 and B300 from 26.06.01.
TEST(ApplyRecipeFp8Attention, FollowsTheRecipes) {
  auto fp8_attention = [](const std::string& version, const std::string& preset,
                          const std::string& gpu, Precision p) {
    auto model = FindModelPreset(preset);
    EXPECT_TRUE(model.has_value()) << preset;
    search_spaces::TrainingSpec t;
    t.precision = p;
    ApplyRecipeFp8Attention("MegatronBridge_" + version + "_perf_summary",
                            *model, gpu, &t);
    return t.fp8_dot_product_attention;
  };
  const Precision mx = Precision::kMxfp8;
  EXPECT_FALSE(fp8_attention("26.04.01", "Qwen3_30B_a3B", "gb200", mx));
  for (const char* gpu : {"gb200", "gb300", "b300"}) {
    EXPECT_TRUE(fp8_attention("26.06", "Qwen3_30B_a3B", gpu, mx)) << gpu;
    EXPECT_TRUE(fp8_attention("26.08", "Qwen3_30B_a3B", gpu, mx)) << gpu;
  }
  EXPECT_FALSE(fp8_attention("26.06", "Qwen3_30B_a3B", "b200", mx));
  EXPECT_TRUE(fp8_attention("26.06.01", "Qwen3_30B_a3B", "b200", mx));
  EXPECT_FALSE(fp8_attention("26.06", "Qwen3_30B_a3B", "h100", mx));
  EXPECT_FALSE(fp8_attention("26.06", "Qwen3_30B_a3B", "gb200",
                             Precision::kFp8Tensorwise));
  EXPECT_TRUE(fp8_attention("26.06", "DeepSeekV3", "gb300", mx));
  EXPECT_FALSE(fp8_attention("26.06", "DeepSeekV3", "gb200", mx));
  EXPECT_FALSE(fp8_attention("26.06", "DeepSeekV3", "b300", mx));
  EXPECT_TRUE(fp8_attention("26.06.01", "DeepSeekV3", "b300", mx));
  EXPECT_FALSE(fp8_attention("26.06", "Nemotron_3_Nano", "gb300", mx));
  EXPECT_FALSE(fp8_attention("26.06", "LLAMA3_70B", "gb300", mx));
}

// The recipes' dispatcher and EP overlap per container
// (tuner/accuracy/rules.h).
TEST(RecipeExpertTensorParallel, MegatronBridgeMoeRecipesRunEtp1) {
  const auto dsv3 = FindModelPreset("DeepSeekV3");
  const auto llama = FindModelPreset("LLAMA3_70B");
  ASSERT_TRUE(dsv3.has_value() && llama.has_value());
  EXPECT_EQ(
      RecipeExpertTensorParallel("MegatronBridge_25.09_perf_summary", *dsv3),
      1);
  EXPECT_EQ(
      RecipeExpertTensorParallel("MegatronBridge_26.08_perf_summary", *dsv3),
      1);
  // Dense models and other sources: Megatron's default (0 = tp).
  EXPECT_EQ(
      RecipeExpertTensorParallel("MegatronBridge_26.04_perf_summary", *llama),
      0);
  EXPECT_EQ(RecipeExpertTensorParallel("NeMo_25.04_perf_summary", *dsv3), 0);
}

TEST(ApplyRecipeMoeSoftware, DispatcherAndOverlapFollowTheContainer) {
  using search_spaces::TokenDispatcher;
  const auto qwen = FindModelPreset("Qwen3_30B_a3B");
  ASSERT_TRUE(qwen.has_value());
  search_spaces::ParallelConfig c;
  c.ep = 8;
  c.mbs = 8;
  auto apply = [&](const std::string& source, const std::string& gpu,
                   Precision p, search_spaces::ModelSpec model) {
    search_spaces::TrainingSpec t;
    t.precision = p;
    ApplyRecipeMoeSoftware(source, gpu, c, &model, &t);
    return std::make_pair(model.moe_token_dispatcher_type, t.moe_ep_overlap);
  };
  // GB300 MXFP8: HybridEP in 26.04, plus the a2a overlap from 26.06.
  EXPECT_EQ(apply("MegatronBridge_26.04_perf_summary", "gb300",
                  Precision::kMxfp8, *qwen),
            std::make_pair(TokenDispatcher::kFlex, false));
  EXPECT_EQ(apply("MegatronBridge_26.06_perf_summary", "gb300",
                  Precision::kMxfp8, *qwen),
            std::make_pair(TokenDispatcher::kFlex, true));
  // ... but not for the FP8-CS recipe of the same container.
  EXPECT_EQ(apply("MegatronBridge_26.06_perf_summary", "gb300",
                  Precision::kFp8Tensorwise, *qwen),
            std::make_pair(TokenDispatcher::kFlex, false));
  // B200 ran Megatron's alltoall until 26.02.01 switched to HybridEP.
  EXPECT_EQ(apply("MegatronBridge_26.02_perf_summary", "b200",
                  Precision::kMxfp8, *qwen),
            std::make_pair(TokenDispatcher::kAlltoall, false));
  EXPECT_EQ(apply("MegatronBridge_26.02.01_perf_summary", "b200",
                  Precision::kMxfp8, *qwen),
            std::make_pair(TokenDispatcher::kFlex, false));
  // The fused grouped MLP came with the 26.06 MXFP8 recipes.
  auto fused = [&](const std::string& version, const std::string& gpu,
                   search_spaces::ModelSpec model) {
    search_spaces::TrainingSpec t;
    t.precision = Precision::kMxfp8;
    ApplyRecipeMoeSoftware("MegatronBridge_" + version + "_perf_summary", gpu,
                           c, &model, &t);
    return model.use_transformer_engine_op_fuser;
  };
  EXPECT_FALSE(fused("26.04.01", "gb300", *qwen));
  EXPECT_TRUE(fused("26.06", "gb300", *qwen));
  EXPECT_TRUE(fused("26.06", "b300", *qwen));
  EXPECT_FALSE(fused("26.06", "b200", *qwen));
  EXPECT_TRUE(fused("26.06.01", "b200", *qwen));
  const auto v3 = FindModelPreset("DeepSeekV3");
  ASSERT_TRUE(v3.has_value());
  EXPECT_TRUE(fused("26.06", "gb200", *v3));
  EXPECT_FALSE(fused("26.06", "b300", *v3));
  EXPECT_TRUE(fused("26.06.01", "b300", *v3));
  // H100 26.02: DeepEP with the overlap, which needs virtual stages at pp 2.
  c.pp = 2;
  c.vpp = 12;
  c.mbs = 1;
  EXPECT_EQ(apply("MegatronBridge_26.02_perf_summary", "h100",
                  Precision::kFp8Tensorwise, *qwen),
            std::make_pair(TokenDispatcher::kFlex, true));
  c.vpp = 1;
  EXPECT_EQ(apply("MegatronBridge_26.02_perf_summary", "h100",
                  Precision::kFp8Tensorwise, *qwen),
            std::make_pair(TokenDispatcher::kFlex, false));
  // DeepSeek-V3 on H100: DeepEP with the overlap in 25.09 and 25.11,
  // HybridEP without it from 26.02.
  const auto dsv3 = FindModelPreset("DeepSeekV3");
  ASSERT_TRUE(dsv3.has_value());
  c.tp = 2;
  c.pp = 8;
  c.vpp = 4;
  c.ep = 64;
  EXPECT_EQ(apply("MegatronBridge_25.09_perf_summary", "h100",
                  Precision::kFp8Tensorwise, *dsv3),
            std::make_pair(TokenDispatcher::kFlex, true));
  EXPECT_EQ(apply("MegatronBridge_26.02_perf_summary", "h100",
                  Precision::kFp8Tensorwise, *dsv3),
            std::make_pair(TokenDispatcher::kFlex, false));
  // On GB300 HybridEP from 25.11, on B200 from 26.02.
  EXPECT_EQ(apply("MegatronBridge_25.11_perf_summary", "gb300",
                  Precision::kMxfp8, *dsv3)
                .first,
            TokenDispatcher::kFlex);
  EXPECT_EQ(apply("MegatronBridge_25.11_perf_summary", "b200",
                  Precision::kMxfp8, *dsv3)
                .first,
            TokenDispatcher::kAlltoall);
  // Other sources and dense models are left alone.
  EXPECT_EQ(apply("NeMo_25.04_perf_summary", "h100", Precision::kFp8Tensorwise,
                  *dsv3),
            std::make_pair(TokenDispatcher::kAlltoall, false));
  const auto llama = FindModelPreset("llama3-70b");
  ASSERT_TRUE(llama.has_value());
  EXPECT_EQ(apply("MegatronBridge_26.06_perf_summary", "gb300",
                  Precision::kMxfp8, *llama),
            std::make_pair(TokenDispatcher::kAlltoall, false));
}

TEST(RecipeRecompute, NemotronNanoRecomputesOnH100Only) {
  const auto nano = FindModelPreset("Nemotron_3_Nano");
  ASSERT_TRUE(nano.has_value());
  const std::string mb = "MegatronBridge_26.04_perf_summary";
  search_spaces::ParallelConfig c;
  c.ep = 8;
  const auto bf16 = RecipeRecompute(mb, *nano, "h100", Precision::kBf16, c);
  ASSERT_TRUE(bf16.has_value());
  EXPECT_EQ(bf16->modules,
            search_spaces::kRecomputeMoe | search_spaces::kRecomputeLayernorm);
  const auto fp8 =
      RecipeRecompute(mb, *nano, "h100", Precision::kFp8Tensorwise, c);
  ASSERT_TRUE(fp8.has_value());
  EXPECT_EQ(fp8->modules, search_spaces::kRecomputeMoe |
                              search_spaces::kRecomputeLayernorm |
                              search_spaces::kRecomputeCoreAttn |
                              search_spaces::kRecomputeMoeAct);
  EXPECT_FALSE(
      RecipeRecompute(mb, *nano, "gb300", Precision::kMxfp8, c).has_value());
}

}  // namespace
}  // namespace meshtune::tuner
