// The Megatron-LM argument list for GPT-style, LLaMA-style (GQA) and MoE
// models, checked flag by flag against megatron/training/arguments.py names.
#include "tuner/megatron_args.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace meshtune::tuner {
namespace {

using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::TrainingSpec;

bool Has(const std::vector<std::string>& args, const std::string& a) {
  return std::find(args.begin(), args.end(), a) != args.end();
}

ModelSpec Gpt175b() {
  ModelSpec m;
  m.name = "gpt3-175b";
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.num_attention_heads = 96;
  m.num_query_groups = 96;
  m.kv_channels = 128;
  m.ffn_hidden_size = 49152;
  m.vocab_size = 50257;
  m.seq_length = 2048;
  return m;
}

ModelSpec Llama70b() {
  ModelSpec m;
  m.name = "llama3-70b";
  m.num_layers = 80;
  m.hidden_size = 8192;
  m.num_attention_heads = 64;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.ffn_hidden_size = 28672;
  m.vocab_size = 128256;
  m.seq_length = 8192;
  m.normalization = search_spaces::Normalization::kRMSNorm;
  m.activation = search_spaces::Activation::kSwiglu;
  m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
  m.untie_embeddings_and_output_weights = true;
  return m;
}

TEST(MegatronArgs, Gpt3WithInterleavingAndSelectiveRecompute) {
  TrainingSpec t;
  t.global_batch_size = 1536;
  t.seq_length = 2048;
  ParallelConfig c;
  c.tp = 8;
  c.pp = 8;
  c.vpp = 3;
  c.dp = 16;
  c.sp = true;
  c.recompute.granularity = RecomputeGranularity::kSelective;
  const auto a = MegatronArgs(Gpt175b(), t, c);
  EXPECT_TRUE(Has(a, "--num-layers 96"));
  EXPECT_TRUE(Has(a, "--hidden-size 12288"));
  EXPECT_TRUE(Has(a, "--num-attention-heads 96"));
  EXPECT_FALSE(Has(a, "--group-query-attention"));
  EXPECT_TRUE(Has(a, "--ffn-hidden-size 49152"));
  EXPECT_TRUE(Has(a, "--seq-length 2048"));
  EXPECT_TRUE(Has(a, "--max-position-embeddings 2048"));
  EXPECT_TRUE(Has(a, "--tensor-model-parallel-size 8"));
  EXPECT_TRUE(Has(a, "--pipeline-model-parallel-size 8"));
  EXPECT_TRUE(Has(a, "--num-layers-per-virtual-pipeline-stage 4"));  // 96/(8·3)
  EXPECT_TRUE(Has(a, "--context-parallel-size 1"));
  EXPECT_TRUE(Has(a, "--sequence-parallel"));
  EXPECT_FALSE(Has(a, "--use-distributed-optimizer"));
  EXPECT_TRUE(Has(a, "--overlap-grad-reduce"));
  EXPECT_FALSE(Has(a, "--overlap-param-gather"));  // needs dist opt
  EXPECT_TRUE(Has(a, "--recompute-granularity selective"));
  EXPECT_FALSE(Has(a, "--recompute-method uniform"));
  EXPECT_TRUE(Has(a, "--micro-batch-size 1"));
  EXPECT_TRUE(Has(a, "--global-batch-size 1536"));
  EXPECT_TRUE(Has(a, "--bf16"));
  EXPECT_FALSE(Has(a, "--swiglu"));
  EXPECT_FALSE(Has(a, "--expert-model-parallel-size 1"));  // dense model
}

TEST(MegatronArgs, LlamaGqaFullRecomputeFp8) {
  TrainingSpec t;
  t.global_batch_size = 1024;
  t.seq_length = 8192;
  t.precision = Precision::kFp8;
  ParallelConfig c;
  c.tp = 8;
  c.pp = 4;
  c.dp = 2;
  c.dist_opt = true;
  c.recompute.granularity = RecomputeGranularity::kFull;
  c.recompute.method = RecomputeMethod::kBlock;
  c.recompute.num_layers = 5;
  const auto a = MegatronArgs(Llama70b(), t, c);
  EXPECT_TRUE(Has(a, "--group-query-attention"));
  EXPECT_TRUE(Has(a, "--num-query-groups 8"));
  EXPECT_TRUE(Has(a, "--normalization RMSNorm"));
  EXPECT_TRUE(Has(a, "--swiglu"));
  EXPECT_TRUE(Has(a, "--position-embedding-type rope"));
  EXPECT_TRUE(Has(a, "--untie-embeddings-and-output-weights"));
  EXPECT_FALSE(Has(a, "--num-layers-per-virtual-pipeline-stage 20"));
  EXPECT_TRUE(Has(a, "--use-distributed-optimizer"));
  EXPECT_TRUE(Has(a, "--overlap-param-gather"));
  EXPECT_TRUE(Has(a, "--recompute-granularity full"));
  EXPECT_TRUE(Has(a, "--recompute-method block"));
  EXPECT_TRUE(Has(a, "--recompute-num-layers 5"));
  EXPECT_TRUE(Has(a, "--bf16"));
  EXPECT_TRUE(Has(a, "--fp8-format hybrid"));
  EXPECT_FALSE(Has(a, "--sequence-parallel"));
  EXPECT_FALSE(Has(a, "--fp8-param-gather"));
  EXPECT_FALSE(Has(a, "--grad-reduce-in-bf16"));

  t.fp8_param_gather = true;
  t.grad_reduce_in_bf16 = true;
  const auto b = MegatronArgs(Llama70b(), t, c);
  EXPECT_TRUE(Has(b, "--fp8-param-gather"));
  EXPECT_TRUE(Has(b, "--grad-reduce-in-bf16"));
  EXPECT_FALSE(Has(b, "--tp-comm-overlap"));  // not asked for
  t.tp_comm_overlap = true;
  EXPECT_FALSE(Has(MegatronArgs(Llama70b(), t, c), "--tp-comm-overlap"))
      << "Megatron needs --sequence-parallel for it";
  c.sp = true;
  EXPECT_TRUE(Has(MegatronArgs(Llama70b(), t, c), "--tp-comm-overlap"));
}

TEST(MegatronArgs, MoeFlags) {
  ModelSpec m = Llama70b();
  m.num_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 14336;
  TrainingSpec t;
  t.global_batch_size = 256;
  t.seq_length = 4096;
  t.precision = Precision::kFp16;
  ParallelConfig c;
  c.tp = 2;
  c.ep = 4;
  c.dp = 8;
  const auto a = MegatronArgs(m, t, c);
  EXPECT_TRUE(Has(a, "--expert-model-parallel-size 4"));
  EXPECT_TRUE(Has(a, "--num-experts 8"));
  EXPECT_TRUE(Has(a, "--moe-router-topk 2"));
  EXPECT_TRUE(Has(a, "--moe-ffn-hidden-size 14336"));
  EXPECT_TRUE(Has(a, "--fp16"));
  EXPECT_FALSE(Has(a, "--bf16"));
  EXPECT_TRUE(Has(a, "--max-position-embeddings 8192"));
}

TEST(FormatMegatronArgs, TrailingBackslashesExceptLast) {
  EXPECT_EQ(FormatMegatronArgs({"--a 1", "--b", "--c 3"}),
            "--a 1 \\\n--b \\\n--c 3\n");
}

}  // namespace
}  // namespace meshtune::tuner

namespace meshtune::tuner {
namespace {

TEST(MegatronArgs, UnevenLayersCountEmbeddingAndLoss) {
  ModelSpec m = Llama70b();
  m.num_layers = 126;  // LLaMA-3 405B depth
  TrainingSpec t;
  t.global_batch_size = 2048;
  t.seq_length = 8192;
  ParallelConfig c;
  c.tp = 8;
  c.pp = 16;
  c.vpp = 2;
  c.dp = 16;
  const auto a = MegatronArgs(m, t, c);
  EXPECT_TRUE(Has(a, "--account-for-embedding-in-pipeline-split"));
  EXPECT_TRUE(Has(a, "--account-for-loss-in-pipeline-split"));
  EXPECT_TRUE(Has(a, "--virtual-pipeline-model-parallel-size 2"));
  c.pp = 2;  // 126 = 2 x 63: even
  c.vpp = 1;
  const auto b = MegatronArgs(m, t, c);
  EXPECT_FALSE(Has(b, "--account-for-embedding-in-pipeline-split"));
}

}  // namespace
}  // namespace meshtune::tuner
