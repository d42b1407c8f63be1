// `tune serve` end to end in process: the report's lines, the JSON keys,
// and the input errors (exit 2, one line naming the problem and the fix).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/tuner/tune_in_process.h"
#include "tuner/interop/serving_commands.h"
#include "tuner/interop/serving_manifest.h"
#include "tuner/interop/shell_words.h"
#include "tuner/serve/serve_benchmark.h"

namespace meshtune::tuner {
namespace {

using testing::Tune;

TEST(ServeCommand, ReportsTheBestPlanUnderTheTarget) {
  const auto run =
      Tune({"serve", "--model", "llama3-70b", "--gpus", "8", "--gpu", "h100",
            "--isl", "2048", "--osl", "512", "--tpot-ms", "50"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("serving llama3-70b on 8 x h100: isl 2048, osl 512, "
                          "batch swept, weights bf16, KV cache bf16; "
                          "targets: TPOT <= 50.0 ms\n",
                          0),
            0u)
      << run.out;
  EXPECT_NE(run.out.find("\nbest: "), std::string::npos);
  // The best was checked on the pass calendar, and so was every row of the
  // front; the table says so.
  EXPECT_NE(run.out.find("   met*  <- best\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  (* priced pass by pass, as a benchmark at that "
                         "concurrency; the sweep's points off the front by "
                         "the closed form)\n"),
            std::string::npos);
  EXPECT_EQ(run.out.find("   met\n"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("   missed\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  decode step "), std::string::npos);
  EXPECT_NE(run.out.find("rejected: 1 x out_of_memory;"), std::string::npos);
}

TEST(ServeCommand, JsonCarriesTheFrontAndTheBest) {
  const auto run =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "2", "--gpu", "h100",
            "--isl", "1024", "--osl", "256", "--precision", "fp8", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["problem"]["kv_cache_dtype"], "fp8");  // follows fp8 weights
  EXPECT_EQ(j["problem"]["num_gpus"], 2);
  ASSERT_FALSE(j["pareto"].empty());
  ASSERT_TRUE(j["best"].is_object());
  for (const char* key :
       {"tp", "pp", "attention_dp", "ep", "moe_tp", "replicas",
        "batch_per_replica", "ttft_ms", "tpot_ms",
        "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user",
        "memory_gib", "decode_ms"}) {
    EXPECT_TRUE(j["best"].contains(key)) << key;
  }
  // No targets: the best is the front's most tokens per GPU; it and the
  // rest of the front are priced on the pass calendar, the sweep's other
  // points by the closed form.
  EXPECT_EQ(j["best"], j["pareto"].back());
  for (const nlohmann::json& p : j["pareto"]) {
    EXPECT_EQ(p["priced_by"], "pass calendar") << p.dump();
  }
  EXPECT_GT(j["considered"]["points"].get<size_t>(), j["pareto"].size());
  EXPECT_EQ(j["commands"]["replicas"], j["best"]["replicas"]);
  EXPECT_EQ(j["commands"]["checkpoint"], "meta-llama/Meta-Llama-3-8B");
  // The run that checks it: the plan's sequences in flight, its requests
  // (ten waves, capped: tuner/serve/serve_benchmark.h), its predicted means.
  const nlohmann::json& b = j["benchmark"];
  const int64_t clients = j["best"]["batch_per_replica"].get<int64_t>() *
                          j["best"]["replicas"].get<int64_t>();
  EXPECT_EQ(b["max_concurrency"], clients);
  EXPECT_EQ(b["num_prompts"], BenchmarkRequests(clients));
  const std::string cmd = b["command"].get<std::string>();
  EXPECT_EQ(cmd.rfind("vllm bench serve --backend openai", 0), 0u) << cmd;
  EXPECT_NE(cmd.find("--max-concurrency " + std::to_string(clients) + " "),
            std::string::npos)
      << cmd;
  EXPECT_NE(cmd.find("--random-input-len 1024 "), std::string::npos) << cmd;
  EXPECT_GT(b["ttft_ms"].get<double>(), 0);
  EXPECT_GT(b["tpot_ms"].get<double>(), 0);
  // The text report prints the same.
  const auto text =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "2", "--gpu", "h100",
            "--isl", "1024", "--osl", "256", "--precision", "fp8"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(cmd + "\npredicted for that run, first requests "
                                "included: mean TTFT "),
            std::string::npos)
      << text.out;
}

TEST(ServeCommand, VllmCommandParsesBackToTheBestPlan) {
  // The issue's check: the best plan of llama3-70b on 8 H100 under a 50 ms
  // TPOT target, its vLLM command read back into the same plan.
  const auto run =
      Tune({"serve", "--model", "llama3-70b", "--gpus", "8", "--gpu", "h100",
            "--isl", "2048", "--osl", "512", "--tpot-ms", "50", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_TRUE(j["commands"].contains("vllm")) << j["commands"].dump();
  ServingLaunch launch;
  const auto parsed =
      ParseVllmServeCommand(j["commands"]["vllm"].get<std::string>(), &launch);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const nlohmann::json& best = j["best"];
  EXPECT_EQ(parsed.value().tp, best["tp"]);
  EXPECT_EQ(parsed.value().pp, best["pp"]);
  EXPECT_EQ(parsed.value().attention_dp, best["attention_dp"]);
  EXPECT_EQ(parsed.value().ep, best["ep"]);
  EXPECT_EQ(launch.max_batch, best["batch_per_replica"]);
  EXPECT_EQ(launch.max_model_len, 2560);
  EXPECT_EQ(search_spaces::ToString(parsed.value().weights),
            best["weights"].get<std::string>());
  EXPECT_LE(best["tpot_ms"].get<double>(), 50.0);
  // The SGLang and TensorRT-LLM commands read back to the same layout.
  const auto sglang = ParseSglangServeCommand(
      j["commands"]["sglang"].get<std::string>(), nullptr);
  ASSERT_TRUE(sglang.ok()) << sglang.status().message();
  EXPECT_EQ(search_spaces::ToString(sglang.value()),
            search_spaces::ToString(parsed.value()));
  const auto trtllm = ParseTrtllmServeCommand(
      j["commands"]["trtllm"].get<std::string>(),
      j["commands"]["trtllm_extra_llm_api_options"].get<std::string>(),
      nullptr);
  ASSERT_TRUE(trtllm.ok()) << trtllm.status().message();
  EXPECT_EQ(trtllm.value().tp, best["tp"]);
  EXPECT_EQ(trtllm.value().attention_dp, best["attention_dp"]);
  EXPECT_EQ(trtllm.value().max_batch, best["batch_per_replica"]);
}

TEST(ServeCommand, ACachedPrefixIsPricedAndSwitchedOn) {
  // 4096-token prompts whose first 3072 tokens are cached, at 16 clients:
  // the best plan's first tokens come sooner than with whole prompts, the
  // engines' prefix caches are switched on and the benchmark sends one
  // shared 3072-token prefix before 1024 random tokens.
  const std::vector<std::string> base = {
      "serve", "--model",       "llama3-8b", "--gpus", "2",   "--gpu",
      "h100",  "--isl",         "4096",      "--osl",  "256", "--precision",
      "fp8",   "--concurrency", "16",        "--json"};
  std::vector<std::string> cached = base;
  cached.insert(cached.end(), {"--prefix", "3072"});
  const auto whole_run = Tune(base);
  const auto cached_run = Tune(cached);
  ASSERT_EQ(whole_run.exit_code, 0) << whole_run.err;
  ASSERT_EQ(cached_run.exit_code, 0) << cached_run.err;
  const nlohmann::json whole = nlohmann::json::parse(whole_run.out);
  const nlohmann::json j = nlohmann::json::parse(cached_run.out);
  EXPECT_EQ(j["problem"]["prefix"], 3072);
  EXPECT_EQ(j["problem"]["prefix_pool"], 1);
  EXPECT_EQ(whole["problem"]["prefix"], 0);
  // The one prefix is held once: more sequences fit than with whole
  // prompts each.
  EXPECT_GT(j["best"]["max_sequences_per_replica"].get<int64_t>(),
            2 * whole["best"]["max_sequences_per_replica"].get<int64_t>());
  EXPECT_LT(j["best"]["ttft_ms"].get<double>(),
            whole["best"]["ttft_ms"].get<double>());
  EXPECT_NE(
      j["commands"]["vllm"].get<std::string>().find("--enable-prefix-caching"),
      std::string::npos);
  EXPECT_NE(
      j["commands"]["trtllm_extra_llm_api_options"].get<std::string>().find(
          "  enable_block_reuse: true\n"),
      std::string::npos);
  EXPECT_EQ(whole["commands"]["vllm"].get<std::string>().find("prefix"),
            std::string::npos);
  const std::string bench = j["benchmark"]["command"].get<std::string>();
  EXPECT_NE(bench.find("--random-prefix-len 3072 \\\n"
                       "  --random-input-len 1024 "),
            std::string::npos)
      << bench;
  // The text report names the cached tokens.
  cached.pop_back();  // --prefix's value
  cached.pop_back();
  cached.pop_back();  // --json
  cached.insert(cached.end(), {"--prefix", "3072"});
  const auto text = Tune(cached);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("serving llama3-8b on 2 x h100: isl 4096 (3072 "
                           "cached), osl 256, concurrency 16",
                           0),
            0u)
      << text.out;
}

TEST(ServeCommand, SpeculativeDecodingIsPricedAndSwitchedOn) {
  // DeepSeek-V3 on 8 H200s at 32 clients with 3 MTP drafts a step, 1.8 of
  // them accepted: each request's tokens come faster, the engines run
  // their MTP drafters, and the plan's vLLM command reads back with them.
  const std::vector<std::string> base = {
      "serve", "--model",       "deepseek-v3", "--gpus", "8",    "--gpu",
      "h200",  "--isl",         "1024",        "--osl",  "1024", "--precision",
      "fp8",   "--concurrency", "32",          "--json"};
  std::vector<std::string> spec = base;
  spec.insert(spec.end(), {"--nextn", "3", "--nextn-accepted", "1.8"});
  const auto plain_run = Tune(base);
  const auto spec_run = Tune(spec);
  ASSERT_EQ(plain_run.exit_code, 0) << plain_run.err;
  ASSERT_EQ(spec_run.exit_code, 0) << spec_run.err;
  const nlohmann::json plain = nlohmann::json::parse(plain_run.out);
  const nlohmann::json j = nlohmann::json::parse(spec_run.out);
  EXPECT_EQ(j["problem"]["nextn"], 3);
  EXPECT_DOUBLE_EQ(j["problem"]["nextn_accepted"].get<double>(), 1.8);
  EXPECT_EQ(plain["problem"]["nextn"], 0);
  EXPECT_LT(j["best"]["tpot_ms"].get<double>(),
            plain["best"]["tpot_ms"].get<double>());
  EXPECT_GT(j["best"]["decode_ms"]["drafts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(plain["best"]["decode_ms"]["drafts"].get<double>(), 0.0);
  const std::string vllm = j["commands"]["vllm"].get<std::string>();
  EXPECT_NE(vllm.find(R"('{"method":"mtp","num_speculative_tokens":3}')"),
            std::string::npos)
      << vllm;
  EXPECT_EQ(ParseVllmServeCommand(vllm, nullptr).value().nextn, 3);
  EXPECT_EQ(plain["commands"]["vllm"].get<std::string>().find("speculative"),
            std::string::npos);
  // The text report names the drafts and their acceptance.
  spec.erase(std::find(spec.begin(), spec.end(), "--json"));
  const auto text = Tune(spec);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("serving deepseek-v3 on 8 x h200: isl 1024, osl "
                           "1024, concurrency 32, weights fp8, KV cache fp8, "
                           "MTP nextn 3 (1.8 accepted); targets: none\n",
                           0),
            0u)
      << text.out;
  EXPECT_NE(text.out.find("; 2.80 tokens per request a step; prefill"),
            std::string::npos)
      << text.out;
}

TEST(ServeCommand, AnEagle3HeadSpeculatesForAModelWithoutMtpLayers) {
  // LLaMA-3 70B on 8 H100s at 16 clients with an EAGLE-3 head's 3 drafts
  // a step, 1.9 accepted: faster tokens than without, the head's drafts
  // in the step, its checkpoint in every engine's command.
  const std::vector<std::string> base = {
      "serve", "--model",       "llama3-70b", "--gpus", "8",   "--gpu",
      "h100",  "--isl",         "2048",       "--osl",  "512", "--precision",
      "fp8",   "--concurrency", "16",         "--json"};
  std::vector<std::string> spec = base;
  spec.insert(spec.end(), {"--spec-method", "eagle3", "--draft-model",
                           "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", "--nextn",
                           "3", "--nextn-accepted", "1.9"});
  const auto plain_run = Tune(base);
  const auto spec_run = Tune(spec);
  ASSERT_EQ(plain_run.exit_code, 0) << plain_run.err;
  ASSERT_EQ(spec_run.exit_code, 0) << spec_run.err;
  const nlohmann::json plain = nlohmann::json::parse(plain_run.out);
  const nlohmann::json j = nlohmann::json::parse(spec_run.out);
  EXPECT_EQ(j["problem"]["spec_method"], "eagle3");
  EXPECT_EQ(j["problem"]["draft_model"],
            "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B");
  EXPECT_EQ(j["problem"]["draft_intermediate"], 28672);
  EXPECT_EQ(j["problem"]["draft_vocab"], 32000);
  EXPECT_EQ(plain["problem"]["spec_method"], "mtp");
  EXPECT_LT(j["best"]["tpot_ms"].get<double>(),
            plain["best"]["tpot_ms"].get<double>());
  EXPECT_GT(j["best"]["decode_ms"]["drafts"].get<double>(), 0.0);
  const std::string vllm = j["commands"]["vllm"].get<std::string>();
  const search_spaces::ServingConfig back =
      ParseVllmServeCommand(vllm, nullptr).value();
  EXPECT_EQ(back.drafter, search_spaces::Drafter::kEagle3);
  EXPECT_EQ(back.nextn, 3);
  EXPECT_EQ(back.draft_head.checkpoint, "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B");
  EXPECT_NE(j["commands"]["sglang"].get<std::string>().find(
                "--speculative-algorithm EAGLE3"),
            std::string::npos);
  spec.erase(std::find(spec.begin(), spec.end(), "--json"));
  const auto text = Tune(spec);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("KV cache fp8, EAGLE-3 head "
                          "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B nextn 3 (1.9 "
                          "accepted); targets: none\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(", EAGLE-3 drafts "), std::string::npos) << text.out;
}

TEST(ServeCommand, ADraftTreeRunsOnSglangOnly) {
  // DeepSeek-V3's MTP as a tree of depth 3, top-k 4 and 8 verified tokens:
  // SGLang's command carries the tree and reads it back; vLLM and
  // TensorRT-LLM draft chains, so their commands say why they are absent.
  const std::vector<std::string> chain = {
      "serve", "--model",       "deepseek-v3", "--gpus",
      "8",     "--gpu",         "h200",        "--isl",
      "1024",  "--osl",         "1024",        "--precision",
      "fp8",   "--nextn",       "3",           "--nextn-accepted",
      "2.2",   "--concurrency", "4",           "--json"};
  std::vector<std::string> tree = chain;
  tree.insert(tree.end(), {"--draft-topk", "4", "--draft-tokens", "8"});
  const auto run = Tune(tree);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["problem"]["draft_topk"], 4);
  EXPECT_EQ(j["problem"]["draft_tokens"], 8);
  const std::string sglang = j["commands"]["sglang"].get<std::string>();
  EXPECT_NE(sglang.find("  --speculative-eagle-topk 4 \\\n"
                        "  --speculative-num-draft-tokens 8"),
            std::string::npos)
      << sglang;
  const search_spaces::ServingConfig back =
      ParseSglangServeCommand(sglang, nullptr).value();
  EXPECT_EQ(back.nextn, 3);
  EXPECT_EQ(back.draft_topk, 4);
  EXPECT_EQ(back.draft_tokens, 8);
  EXPECT_EQ(j["commands"]["vllm_error"],
            "vLLM drafts a chain, not a tree of top-4");
  EXPECT_FALSE(j["commands"].contains("vllm"));
  EXPECT_FALSE(j["commands"].contains("trtllm"));
  // The text report's layouts name the tree.
  tree.erase(std::find(tree.begin(), tree.end(), "--json"));
  const auto text = Tune(tree);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("best: 1x tp8 pp1 adp1 ep8 nextn3 tree4x8, batch 4"),
            std::string::npos)
      << text.out;
  // A chain's SGLang command reads back as a chain.
  const auto plain = Tune(chain);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const nlohmann::json c = nlohmann::json::parse(plain.out);
  const search_spaces::ServingConfig chain_back =
      ParseSglangServeCommand(c["commands"]["sglang"].get<std::string>(),
                              nullptr)
          .value();
  EXPECT_EQ(chain_back.draft_topk, 1);
  EXPECT_EQ(chain_back.draft_tokens, 0);
}

TEST(ServeCommand, PerPositionRatesSearchTheDraftLength) {
  // With each draft position's acceptance rate and no --nextn, every
  // layout is priced at 0 to 3 drafts and the best plan names its length:
  // more drafts pay at few sequences, fewer at many.
  const auto run = Tune({"serve", "--model", "deepseek-v3", "--gpus", "8",
                         "--gpu", "h200", "--isl", "1024", "--osl", "1024",
                         "--precision", "fp8", "--nextn-accept-rates",
                         "0.85,0.6,0.4", "--tpot-ms", "20", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["problem"]["nextn_accept_rates"],
            nlohmann::json::array({0.85, 0.6, 0.4}));
  std::set<int64_t> lengths;
  for (const auto& point : j["pareto"]) {
    lengths.insert(point["nextn"].get<int64_t>());
  }
  EXPECT_GE(lengths.size(), 2u);
  const int64_t best = j["best"]["nextn"].get<int64_t>();
  EXPECT_GE(best, 1);
  const std::string vllm = j["commands"]["vllm"].get<std::string>();
  EXPECT_EQ(ParseVllmServeCommand(vllm, nullptr).value().nextn, best);
}

TEST(ServeCommand, TensorRtLlmKeepsTheWindowsThePlanWasPricedWith) {
  // Mistral 7B's 4096-token window: vLLM and SGLang read it from the
  // checkpoint, TensorRT-LLM is told in its options.
  const auto run =
      Tune({"serve", "--model", "mistral-7b", "--gpus", "1", "--gpu", "h100",
            "--isl", "2048", "--osl", "512", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_NE(
      j["commands"]["trtllm_extra_llm_api_options"].get<std::string>().find(
          "  max_attention_window: [4097]\n"),
      std::string::npos)
      << j["commands"].dump();
}

TEST(ServeCommand, DisaggregatedBestPlanHasCommandsPerRole) {
  const auto run =
      Tune({"serve", "--model", "llama3-70b", "--gpus", "16", "--gpu", "h100",
            "--isl", "8192", "--osl", "256", "--precision", "fp8", "--disagg",
            "--tpot-ms", "40", "--ttft-ms", "2000", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["problem"]["disaggregated"], true);
  ASSERT_TRUE(j["best"].is_object());
  // On 16 H100 with 8k prompts the best plan splits prefill and decode.
  ASSERT_EQ(j["best"]["disaggregated"], true) << j["best"].dump();
  const nlohmann::json& prefill = j["best"]["prefill"];
  EXPECT_EQ(prefill["workers"].get<int64_t>() *
                    prefill["gpus_per_worker"].get<int64_t>() +
                j["best"]["replicas"].get<int64_t>() *
                    j["best"]["gpus_per_replica"].get<int64_t>(),
            16);
  const nlohmann::json& c = j["commands"];
  EXPECT_EQ(c["disaggregated"], true);
  EXPECT_EQ(c["prefill"]["workers"], prefill["workers"]);
  EXPECT_EQ(c["decode"]["workers"], j["best"]["replicas"]);
  EXPECT_NE(c["prefill"]["sglang"].get<std::string>().find(
                "--disaggregation-mode prefill"),
            std::string::npos);
  EXPECT_NE(c["decode"]["vllm"].get<std::string>().find("NixlConnector"),
            std::string::npos);
}

TEST(ServeCommand, K8sWritesTheBestPlansDeployment) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/serve.yaml";
  const auto run =
      Tune({"serve", "--model", "llama3-70b", "--gpus", "8", "--gpu", "h100",
            "--isl", "2048", "--osl", "512", "--tpot-ms", "50", "--k8s", path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string yaml = testing::ReadFile(path);
  // The best plan: two replicas of tp4 (docs/serving.md §6).
  EXPECT_NE(yaml.find("  replicas: 2\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("nvidia.com/gpu: 4\n"), std::string::npos);
  EXPECT_NE(yaml.find("- \"--tensor-parallel-size\"\n            - \"4\"\n"),
            std::string::npos);
  EXPECT_NE(yaml.find("- \"--pipeline-parallel-size\"\n            - \"1\"\n"),
            std::string::npos);
  EXPECT_NE(run.err.find("tune: wrote " + path +
                         " (Deployment and Service 'tune-serve-llama3-70b': "
                         "2 x 4 GPUs)"),
            std::string::npos)
      << run.err;
  // A plan vLLM cannot run has no manifest; the file is kept.
  const auto refused = Tune({"serve", "--model", "llama3-70b", "--gpus", "8",
                             "--gpu", "b200", "--isl", "1024", "--osl", "1024",
                             "--precision", "mxfp8", "--k8s", path});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("tune: error: --k8s runs vllm serve, and vLLM "
                             "has no flag for MXFP8 weights"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(testing::ReadFile(path), yaml);
  // A missing directory fails before the search.
  const auto missing =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s", dir + "/no/serve.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  std::filesystem::remove_all(dir);
}

TEST(ServeCommand, K8sEngineSglangWritesSglangsManifests) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/serve.yaml";
  // The plan vLLM refuses (MXFP8 weights) is SGLang's to run.
  const auto run =
      Tune({"serve", "--model", "llama3-70b", "--gpus", "8", "--gpu", "b200",
            "--isl", "1024", "--osl", "1024", "--precision", "mxfp8", "--k8s",
            path, "--k8s-engine", "sglang", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  const std::vector<YAML::Node> docs = YAML::LoadAll(testing::ReadFile(path));
  ASSERT_EQ(docs.size(), 2u);
  const YAML::Node c = docs[0]["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["image"].as<std::string>(), "lmsysorg/sglang:latest");
  EXPECT_EQ(c["command"][2].as<std::string>(), "sglang.launch_server");
  // The args are the printed SGLang command's, then the endpoint.
  auto words = SplitShellWords(j["commands"]["sglang"].get<std::string>(),
                               "the SGLang command");
  ASSERT_TRUE(words.ok());
  std::vector<std::string> want(words.value().begin() + 3, words.value().end());
  want.insert(want.end(), {"--host", "0.0.0.0", "--port", "8000"});
  EXPECT_EQ(c["args"].as<std::vector<std::string>>(), want);
  // Bad values are usage errors, before the search.
  const auto bad =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s", path, "--k8s-engine", "tensorrt"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("tune: error: --k8s-engine must be vllm, sglang or "
                         "trtllm, got 'tensorrt'"),
            std::string::npos)
      << bad.err;
  const auto alone =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s-engine", "sglang"});
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--k8s-engine needs --k8s FILE"), std::string::npos)
      << alone.err;
  std::filesystem::remove_all(dir);
}

TEST(ServeCommand, K8sVllmDataParallelRanksSpanNodes) {
  // DeepSeek-V3 on 16 H200: one replica of attention-DP ranks over two
  // nodes, each pod starting its share of the ranks.
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/serve.yaml";
  const auto run =
      Tune({"serve", "--model", "deepseek-v3", "--gpus", "16", "--gpu", "h200",
            "--isl", "1024", "--osl", "1024", "--k8s", path, "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json best = nlohmann::json::parse(run.out)["best"];
  ASSERT_EQ(best["gpus_per_replica"], 16);
  ASSERT_GT(best["attention_dp"].get<int64_t>(), 1);
  const std::string local = std::to_string(
      8 / (best["tp"].get<int64_t>() * best["pp"].get<int64_t>()));
  const std::vector<YAML::Node> docs = YAML::LoadAll(testing::ReadFile(path));
  ASSERT_EQ(docs.size(), 2u);
  const YAML::Node t = docs[0]["spec"]["leaderWorkerTemplate"];
  const auto leader = t["leaderTemplate"]["spec"]["containers"][0]["args"]
                          .as<std::vector<std::string>>();
  ASSERT_GE(leader.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(leader.end() - 6, leader.end()),
            (std::vector<std::string>{
                "--data-parallel-size-local", local, "--data-parallel-address",
                "$(LWS_LEADER_ADDRESS)", "--data-parallel-rpc-port", "13345"}));
  const std::string worker =
      t["workerTemplate"]["spec"]["containers"][0]["args"][0].as<std::string>();
  EXPECT_NE(worker.find(" --headless --data-parallel-size-local " + local +
                        " --data-parallel-start-rank $((LWS_WORKER_INDEX * " +
                        local + "))"),
            std::string::npos)
      << worker;
  std::filesystem::remove_all(dir);
}

TEST(ServeCommand, K8sEngineTrtllmRunsTrtllmServeWithItsOptions) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/serve.yaml";
  const std::vector<std::string> plan = {
      "serve", "--model", "llama3-70b", "--gpus",       "8",     "--gpu",
      "h100",  "--isl",   "2048",       "--osl",        "512",   "--tpot-ms",
      "50",    "--k8s",   path,         "--k8s-engine", "trtllm"};
  // NGC's TensorRT-LLM image has no default tag: refused before the search.
  const auto no_image = Tune(plan);
  EXPECT_EQ(no_image.exit_code, 2);
  EXPECT_NE(no_image.err.find("tune: error: TensorRT-LLM's manifests need an "
                              "image"),
            std::string::npos)
      << no_image.err;
  EXPECT_FALSE(std::filesystem::exists(path));
  std::vector<std::string> with_image = plan;
  with_image.insert(
      with_image.end(),
      {"--k8s-image", "nvcr.io/nvidia/tensorrt-llm/release:1.0.0", "--json"});
  const auto run = Tune(with_image);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  const std::vector<YAML::Node> docs = YAML::LoadAll(testing::ReadFile(path));
  ASSERT_EQ(docs.size(), 3u);  // the options, the Deployment, the Service
  EXPECT_EQ(docs[0]["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(docs[0]["data"]["extra_llm_api_options.yaml"].as<std::string>(),
            j["commands"]["trtllm_extra_llm_api_options"].get<std::string>());
  const YAML::Node c = docs[1]["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["image"].as<std::string>(),
            "nvcr.io/nvidia/tensorrt-llm/release:1.0.0");
  // The printed command's words, its options file where the ConfigMap is
  // mounted, and the endpoint.
  auto words = SplitShellWords(j["commands"]["trtllm"].get<std::string>(),
                               "the TensorRT-LLM command");
  ASSERT_TRUE(words.ok());
  std::vector<std::string> want(words.value().begin() + 1, words.value().end());
  ASSERT_EQ(want[want.size() - 2], "--extra_llm_api_options");
  want.back() = "/etc/tune-serve/extra_llm_api_options.yaml";
  want.insert(want.end(), {"--host", "0.0.0.0", "--port", "8000"});
  EXPECT_EQ(c["args"].as<std::vector<std::string>>(), want);
  EXPECT_EQ(c["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"trtllm-serve"}));
  // An image without --k8s, or one with a space, is a usage error.
  const auto alone = Tune({"serve", "--model", "llama3-8b", "--gpus", "1",
                           "--isl", "8", "--osl", "8", "--k8s-image", "x:1"});
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--k8s-image needs --k8s FILE"), std::string::npos)
      << alone.err;
  const auto router_alone =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s-router-image", "x:1"});
  EXPECT_EQ(router_alone.exit_code, 2);
  EXPECT_NE(router_alone.err.find("--k8s-router-image needs --k8s FILE"),
            std::string::npos)
      << router_alone.err;
  const auto spaced_router =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s", path, "--k8s-router-image", "r:1 x"});
  EXPECT_EQ(spaced_router.exit_code, 2);
  EXPECT_NE(spaced_router.err.find("--k8s-router-image 'r:1 x' holds "
                                   "whitespace"),
            std::string::npos)
      << spaced_router.err;
  const auto ns_alone =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s-namespace", "inference"});
  EXPECT_EQ(ns_alone.exit_code, 2);
  EXPECT_NE(ns_alone.err.find("--k8s-namespace needs --k8s FILE"),
            std::string::npos)
      << ns_alone.err;
  const auto bad_ns =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s", path, "--k8s-namespace", "Bad_NS"});
  EXPECT_EQ(bad_ns.exit_code, 2);
  EXPECT_NE(bad_ns.err.find("--k8s-namespace: 'Bad_NS' is not a Kubernetes "
                            "name"),
            std::string::npos)
      << bad_ns.err;
  const auto spaced =
      Tune({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8",
            "--osl", "8", "--k8s", path, "--k8s-image", "x:1 --privileged"});
  EXPECT_EQ(spaced.exit_code, 2);
  EXPECT_NE(spaced.err.find("--k8s-image 'x:1 --privileged' holds whitespace"),
            std::string::npos)
      << spaced.err;
  std::filesystem::remove_all(dir);
}

TEST(ServeCommand, K8sTrtllmOverNodesSaysHowToCreateTheSshSecret) {
  // LLaMA-3.1 405B in bf16 on 32 H100: replicas over several nodes, whose
  // leader runs trtllm-serve under mpirun over SSH.
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/serve.yaml";
  const auto run = Tune({"serve", "--model", "llama3-405b", "--gpus", "32",
                         "--gpu", "h100", "--isl", "2048", "--osl", "512",
                         "--k8s", path, "--k8s-engine", "trtllm", "--k8s-image",
                         "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
                         "--k8s-namespace", "inference"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string name = "tune-serve-llama3-405b";
  EXPECT_NE(run.err.find("tune: mpirun starts TensorRT-LLM's ranks on several "
                         "nodes over SSH; before applying " +
                         path + ", create the Secret " + name +
                         "-ssh with a key of your own:\n  " +
                         ServingSshSecretCommand(name, "inference") + "\n"),
            std::string::npos)
      << run.err;
  const std::string yaml = testing::ReadFile(path);
  EXPECT_EQ(yaml.rfind("# TensorRT-LLM's workers over several nodes", 0), 0u);
  bool group = false;
  for (const YAML::Node& d : YAML::LoadAll(yaml)) {
    if (d["kind"].as<std::string>() != "LeaderWorkerSet") continue;
    group = true;
    const YAML::Node t = d["spec"]["leaderWorkerTemplate"];
    EXPECT_GT(t["size"].as<int64_t>(), 1);
    const std::string leader =
        t["leaderTemplate"]["spec"]["containers"][0]["args"][0]
            .as<std::string>();
    EXPECT_NE(leader.find("exec mpirun --allow-run-as-root"), std::string::npos)
        << leader;
  }
  EXPECT_TRUE(group) << yaml;
  std::filesystem::remove_all(dir);
}

TEST(ServeCommand, K8sWritesMultiNodeAndDisaggregatedPlans) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/serve.yaml";
  // llama3-405b in bf16 needs at least 16 H100 per replica: two nodes or
  // more, a LeaderWorkerSet of one pod per node in each group.
  const auto multi =
      Tune({"serve", "--model", "llama3-405b", "--gpus", "32", "--gpu", "h100",
            "--isl", "1024", "--osl", "256", "--k8s", path, "--json"});
  ASSERT_EQ(multi.exit_code, 0) << multi.err;
  const nlohmann::json best = nlohmann::json::parse(multi.out)["best"];
  const int64_t gpus = best["gpus_per_replica"].get<int64_t>();
  ASSERT_GE(gpus, 16);
  ASSERT_EQ(gpus % 8, 0);
  std::vector<YAML::Node> docs = YAML::LoadAll(testing::ReadFile(path));
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0]["kind"].as<std::string>(), "LeaderWorkerSet");
  EXPECT_EQ(docs[0]["spec"]["replicas"].as<int64_t>(),
            best["replicas"].get<int64_t>());
  EXPECT_EQ(docs[0]["spec"]["leaderWorkerTemplate"]["size"].as<int64_t>(),
            gpus / 8);
  const std::string script =
      docs[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
          ["containers"][0]["args"][0]
              .as<std::string>();
  EXPECT_NE(script.find("exec vllm serve meta-llama/Llama-3.1-405B "
                        "--tensor-parallel-size " +
                        std::to_string(best["tp"].get<int64_t>()) +
                        " --pipeline-parallel-size " +
                        std::to_string(best["pp"].get<int64_t>())),
            std::string::npos)
      << script;
  EXPECT_NE(multi.err.find("(LeaderWorkerSet and Service "
                           "'tune-serve-llama3-405b': " +
                           std::to_string(best["replicas"].get<int64_t>()) +
                           " x " + std::to_string(gpus) + " GPUs over " +
                           std::to_string(gpus / 8) + " nodes)"),
            std::string::npos)
      << multi.err;
  // The disaggregated plan of docs/serving.md §6: 12 one-GPU prefill
  // workers and two tp2 decode workers, each role a Deployment and Service.
  const auto disagg = Tune(
      {"serve", "--model",  "llama3-70b", "--gpus", "16",        "--gpu",
       "h100",  "--isl",    "8192",       "--osl",  "256",       "--precision",
       "fp8",   "--disagg", "--tpot-ms",  "40",     "--ttft-ms", "2000",
       "--k8s", path,       "--json"});
  ASSERT_EQ(disagg.exit_code, 0) << disagg.err;
  const nlohmann::json j = nlohmann::json::parse(disagg.out);
  ASSERT_EQ(j["best"]["disaggregated"], true);
  docs = YAML::LoadAll(testing::ReadFile(path));
  ASSERT_EQ(docs.size(), 9u);  // 2 workloads and Services, the router's 5
  struct Role {
    const char* name;
    int64_t workers;
    int64_t gpus;
  };
  const Role roles[] = {
      {"prefill", j["best"]["prefill"]["workers"].get<int64_t>(),
       j["best"]["prefill"]["gpus_per_worker"].get<int64_t>()},
      {"decode", j["best"]["replicas"].get<int64_t>(),
       j["best"]["gpus_per_replica"].get<int64_t>()}};
  for (size_t i = 0; i < 2; ++i) {
    const YAML::Node& w = docs[2 * i];
    EXPECT_EQ(w["kind"].as<std::string>(), "Deployment");
    EXPECT_EQ(w["metadata"]["name"].as<std::string>(),
              std::string("tune-serve-llama3-70b-") + roles[i].name);
    EXPECT_EQ(w["spec"]["replicas"].as<int64_t>(), roles[i].workers);
    const YAML::Node c = w["spec"]["template"]["spec"]["containers"][0];
    EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"].as<int64_t>(),
              roles[i].gpus);
    const auto args = c["args"].as<std::vector<std::string>>();
    EXPECT_EQ(args.back(),
              "{\"kv_connector\":\"NixlConnector\",\"kv_role\":"
              "\"kv_both\"}");
    EXPECT_EQ(docs[2 * i + 1]["kind"].as<std::string>(), "Service");
  }
  EXPECT_EQ(docs[7]["spec"]["template"]["spec"]["containers"][0]["image"]
                .as<std::string>(),
            "vllm/vllm-router:latest");
  EXPECT_NE(disagg.err.find(
                "; vLLM's router, Deployment 'tune-serve-llama3-70b-router' "
                "behind Service 'tune-serve-llama3-70b')"),
            std::string::npos)
      << disagg.err;
  // The same plan in SGLang's manifests: its router in front, as Service
  // 'tune-serve-llama3-70b'.
  const auto sglang_disagg = Tune(
      {"serve",        "--model",     "llama3-70b", "--gpus",   "16",
       "--gpu",        "h100",        "--isl",      "8192",     "--osl",
       "256",          "--precision", "fp8",        "--disagg", "--tpot-ms",
       "40",           "--ttft-ms",   "2000",       "--k8s",    path,
       "--k8s-engine", "sglang"});
  ASSERT_EQ(sglang_disagg.exit_code, 0) << sglang_disagg.err;
  docs = YAML::LoadAll(testing::ReadFile(path));
  ASSERT_EQ(docs.size(), 9u);
  EXPECT_EQ(docs[7]["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-router");
  EXPECT_EQ(docs[8]["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b");
  EXPECT_NE(sglang_disagg.err.find(
                "; SGLang's router, Deployment 'tune-serve-llama3-70b-router' "
                "behind Service 'tune-serve-llama3-70b')"),
            std::string::npos)
      << sglang_disagg.err;
  // In a namespace: every object in it, the router's RoleBinding naming it.
  const auto in_ns = Tune({"serve",
                           "--model",
                           "llama3-70b",
                           "--gpus",
                           "16",
                           "--gpu",
                           "h100",
                           "--isl",
                           "8192",
                           "--osl",
                           "256",
                           "--precision",
                           "fp8",
                           "--disagg",
                           "--tpot-ms",
                           "40",
                           "--ttft-ms",
                           "2000",
                           "--k8s",
                           path,
                           "--k8s-engine",
                           "sglang",
                           "--k8s-namespace",
                           "inference"});
  ASSERT_EQ(in_ns.exit_code, 0) << in_ns.err;
  docs = YAML::LoadAll(testing::ReadFile(path));
  for (const YAML::Node& d : docs) {
    EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "inference");
  }
  EXPECT_EQ(docs[6]["subjects"][0]["namespace"].as<std::string>(), "inference");
  // And in TensorRT-LLM's: StatefulSets its disaggregated server lists.
  const auto trtllm_disagg = Tune(
      {"serve",  "--model",     "llama3-70b",
       "--gpus", "16",          "--gpu",
       "h100",   "--isl",       "8192",
       "--osl",  "256",         "--precision",
       "fp8",    "--disagg",    "--tpot-ms",
       "40",     "--ttft-ms",   "2000",
       "--k8s",  path,          "--k8s-engine",
       "trtllm", "--k8s-image", "nvcr.io/nvidia/tensorrt-llm/release:1.0.0"});
  ASSERT_EQ(trtllm_disagg.exit_code, 0) << trtllm_disagg.err;
  docs = YAML::LoadAll(testing::ReadFile(path));
  ASSERT_EQ(docs.size(), 11u);
  EXPECT_EQ(docs[1]["kind"].as<std::string>(), "StatefulSet");
  const YAML::Node urls =
      YAML::Load(docs[8]["data"]["disagg_config.yaml"]
                     .as<std::string>())["context_servers"]["urls"];
  EXPECT_EQ(static_cast<int64_t>(urls.size()),
            j["best"]["prefill"]["workers"].get<int64_t>());
  EXPECT_NE(trtllm_disagg.err.find("prefill StatefulSet and Service "
                                   "'tune-serve-llama3-70b-prefill'"),
            std::string::npos)
      << trtllm_disagg.err;
  std::filesystem::remove_all(dir);
}

TEST(ServeCommand, InputErrors) {
  auto expect = [](const std::vector<std::string>& args,
                   const std::string& message) {
    const auto run = Tune(args);
    EXPECT_EQ(run.exit_code, 2) << run.out;
    EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
  };
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "0", "--osl",
          "8"},
         "--isl and --osl must be at least 1 token, got 0 and 8");
  expect(
      {"serve", "--model", "nope", "--gpus", "1", "--isl", "8", "--osl", "8"},
      "nope");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
          "8", "--kv-cache-dtype", "int3"},
         "unknown KV-cache dtype 'int3'");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
          "8", "--top", "0"},
         "--top must be at least 1, got 0");
  expect({"serve", "--model", "llama3-405b", "--gpus", "1", "--gpu", "h100",
          "--isl", "8", "--osl", "8"},
         "no deployment of llama3-405b fits on 1 x h100 (1 x out_of_memory)");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
          "8", "--request-rate", "2", "--concurrency", "3"},
         "--request-rate and --concurrency cannot be combined");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "4096",
          "--osl", "8", "--prefix", "4096"},
         "--prefix must be in [0, 4095] (below --isl 4096), got 4096");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "4096",
          "--osl", "8", "--prefix", "1024", "--prefix-pool", "0"},
         "--prefix-pool must be in [1, 1048576], got 0");
  expect({"serve", "--model", "llama3-8b", "--gpus", "8", "--isl", "8", "--osl",
          "8", "--nextn", "1", "--nextn-accepted", "0.5"},
         "--nextn drafts with the model's MTP layers, and llama3-8b has none "
         "(mtp_num_layers 0)");
  expect({"serve", "--model", "deepseek-v3", "--gpus", "8", "--isl", "8",
          "--osl", "8", "--nextn", "2"},
         "--nextn 2 needs --nextn-accepted or --nextn-accept-rates");
  expect({"serve", "--model", "deepseek-v3", "--gpus", "8", "--isl", "8",
          "--osl", "8", "--nextn-accept-rates", "0.9,1.5"},
         "--nextn-accept-rates must lie in [0, 1], got 1.5 at position 2");
  expect({"serve", "--model", "deepseek-v3", "--gpus", "8", "--isl", "8",
          "--osl", "8", "--nextn", "2", "--nextn-accepted", "1",
          "--nextn-accept-rates", "0.9"},
         "--nextn-accept-rates and --nextn-accepted cannot be combined");
  expect({"serve", "--model", "deepseek-v3", "--gpus", "8", "--isl", "8",
          "--osl", "8", "--nextn-accept-rates", "high"},
         "--nextn-accept-rates");
  expect({"serve", "--model", "deepseek-v3", "--gpus", "8", "--isl", "8",
          "--osl", "8", "--nextn", "2", "--nextn-accepted", "2.5"},
         "--nextn-accepted must be in [0, 2] (at most --nextn 2), got 2.5");
  expect(
      {"serve", "--model", "deepseek-v3", "--gpus", "8", "--isl", "8", "--osl",
       "8", "--nextn", "3", "--nextn-accepted", "1", "--draft-topk", "4"},
      "--draft-tokens must be in [4, 37] for a tree of depth 3 and top-k "
      "4, got 0");
  expect({"serve", "--model", "deepseek-v3", "--gpus", "8", "--isl", "8",
          "--osl", "8", "--nextn-accept-rates", "0.8", "--draft-topk", "2",
          "--draft-tokens", "3"},
         "--draft-topk 2 needs --nextn (the tree's depth)");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
          "8", "--spec-method", "medusa"},
         "unknown --spec-method 'medusa'");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
          "8", "--draft-model", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
          "--nextn", "2", "--nextn-accepted", "1"},
         "--draft-model, --draft-intermediate and --draft-vocab describe an "
         "EAGLE-3 head");
  expect(
      {"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
       "8", "--spec-method", "eagle3", "--nextn", "2", "--nextn-accepted", "1"},
      "--spec-method eagle3 needs the head's checkpoint (--draft-model)");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
          "8", "--spec-method", "eagle3", "--draft-model", "a b", "--nextn",
          "2", "--nextn-accepted", "1"},
         "--draft-model 'a b' has characters the commands cannot carry as "
         "written");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--isl", "8", "--osl",
          "8", "--spec-method", "eagle3", "--draft-model",
          "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
         "--spec-method eagle3 needs --nextn or --nextn-accept-rates");
  expect({"serve", "--model", "llama-tiny", "--gpus", "1", "--isl", "8",
          "--osl", "8", "--spec-method", "eagle3", "--validate"},
         "--validate runs the plans on meshtune's engine, which has no "
         "speculative decoding");
  expect({"serve", "--model", "llama-tiny", "--gpus", "1", "--isl", "8",
          "--osl", "8", "--nextn", "1", "--nextn-accepted", "1", "--validate"},
         "--validate runs the plans on meshtune's engine, which has no "
         "speculative decoding");
  expect({"serve", "--model", "llama3-8b", "--gpus", "1", "--gpu", "h100",
          "--isl", "1024", "--osl", "256", "--request-rate", "100000"},
         "no deployment of llama3-8b fits on 1 x h100 (1 x overloaded)");
  expect({"serve", "--model", "llama3-8b", "--gpus", "9999999999", "--isl", "8",
          "--osl", "8"},
         "--gpus: 9999999999 is above the limit");
}

}  // namespace
}  // namespace meshtune::tuner
