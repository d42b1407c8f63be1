// BridgeOverrides and BridgeMixedPrecision against hand-written overrides
// for known plans, and the presets of megatron.bridge.training.
// mixed_precision for every precision.
#include "tuner/interop/bridge_overrides.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "search_spaces/presets/presets.h"

namespace meshtune::tuner {
namespace {

using search_spaces::Precision;

// "group.field=value" words as a map (quotes kept as written).
std::map<std::string, std::string> AsMap(const std::vector<std::string>& o) {
  std::map<std::string, std::string> m;
  for (const std::string& word : o) {
    const size_t eq = word.find('=');
    EXPECT_NE(eq, std::string::npos) << word;
    EXPECT_TRUE(m.emplace(word.substr(0, eq), word.substr(eq + 1)).second)
        << "twice: " << word;
  }
  return m;
}

TEST(BridgeMixedPrecision, EveryPrecisionAndModifier) {
  search_spaces::TrainingSpec t;
  const std::pair<Precision, const char*> cases[] = {
      {Precision::kBf16, "bf16_mixed"},
      {Precision::kFp16, "fp16_mixed"},
      {Precision::kFp8, "bf16_with_fp8_delayed_scaling_mixed"},
      {Precision::kFp8Tensorwise, "bf16_with_fp8_current_scaling_mixed"},
      {Precision::kFp8Blockwise, "bf16_with_fp8_subchannel_scaling_mixed"},
      {Precision::kMxfp8, "bf16_with_mxfp8_mixed"},
      {Precision::kNvfp4, "bf16_with_nvfp4_mixed"}};
  for (const auto& [precision, name] : cases) {
    t.precision = precision;
    t.fp8_param_gather = true;
    EXPECT_EQ(BridgeMixedPrecision(t), name);
  }
  // The delayed preset gathers FP8 parameters; without them it is modified.
  t.precision = Precision::kFp8;
  t.fp8_param_gather = false;
  EXPECT_EQ(BridgeMixedPrecision(t),
            "bf16_with_fp8_delayed_scaling_mixed_bf16_params");
  t.precision = Precision::kBf16;
  t.grad_reduce_in_bf16 = true;
  EXPECT_EQ(BridgeMixedPrecision(t), "bf16_mixed_bf16_grad_reduce");
}

TrainingRun ShortRun() {
  TrainingRun r;
  r.train_iters = 1000;
  r.lr = 3e-4;
  r.min_lr = 3e-5;
  r.lr_warmup_iters = 20;
  r.lr_decay_iters = 1000;
  return r;
}

TEST(BridgeOverrides, DensePlanWithEvenVirtualStages) {
  const auto m = search_spaces::ResolveModel("llama3-70b").value();
  search_spaces::TrainingSpec t;
  t.global_batch_size = 512;
  t.seq_length = 8192;
  search_spaces::ParallelConfig c;
  c.tp = 4;
  c.pp = 4;
  c.vpp = 20;
  c.dp = 8;
  c.sp = true;
  c.dist_opt = true;
  std::vector<std::string> notes;
  const auto o = AsMap(BridgeOverrides(m, t, c, true, ShortRun(), &notes));
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(o.at("model.tensor_model_parallel_size"), "4");
  EXPECT_EQ(o.at("model.pipeline_model_parallel_size"), "4");
  EXPECT_EQ(o.at("model.virtual_pipeline_model_parallel_size"), "20");
  EXPECT_EQ(o.at("model.sequence_parallel"), "true");
  EXPECT_EQ(o.at("model.recompute_granularity"), "null");
  EXPECT_EQ(o.at("model.attention_backend"), "flash");
  EXPECT_EQ(o.at("dataset.sequence_length"), "8192");
  EXPECT_EQ(o.at("train.global_batch_size"), "512");
  EXPECT_EQ(o.at("train.micro_batch_size"), "1");
  EXPECT_EQ(o.at("train.train_iters"), "1000");
  EXPECT_EQ(o.at("ddp.use_distributed_optimizer"), "true");
  EXPECT_EQ(o.at("ddp.overlap_param_gather"), "true");
  EXPECT_EQ(o.at("mixed_precision"), "bf16_mixed");
  EXPECT_EQ(o.at("tokenizer.tokenizer_model"), "meta-llama/Meta-Llama-3-70B");
  EXPECT_EQ(o.at("optimizer.lr"), "0.0003");
  EXPECT_EQ(o.at("scheduler.lr_warmup_iters"), "20");
  EXPECT_EQ(o.count("model.expert_model_parallel_size"), 0u);
}

TEST(BridgeOverrides, MoeUnevenFp8PlanAndItsNotes) {
  const auto m = search_spaces::ResolveModel("deepseek-v3").value();
  search_spaces::TrainingSpec t;
  t.global_batch_size = 4096;
  t.seq_length = 4096;
  t.precision = Precision::kFp8Blockwise;
  t.fp8_param_gather = true;
  t.fp8_dot_product_attention = true;
  t.moe_ep_overlap = true;
  search_spaces::ParallelConfig c;
  c.tp = 2;
  c.pp = 16;
  c.ep = 8;
  c.dp = 32;
  c.sp = true;
  c.dist_opt = true;
  c.layout_first_layers = 4;
  c.layout_last_layers = 1;
  c.recompute.granularity = search_spaces::RecomputeGranularity::kFull;
  c.recompute.method = search_spaces::RecomputeMethod::kBlock;
  c.recompute.num_layers = 2;
  std::vector<std::string> notes;
  const auto words = BridgeOverrides(m, t, c, true, ShortRun(), &notes);
  const auto o = AsMap(words);
  EXPECT_EQ(o.at("model.expert_model_parallel_size"), "8");
  EXPECT_EQ(o.at("model.moe_token_dispatcher_type"), "alltoall");
  EXPECT_EQ(o.at("model.moe_expert_capacity_factor"), "null");
  EXPECT_EQ(o.at("model.recompute_method"), "block");
  EXPECT_EQ(o.at("model.recompute_num_layers"), "2");
  // MLA's head widths differ: cuDNN's fused kernel (megatron_args.h).
  EXPECT_EQ(o.at("model.attention_backend"), "fused");
  EXPECT_EQ(o.at("model.overlap_moe_expert_parallel_comm"), "true");
  EXPECT_EQ(o.at("mixed_precision"), "bf16_with_fp8_subchannel_scaling_mixed");
  // The uneven layout, quoted for the shell and for Hydra.
  bool layout = false;
  for (const std::string& w : words) {
    layout =
        layout || w.rfind("'model.pipeline_model_parallel_layout=\"E", 0) == 0;
  }
  EXPECT_TRUE(layout);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("fp8_param_gather=True"), std::string::npos);
  EXPECT_NE(notes[1].find("fp8_dot_product_attention=True"), std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
