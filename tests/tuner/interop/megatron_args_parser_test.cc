// ParseMegatronArgs: every preset × a spread of configurations survives
// MegatronArgs -> FormatMegatronArgs -> ParseMegatronArgs; pasted launch
// script text parses; each error has its exact message.
#include "tuner/interop/megatron_args_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "search_spaces/pipeline_layout.h"
#include "search_spaces/presets/presets.h"
#include "tests/tuner/export_round_trip.h"
#include "tuner/interop/megatron_args.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::TrainingSpec;
using testing::RoundTripCase;
using testing::RoundTripCases;

std::string Format(const RoundTripCase& c) {
  return FormatMegatronArgs(MegatronArgs(c.model, c.training, c.config));
}

// Replaces the first occurrence of `from` (which must be present).
std::string Replace(std::string text, const std::string& from,
                    const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in\n" << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void ExpectSameFields(const ParsedMegatronArgs& p, const RoundTripCase& c,
                      const std::string& text) {
  SCOPED_TRACE(c.name + "\n" + text);
  const ModelSpec& m = c.model;
  EXPECT_EQ(p.model.num_layers, m.num_layers);
  EXPECT_EQ(p.model.hidden_size, m.hidden_size);
  EXPECT_EQ(p.model.num_attention_heads, m.num_attention_heads);
  EXPECT_EQ(p.model.num_query_groups, m.num_query_groups);
  EXPECT_EQ(p.model.kv_channels, m.kv_channels);
  EXPECT_EQ(p.model.ffn_hidden_size, m.ffn_hidden_size);
  EXPECT_EQ(p.model.seq_length, std::max(m.seq_length, c.training.seq_length));
  EXPECT_EQ(p.model.normalization, m.normalization);
  EXPECT_EQ(p.model.activation, m.activation);
  EXPECT_EQ(p.model.position_embedding_type, m.position_embedding_type);
  EXPECT_EQ(p.model.untie_embeddings_and_output_weights,
            m.untie_embeddings_and_output_weights);
  EXPECT_EQ(p.model.num_experts, m.num_experts);
  EXPECT_EQ(p.model.moe_router_topk, m.moe_router_topk);
  EXPECT_EQ(p.model.moe_ffn_hidden_size, m.moe_ffn_hidden_size);
  EXPECT_EQ(p.model.moe_layer_freq, m.moe_layer_freq);
  EXPECT_EQ(p.model.use_transformer_engine_op_fuser,
            m.use_transformer_engine_op_fuser);

  const TrainingSpec& t = c.training;
  EXPECT_EQ(p.training.num_gpus, t.num_gpus);
  EXPECT_EQ(p.training.global_batch_size, t.global_batch_size);
  EXPECT_EQ(p.training.seq_length, t.seq_length);
  EXPECT_EQ(p.training.precision, t.precision);
  EXPECT_EQ(p.training.fp8_param_gather, t.fp8_param_gather);
  EXPECT_EQ(p.training.fp8_dot_product_attention, t.fp8_dot_product_attention);
  EXPECT_EQ(p.training.grad_reduce_in_bf16, t.grad_reduce_in_bf16);
  // Megatron needs sequence parallelism for --tp-comm-overlap.
  EXPECT_EQ(p.training.tp_comm_overlap,
            t.tp_comm_overlap && c.config.sp && c.config.tp > 1);
  EXPECT_TRUE(p.training.cuda_graphs == t.cuda_graphs) << c.name;

  EXPECT_TRUE(p.config == c.config)
      << search_spaces::ToString(p.config) << " vs "
      << search_spaces::ToString(c.config);
  EXPECT_TRUE(p.overlap_grad_reduce);
  EXPECT_EQ(p.overlap_param_gather, c.config.dist_opt);
  // The fused grouped MLP's weight layout changes no input of the plan.
  const bool interleave =
      m.use_transformer_engine_op_fuser && m.is_moe() && m.gated_mlp();
  EXPECT_EQ(p.ignored,
            interleave
                ? std::vector<std::string>{"--moe-mlp-glu-interleave-size"}
                : std::vector<std::string>{});
  EXPECT_TRUE(p.notes.empty());
}

TEST(MegatronArgsParser, RoundTripsEveryPresetAndConfiguration) {
  const std::vector<RoundTripCase> cases = RoundTripCases();
  // Every preset, and each kind of configuration at least once.
  EXPECT_GE(cases.size(), search_spaces::ModelPresets().size() * 5);
  int per_stage = 0, explicit_vpp = 0, moe_ep = 0, fp8 = 0, full_block = 0;
  for (const RoundTripCase& c : cases) {
    const std::string text = Format(c);
    auto parsed = ParseMegatronArgs(text, c.training.num_gpus);
    ASSERT_TRUE(parsed.ok())
        << c.name << ": " << parsed.status().message() << "\n"
        << text;
    ExpectSameFields(parsed.value(), c, text);
    per_stage += text.find("--num-layers-per-virtual-pipeline-stage") !=
                 std::string::npos;
    explicit_vpp += text.find("--virtual-pipeline-model-parallel-size") !=
                    std::string::npos;
    moe_ep += c.config.ep > 1;
    fp8 += c.training.precision == Precision::kFp8;
    full_block += c.config.recompute.method == RecomputeMethod::kBlock &&
                  c.config.recompute.granularity == RecomputeGranularity::kFull;
  }
  EXPECT_GT(per_stage, 0);
  EXPECT_GT(explicit_vpp, 0);
  EXPECT_GT(moe_ep, 0);
  EXPECT_GT(fp8, 0);
  EXPECT_GT(full_block, 0);
}

// Each interleaved case, with the vpp written the other way round.
TEST(MegatronArgsParser, ReadsVppEitherWay) {
  int checked = 0;
  for (const RoundTripCase& c : RoundTripCases()) {
    if (c.config.vpp == 1) continue;
    const std::string text = Format(c);
    const bool accounts =
        search_spaces::PipelineLayout::AccountsEmbeddingAndLoss(
            c.model.num_layers, c.config.pp, c.config.vpp);
    const int64_t units = c.model.num_layers + (accounts ? 2 : 0);
    const std::string per_stage =
        "--num-layers-per-virtual-pipeline-stage " +
        std::to_string(units / (c.config.pp * c.config.vpp));
    const std::string vpp = "--virtual-pipeline-model-parallel-size " +
                            std::to_string(c.config.vpp);
    const std::string other = accounts ? Replace(text, vpp, per_stage)
                                       : Replace(text, per_stage, vpp);
    auto parsed = ParseMegatronArgs(other, c.training.num_gpus);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << other;
    ExpectSameFields(parsed.value(), c, other);
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(MegatronArgsParser, ReadsPastedLaunchScriptText) {
  const std::string text =
      "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\\n"
      "    --num-layers 32 --hidden-size 4096 \\   \n"
      "\t--num-attention-heads=32 --seq-length 4096 # model shape\n"
      "    --swiglu --normalization 'RMSNorm' --position-embedding-type rope\n"
      "    --group-query-attention --num-query-groups 8 \\\n"
      "    --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 \\\n"
      "    --sequence-parallel --micro-batch-size 2 --global-batch-size 256 "
      "\\\n"
      "    --lr 3e-4 --min-lr=3e-5 --data-path 0.5 \"/data/a b\" 0.5 /data/c "
      "\\\n"
      "    --use-flash-attn --recompute-activations --bf16\n";
  auto parsed = ParseMegatronArgs(text, 16);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const ParsedMegatronArgs& p = parsed.value();
  EXPECT_EQ(p.model.num_layers, 32);
  EXPECT_EQ(p.model.num_attention_heads, 32);
  EXPECT_EQ(p.model.num_query_groups, 8);
  EXPECT_EQ(p.model.kv_channels, 128);
  // Megatron's SwiGLU default: int(4·h·2/3 / 64)·64.
  EXPECT_EQ(p.model.ffn_hidden_size, 10880);
  EXPECT_EQ(p.model.normalization, search_spaces::Normalization::kRMSNorm);
  EXPECT_EQ(p.model.seq_length, 4096);
  EXPECT_EQ(p.config.tp, 4);
  EXPECT_EQ(p.config.pp, 2);
  EXPECT_EQ(p.config.dp, 2);
  EXPECT_EQ(p.config.mbs, 2);
  EXPECT_TRUE(p.config.sp);
  EXPECT_EQ(p.config.recompute.granularity, RecomputeGranularity::kSelective);
  EXPECT_EQ(p.training.global_batch_size, 256);
  EXPECT_EQ(p.training.precision, Precision::kBf16);
  EXPECT_EQ(p.ignored,
            (std::vector<std::string>{"--lr", "--min-lr", "--data-path",
                                      "--use-flash-attn"}));
  EXPECT_FALSE(p.overlap_grad_reduce);
}

TEST(MegatronArgsParser, AppliesMegatronDefaultsAndAdjustments) {
  auto parsed = ParseMegatronArgs(
      "--num-layers 4 --hidden-size 256 --num-attention-heads 4 "
      "--seq-length 128 --global-batch-size 8 --fp16 --sequence-parallel "
      "--num-experts 4 --expert-model-parallel-size 2 --vocab-size 32000");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const ParsedMegatronArgs& p = parsed.value();
  EXPECT_EQ(p.model.ffn_hidden_size, 1024);
  EXPECT_EQ(p.model.kv_channels, 64);
  EXPECT_EQ(p.model.moe_router_topk, 2);
  EXPECT_EQ(p.model.vocab_size, 32000);
  EXPECT_EQ(p.config.ep, 2);
  EXPECT_EQ(p.config.dp, 0);  // no world size given
  EXPECT_EQ(p.config.mbs, 1);
  EXPECT_EQ(p.training.precision, Precision::kFp16);
  EXPECT_FALSE(p.config.sp);
  EXPECT_EQ(p.notes,
            (std::vector<std::string>{"--sequence-parallel is off with "
                                      "--tensor-model-parallel-size 1"}));
}

TEST(MegatronArgsParser, IgnoredFlagsAreSortedAndDisjointFromPlanFlags) {
  const auto& ignored = IgnoredMegatronFlags();
  EXPECT_TRUE(std::is_sorted(ignored.begin(), ignored.end()));
  EXPECT_TRUE(std::binary_search(ignored.begin(), ignored.end(), "--lr"));
  EXPECT_TRUE(
      std::binary_search(ignored.begin(), ignored.end(), "--train-iters"));
  EXPECT_FALSE(std::binary_search(ignored.begin(), ignored.end(),
                                  "--tensor-model-parallel-size"));
}

constexpr const char* kBase =
    "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 "
    "--seq-length 2048 --global-batch-size 512 --bf16 ";

struct ErrorCase {
  std::string text;
  std::string message;
  std::string hint;
};

TEST(MegatronArgsParser, ErrorsNameTheFlagAndTheFix) {
  const std::vector<ErrorCase> cases = {
      {"", "no Megatron arguments given",
       "paste the pretrain_gpt.py arguments, e.g. the output of 'tune export "
       "--format megatron'"},
      {std::string(kBase) + "--tensor-model-paralel-size 2",
       "unknown Megatron argument '--tensor-model-paralel-size'",
       "did you mean '--tensor-model-parallel-size'? meshtune reads the flags "
       "that shape the parallel plan and skips common ones that do not "
       "(docs/export.md lists both)"},
      {std::string(kBase) + "--my-custom-thing 3",
       "unknown Megatron argument '--my-custom-thing'",
       "meshtune reads the flags that shape the parallel plan and skips common "
       "ones that do not (docs/export.md lists both); remove "
       "'--my-custom-thing'"},
      {std::string(kBase) + "--tensor-model-parallel-size",
       "--tensor-model-parallel-size: missing value",
       "give it a positive integer, e.g. --tensor-model-parallel-size 8"},
      {std::string(kBase) +
           "--pipeline-model-parallel-size --sequence-parallel",
       "--pipeline-model-parallel-size: missing value",
       "give it a positive integer, e.g. --pipeline-model-parallel-size 8"},
      {std::string(kBase) + "--recompute-granularity=",
       "--recompute-granularity: missing value",
       "give it a value, e.g. --recompute-granularity selective"},
      {std::string(kBase) + "--micro-batch-size two",
       "--micro-batch-size: expected a positive integer, got 'two'",
       "e.g. --micro-batch-size 8"},
      {std::string(kBase) + "--context-parallel-size 0",
       "--context-parallel-size: expected a positive integer, got '0'",
       "e.g. --context-parallel-size 8"},
      {std::string(kBase) + "--sequence-parallel true",
       "--sequence-parallel takes no value, got 'true'",
       "write --sequence-parallel alone to turn it on; leave it out to turn it "
       "off"},
      {std::string(kBase) + "--micro-batch-size 2 4",
       "unexpected '4' after --micro-batch-size 2",
       "--micro-batch-size takes one value; quote values that contain spaces"},
      {std::string(kBase) + "--micro-batch-size 2 --micro-batch-size 4",
       "--micro-batch-size given twice",
       "keep one of them (Megatron silently uses the last)"},
      {"python train.sh --num-layers 2",
       "unexpected 'python' where a Megatron argument (--flag) was expected",
       "each argument is --flag or --flag VALUE; quote values that contain "
       "spaces"},
      {"--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --bf16 "
       "--seq-length 2048",
       "missing --global-batch-size",
       "the arguments must give the model shape and the batch: --num-layers, "
       "--hidden-size, --num-attention-heads, --seq-length, "
       "--global-batch-size"},
      {std::string(kBase) + "--data-path 'a b",
       "unterminated ' quote in the Megatron arguments",
       "close the quote or remove it"},
      {std::string(kBase) + "--fp16", "--bf16 and --fp16 contradict each other",
       "keep one of them"},
      {"--num-layers 24 --hidden-size 2048 --num-attention-heads 16 "
       "--seq-length 2048 --global-batch-size 512",
       "no precision flag: neither --bf16 nor --fp16",
       "add --bf16 (meshtune plans 16-bit and fp8 training, not fp32)"},
      {std::string(kBase) + "--fp8-param-gather",
       "--fp8-param-gather needs --fp8-format",
       "add --fp8-format hybrid or remove --fp8-param-gather"},
      {std::string(kBase) + "--fp8-dot-product-attention",
       "--fp8-dot-product-attention needs --fp8-format",
       "add --fp8-format hybrid or remove --fp8-dot-product-attention"},
      {std::string(kBase) + "--fp8-format e5m2",
       "--fp8-format: expected one of hybrid, e4m3, got 'e5m2'",
       "e.g. --fp8-format hybrid"},
      {std::string(kBase) + "--normalization rmsnorm",
       "--normalization: expected one of LayerNorm, RMSNorm, got 'rmsnorm'",
       "e.g. --normalization LayerNorm"},
      {std::string(kBase) + "--recompute-granularity full",
       "--recompute-granularity full needs --recompute-method",
       "add --recompute-method uniform (or block) and --recompute-num-layers "
       "N"},
      {std::string(kBase) + "--recompute-granularity selective "
                            "--recompute-num-layers 2",
       "--recompute-num-layers applies only to --recompute-granularity full",
       "remove --recompute-num-layers or add --recompute-granularity full"},
      {std::string(kBase) + "--tensor-model-parallel-size 2 --tp-comm-overlap",
       "--tp-comm-overlap needs --sequence-parallel with "
       "--tensor-model-parallel-size 2 or more",
       "add --sequence-parallel or remove --tp-comm-overlap"},
      {std::string(kBase) + "--overlap-param-gather",
       "--overlap-param-gather needs --use-distributed-optimizer",
       "add --use-distributed-optimizer or remove --overlap-param-gather"},
      {std::string(kBase) + "--num-query-groups 4",
       "--num-query-groups without --group-query-attention",
       "add --group-query-attention (Megatron ignores --num-query-groups "
       "without it)"},
      {std::string(kBase) + "--group-query-attention --num-query-groups 5",
       "--num-query-groups 5 does not divide --num-attention-heads 16",
       "use a divisor of the number of heads"},
      {std::string(kBase) + "--expert-model-parallel-size 2",
       "--expert-model-parallel-size needs --num-experts",
       "add --num-experts E for a mixture-of-experts model, or remove "
       "--expert-model-parallel-size"},
      {std::string(kBase) + "--pipeline-model-parallel-size 4 "
                            "--virtual-pipeline-model-parallel-size 2 "
                            "--num-layers-per-virtual-pipeline-stage 3",
       "--virtual-pipeline-model-parallel-size and "
       "--num-layers-per-virtual-pipeline-stage both set the interleaving",
       "keep one of them"},
      {std::string(kBase) + "--pipeline-model-parallel-size 4 "
                            "--num-layers-per-virtual-pipeline-stage 4",
       "--num-layers-per-virtual-pipeline-stage 4 does not divide the 24 "
       "layers per 4 pipeline stages evenly",
       "use a divisor of num_layers / pipeline-model-parallel-size"},
      {std::string(kBase) + "--virtual-pipeline-model-parallel-size 2",
       "interleaving (vpp 2) needs --pipeline-model-parallel-size 2 or more",
       "raise --pipeline-model-parallel-size or drop the virtual pipeline "
       "flag"},
      {std::string(kBase) + "--pipeline-model-parallel-size 5",
       "--num-layers 24 over pp 5 x vpp 1 virtual stages has no even layer "
       "split",
       "choose pp·vpp dividing num_layers (or num_layers + 2)"},
      {std::string(kBase) + "--pipeline-model-parallel-size 13",
       "--num-layers 24 over pp 13 x vpp 1 splits evenly only when the "
       "embedding and loss count as layers",
       "add --account-for-embedding-in-pipeline-split and "
       "--account-for-loss-in-pipeline-split"},
      {std::string(kBase) + "--pipeline-model-parallel-size 4 "
                            "--account-for-embedding-in-pipeline-split "
                            "--account-for-loss-in-pipeline-split",
       "--num-layers 24 over pp 4 x vpp 1 splits evenly without the "
       "--account-for-*-in-pipeline-split flags, which would make the split "
       "uneven",
       "remove --account-for-embedding-in-pipeline-split and "
       "--account-for-loss-in-pipeline-split"},
      {std::string(kBase) + "--account-for-loss-in-pipeline-split",
       "--account-for-loss-in-pipeline-split without "
       "--account-for-embedding-in-pipeline-split",
       "give both (meshtune's layout counts the embedding and the loss as one "
       "layer each) or neither"},
  };
  for (const ErrorCase& c : cases) {
    auto parsed = ParseMegatronArgs(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.message) << c.text;
    EXPECT_EQ(parsed.status().hint(), c.hint) << c.text;
  }
}

TEST(MegatronArgsParser, WorldSizeMustBeAMultipleOfModelParallelism) {
  auto parsed = ParseMegatronArgs(
      std::string(kBase) + "--tensor-model-parallel-size 4", 6);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "6 GPUs is not a multiple of tp·pp·cp = 4");
  EXPECT_EQ(parsed.status().hint(), "run on a multiple of 4 GPUs");
}

// ---- ApplyMegatronFlags: a run's flags on top of existing specs. ----

// A 4-layer, 160-expert MoE model (DeepSeek-V2's expert count) with
// Megatron's defaults elsewhere.
ModelSpec SmallMoe() {
  ModelSpec m;
  m.name = "small-moe";
  m.num_layers = 4;
  m.hidden_size = 1024;
  m.num_attention_heads = 8;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.ffn_hidden_size = 4096;
  m.vocab_size = 32000;
  m.seq_length = 4096;
  m.num_experts = 160;
  m.moe_router_topk = 6;
  m.moe_grouped_gemm = false;
  return m;
}

TEST(ApplyMegatronFlags, EveryFlagOfTheMeasuredB200Rows) {
  ModelSpec m = SmallMoe();
  TrainingSpec t;
  ParallelConfig c;
  auto applied = ApplyMegatronFlags(
      "--use-distributed-optimizer --cross-entropy-loss-fusion "
      "--transformer-impl transformer_engine --moe-layer-freq "
      "([0]*1+[1]*3) --moe-token-dispatcher-type alltoall "
      "--moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity "
      "--moe-grouped-gemm --moe-permute-fusion --moe-router-pre-softmax "
      "--moe-router-topk-scaling-factor 16 --moe-router-num-groups 8 "
      "--moe-router-group-topk 3 --qk-layernorm",
      &m, &t, &c);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_TRUE(c.dist_opt);
  EXPECT_EQ(m.moe_layer_pattern, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(m.num_moe_layers(), 3);
  EXPECT_EQ(m.moe_token_dispatcher_type,
            search_spaces::TokenDispatcher::kAlltoall);
  EXPECT_EQ(m.moe_expert_capacity_factor, 1.0);
  EXPECT_TRUE(m.moe_pad_expert_input_to_capacity);
  EXPECT_TRUE(m.moe_grouped_gemm);
  EXPECT_TRUE(m.moe_router_pre_softmax);
  EXPECT_EQ(m.moe_router_num_groups, 8);
  EXPECT_EQ(m.moe_router_group_topk, 3);
  EXPECT_TRUE(m.qk_layernorm);
  // Nothing else turned on.
  EXPECT_FALSE(t.tp_comm_overlap);
  EXPECT_FALSE(t.grad_reduce_in_bf16);
  EXPECT_FALSE(t.fp8_param_gather);
  EXPECT_FALSE(t.fp8_dot_product_attention);
  EXPECT_TRUE(t.cross_entropy_loss_fusion);
  EXPECT_FALSE(t.overlap_grad_reduce);  // Megatron's default: no overlap
  EXPECT_EQ(
      applied.value().without_effect,
      (std::vector<std::string>{"--transformer-impl", "--moe-permute-fusion",
                                "--moe-router-topk-scaling-factor"}));
  EXPECT_TRUE(m.Validate().ok()) << m.Validate().message();

  // The integer form, the allow-listed flags and the overlap switches.
  ModelSpec m2 = SmallMoe();
  TrainingSpec t2;
  t2.precision = Precision::kFp8Tensorwise;
  ParallelConfig c2;
  c2.tp = 2;
  c2.sp = true;
  applied = ApplyMegatronFlags(
      "--moe-layer-freq 2 --moe-token-dispatcher-type flex --lr 3e-4 "
      "--use-distributed-optimizer --fp8-param-gather --tp-comm-overlap "
      "--grad-reduce-in-bf16 --overlap-grad-reduce "
      "--fp8-dot-product-attention",
      &m2, &t2, &c2);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(m2.moe_layer_freq, 2);
  EXPECT_TRUE(m2.moe_layer_pattern.empty());
  EXPECT_EQ(m2.moe_token_dispatcher_type,
            search_spaces::TokenDispatcher::kFlex);
  EXPECT_TRUE(t2.fp8_param_gather);
  EXPECT_TRUE(t2.fp8_dot_product_attention);
  EXPECT_TRUE(t2.tp_comm_overlap);
  EXPECT_TRUE(t2.grad_reduce_in_bf16);
  EXPECT_TRUE(t2.overlap_grad_reduce);
  EXPECT_FALSE(t2.overlap_param_gather);
  EXPECT_EQ(applied.value().without_effect, (std::vector<std::string>{"--lr"}));

  // --cp-comm-type picks the CP collective; other values are refused.
  ModelSpec m3 = SmallMoe();
  TrainingSpec t3;
  ParallelConfig c3;
  ASSERT_TRUE(ApplyMegatronFlags("--cp-comm-type a2a", &m3, &t3, &c3).ok());
  EXPECT_TRUE(t3.cp_comm_a2a);
  auto bad = ApplyMegatronFlags("--cp-comm-type ring", &m3, &t3, &c3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--cp-comm-type: expected p2p or a2a, got 'ring'");
}

TEST(ApplyMegatronFlags, ErrorsNameTheFlag) {
  auto error = [](const std::string& text, ModelSpec m = SmallMoe()) {
    TrainingSpec t;
    ParallelConfig c;
    auto applied = ApplyMegatronFlags(text, &m, &t, &c);
    return applied.ok() ? std::string("ok") : applied.status().message();
  };
  EXPECT_EQ(error("--use-distributed-optimizer --frobnicate 3"),
            "unknown Megatron argument '--frobnicate'");
  EXPECT_EQ(error("--qk-layernorm --qk-layernorm"),
            "--qk-layernorm given twice");
  EXPECT_EQ(error("--qk-layernorm yes"),
            "--qk-layernorm takes no value, got 'yes'");
  EXPECT_EQ(error("--moe-router-num-groups"),
            "--moe-router-num-groups: missing value");
  EXPECT_EQ(error("--moe-pad-expert-input-to-capacity"),
            "--moe-pad-expert-input-to-capacity needs "
            "--moe-expert-capacity-factor");
  EXPECT_EQ(error("--moe-layer-freq ([0]*1+[1]*5)"),
            "--moe-layer-freq ([0]*1+[1]*5) has 6 entries for 4 layers");
  EXPECT_EQ(error("--moe-router-num-groups 7"),
            "--moe-router-num-groups 7 does not divide the 160 experts");
  EXPECT_EQ(error("--moe-router-group-topk 3"),
            "--moe-router-group-topk 3 needs --moe-router-num-groups of at "
            "least that many groups");
  EXPECT_EQ(error("--moe-expert-capacity-factor none"),
            "--moe-expert-capacity-factor: expected a positive number, got "
            "'none'");
  EXPECT_EQ(error("--moe-token-dispatcher-type deepep"),
            "--moe-token-dispatcher-type: expected one of allgather, "
            "alltoall, flex, got 'deepep'");
  EXPECT_EQ(error("--transformer-impl inference"),
            "--transformer-impl: expected one of transformer_engine, local, "
            "got 'inference'");
  EXPECT_EQ(error("--tp-comm-overlap"),
            "--tp-comm-overlap needs sequence parallelism with tp 2 or more");
  EXPECT_EQ(error("--fp8-param-gather"),
            "--fp8-param-gather needs an fp8/fp4 precision and "
            "--use-distributed-optimizer");
  EXPECT_EQ(error("--fp8-dot-product-attention"),
            "--fp8-dot-product-attention needs an fp8 precision");
  EXPECT_EQ(error("pretrain_gpt.py --qk-layernorm"),
            "unexpected 'pretrain_gpt.py' where a Megatron argument (--flag) "
            "was expected");
  ModelSpec dense = SmallMoe();
  dense.num_experts = 0;
  dense.name = "dense";
  EXPECT_EQ(error("--moe-grouped-gemm", dense),
            "--moe-grouped-gemm needs a mixture-of-experts model, and 'dense' "
            "has no experts");
  EXPECT_EQ(error("--qk-layernorm '--unterminated"),
            "unterminated ' quote in the Megatron arguments");
}

}  // namespace
}  // namespace meshtune::tuner

namespace meshtune::tuner {
namespace {

const char* kSmall =
    "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
    "--seq-length 1024 --global-batch-size 8 --bf16 ";

// Absent flags take Megatron's defaults, not meshtune's model defaults.
TEST(MegatronArgsParser, NewVocabularyDefaultsAreMegatrons) {
  auto p = ParseMegatronArgs(std::string(kSmall) +
                             "--num-experts 8 --multi-latent-attention");
  ASSERT_TRUE(p.ok()) << p.status().message();
  const ModelSpec& m = p->model;
  EXPECT_TRUE(m.has_linear_biases());  // add_bias_linear defaults to true
  EXPECT_EQ(m.q_lora_rank, 0);
  EXPECT_EQ(m.kv_lora_rank, 32);
  EXPECT_EQ(m.qk_head_dim, 128);
  EXPECT_EQ(m.qk_pos_emb_head_dim, 64);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.moe_token_dispatcher_type,
            search_spaces::TokenDispatcher::kAllgather);
  EXPECT_FALSE(m.moe_grouped_gemm);
  EXPECT_EQ(m.moe_expert_capacity_factor, 0.0);
  EXPECT_EQ(m.window_size, -1);
  EXPECT_EQ(p->attention_backend, "");

  auto q = ParseMegatronArgs(std::string(kSmall) +
                             "--disable-bias-linear --rotary-base 1000000 "
                             "--position-embedding-type rope "
                             "--window-size 127,0 --window-attn-skip-freq 2 "
                             "--attention-backend fused --mtp-num-layers 2 "
                             "--moe-token-drop-policy position");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_FALSE(q->model.has_linear_biases());
  EXPECT_EQ(q->model.rotary_base, 1e6);
  EXPECT_EQ(q->model.window_size, 127);
  EXPECT_EQ(q->model.window_attn_skip_freq, 2);
  EXPECT_EQ(q->model.mtp_num_layers, 2);
  EXPECT_EQ(q->attention_backend, "fused");
  EXPECT_EQ(q->ignored, std::vector<std::string>{"--moe-token-drop-policy"});
}

TEST(MegatronArgsParser, NewVocabularyErrorsNameTheFlag) {
  auto error = [](const std::string& extra) {
    auto p = ParseMegatronArgs(std::string(kSmall) + extra);
    return p.ok() ? std::string("(parsed)") : p.status().message();
  };
  EXPECT_EQ(error("--q-lora-rank 64"),
            "--q-lora-rank needs --multi-latent-attention");
  EXPECT_EQ(error("--moe-latent-size 64"),
            "--moe-latent-size needs --num-experts");
  EXPECT_EQ(error("--num-experts 8 --moe-router-enable-expert-bias"),
            "--moe-router-enable-expert-bias needs --moe-router-score-function "
            "sigmoid or sqrtsoftplus");
  EXPECT_EQ(error("--num-experts 8 --moe-router-num-groups 2"),
            "--moe-router-num-groups and --moe-router-group-topk go together");
  EXPECT_EQ(error("--num-experts 8 --moe-router-num-groups 3 "
                  "--moe-router-group-topk 1"),
            "--moe-router-num-groups 3 with --moe-router-group-topk 1 for 8 "
            "experts");
  EXPECT_EQ(error("--num-experts 8 --moe-pad-expert-input-to-capacity"),
            "--moe-pad-expert-input-to-capacity needs "
            "--moe-expert-capacity-factor");
  EXPECT_EQ(error("--num-experts 8 --moe-token-dispatcher-type ring"),
            "--moe-token-dispatcher-type: expected one of allgather, "
            "alltoall, flex, got 'ring'");
  EXPECT_EQ(error("--window-size 128,128"),
            "--window-size 128,128: a causal decoder needs a left window >= 0 "
            "and a right window of 0");
  EXPECT_EQ(error("--window-size 128"),
            "--window-size: expected Megatron's 'LEFT,RIGHT' window in "
            "tokens, got '128'");
  EXPECT_EQ(error("--window-attn-skip-freq 2"),
            "--window-attn-skip-freq without a sliding window");
  EXPECT_EQ(error("--rotary-base 0"),
            "--rotary-base: expected a positive number, got '0'");
  EXPECT_EQ(error("--attention-backend cudnn"),
            "--attention-backend: expected one of flash, fused, unfused, "
            "local, auto, got 'cudnn'");
  EXPECT_EQ(error("--hybrid-layer-pattern 'M*/*' --mtp-num-layers 2"),
            "--mtp-num-layers 2 but --hybrid-layer-pattern has 1 MTP depths "
            "('/' parts)");
}

// A DeepSeek-V3-style uneven layout with an MTP layer on the last stage
// reads back only when --mtp-num-layers is read first.
TEST(MegatronArgsParser, LayoutWithMtpReadsBack) {
  auto p = ParseMegatronArgs(
      "--num-layers 61 --hidden-size 7168 --num-attention-heads 128 "
      "--seq-length 4096 --global-batch-size 4096 --bf16 --mtp-num-layers 1 "
      "--position-embedding-type rope "
      "--pipeline-model-parallel-size 16 "
      "--pipeline-model-parallel-layout 'Et*4|(t*4|)*14tmL'");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->config.layout_first_layers, 4);
  EXPECT_EQ(p->config.layout_last_layers, 1);
  EXPECT_EQ(p->config.vpp, 1);
}

TEST(ApplyMegatronFlags, BiasesRopeBaseAndAttentionBackend) {
  ModelSpec m;
  m.name = "m";
  TrainingSpec t;
  ParallelConfig c;
  auto applied = ApplyMegatronFlags(
      "--disable-bias-linear --rotary-base 500000 --attention-backend fused",
      &m, &t, &c);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_FALSE(m.has_linear_biases());
  EXPECT_EQ(m.rotary_base, 500000);
  EXPECT_EQ(applied->without_effect,
            std::vector<std::string>{"--attention-backend"});
  auto bad = ApplyMegatronFlags("--attention-backend best", &m, &t, &c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--attention-backend: expected one of flash, fused, unfused, "
            "local, auto, got 'best'");
}

}  // namespace
}  // namespace meshtune::tuner

namespace meshtune::tuner {
namespace {

TEST(MegatronArgsParser, ForcedLoadBalancingRoundTrips) {
  auto model = search_spaces::ResolveModel("qwen3-30b-a3b");
  ASSERT_TRUE(model.ok());
  ModelSpec m = model.value();
  m.moe_router_force_load_balancing = true;
  TrainingSpec t;
  t.num_gpus = 8;
  t.global_batch_size = 512;
  t.seq_length = 4096;
  ParallelConfig c;
  c.ep = 8;
  c.dp = 8;
  const std::string text = FormatMegatronArgs(MegatronArgs(m, t, c));
  ASSERT_NE(text.find("--moe-router-force-load-balancing"), std::string::npos)
      << text;
  auto parsed = ParseMegatronArgs(text, 8);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(parsed.value().model.moe_router_force_load_balancing);
  // Without the flag Megatron routes by the router's scores.
  m.moe_router_force_load_balancing = false;
  auto plain = ParseMegatronArgs(FormatMegatronArgs(MegatronArgs(m, t, c)), 8);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain.value().model.moe_router_force_load_balancing);
}

TEST(MegatronArgsParser, MegatronFsdpAndOffloadingRoundTrip) {
  auto model = search_spaces::ResolveModel("llama3-70b");
  ASSERT_TRUE(model.ok());
  TrainingSpec t;
  t.num_gpus = 64;
  t.global_batch_size = 256;
  t.seq_length = 8192;
  t.megatron_fsdp = true;
  t.cpu_offloading_num_layers = 20;
  ParallelConfig c;
  c.dp = 64;
  const std::string text =
      FormatMegatronArgs(MegatronArgs(model.value(), t, c));
  for (const char* flag :
       {"--use-megatron-fsdp",
        "--data-parallel-sharding-strategy "
        "optim_grads_params",
        "--cpu-offloading", "--cpu-offloading-num-layers 20"}) {
    EXPECT_NE(text.find(flag), std::string::npos) << flag << "\n" << text;
  }
  auto parsed = ParseMegatronArgs(text, 64);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(parsed.value().training.megatron_fsdp);
  EXPECT_EQ(parsed.value().training.cpu_offloading_num_layers, 20);
  // The strategies meshtune does not model are named.
  std::string zero2_text = text;
  const std::string full = "optim_grads_params";
  zero2_text.replace(zero2_text.find(full), full.size(), "optim_grads");
  auto zero2 = ParseMegatronArgs(zero2_text, 64);
  ASSERT_FALSE(zero2.ok());
  EXPECT_EQ(zero2.status().message(),
            "--data-parallel-sharding-strategy 'optim_grads' is not modelled "
            "(no_shard, optim and optim_grads_params are)");
}

TEST(MegatronArgsParser, EpOverlapRoundTripsAndDelayedWgradNeedsIt) {
  auto model = search_spaces::ResolveModel("deepseek-v2-lite");
  ASSERT_TRUE(model.ok());
  TrainingSpec t;
  t.num_gpus = 8;
  t.global_batch_size = 64;
  t.seq_length = 4096;
  t.moe_ep_overlap = true;
  ParallelConfig c;
  c.dp = 8;
  c.ep = 8;
  const std::string text =
      FormatMegatronArgs(MegatronArgs(model.value(), t, c));
  EXPECT_NE(text.find("--overlap-moe-expert-parallel-comm"), std::string::npos)
      << text;
  EXPECT_NE(text.find("--delay-wgrad-compute"), std::string::npos) << text;
  auto parsed = ParseMegatronArgs(text, 8);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(parsed.value().training.moe_ep_overlap);
  // Without EP there is nothing to overlap: not exported.
  c.ep = 1;
  EXPECT_EQ(FormatMegatronArgs(MegatronArgs(model.value(), t, c))
                .find("--overlap-moe-expert-parallel-comm"),
            std::string::npos);
  // Megatron asserts the delayed wgrad only with the overlap.
  std::string alone = text;
  const std::string flag = "--overlap-moe-expert-parallel-comm";
  alone.replace(alone.find(flag), flag.size(), "");
  auto bad = ParseMegatronArgs(alone, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm");
}

}  // namespace
}  // namespace meshtune::tuner
