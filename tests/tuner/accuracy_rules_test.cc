// The row-mapping rules of `tune accuracy` that read notes and apply the
// documented defaults of NVIDIA's recipes.
#include "tuner/accuracy_rules.h"

#include <gtest/gtest.h>

#include "search_spaces/presets.h"

namespace meshtune::tuner {
namespace {

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

TEST(ApplyRecipeDefaults, MegatronBridgeFusesTheCrossEntropy) {
  const auto llama = FindModelPreset("LLAMA3_70B");
  ASSERT_TRUE(llama.has_value());
  TrainingSpec t;
  ApplyRecipeDefaults("MegatronBridge_26.04_perf_summary", *llama, "h100", &t);
  EXPECT_TRUE(t.cross_entropy_loss_fusion);
  EXPECT_EQ(t.cpu_offloading_num_layers, 0);  // not Megatron-FSDP
  TrainingSpec nemo;
  ApplyRecipeDefaults("NeMo_25.04_perf_summary", *llama, "gb200", &nemo);
  EXPECT_FALSE(nemo.cross_entropy_loss_fusion);
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

}  // namespace
}  // namespace meshtune::tuner
