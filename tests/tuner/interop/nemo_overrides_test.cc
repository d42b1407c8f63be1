// NemoOverrides / ParseNemoOverrides: the exact block for one configuration,
// the round trip for every preset × configuration, and each parse error with
// its exact message.
#include "tuner/interop/nemo_overrides.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "search_spaces/presets/presets.h"
#include "tests/tuner/export_round_trip.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ParallelConfig;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::TrainingSpec;
using testing::RoundTripCase;
using testing::RoundTripCases;

search_spaces::ModelSpec Preset(const std::string& name) {
  auto m = search_spaces::ResolveModel(name);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.value();
}

TEST(NemoOverrides, WritesTheBlockForAnInterleavedFp8Configuration) {
  TrainingSpec t;
  t.num_gpus = 1024;
  t.global_batch_size = 1536;
  t.seq_length = 2048;
  t.precision = Precision::kFp8;
  t.fp8_param_gather = true;
  t.fp8_dot_product_attention = true;
  t.grad_reduce_in_bf16 = true;
  t.tp_comm_overlap = true;
  ParallelConfig c;
  c.tp = 8;
  c.pp = 8;
  c.vpp = 3;
  c.dp = 16;
  c.sp = true;
  c.dist_opt = true;
  c.recompute.granularity = RecomputeGranularity::kFull;
  c.recompute.method = RecomputeMethod::kBlock;
  c.recompute.num_layers = 2;
  auto yaml = NemoOverrides(Preset("gpt3-175b"), t, c, 8);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  EXPECT_EQ(yaml.value(),
            "# NeMo megatron_gpt overrides from meshtune for gpt3-175b: " +
                search_spaces::ToString(c) +
                "\n"
                "# merge into the model's NeMo config; docs/export.md maps "
                "each key\n"
                "trainer:\n"
                "  devices: 8\n"
                "  num_nodes: 128\n"
                "  precision: bf16-mixed\n"
                "model:\n"
                "  tensor_model_parallel_size: 8\n"
                "  pipeline_model_parallel_size: 8\n"
                "  virtual_pipeline_model_parallel_size: 3\n"
                "  context_parallel_size: 1\n"
                "  expert_model_parallel_size: 1\n"
                "  sequence_parallel: true\n"
                "  micro_batch_size: 1\n"
                "  global_batch_size: 1536\n"
                "  encoder_seq_length: 2048\n"
                "  activations_checkpoint_granularity: full\n"
                "  activations_checkpoint_method: block\n"
                "  activations_checkpoint_num_layers: 2\n"
                "  megatron_amp_O2: true\n"
                "  fp8: true\n"
                "  fp8_hybrid: true\n"
                "  fp8_params: true\n"
                "  fp8_dot_product_attention: true\n"
                "  ub_tp_comm_overlap: true\n"
                "  attention_backend: flash\n"
                "  optim:\n"
                "    name: distributed_fused_adam\n"
                "    overlap_grad_sync: true\n"
                "    overlap_param_sync: true\n"
                "    grad_sync_dtype: bf16\n");
}

TEST(NemoOverrides, PlainConfigurationHasNullVppAndFusedAdam) {
  TrainingSpec t;
  t.num_gpus = 4;
  t.global_batch_size = 64;
  t.seq_length = 1024;
  t.precision = Precision::kFp16;
  t.grad_reduce_in_bf16 = true;
  ParallelConfig c;
  c.dp = 4;
  auto yaml = NemoOverrides(Preset("gpt3-1.3b"), t, c, 8);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::string& y = yaml.value();
  EXPECT_NE(y.find("  devices: 4\n  num_nodes: 1\n  precision: 16-mixed\n"),
            std::string::npos)
      << y;
  EXPECT_NE(y.find("  virtual_pipeline_model_parallel_size: null\n"),
            std::string::npos);
  EXPECT_NE(y.find("  activations_checkpoint_granularity: null\n"),
            std::string::npos);
  EXPECT_NE(y.find("    name: fused_adam\n"
                   "    # not exported: grad_reduce_in_bf16 (grad_sync_dtype "
                   "needs distributed_fused_adam)\n"),
            std::string::npos)
      << y;
  EXPECT_EQ(y.find("overlap_grad_sync"), std::string::npos);
}

TEST(NemoOverrides, RefusesGpusThatAreNotWholeNodes) {
  TrainingSpec t;
  t.num_gpus = 12;
  t.global_batch_size = 12;
  t.seq_length = 1024;
  ParallelConfig c;
  c.dp = 12;
  auto yaml = NemoOverrides(Preset("gpt3-1.3b"), t, c, 8);
  ASSERT_FALSE(yaml.ok());
  EXPECT_EQ(yaml.status().message(),
            "12 GPUs is not a whole number of 8-GPU nodes");
  EXPECT_EQ(yaml.status().hint(),
            "NeMo's trainer runs devices x num_nodes GPUs; use a multiple of "
            "8");
}

TEST(NemoOverrides, RoundTripsEveryPresetAndConfiguration) {
  const std::vector<RoundTripCase> cases = RoundTripCases();
  EXPECT_GE(cases.size(), search_spaces::ModelPresets().size() * 5);
  for (const RoundTripCase& c : cases) {
    auto yaml = NemoOverrides(c.model, c.training, c.config, c.gpus_per_node);
    ASSERT_TRUE(yaml.ok()) << c.name << ": " << yaml.status().message();
    auto parsed = ParseNemoOverrides(yaml.value());
    ASSERT_TRUE(parsed.ok())
        << c.name << ": " << parsed.status().message() << "\n"
        << yaml.value();
    SCOPED_TRACE(c.name + "\n" + yaml.value());
    const ParsedNemoOverrides& p = parsed.value();
    const TrainingSpec& t = c.training;
    EXPECT_EQ(p.training.num_gpus, t.num_gpus);
    EXPECT_EQ(p.gpus_per_node, std::min(t.num_gpus, c.gpus_per_node));
    EXPECT_EQ(p.training.global_batch_size, t.global_batch_size);
    EXPECT_EQ(p.training.seq_length, t.seq_length);
    EXPECT_EQ(p.training.precision, t.precision);
    EXPECT_EQ(p.training.fp8_param_gather, t.fp8_param_gather);
    EXPECT_EQ(p.training.fp8_dot_product_attention,
              t.fp8_dot_product_attention);
    EXPECT_EQ(p.use_transformer_engine_op_fuser.value_or(false),
              c.model.use_transformer_engine_op_fuser);
    // grad_sync_dtype exists only for distributed_fused_adam.
    EXPECT_EQ(p.training.grad_reduce_in_bf16,
              t.grad_reduce_in_bf16 && c.config.dist_opt);
    EXPECT_EQ(p.training.tp_comm_overlap,
              t.tp_comm_overlap && c.config.sp && c.config.tp > 1);
    EXPECT_TRUE(p.training.cuda_graphs == t.cuda_graphs) << c.name;
    EXPECT_TRUE(p.config == c.config)
        << search_spaces::ToString(p.config) << " vs "
        << search_spaces::ToString(c.config);
    EXPECT_TRUE(p.notes.empty());
  }
}

TEST(ParseNemoOverrides, ReadsAHandWrittenBlockWithDefaults) {
  auto parsed = ParseNemoOverrides(
      "trainer:\n"
      "  devices: 8\n"
      "  num_nodes: 2\n"
      "  precision: bf16\n"
      "model:\n"
      "  tensor_model_parallel_size: 4\n"
      "  sequence_parallel: True\n"
      "  micro_batch_size: 1\n"
      "  global_batch_size: 128\n"
      "  encoder_seq_length: 4096\n"
      "  activations_checkpoint_granularity: selective\n"
      "  activations_checkpoint_method: uniform\n"
      "  optim:\n"
      "    name: mcore_distributed_optim\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const ParsedNemoOverrides& p = parsed.value();
  EXPECT_EQ(p.config.tp, 4);
  EXPECT_EQ(p.config.pp, 1);
  EXPECT_EQ(p.config.vpp, 1);
  EXPECT_EQ(p.config.dp, 4);
  EXPECT_TRUE(p.config.sp);
  EXPECT_TRUE(p.config.dist_opt);
  EXPECT_EQ(p.config.recompute.granularity, RecomputeGranularity::kSelective);
  EXPECT_EQ(p.training.precision, Precision::kBf16);
  EXPECT_EQ(p.notes,
            (std::vector<std::string>{
                "activations_checkpoint_method and _num_layers are ignored "
                "without activations_checkpoint_granularity full"}));
}

constexpr const char* kTrainer =
    "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\n";
constexpr const char* kModel =
    "model:\n  micro_batch_size: 1\n  global_batch_size: 64\n"
    "  encoder_seq_length: 2048\n";

struct ErrorCase {
  std::string yaml;
  std::string message;
  std::string hint;
};

TEST(ParseNemoOverrides, ErrorsNameTheKeyAndTheFix) {
  const std::string base = std::string(kTrainer) + kModel;
  const std::vector<ErrorCase> cases = {
      {"trainer: [1, 2\n",
       "NeMo overrides:1: malformed YAML: end of sequence flow not found",
       "fix the YAML syntax on that line (indentation, ':' after keys, "
       "matching brackets and quotes)"},
      {std::string(kTrainer) + "modle:\n  micro_batch_size: 1\n",
       "NeMo overrides:5: unknown key 'modle' in NeMo override block",
       "did you mean 'model'?"},
      {kTrainer,
       "NeMo overrides:1: NeMo override block is missing required "
       "key 'model'",
       "add a line 'model: {micro_batch_size: 1, ...}'"},
      {base + "  tensor_parallel_size: 2\n",
       "NeMo overrides:9: unknown key 'tensor_parallel_size' in NeMo model "
       "section",
       "did you mean 'tensor_model_parallel_size'?"},
      {base + "  tensor_model_parallel_size: eight\n",
       "NeMo overrides:9: tensor_model_parallel_size: expected a positive "
       "integer, got 'eight'",
       "write a whole number greater than 0, e.g. "
       "'tensor_model_parallel_size: 8'"},
      {std::string(kTrainer) + "model:\n  micro_batch_size: 1\n"
                               "  global_batch_size: 64\n",
       "NeMo overrides:6: NeMo model section is missing required key "
       "'encoder_seq_length'",
       "add a line 'encoder_seq_length: <integer>'"},
      {"trainer:\n  devices: 8\n  num_nodes: 1\n  precision: fp32\n" +
           std::string(kModel),
       "NeMo overrides:4: precision: expected one of bf16-mixed, bf16, "
       "16-mixed, 16, got 'fp32'",
       "write e.g. 'precision: bf16-mixed'"},
      {base + "  activations_checkpoint_granularity: full\n",
       "NeMo overrides:9: activations_checkpoint_granularity full needs "
       "activations_checkpoint_method",
       "set activations_checkpoint_method: uniform (or block) and "
       "activations_checkpoint_num_layers: N"},
      {base + "  fp8_params: true\n",
       "NeMo overrides:9: fp8_params needs fp8: true",
       "set fp8: true or fp8_params: false"},
      {base + "  fp8_dot_product_attention: true\n",
       "NeMo overrides:9: fp8_dot_product_attention needs fp8: true",
       "set fp8: true or fp8_dot_product_attention: false"},
      {base + "  fp8_hybrid: true\n",
       "NeMo overrides:9: fp8_hybrid without fp8: true",
       "set fp8: true, or set the format keys to false"},
      {base + "  tensor_model_parallel_size: 2\n  ub_tp_comm_overlap: true\n",
       "NeMo overrides:10: ub_tp_comm_overlap needs sequence_parallel with "
       "tensor_model_parallel_size 2 or more",
       "set sequence_parallel: true or ub_tp_comm_overlap: false"},
      {base + "  virtual_pipeline_model_parallel_size: 2\n",
       "NeMo overrides:9: virtual_pipeline_model_parallel_size 2 needs "
       "pipeline_model_parallel_size 2 or more",
       "raise pipeline_model_parallel_size or set "
       "virtual_pipeline_model_parallel_size: null"},
      {base + "  optim:\n    name: fused_adam\n    grad_sync_dtype: bf16\n",
       "NeMo overrides:11: grad_sync_dtype applies only to optim.name "
       "distributed_fused_adam",
       "remove grad_sync_dtype or use distributed_fused_adam"},
      {base + "  tensor_model_parallel_size: 3\n",
       "NeMo overrides:1: trainer.devices x trainer.num_nodes = 8 GPUs is not "
       "a multiple of tp·pp·cp = 3",
       "use a multiple of 3 GPUs or smaller parallel sizes"},
  };
  for (const ErrorCase& c : cases) {
    auto parsed = ParseNemoOverrides(c.yaml);
    ASSERT_FALSE(parsed.ok()) << c.yaml;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.message) << c.yaml;
    EXPECT_EQ(parsed.status().hint(), c.hint) << c.yaml;
  }
}

}  // namespace
}  // namespace meshtune::tuner

namespace meshtune::tuner {
namespace {

// An uneven DeepSeek-V3 layout and its MoE run choices survive the block;
// the layout cannot be read without the model's layer count.
TEST(NemoOverrides, LayoutAndMoeKeysReadBackWithTheModel) {
  auto m = search_spaces::ResolveModel("deepseek-v3");
  ASSERT_TRUE(m.ok()) << m.status().message();
  search_spaces::TrainingSpec t;
  t.num_gpus = 1024;
  t.global_batch_size = 4096;
  t.seq_length = 4096;
  search_spaces::ParallelConfig c;
  c.tp = 4;
  c.pp = 16;
  c.ep = 8;
  c.etp = 1;
  c.dp = 16;
  c.layout_first_layers = 4;
  c.layout_last_layers = 1;
  auto y = NemoOverrides(m.value(), t, c, 8);
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_NE(y->find("  pipeline_model_parallel_layout: 'Et*4|(t*4|)*14tmL'\n"),
            std::string::npos)
      << y.value();
  EXPECT_NE(y->find("  expert_tensor_parallel_size: 1\n"), std::string::npos);
  EXPECT_NE(y->find("  moe_token_dispatcher_type: alltoall\n"),
            std::string::npos);
  EXPECT_NE(y->find("  moe_expert_capacity_factor: null\n"), std::string::npos);
  EXPECT_NE(y->find("  attention_backend: fused\n"), std::string::npos);
  auto back = ParseNemoOverrides(y.value(), "nemo", &m.value());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->config, c);
  EXPECT_EQ(back->moe_grouped_gemm, std::optional<bool>(true));
  auto without = ParseNemoOverrides(y.value(), "nemo");
  ASSERT_FALSE(without.ok());
  EXPECT_NE(without.status().message().find(
                "pipeline_model_parallel_layout needs the model's layer count"),
            std::string::npos)
      << without.status().message();
}

}  // namespace
}  // namespace meshtune::tuner
