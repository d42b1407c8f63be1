// The serving engines' commands of a plan: exact text for vLLM, SGLang and
// TensorRT-LLM, the vLLM command read back into the same plan, the MoE
// layouts vLLM cannot express, and the parser's errors.
#include "tuner/interop/serving_commands.h"

#include <gtest/gtest.h>

namespace meshtune::tuner {
namespace {

using search_spaces::KvCacheDtype;
using search_spaces::Precision;
using search_spaces::ServingConfig;

ServingConfig Config(int64_t tp, int64_t pp, int64_t adp, int64_t ep,
                     Precision w = Precision::kBf16,
                     KvCacheDtype kv = KvCacheDtype::kBf16) {
  ServingConfig c;
  c.tp = tp;
  c.pp = pp;
  c.attention_dp = adp;
  c.ep = ep;
  c.weights = w;
  c.kv_cache = kv;
  return c;
}

ServingLaunch Launch(int64_t batch) {
  ServingLaunch l;
  l.model = "meta-llama/Meta-Llama-3-70B";
  l.max_batch = batch;
  l.max_model_len = 2560;
  return l;
}

TEST(VllmServeCommand, ExactText) {
  const auto cmd = VllmServeCommand(
      Config(4, 1, 1, 1, Precision::kFp8, KvCacheDtype::kFp8), Launch(125));
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(cmd.value(),
            "vllm serve 'meta-llama/Meta-Llama-3-70B' \\\n"
            "  --tensor-parallel-size 4 \\\n"
            "  --pipeline-parallel-size 1 \\\n"
            "  --max-num-seqs 125 \\\n"
            "  --max-model-len 2560 \\\n"
            "  --kv-cache-dtype fp8 \\\n"
            "  --quantization fp8");
}

TEST(VllmServeCommand, ParsesBackToTheSamePlan) {
  for (const ServingConfig& c :
       {Config(4, 1, 1, 1), Config(8, 2, 1, 1, Precision::kFp8),
        Config(1, 1, 8, 8, Precision::kNvfp4, KvCacheDtype::kFp8),
        Config(2, 1, 4, 8, Precision::kFp8, KvCacheDtype::kFp8)}) {
    ServingConfig want = c;
    want.max_batch = 96;
    const auto cmd = VllmServeCommand(c, Launch(96));
    ASSERT_TRUE(cmd.ok()) << ToString(c) << ": " << cmd.status().message();
    ServingLaunch back;
    const auto parsed = ParseVllmServeCommand(cmd.value(), &back);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(ToString(parsed.value()), ToString(want)) << cmd.value();
    EXPECT_EQ(back.model, "meta-llama/Meta-Llama-3-70B");
    EXPECT_EQ(back.max_model_len, 2560);
  }
  // Typed by hand: --flag=value and unknown flags.
  ServingLaunch l;
  const auto hand = ParseVllmServeCommand(
      "vllm serve m --tensor-parallel-size=2 --enable-prefix-caching "
      "--max-num-seqs 7 --gpu-memory-utilization 0.9",
      &l);
  ASSERT_TRUE(hand.ok()) << hand.status().message();
  EXPECT_EQ(hand.value().tp, 2);
  EXPECT_EQ(l.max_batch, 7);
}

TEST(VllmServeCommand, LayoutsVllmCannotRun) {
  EXPECT_EQ(VllmServeCommand(Config(4, 1, 1, 2), Launch(8)).status().message(),
            "vLLM cannot run ep 2 with moe_tp 2: its experts are either "
            "tensor-parallel or spread over all tp·dp ranks");
  EXPECT_EQ(VllmServeCommand(Config(1, 1, 4, 1), Launch(8)).status().message(),
            "vLLM's attention data parallelism needs --enable-expert-parallel "
            "(ep = tp·dp)");
  EXPECT_FALSE(
      VllmServeCommand(Config(4, 1, 1, 1, Precision::kMxfp8), Launch(8)).ok());
}

TEST(ParseVllmServeCommand, Errors) {
  EXPECT_EQ(ParseVllmServeCommand("sglang serve m", nullptr).status().message(),
            "not a 'vllm serve MODEL ...' command");
  EXPECT_EQ(
      ParseVllmServeCommand("vllm serve m --tensor-parallel-size four", nullptr)
          .status()
          .message(),
      "--tensor-parallel-size needs a whole number, got 'four'");
  EXPECT_FALSE(ParseVllmServeCommand("vllm serve 'm", nullptr).ok());
}

TEST(SglangAndTrtllm, DepLayout) {
  // DEP8: attention DP 8, experts over the 8 GPUs.
  const ServingConfig dep =
      Config(1, 1, 8, 8, Precision::kNvfp4, KvCacheDtype::kFp8);
  ServingLaunch l = Launch(1024);
  l.model = "nvidia/DeepSeek-R1-FP4";
  EXPECT_EQ(SglangServeCommand(dep, l),
            "python3 -m sglang.launch_server --model-path "
            "'nvidia/DeepSeek-R1-FP4' \\\n"
            "  --tp 8 \\\n"
            "  --dp 8 \\\n"
            "  --enable-dp-attention \\\n"
            "  --ep-size 8 \\\n"
            "  --pp-size 1 \\\n"
            "  --max-running-requests 1024 \\\n"
            "  --context-length 2560 \\\n"
            "  --kv-cache-dtype fp8_e4m3 \\\n"
            "  --quantization modelopt_fp4");
  std::string yaml;
  EXPECT_EQ(TrtllmServeCommand(dep, l, &yaml).value(),
            "trtllm-serve 'nvidia/DeepSeek-R1-FP4' \\\n"
            "  --tp_size 8 \\\n"
            "  --pp_size 1 \\\n"
            "  --ep_size 8 \\\n"
            "  --max_batch_size 128 \\\n"
            "  --max_seq_len 2560 \\\n"
            "  --kv_cache_free_gpu_memory_fraction 0.9 \\\n"
            "  --extra_llm_api_options extra_llm_api_options.yaml");
  EXPECT_EQ(yaml,
            "enable_attention_dp: true\n"
            "kv_cache_config:\n"
            "  dtype: fp8\n");
}

TEST(ServingCommands, ACachedPrefixSwitchesThePrefixCacheOn) {
  // vLLM's --enable-prefix-caching and TensorRT-LLM's enable_block_reuse,
  // written and read back; SGLang's radix cache is on unless disabled.
  ServingLaunch l = Launch(64);
  l.prefix_caching = true;
  const std::string vllm = VllmServeCommand(Config(4, 1, 1, 1), l).value();
  EXPECT_NE(vllm.find("  --max-model-len 2560 \\\n  --enable-prefix-caching"),
            std::string::npos)
      << vllm;
  ServingLaunch back;
  ASSERT_TRUE(ParseVllmServeCommand(vllm, &back).ok());
  EXPECT_TRUE(back.prefix_caching);
  std::string yaml;
  const std::string trt =
      TrtllmServeCommand(Config(4, 1, 1, 1), l, &yaml).value();
  EXPECT_EQ(yaml,
            "enable_attention_dp: false\n"
            "kv_cache_config:\n"
            "  dtype: auto\n"
            "  enable_block_reuse: true\n");
  back = ServingLaunch();
  ASSERT_TRUE(ParseTrtllmServeCommand(trt, yaml, &back).ok());
  EXPECT_TRUE(back.prefix_caching);
  EXPECT_EQ(SglangServeCommand(Config(4, 1, 1, 1), l),
            SglangServeCommand(Config(4, 1, 1, 1), Launch(64)));
  // Without a prefix neither switch is written.
  EXPECT_EQ(
      VllmServeCommand(Config(4, 1, 1, 1), Launch(64)).value().find("prefix"),
      std::string::npos);
  EXPECT_FALSE(
      ParseTrtllmServeCommand(
          trt, "kv_cache_config:\n  enable_block_reuse: maybe\n", nullptr)
          .ok());
}

TEST(ServingCommands, SpeculativeDecodingRunsTheMtpDrafter) {
  // Three MTP drafts a step: vLLM's --speculative-config, SGLang's EAGLE
  // drafter and TensorRT-LLM's speculative_config, each read back.
  ServingConfig c = Config(8, 1, 1, 8, Precision::kFp8, KvCacheDtype::kFp8);
  c.nextn = 3;
  ServingLaunch l = Launch(64);
  l.model = "deepseek-ai/DeepSeek-V3";
  const std::string vllm = VllmServeCommand(c, l).value();
  EXPECT_NE(vllm.find("  --speculative-config "
                      "'{\"method\":\"mtp\",\"num_speculative_tokens\":3}'"),
            std::string::npos)
      << vllm;
  EXPECT_EQ(ParseVllmServeCommand(vllm, nullptr).value().nextn, 3);
  const std::string sglang = SglangServeCommand(c, l);
  EXPECT_NE(sglang.find("  --speculative-algorithm EAGLE \\\n"
                        "  --speculative-num-steps 3 \\\n"
                        "  --speculative-eagle-topk 1 \\\n"
                        "  --speculative-num-draft-tokens 4"),
            std::string::npos)
      << sglang;
  EXPECT_EQ(ParseSglangServeCommand(sglang, nullptr).value().nextn, 3);
  std::string yaml;
  const std::string trt = TrtllmServeCommand(c, l, &yaml).value();
  EXPECT_EQ(yaml,
            "enable_attention_dp: false\n"
            "kv_cache_config:\n"
            "  dtype: fp8\n"
            "speculative_config:\n"
            "  decoding_type: MTP\n"
            "  num_nextn_predict_layers: 3\n");
  EXPECT_EQ(ParseTrtllmServeCommand(trt, yaml, nullptr).value().nextn, 3);
  // Without drafts none of it is written.
  c.nextn = 0;
  EXPECT_EQ(VllmServeCommand(c, l).value().find("speculative"),
            std::string::npos);
  EXPECT_EQ(SglangServeCommand(c, l).find("speculative"), std::string::npos);
  // Other methods are not MTP drafts; a malformed config is an error.
  EXPECT_EQ(
      ParseVllmServeCommand(
          R"(vllm serve m --speculative-config '{"method":"ngram"}')", nullptr)
          .value()
          .nextn,
      0);
  EXPECT_EQ(
      ParseVllmServeCommand("vllm serve m --speculative-config 3", nullptr)
          .status()
          .message(),
      "--speculative-config needs a JSON object with a method, got '3'");
  EXPECT_FALSE(
      ParseTrtllmServeCommand(trt,
                              "speculative_config:\n  decoding_type: MTP\n"
                              "  num_nextn_predict_layers: many\n",
                              nullptr)
          .ok());
}

TEST(ServingCommands, AnEagle3HeadRunsAsEachEnginesEagle3Drafter) {
  // Three drafts a step from an EAGLE-3 head: vLLM's method eagle3 with
  // the head as its model, SGLang's EAGLE3 algorithm and draft path,
  // TensorRT-LLM's decoding_type Eagle3; each reads back the drafter, the
  // drafts and the head.
  ServingConfig c = Config(2, 1, 1, 1, Precision::kFp8, KvCacheDtype::kFp8);
  c.nextn = 3;
  c.drafter = search_spaces::Drafter::kEagle3;
  c.draft_head.checkpoint = "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B";
  ServingLaunch l = Launch(64);
  l.model = "meta-llama/Llama-3.3-70B-Instruct";
  auto expect_head = [&](const ServingConfig& back) {
    EXPECT_EQ(back.drafter, search_spaces::Drafter::kEagle3);
    EXPECT_EQ(back.nextn, 3);
    EXPECT_EQ(back.draft_head.checkpoint, c.draft_head.checkpoint);
  };
  const std::string vllm = VllmServeCommand(c, l).value();
  EXPECT_NE(vllm.find("  --speculative-config '{\"method\":\"eagle3\","
                      "\"model\":\"yuhuili/EAGLE3-LLaMA3.3-Instruct-70B\","
                      "\"num_speculative_tokens\":3}'"),
            std::string::npos)
      << vllm;
  expect_head(ParseVllmServeCommand(vllm, nullptr).value());
  const std::string sglang = SglangServeCommand(c, l);
  EXPECT_NE(sglang.find("  --speculative-algorithm EAGLE3 \\\n"
                        "  --speculative-draft-model-path "
                        "'yuhuili/EAGLE3-LLaMA3.3-Instruct-70B' \\\n"
                        "  --speculative-num-steps 3 \\\n"
                        "  --speculative-eagle-topk 1 \\\n"
                        "  --speculative-num-draft-tokens 4"),
            std::string::npos)
      << sglang;
  expect_head(ParseSglangServeCommand(sglang, nullptr).value());
  std::string yaml;
  const std::string trt = TrtllmServeCommand(c, l, &yaml).value();
  EXPECT_EQ(yaml,
            "enable_attention_dp: false\n"
            "kv_cache_config:\n"
            "  dtype: fp8\n"
            "speculative_config:\n"
            "  decoding_type: Eagle3\n"
            "  max_draft_len: 3\n"
            "  speculative_model: \"yuhuili/EAGLE3-LLaMA3.3-Instruct-70B\"\n");
  expect_head(ParseTrtllmServeCommand(trt, yaml, nullptr).value());
  // TensorRT-LLM's older spellings read back the same.
  expect_head(
      ParseTrtllmServeCommand(trt,
                              "speculative_config:\n  decoding_type: Eagle\n"
                              "  max_draft_len: 3\n  speculative_model_dir: "
                              "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B\n",
                              nullptr)
          .value());
}

TEST(TrtllmServeCommand, KeepsTheModelsSlidingWindows) {
  // TensorRT-LLM keeps a window only when told (vLLM and SGLang read it
  // from the checkpoint): the plan's windows go into its options.
  ServingLaunch l = Launch(64);
  l.model = "openai/gpt-oss-120b";
  l.attention_windows = {128, 2560};
  std::string yaml;
  ASSERT_TRUE(TrtllmServeCommand(Config(4, 1, 1, 4), l, &yaml).ok());
  EXPECT_EQ(yaml,
            "enable_attention_dp: false\n"
            "kv_cache_config:\n"
            "  dtype: auto\n"
            "  max_attention_window: [128, 2560]\n");
  ServingLaunch back;
  const std::string cmd =
      TrtllmServeCommand(Config(4, 1, 1, 4), l, nullptr).value();
  ASSERT_TRUE(ParseTrtllmServeCommand(cmd, yaml, &back).ok());
  EXPECT_EQ(back.attention_windows, l.attention_windows);
  // Without windows the option is not written.
  l.attention_windows.clear();
  ASSERT_TRUE(TrtllmServeCommand(Config(4, 1, 1, 4), l, &yaml).ok());
  EXPECT_EQ(yaml.find("max_attention_window"), std::string::npos);
  // A window that is not a token count is refused.
  const auto bad = ParseTrtllmServeCommand(
      cmd, "kv_cache_config:\n  max_attention_window: [128, 0]\n", nullptr);
  EXPECT_EQ(bad.status().message(),
            "kv_cache_config.max_attention_window holds 0, not a number of "
            "tokens");
  EXPECT_FALSE(
      ParseTrtllmServeCommand(
          cmd, "kv_cache_config:\n  max_attention_window: x\n", nullptr)
          .ok());
}

TEST(SglangServeCommand, ParsesBackToTheSamePlan) {
  for (const ServingConfig& c :
       {Config(4, 1, 1, 1), Config(8, 2, 1, 1, Precision::kFp8),
        Config(1, 1, 8, 8, Precision::kNvfp4, KvCacheDtype::kFp8),
        Config(2, 1, 4, 8, Precision::kFp8, KvCacheDtype::kFp8),
        Config(4, 1, 2, 2)}) {
    ServingConfig want = c;
    want.max_batch = 96;
    ServingLaunch back;
    const std::string cmd = SglangServeCommand(c, Launch(96));
    const auto parsed = ParseSglangServeCommand(cmd, &back);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(ToString(parsed.value()), ToString(want)) << cmd;
    EXPECT_EQ(back.model, "meta-llama/Meta-Llama-3-70B");
    EXPECT_EQ(back.max_model_len, 2560);
  }
  ServingLaunch prefill = Launch(4);
  prefill.role = ServingRole::kPrefill;
  ServingLaunch back;
  ASSERT_TRUE(ParseSglangServeCommand(
                  SglangServeCommand(Config(2, 1, 1, 1), prefill), &back)
                  .ok());
  EXPECT_EQ(back.role, ServingRole::kPrefill);
  // By hand: --flag=value, python instead of python3, unknown flags, and
  // --dp without DP attention (replicas: one is read).
  const auto hand = ParseSglangServeCommand(
      "python -m sglang.launch_server --model-path=m --tp=4 --dp 2 "
      "--mem-fraction-static 0.85 --trust-remote-code",
      &back);
  ASSERT_TRUE(hand.ok()) << hand.status().message();
  EXPECT_EQ(hand->tp, 4);
  EXPECT_EQ(hand->attention_dp, 1);
  EXPECT_EQ(back.model, "m");
  EXPECT_EQ(ParseSglangServeCommand("vllm serve m", nullptr).status().message(),
            "not a 'python3 -m sglang.launch_server ...' command");
  EXPECT_EQ(ParseSglangServeCommand("python3 -m sglang.launch_server --tp 6 "
                                    "--dp 4 --enable-dp-attention",
                                    nullptr)
                .status()
                .message(),
            "SGLang's --tp 6 is not a multiple of --dp 4 with "
            "--enable-dp-attention");
}

TEST(TrtllmServeCommand, ParsesBackToTheSamePlan) {
  // TensorRT-LLM has tp or attention DP, not both; the weights come from
  // the checkpoint (bf16 when read back).
  for (const ServingConfig& c :
       {Config(4, 1, 1, 1),
        Config(8, 2, 1, 1, Precision::kBf16, KvCacheDtype::kFp8),
        Config(1, 1, 8, 8, Precision::kBf16, KvCacheDtype::kNvfp4),
        Config(8, 1, 1, 4)}) {
    ServingConfig want = c;
    want.max_batch = 96;
    std::string yaml;
    ServingLaunch back;
    const std::string cmd = TrtllmServeCommand(c, Launch(96), &yaml).value();
    const auto parsed = ParseTrtllmServeCommand(cmd, yaml, &back);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(ToString(parsed.value()), ToString(want)) << cmd << "\n" << yaml;
    EXPECT_EQ(back.model, "meta-llama/Meta-Llama-3-70B");
    EXPECT_EQ(back.max_model_len, 2560);
  }
  // Without the options file: tp_size GPUs tensor-parallel, bf16 cache.
  const auto bare = ParseTrtllmServeCommand(
      "trtllm-serve m --tp_size 2 --max_batch_size 16", "", nullptr);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(ToString(bare.value()), ToString([] {
              ServingConfig c = Config(2, 1, 1, 1);
              c.max_batch = 16;
              return c;
            }()));
  EXPECT_EQ(ParseTrtllmServeCommand("trtllm-serve m", "a: [", nullptr)
                .status()
                .message()
                .rfind("the --extra_llm_api_options YAML does not parse: ", 0),
            0u);
  EXPECT_EQ(ParseTrtllmServeCommand("trtllm-serve m",
                                    "enable_attention_dp: [1]", nullptr)
                .status()
                .message()
                .rfind("the --extra_llm_api_options YAML has a field of the "
                       "wrong type: ",
                       0),
            0u);
  EXPECT_EQ(ParseTrtllmServeCommand("trtllm-serve m --ep_size x", "", nullptr)
                .status()
                .message(),
            "--ep_size needs a whole number, got 'x'");
}

TEST(TrtllmServeCommand, HybridAttentionTpAndDpHasNoForm) {
  std::string yaml;
  const auto hybrid = TrtllmServeCommand(Config(2, 1, 4, 8), Launch(8), &yaml);
  EXPECT_EQ(hybrid.status().message(),
            "TensorRT-LLM's attention data parallelism spans all its tp_size "
            "ranks: it cannot run attention tp 2 within attention DP 4");
  EXPECT_EQ(hybrid.status().hint(), "use the SGLang command of this plan");
}

TEST(ServingCommands, CheckpointIsQuoted) {
  ServingLaunch l = Launch(1);
  l.model = "a b'; rm -rf /";
  const auto cmd = VllmServeCommand(Config(1, 1, 1, 1), l);
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd.value().rfind("vllm serve 'a b'\\''; rm -rf /' \\\n", 0), 0u)
      << cmd.value();
  ServingLaunch back;
  ASSERT_TRUE(ParseVllmServeCommand(cmd.value(), &back).ok());
  EXPECT_EQ(back.model, l.model);
}

TEST(ServingCommands, DisaggregatedRolesAddTheirKvTransfer) {
  ServingLaunch prefill = Launch(1);
  prefill.role = ServingRole::kPrefill;
  ServingLaunch decode = Launch(64);
  decode.role = ServingRole::kDecode;
  const ServingConfig c = Config(4, 1, 1, 1);
  const std::string vllm = VllmServeCommand(c, prefill).value();
  EXPECT_NE(vllm.find("  --kv-transfer-config "
                      "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":"
                      "\"kv_both\"}'"),
            std::string::npos)
      << vllm;
  // The parser skips it and reads the layout back.
  ServingLaunch back;
  ASSERT_TRUE(ParseVllmServeCommand(vllm, &back).ok());
  EXPECT_EQ(back.max_batch, 1);
  EXPECT_NE(
      SglangServeCommand(c, prefill).find("--disaggregation-mode prefill"),
      std::string::npos);
  EXPECT_NE(SglangServeCommand(c, decode).find("--disaggregation-mode decode"),
            std::string::npos);
  std::string yaml;
  const std::string trtllm = TrtllmServeCommand(c, decode, &yaml).value();
  EXPECT_EQ(yaml,
            "enable_attention_dp: false\n"
            "kv_cache_config:\n"
            "  dtype: auto\n"
            "cache_transceiver_config:\n"
            "  backend: DEFAULT\n");
  ServingLaunch role;
  ASSERT_TRUE(ParseTrtllmServeCommand(trtllm, yaml, &role).ok());
  EXPECT_EQ(role.role, ServingRole::kDecode);
  // A context server runs without the overlap scheduler, which marks it.
  std::string prefill_yaml;
  ASSERT_TRUE(TrtllmServeCommand(c, prefill, &prefill_yaml).ok());
  EXPECT_EQ(prefill_yaml,
            "enable_attention_dp: false\n"
            "kv_cache_config:\n"
            "  dtype: auto\n"
            "disable_overlap_scheduler: true\n"
            "cache_transceiver_config:\n"
            "  backend: DEFAULT\n");
  ASSERT_TRUE(ParseTrtllmServeCommand(trtllm, prefill_yaml, &role).ok());
  EXPECT_EQ(role.role, ServingRole::kPrefill);
  // Aggregated: none of them.
  EXPECT_EQ(VllmServeCommand(c, Launch(1)).value().find("kv-transfer"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
