// The serving plan as Kubernetes manifests: exact text of the Deployment
// and Service, the engine's words quoted for YAML, replicas that span nodes
// as LeaderWorkerSets and disaggregated plans as a workload per role (both
// parsed back with yaml-cpp), and the plans that have no manifest.
#include "tuner/interop/serving_manifest.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/tuner/interop/manifest_yaml.h"
#include "tuner/interop/shell_words.h"

namespace meshtune::tuner {
namespace {

using testing::Args;
using testing::Container;
using testing::Documents;
using testing::EnvNames;
using testing::Gpus;

ServingManifestSpec Spec() {
  ServingManifestSpec s;
  s.name = "tune-serve-llama3-70b";
  s.command =
      "vllm serve 'meta-llama/Meta-Llama-3-70B' \\\n"
      "  --tensor-parallel-size 4 \\\n"
      "  --max-num-seqs 123";
  s.replicas = 2;
  s.gpus_per_replica = 4;
  s.gpus_per_node = 8;
  return s;
}

TEST(ServingDeployment, ExactText) {
  ServingManifestSpec s = Spec();
  s.namespace_name = "inference";
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  EXPECT_EQ(yaml.value(),
            "apiVersion: apps/v1\n"
            "kind: Deployment\n"
            "metadata:\n"
            "  name: tune-serve-llama3-70b\n"
            "  namespace: inference\n"
            "spec:\n"
            "  replicas: 2\n"
            "  selector:\n"
            "    matchLabels:\n"
            "      app: tune-serve-llama3-70b\n"
            "  template:\n"
            "    metadata:\n"
            "      labels:\n"
            "        app: tune-serve-llama3-70b\n"
            "    spec:\n"
            "      containers:\n"
            "        - name: server\n"
            "          image: \"vllm/vllm-openai:latest\"\n"
            "          command: [\"vllm\", \"serve\"]\n"
            "          args:\n"
            "            - \"meta-llama/Meta-Llama-3-70B\"\n"
            "            - \"--tensor-parallel-size\"\n"
            "            - \"4\"\n"
            "            - \"--max-num-seqs\"\n"
            "            - \"123\"\n"
            "          env:\n"
            "            - name: HF_TOKEN\n"
            "              valueFrom:\n"
            "                secretKeyRef:\n"
            "                  name: hf-token-secret\n"
            "                  key: token\n"
            "                  optional: true\n"
            "          ports:\n"
            "            - containerPort: 8000\n"
            "          readinessProbe:\n"
            "            httpGet:\n"
            "              path: /health\n"
            "              port: 8000\n"
            "            periodSeconds: 10\n"
            "          resources:\n"
            "            limits:\n"
            "              nvidia.com/gpu: 4\n"
            "          volumeMounts:\n"
            "            - name: shm\n"
            "              mountPath: /dev/shm\n"
            "      volumes:\n"
            "        - name: shm\n"
            "          emptyDir:\n"
            "            medium: Memory\n"
            "---\n"
            "apiVersion: v1\n"
            "kind: Service\n"
            "metadata:\n"
            "  name: tune-serve-llama3-70b\n"
            "  namespace: inference\n"
            "spec:\n"
            "  selector:\n"
            "    app: tune-serve-llama3-70b\n"
            "  ports:\n"
            "    - port: 8000\n"
            "      targetPort: 8000\n");
}

TEST(ServingDeployment, WordsAreQuotedForYaml) {
  ServingManifestSpec s = Spec();
  s.command =
      "vllm serve 'a\"b\\c' --kv-transfer-config "
      "'{\"kv_connector\":\"NixlConnector\"}'";
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok());
  EXPECT_NE(yaml.value().find("            - \"a\\\"b\\\\c\"\n"),
            std::string::npos)
      << yaml.value();
  EXPECT_NE(
      yaml.value().find(
          "            - \"{\\\"kv_connector\\\":\\\"NixlConnector\\\"}\"\n"),
      std::string::npos);
}

// The words after `exec` of a leader's shell script: the vLLM command it
// runs.
std::vector<std::string> ExecWords(const std::string& script) {
  const size_t exec = script.find(" && exec ");
  EXPECT_NE(exec, std::string::npos) << script;
  auto words = SplitShellWords(script.substr(exec + 9), "the leader script");
  EXPECT_TRUE(words.ok()) << script;
  return words.ok() ? words.value() : std::vector<std::string>{};
}

ServingManifestSpec SglangSpec() {
  ServingManifestSpec s;
  s.name = "tune-serve-deepseek-v3";
  s.engine = ServingManifestEngine::kSglang;
  s.command =
      "python3 -m sglang.launch_server --model-path "
      "'deepseek-ai/DeepSeek-V3' \\\n"
      "  --tp 8 \\\n"
      "  --dp 8 \\\n"
      "  --enable-dp-attention \\\n"
      "  --ep-size 8";
  s.replicas = 2;
  s.gpus_per_replica = 8;
  s.gpus_per_node = 8;
  return s;
}

TEST(ServingDeployment, SglangRunsItsLaunchServerOnPort8000) {
  const auto yaml = ServingDeployment(SglangSpec());
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0]["kind"].as<std::string>(), "Deployment");
  EXPECT_EQ(docs[0]["spec"]["replicas"].as<int64_t>(), 2);
  const YAML::Node c = Container(docs[0]["spec"]["template"]);
  EXPECT_EQ(c["image"].as<std::string>(), "lmsysorg/sglang:latest");
  EXPECT_EQ(
      c["command"].as<std::vector<std::string>>(),
      (std::vector<std::string>{"python3", "-m", "sglang.launch_server"}));
  EXPECT_EQ(Args(c), (std::vector<std::string>{
                         "--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8",
                         "--dp", "8", "--enable-dp-attention", "--ep-size", "8",
                         "--host", "0.0.0.0", "--port", "8000"}));
  EXPECT_EQ(c["ports"][0]["containerPort"].as<int>(), 8000);
  EXPECT_EQ(Gpus(c), 8);
  EXPECT_EQ(EnvNames(c), std::vector<std::string>{"HF_TOKEN"})
      << "the NIXL side channel is vLLM's";
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(),
            "/health");
  EXPECT_EQ(docs[1]["spec"]["ports"][0]["port"].as<int>(), 8000);
  // An image of the user's wins.
  ServingManifestSpec own = SglangSpec();
  own.image = "registry.local/sglang:v0.5";
  EXPECT_NE(ServingDeployment(own).value().find(
                "image: \"registry.local/sglang:v0.5\""),
            std::string::npos);
}

TEST(ServingDeployment, SglangAcrossNodesRanksEveryPod) {
  // 16 GPUs per replica on 8-GPU nodes: a group of 2 pods, each running
  // the plan's command with SGLang's rendezvous flags and its LWS rank;
  // the leader serves HTTP. Data-parallel attention across nodes is
  // SGLang's own (vLLM's manifests refuse it).
  ServingManifestSpec s = SglangSpec();
  s.replicas = 1;
  s.gpus_per_replica = 16;
  s.command =
      "python3 -m sglang.launch_server --model-path "
      "'deepseek-ai/DeepSeek-V3' --tp 16 --dp 16 --enable-dp-attention "
      "--ep-size 16";
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0]["kind"].as<std::string>(), "LeaderWorkerSet");
  const YAML::Node group = docs[0]["spec"]["leaderWorkerTemplate"];
  EXPECT_EQ(group["size"].as<int64_t>(), 2);
  const std::vector<std::string> plan = {
      "--model-path", "deepseek-ai/DeepSeek-V3", "--tp",      "16", "--dp",
      "16",           "--enable-dp-attention",   "--ep-size", "16"};
  const std::vector<std::string> rank = {
      "--dist-init-addr", "$(LWS_LEADER_ADDRESS):20000",
      "--nnodes",         "$(LWS_GROUP_SIZE)",
      "--node-rank",      "$(LWS_WORKER_INDEX)"};
  std::vector<std::string> leader_args = plan;
  leader_args.insert(leader_args.end(), rank.begin(), rank.end());
  std::vector<std::string> worker_args = leader_args;
  leader_args.insert(leader_args.end(),
                     {"--host", "0.0.0.0", "--port", "8000"});
  const YAML::Node leader = Container(group["leaderTemplate"]);
  const YAML::Node worker = Container(group["workerTemplate"]);
  for (const YAML::Node& c : {leader, worker}) {
    EXPECT_EQ(
        c["command"].as<std::vector<std::string>>(),
        (std::vector<std::string>{"python3", "-m", "sglang.launch_server"}));
    EXPECT_EQ(Gpus(c), 8);
  }
  EXPECT_EQ(Args(leader), leader_args);
  EXPECT_EQ(Args(worker), worker_args);
  EXPECT_TRUE(leader["ports"]);
  EXPECT_FALSE(worker["ports"]);
  EXPECT_EQ(docs[1]["spec"]["selector"]["role"].as<std::string>(), "leader");
}

TEST(ServingDeployment, SglangCommandIsChecked) {
  ServingManifestSpec vllm = SglangSpec();
  vllm.command = "vllm serve m --tensor-parallel-size 8";
  EXPECT_EQ(ServingDeployment(vllm).status().message(),
            "not a 'python3 -m sglang.launch_server ...' command");
  ServingManifestSpec bare = SglangSpec();
  bare.command = "-m sglang.launch_server --tp 8";
  EXPECT_FALSE(ServingDeployment(bare).ok());
  ServingManifestSpec bad = SglangSpec();
  bad.command = "python3 -m sglang.launch_server --tp eight";
  EXPECT_FALSE(ServingDeployment(bad).ok());
  EXPECT_EQ(ParseServingManifestEngine("sglang").value(),
            ServingManifestEngine::kSglang);
  EXPECT_EQ(ParseServingManifestEngine("trtllm").value(),
            ServingManifestEngine::kTensorRtLlm);
  EXPECT_EQ(ParseServingManifestEngine("tensorrt").status().message(),
            "--k8s-engine must be vllm, sglang or trtllm, got 'tensorrt'");
}

// SGLang's disaggregated plan: 2 prefill workers of tp 8 and one decode
// worker of tp `decode_tp` (over two nodes at 16).
ServingDisaggregatedSpec SglangDisaggregatedSpec(int64_t decode_tp) {
  ServingDisaggregatedSpec s;
  s.name = "tune-serve-deepseek-v3";
  s.engine = ServingManifestEngine::kSglang;
  s.prefill = {
      "python3 -m sglang.launch_server --model-path m --tp 8 "
      "--disaggregation-mode prefill",
      2, 8, ""};
  s.decode = {"python3 -m sglang.launch_server --model-path m --tp " +
                  std::to_string(decode_tp) + " --disaggregation-mode decode",
              1, decode_tp, ""};
  return s;
}

TEST(ServingDisaggregatedDeployment, SglangRolesCarryTheirModes) {
  const ServingDisaggregatedSpec s = SglangDisaggregatedSpec(8);
  const auto yaml = ServingDisaggregatedDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 9u);  // 2 workloads and Services, the router's 5
  const YAML::Node prefill = Container(docs[0]["spec"]["template"]);
  const YAML::Node decode = Container(docs[2]["spec"]["template"]);
  EXPECT_EQ(docs[0]["spec"]["replicas"].as<int64_t>(), 2);
  EXPECT_EQ(Args(prefill)[5], "prefill");
  EXPECT_EQ(Args(decode)[5], "decode");
  EXPECT_EQ(EnvNames(prefill), std::vector<std::string>{"HF_TOKEN"});
  EXPECT_EQ(prefill["image"].as<std::string>(), "lmsysorg/sglang:latest");
}

TEST(ServingDisaggregatedDeployment, SglangRouterFindsTheServingPods) {
  // Prefill: 2 single-node workers; decode: 1 worker over 2 nodes, whose
  // leader alone serves. The router discovers both through the API.
  ServingDisaggregatedSpec s = SglangDisaggregatedSpec(16);
  const auto yaml = ServingDisaggregatedDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 9u) << yaml.value();
  // The prefill pods announce their KV bootstrap port.
  EXPECT_EQ(docs[0]["spec"]["template"]["metadata"]["annotations"]
                ["sglang.ai/bootstrap-port"]
                    .as<std::string>(),
            "8998");
  EXPECT_EQ(docs[2]["kind"].as<std::string>(), "LeaderWorkerSet");
  EXPECT_FALSE(docs[2]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
                   ["metadata"]["annotations"]);
  const std::string router = "tune-serve-deepseek-v3-router";
  EXPECT_EQ(docs[4]["kind"].as<std::string>(), "ServiceAccount");
  EXPECT_EQ(docs[4]["metadata"]["name"].as<std::string>(), router);
  const YAML::Node& role = docs[5];
  EXPECT_EQ(role["kind"].as<std::string>(), "Role");
  EXPECT_EQ(role["rules"][0]["resources"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"pods"}));
  EXPECT_EQ(role["rules"][0]["verbs"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"get", "list", "watch"}));
  const YAML::Node& binding = docs[6];
  EXPECT_EQ(binding["kind"].as<std::string>(), "RoleBinding");
  EXPECT_EQ(binding["subjects"][0]["kind"].as<std::string>(), "ServiceAccount");
  EXPECT_EQ(binding["subjects"][0]["name"].as<std::string>(), router);
  EXPECT_FALSE(binding["subjects"][0]["namespace"]);  // the binding's own
  EXPECT_EQ(binding["roleRef"]["name"].as<std::string>(), router);
  const YAML::Node& deployment = docs[7];
  EXPECT_EQ(deployment["kind"].as<std::string>(), "Deployment");
  EXPECT_EQ(deployment["metadata"]["name"].as<std::string>(), router);
  EXPECT_EQ(deployment["spec"]["template"]["spec"]["serviceAccountName"]
                .as<std::string>(),
            router);
  const YAML::Node c = Container(deployment["spec"]["template"]);
  EXPECT_EQ(c["image"].as<std::string>(), "lmsysorg/sglang:latest");
  EXPECT_EQ(c["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"python3", "-m",
                                      "sglang_router.launch_router"}));
  EXPECT_FALSE(c["resources"]);  // no GPU
  EXPECT_EQ(Args(c), (std::vector<std::string>{
                         "--pd-disaggregation", "--service-discovery",
                         "--prefill-selector", "app=tune-serve-deepseek-v3",
                         "serving-role=prefill", "--decode-selector",
                         "app=tune-serve-deepseek-v3", "serving-role=decode",
                         "role=leader", "--service-discovery-namespace",
                         "$(POD_NAMESPACE)", "--service-discovery-port", "8000",
                         "--host", "0.0.0.0", "--port", "8000"}));
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
            "metadata.namespace");
  // The entry point: the plan's name, in front of the router only.
  const YAML::Node& service = docs[8];
  EXPECT_EQ(service["kind"].as<std::string>(), "Service");
  EXPECT_EQ(service["metadata"]["name"].as<std::string>(), s.name);
  EXPECT_EQ(service["spec"]["selector"]["serving-role"].as<std::string>(),
            "router");
  // The workers' labels match the router's selectors.
  EXPECT_EQ(docs[0]["spec"]["template"]["metadata"]["labels"]["serving-role"]
                .as<std::string>(),
            "prefill");
  const YAML::Node leader_labels = docs[2]["spec"]["leaderWorkerTemplate"]
                                       ["leaderTemplate"]["metadata"]["labels"];
  EXPECT_EQ(leader_labels["serving-role"].as<std::string>(), "decode");
  EXPECT_EQ(leader_labels["role"].as<std::string>(), "leader");
  // With a namespace, every object is in it and the subject names it.
  s.namespace_name = "inference";
  const std::vector<YAML::Node> in_ns =
      Documents(ServingDisaggregatedDeployment(s).value());
  for (const YAML::Node& d : in_ns) {
    EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "inference");
  }
  EXPECT_EQ(in_ns[6]["subjects"][0]["namespace"].as<std::string>(),
            "inference");
}

ServingManifestSpec TrtllmSpec() {
  ServingManifestSpec s;
  s.name = "tune-serve-llama3-70b";
  s.engine = ServingManifestEngine::kTensorRtLlm;
  s.image = "nvcr.io/nvidia/tensorrt-llm/release:1.0.0";
  s.command =
      "trtllm-serve 'meta-llama/Meta-Llama-3-70B' \\\n"
      "  --tp_size 4 \\\n"
      "  --max_batch_size 84 \\\n"
      "  --extra_llm_api_options extra_llm_api_options.yaml";
  s.options_yaml =
      "enable_attention_dp: false\nkv_cache_config:\n  dtype: fp8\n";
  s.replicas = 2;
  s.gpus_per_replica = 4;
  return s;
}

TEST(ServingDeployment, TrtllmMountsItsOptionsFile) {
  const ServingManifestSpec s = TrtllmSpec();
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 3u) << yaml.value();
  const YAML::Node& options = docs[0];
  EXPECT_EQ(options["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(options["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-options");
  EXPECT_EQ(options["data"]["extra_llm_api_options.yaml"].as<std::string>(),
            s.options_yaml);
  EXPECT_EQ(docs[1]["kind"].as<std::string>(), "Deployment");
  EXPECT_EQ(docs[1]["spec"]["replicas"].as<int64_t>(), 2);
  const YAML::Node c = Container(docs[1]["spec"]["template"]);
  EXPECT_EQ(c["image"].as<std::string>(), s.image);
  EXPECT_EQ(c["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"trtllm-serve"}));
  EXPECT_EQ(Args(c), (std::vector<std::string>{
                         "meta-llama/Meta-Llama-3-70B", "--tp_size", "4",
                         "--max_batch_size", "84", "--extra_llm_api_options",
                         "/etc/tune-serve/extra_llm_api_options.yaml", "--host",
                         "0.0.0.0", "--port", "8000"}));
  EXPECT_EQ(Gpus(c), 4);
  EXPECT_EQ(c["volumeMounts"][1]["mountPath"].as<std::string>(),
            "/etc/tune-serve");
  EXPECT_TRUE(c["volumeMounts"][1]["readOnly"].as<bool>());
  const YAML::Node volume = docs[1]["spec"]["template"]["spec"]["volumes"][1];
  EXPECT_EQ(volume["configMap"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-options");
  EXPECT_EQ(docs[2]["kind"].as<std::string>(), "Service");
  // A command that names no options file gets the mounted one.
  ServingManifestSpec bare = TrtllmSpec();
  bare.command = "trtllm-serve m --tp_size 4";
  const std::vector<YAML::Node> bare_docs =
      Documents(ServingDeployment(bare).value());
  EXPECT_EQ(Args(Container(bare_docs[1]["spec"]["template"])),
            (std::vector<std::string>{
                "m", "--tp_size", "4", "--extra_llm_api_options",
                "/etc/tune-serve/extra_llm_api_options.yaml", "--host",
                "0.0.0.0", "--port", "8000"}));
}

TEST(ServingDeployment, TrtllmRefusals) {
  ServingManifestSpec no_image = TrtllmSpec();
  no_image.image = "";
  EXPECT_EQ(ServingDeployment(no_image).status().message(),
            "TensorRT-LLM's manifests need an image: NGC publishes its "
            "release image by version only");
  ServingManifestSpec spaced = TrtllmSpec();
  spaced.image = "a b";
  EXPECT_EQ(ServingDeployment(spaced).status().message(),
            "--k8s-image 'a b' holds whitespace");
  ServingManifestSpec vllm = TrtllmSpec();
  vllm.command = "vllm serve m --tensor-parallel-size 4";
  EXPECT_EQ(ServingDeployment(vllm).status().message(),
            "not a 'trtllm-serve MODEL ...' command");
  ServingManifestSpec malformed = TrtllmSpec();
  malformed.options_yaml = "kv_cache_config: [unclosed";
  EXPECT_FALSE(ServingDeployment(malformed).ok());
}

TEST(ServingDisaggregatedDeployment, TrtllmServerListsEveryWorkerPod) {
  // 3 context servers of 1 GPU and 1 generation server of 4, each role a
  // StatefulSet with its options; the disaggregated server in front.
  ServingDisaggregatedSpec d;
  d.name = "tune-serve-llama3-70b";
  d.engine = ServingManifestEngine::kTensorRtLlm;
  d.image = "nvcr.io/nvidia/tensorrt-llm/release:1.0.0";
  const std::string kv =
      "enable_attention_dp: false\ncache_transceiver_config:\n  backend: "
      "DEFAULT\n";
  d.prefill = {"trtllm-serve m --tp_size 1 --extra_llm_api_options o.yaml", 3,
               1, "disable_overlap_scheduler: true\n" + kv};
  d.decode = {"trtllm-serve m --tp_size 4 --extra_llm_api_options o.yaml", 1, 4,
              kv};
  const auto yaml = ServingDisaggregatedDeployment(d);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  // Per role: options, StatefulSet, Service, headless Service; then the
  // server's configuration, Deployment and Service.
  ASSERT_EQ(docs.size(), 11u) << yaml.value();
  for (const auto& [first, role, workers] :
       {std::tuple<size_t, std::string, int64_t>{0, "prefill", 3},
        {4, "decode", 1}}) {
    const std::string name = "tune-serve-llama3-70b-" + role;
    EXPECT_EQ(docs[first]["kind"].as<std::string>(), "ConfigMap");
    EXPECT_EQ(docs[first]["metadata"]["name"].as<std::string>(),
              name + "-options");
    const YAML::Node& set = docs[first + 1];
    EXPECT_EQ(set["kind"].as<std::string>(), "StatefulSet");
    EXPECT_EQ(set["metadata"]["name"].as<std::string>(), name);
    EXPECT_EQ(set["spec"]["replicas"].as<int64_t>(), workers);
    EXPECT_EQ(set["spec"]["serviceName"].as<std::string>(), name + "-pods");
    EXPECT_EQ(set["spec"]["podManagementPolicy"].as<std::string>(), "Parallel");
    EXPECT_EQ(set["spec"]["template"]["spec"]["volumes"][1]["configMap"]["name"]
                  .as<std::string>(),
              name + "-options");
    const YAML::Node& pods = docs[first + 3];
    EXPECT_EQ(pods["metadata"]["name"].as<std::string>(), name + "-pods");
    EXPECT_EQ(pods["spec"]["clusterIP"].as<std::string>(), "None");
    EXPECT_EQ(pods["spec"]["selector"]["serving-role"].as<std::string>(), role);
  }
  EXPECT_EQ(docs[4]["data"]["extra_llm_api_options.yaml"].as<std::string>(),
            kv);
  // The server's configuration lists every pod by its stable DNS name.
  const YAML::Node config =
      YAML::Load(docs[8]["data"]["disagg_config.yaml"].as<std::string>());
  EXPECT_EQ(config["hostname"].as<std::string>(), "0.0.0.0");
  EXPECT_EQ(config["port"].as<int>(), 8000);
  EXPECT_EQ(config["context_servers"]["num_instances"].as<int64_t>(), 3);
  EXPECT_EQ(
      config["context_servers"]["urls"].as<std::vector<std::string>>(),
      (std::vector<std::string>{
          "tune-serve-llama3-70b-prefill-0.tune-serve-llama3-70b-prefill-pods:"
          "8000",
          "tune-serve-llama3-70b-prefill-1.tune-serve-llama3-70b-prefill-pods:"
          "8000",
          "tune-serve-llama3-70b-prefill-2.tune-serve-llama3-70b-prefill-pods:"
          "8000"}));
  EXPECT_EQ(
      config["generation_servers"]["urls"].as<std::vector<std::string>>(),
      (std::vector<std::string>{
          "tune-serve-llama3-70b-decode-0.tune-serve-llama3-70b-decode-pods:"
          "8000"}));
  const YAML::Node c = Container(docs[9]["spec"]["template"]);
  EXPECT_EQ(docs[9]["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-router");
  EXPECT_EQ(c["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"trtllm-serve", "disaggregated"}));
  EXPECT_EQ(Args(c), (std::vector<std::string>{
                         "-c", "/etc/tune-serve/disagg_config.yaml", "-t",
                         "3600", "-r", "3600"}));
  EXPECT_EQ(c["image"].as<std::string>(), d.image);
  EXPECT_FALSE(c["resources"]);
  EXPECT_EQ(
      docs[9]["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
          .as<std::string>(),
      "tune-serve-llama3-70b-router-config");
  EXPECT_EQ(docs[10]["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b");
  EXPECT_EQ(docs[10]["spec"]["selector"]["serving-role"].as<std::string>(),
            "router");
}

TEST(ServingDeployment, ReplicaSpanningNodesIsALeaderWorkerSet) {
  ServingManifestSpec s = Spec();
  s.name = "tune-serve-llama3-405b";
  s.command =
      "vllm serve 'meta-llama/Meta-Llama-3.1-405B' \\\n"
      "  --tensor-parallel-size 8 \\\n"
      "  --pipeline-parallel-size 2 \\\n"
      "  --max-num-seqs 64";
  s.replicas = 3;
  s.gpus_per_replica = 16;
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 2u) << yaml.value();
  const YAML::Node& lws = docs[0];
  EXPECT_EQ(lws["apiVersion"].as<std::string>(), "leaderworkerset.x-k8s.io/v1");
  EXPECT_EQ(lws["kind"].as<std::string>(), "LeaderWorkerSet");
  // Not the Service's name: the LWS controller makes a headless Service
  // of the LWS's name for its pods' DNS names.
  EXPECT_EQ(lws["metadata"]["name"].as<std::string>(), s.name + "-lws");
  EXPECT_EQ(lws["spec"]["replicas"].as<int64_t>(), 3);
  const YAML::Node t = lws["spec"]["leaderWorkerTemplate"];
  EXPECT_EQ(t["size"].as<int64_t>(), 2);  // 16 GPUs on nodes of 8
  EXPECT_EQ(t["restartPolicy"].as<std::string>(), "RecreateGroupOnPodRestart");
  EXPECT_EQ(t["leaderTemplate"]["metadata"]["labels"]["role"].as<std::string>(),
            "leader");
  const YAML::Node leader = Container(t["leaderTemplate"]);
  const YAML::Node worker = Container(t["workerTemplate"]);
  EXPECT_EQ(Gpus(leader), 8);
  EXPECT_EQ(Gpus(worker), 8);
  EXPECT_EQ(leader["ports"][0]["containerPort"].as<int>(), 8000);
  EXPECT_FALSE(worker["ports"]);
  // Only the leader serves, so only it has a readiness probe; every pod
  // loads weights and takes the token.
  EXPECT_TRUE(leader["readinessProbe"]);
  EXPECT_FALSE(worker["readinessProbe"]);
  EXPECT_EQ(EnvNames(worker), std::vector<std::string>{"HF_TOKEN"});
  EXPECT_EQ(leader["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"sh", "-c"}));
  // The leader: Ray head, a wait for both pods, then vLLM over them.
  const std::string script = leader["args"][0].as<std::string>();
  EXPECT_EQ(
      script.rfind("ray start --head --port=6379 && until python3 -c ", 0), 0u)
      << script;
  EXPECT_NE(script.find("sum(n[\"Alive\"] for n in ray.nodes()) < 2)"),
            std::string::npos)
      << script;
  EXPECT_EQ(
      ExecWords(script),
      (std::vector<std::string>{
          "vllm", "serve", "meta-llama/Meta-Llama-3.1-405B",
          "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
          "--max-num-seqs", "64", "--distributed-executor-backend", "ray"}));
  EXPECT_EQ(worker["args"][0].as<std::string>(),
            "until ray start --address=\"$LWS_LEADER_ADDRESS\":6379 --block; "
            "do sleep 5; done");
  // The Service reaches the leaders only.
  EXPECT_EQ(docs[1]["kind"].as<std::string>(), "Service");
  EXPECT_EQ(docs[1]["metadata"]["name"].as<std::string>(), s.name);
  EXPECT_EQ(docs[1]["spec"]["selector"]["role"].as<std::string>(), "leader");
  EXPECT_EQ(docs[1]["spec"]["selector"]["app"].as<std::string>(), s.name);
  EXPECT_STREQ(ServingWorkloadKind(16, 8), "LeaderWorkerSet");
  EXPECT_STREQ(ServingWorkloadKind(8, 8), "Deployment");
  EXPECT_STREQ(
      ServingRoleWorkloadKind(ServingManifestEngine::kTensorRtLlm, 4, 8),
      "StatefulSet");
  EXPECT_STREQ(
      ServingRoleWorkloadKind(ServingManifestEngine::kTensorRtLlm, 16, 8),
      "LeaderWorkerSet");
  EXPECT_STREQ(ServingRoleWorkloadKind(ServingManifestEngine::kSglang, 16, 8),
               "LeaderWorkerSet");
  EXPECT_STREQ(ServingRouterName(ServingManifestEngine::kVllm),
               "vLLM's router");
  // vLLM's router has an image of its own; SGLang's and TensorRT-LLM's
  // come in the engine's image, the one the workers run.
  EXPECT_EQ(
      ServingRouterImage(ServingManifestEngine::kVllm, "my/vllm:1", "").value(),
      "vllm/vllm-router:latest");
  EXPECT_EQ(ServingRouterImage(ServingManifestEngine::kSglang, "", "").value(),
            "lmsysorg/sglang:latest");
  EXPECT_EQ(
      ServingRouterImage(ServingManifestEngine::kTensorRtLlm, "trt:1.2", "")
          .value(),
      "trt:1.2");
  EXPECT_FALSE(
      ServingRouterImage(ServingManifestEngine::kTensorRtLlm, "", "").ok());
  EXPECT_STREQ(ServingRouterName(ServingManifestEngine::kTensorRtLlm),
               "TensorRT-LLM's disaggregated server");
}

TEST(ServingDeployment, VllmDataParallelRanksSpanNodesWithoutRay) {
  // DeepSeek-V3 with 16 attention-DP ranks of tp 1 and the experts over
  // all 16 GPUs: 2 pods of 8 ranks, the leader's API server in front.
  ServingManifestSpec s = Spec();
  s.name = "tune-serve-deepseek-v3";
  s.command =
      "vllm serve 'deepseek-ai/DeepSeek-V3' --tensor-parallel-size 1 "
      "--data-parallel-size 16 --enable-expert-parallel --max-num-seqs 256";
  s.replicas = 1;
  s.gpus_per_replica = 16;
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 2u) << yaml.value();
  const YAML::Node t = docs[0]["spec"]["leaderWorkerTemplate"];
  EXPECT_EQ(t["size"].as<int64_t>(), 2);
  const YAML::Node leader = Container(t["leaderTemplate"]);
  const YAML::Node worker = Container(t["workerTemplate"]);
  EXPECT_EQ(leader["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"vllm", "serve"}));
  EXPECT_EQ(Args(leader),
            (std::vector<std::string>{
                "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "1",
                "--data-parallel-size", "16", "--enable-expert-parallel",
                "--max-num-seqs", "256", "--data-parallel-size-local", "8",
                "--data-parallel-address", "$(LWS_LEADER_ADDRESS)",
                "--data-parallel-rpc-port", "13345"}));
  EXPECT_EQ(worker["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"sh", "-c"}));
  // A shell computes the worker's first rank; the plan's words are
  // quoted for it.
  EXPECT_EQ(worker["args"][0].as<std::string>(),
            "exec vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 1 "
            "--data-parallel-size 16 --enable-expert-parallel --max-num-seqs "
            "256 --headless --data-parallel-size-local 8 "
            "--data-parallel-start-rank $((LWS_WORKER_INDEX * 8)) "
            "--data-parallel-address \"$LWS_LEADER_ADDRESS\" "
            "--data-parallel-rpc-port 13345");
  EXPECT_EQ(Gpus(leader), 8);
  EXPECT_EQ(Gpus(worker), 8);
  // Ranks of tp 2, or of tp 1 and pp 2: 4 per pod of 8 GPUs.
  s.command =
      "vllm serve m --tensor-parallel-size 2 --data-parallel-size 8 "
      "--enable-expert-parallel";
  const std::vector<YAML::Node> tp2 = Documents(ServingDeployment(s).value());
  const std::vector<std::string> args =
      Args(Container(tp2[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]));
  ASSERT_GE(args.size(), 6u);
  EXPECT_EQ(args[args.size() - 5], "4");
  s.command =
      "vllm serve m --tensor-parallel-size 1 --pipeline-parallel-size 2 "
      "--data-parallel-size 8 --enable-expert-parallel";
  const std::vector<YAML::Node> pp2 = Documents(ServingDeployment(s).value());
  const std::vector<std::string> pp2_args =
      Args(Container(pp2[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]));
  ASSERT_GE(pp2_args.size(), 6u);
  EXPECT_EQ(pp2_args[pp2_args.size() - 5], "4");
}

TEST(ServingDeployment, VllmDataParallelRanksOverWholeNodesRunOnRay) {
  // Two attention-DP ranks of tp 8 x pp 2, 16 GPUs each on nodes of 8:
  // each rank spans two pods, which only vLLM's Ray data-parallel backend
  // places ("span" packing gathers a rank's GPUs from whole nodes).
  ServingManifestSpec s = Spec();
  s.command =
      "vllm serve m --tensor-parallel-size 8 --data-parallel-size 2 "
      "--pipeline-parallel-size 2 --enable-expert-parallel";
  s.replicas = 1;
  s.gpus_per_replica = 32;
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 2u) << yaml.value();
  const YAML::Node t = docs[0]["spec"]["leaderWorkerTemplate"];
  EXPECT_EQ(t["size"].as<int64_t>(), 4);
  const YAML::Node leader = Container(t["leaderTemplate"]);
  const YAML::Node worker = Container(t["workerTemplate"]);
  EXPECT_EQ(Gpus(leader), 8);
  EXPECT_EQ(Gpus(worker), 8);
  const std::string script = leader["args"][0].as<std::string>();
  // The Ray head waits for all four pods, then starts vLLM with the
  // packing strategy in its environment.
  EXPECT_NE(script.find("sum(n[\"Alive\"] for n in ray.nodes()) < 4)"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("; do sleep 5; done && export "
                        "VLLM_RAY_DP_PACK_STRATEGY=span && exec vllm "),
            std::string::npos)
      << script;
  EXPECT_EQ(ExecWords(script),
            (std::vector<std::string>{
                "vllm", "serve", "m", "--tensor-parallel-size", "8",
                "--data-parallel-size", "2", "--pipeline-parallel-size", "2",
                "--enable-expert-parallel", "--data-parallel-backend", "ray",
                "--distributed-executor-backend", "ray"}));
  EXPECT_EQ(worker["args"][0].as<std::string>(),
            "until ray start --address=\"$LWS_LEADER_ADDRESS\":6379 --block; "
            "do sleep 5; done");
  // A rank of exactly one node's GPUs is a rank per pod, without Ray.
  s.command =
      "vllm serve m --tensor-parallel-size 8 --data-parallel-size 2 "
      "--enable-expert-parallel";
  s.gpus_per_replica = 16;
  const std::vector<YAML::Node> one = Documents(ServingDeployment(s).value());
  const YAML::Node one_leader =
      Container(one[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]);
  EXPECT_EQ(one_leader["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"vllm", "serve"}));
  const std::vector<std::string> args = Args(one_leader);
  ASSERT_GE(args.size(), 6u);
  EXPECT_EQ(args[args.size() - 6], "--data-parallel-size-local");
  EXPECT_EQ(args[args.size() - 5], "1");
}

TEST(ServingDeployment, HostileCheckpointSurvivesTheLeaderScript) {
  ServingManifestSpec s = Spec();
  s.command =
      "vllm serve 'a\"b\\c $(touch pwned) `id`'\"'\"'x' "
      "--tensor-parallel-size 8 --pipeline-parallel-size 2";
  s.gpus_per_replica = 16;
  const auto yaml = ServingDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  const std::string script =
      Container(
          docs[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["args"][0]
          .as<std::string>();
  const std::vector<std::string> words = ExecWords(script);
  ASSERT_GE(words.size(), 3u);
  EXPECT_EQ(words[2], "a\"b\\c $(touch pwned) `id`'x");
}

TEST(ServingDeployment, DisaggregatedPlanHasAWorkloadPerRole) {
  ServingDisaggregatedSpec s;
  s.name = "tune-serve-llama3-70b";
  s.namespace_name = "inference";
  const std::string kv =
      " --kv-transfer-config "
      "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'";
  s.prefill = {"vllm serve m --tensor-parallel-size 2 --max-num-seqs 1" + kv, 3,
               2, ""};
  s.decode = {
      "vllm serve m --tensor-parallel-size 8 --pipeline-parallel-size 2 "
      "--max-num-seqs 64" +
          kv,
      2, 16, ""};
  const auto yaml = ServingDisaggregatedDeployment(s);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 9u) << yaml.value();
  // Prefill: a Deployment of 3 pods of 2 GPUs and its Service.
  const YAML::Node& prefill = docs[0];
  EXPECT_EQ(prefill["kind"].as<std::string>(), "Deployment");
  EXPECT_EQ(prefill["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-prefill");
  EXPECT_EQ(prefill["metadata"]["namespace"].as<std::string>(), "inference");
  EXPECT_EQ(prefill["spec"]["replicas"].as<int64_t>(), 3);
  EXPECT_EQ(prefill["spec"]["selector"]["matchLabels"]["serving-role"]
                .as<std::string>(),
            "prefill");
  const YAML::Node p = Container(prefill["spec"]["template"]);
  EXPECT_EQ(Gpus(p), 2);
  EXPECT_EQ(p["args"][p["args"].size() - 1].as<std::string>(),
            "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}");
  EXPECT_EQ(EnvNames(p), (std::vector<std::string>{
                             "HF_TOKEN", "VLLM_NIXL_SIDE_CHANNEL_HOST"}));
  EXPECT_EQ(p["env"][1]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
            "status.podIP");
  EXPECT_EQ(docs[1]["kind"].as<std::string>(), "Service");
  EXPECT_EQ(docs[1]["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-prefill");
  EXPECT_EQ(docs[1]["spec"]["selector"]["serving-role"].as<std::string>(),
            "prefill");
  EXPECT_FALSE(docs[1]["spec"]["selector"]["role"]);
  // Decode: 2 groups of 2 pods of 8 GPUs.
  const YAML::Node& decode = docs[2];
  EXPECT_EQ(decode["kind"].as<std::string>(), "LeaderWorkerSet");
  EXPECT_EQ(decode["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-decode-lws");
  EXPECT_EQ(decode["spec"]["replicas"].as<int64_t>(), 2);
  const YAML::Node t = decode["spec"]["leaderWorkerTemplate"];
  EXPECT_EQ(t["size"].as<int64_t>(), 2);
  EXPECT_EQ(Gpus(Container(t["leaderTemplate"])), 8);
  EXPECT_EQ(Gpus(Container(t["workerTemplate"])), 8);
  EXPECT_EQ(t["workerTemplate"]["metadata"]["labels"]["serving-role"]
                .as<std::string>(),
            "decode");
  const std::vector<std::string> words =
      ExecWords(Container(t["leaderTemplate"])["args"][0].as<std::string>());
  ASSERT_GE(words.size(), 3u);
  EXPECT_EQ(words[words.size() - 3],
            "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}");
  EXPECT_TRUE(Container(t["workerTemplate"])["env"]);
  EXPECT_EQ(docs[3]["metadata"]["name"].as<std::string>(),
            "tune-serve-llama3-70b-decode");
  EXPECT_EQ(docs[3]["spec"]["selector"]["role"].as<std::string>(), "leader");
  // NIXL needs no bootstrap port: no annotation.
  EXPECT_FALSE(prefill["spec"]["template"]["metadata"]["annotations"]);
  // vLLM's router in front, from its own image, finding the prefill pods
  // and the decode groups' leaders through the API in its namespace.
  const std::string router = "tune-serve-llama3-70b-router";
  EXPECT_EQ(docs[4]["kind"].as<std::string>(), "ServiceAccount");
  EXPECT_EQ(docs[5]["kind"].as<std::string>(), "Role");
  EXPECT_EQ(docs[6]["kind"].as<std::string>(), "RoleBinding");
  EXPECT_EQ(docs[6]["subjects"][0]["namespace"].as<std::string>(), "inference");
  const YAML::Node& deployment = docs[7];
  EXPECT_EQ(deployment["metadata"]["name"].as<std::string>(), router);
  EXPECT_EQ(deployment["spec"]["template"]["spec"]["serviceAccountName"]
                .as<std::string>(),
            router);
  const YAML::Node c = Container(deployment["spec"]["template"]);
  EXPECT_EQ(c["image"].as<std::string>(), "vllm/vllm-router:latest");
  EXPECT_FALSE(c["resources"]);  // no GPU
  EXPECT_EQ(c["command"].as<std::vector<std::string>>(),
            std::vector<std::string>{"vllm-router"});
  EXPECT_EQ(Args(c), (std::vector<std::string>{
                         "--vllm-pd-disaggregation", "--service-discovery",
                         "--prefill-selector", "app=tune-serve-llama3-70b",
                         "serving-role=prefill", "--decode-selector",
                         "app=tune-serve-llama3-70b", "serving-role=decode",
                         "role=leader", "--service-discovery-namespace",
                         "$(POD_NAMESPACE)", "--service-discovery-port", "8000",
                         "--host", "0.0.0.0", "--port", "8000"}));
  EXPECT_EQ(docs[8]["kind"].as<std::string>(), "Service");
  EXPECT_EQ(docs[8]["metadata"]["name"].as<std::string>(), s.name);
  EXPECT_EQ(docs[8]["spec"]["selector"]["serving-role"].as<std::string>(),
            "router");
  // A router image of the user's own replaces vLLM's; the workers keep
  // theirs. One with whitespace is refused.
  s.router_image = "registry.local/vllm-router:v0.1.15";
  const std::vector<YAML::Node> own =
      Documents(ServingDisaggregatedDeployment(s).value());
  EXPECT_EQ(Container(own[7]["spec"]["template"])["image"].as<std::string>(),
            s.router_image);
  EXPECT_EQ(Container(own[0]["spec"]["template"])["image"].as<std::string>(),
            "vllm/vllm-openai:latest");
  s.router_image = "r:1\tx";
  EXPECT_EQ(ServingDisaggregatedDeployment(s).status().message(),
            "--k8s-router-image 'r:1\tx' holds whitespace");
}

TEST(ServingDeployment, Errors) {
  ServingManifestSpec uneven = Spec();
  uneven.gpus_per_replica = 20;
  EXPECT_EQ(ServingDeployment(uneven).status().message(),
            "a worker of 20 GPUs does not split evenly over 3 nodes of 8 GPUs");
  ServingManifestSpec dp = Spec();
  dp.command =
      "vllm serve m --tensor-parallel-size 4 --data-parallel-size 2 "
      "--pipeline-parallel-size 3 --enable-expert-parallel";
  dp.gpus_per_replica = 24;
  EXPECT_EQ(ServingDeployment(dp).status().message(),
            "a worker of 24 GPUs spans nodes with vLLM data-parallel ranks "
            "(--data-parallel-size 2) of 12 GPUs, which neither split into "
            "whole ranks per node of 8 GPUs nor span whole nodes");
  ServingManifestSpec name = Spec();
  name.name = "Bad_Name";
  EXPECT_FALSE(ServingDeployment(name).ok());
  ServingManifestSpec cmd = Spec();
  cmd.command = "python3 -m sglang.launch_server --tp 4";
  EXPECT_EQ(ServingDeployment(cmd).status().message(),
            "not a 'vllm serve MODEL ...' command");
  ServingDisaggregatedSpec long_name;
  long_name.name = std::string(38, 'a');
  long_name.prefill = {"vllm serve m", 1, 1, ""};
  long_name.decode = {"vllm serve m", 1, 1, ""};
  EXPECT_EQ(ServingDisaggregatedDeployment(long_name).status().message(),
            "--k8s name '" + long_name.name + "' is longer than 37 characters");
  long_name.name.pop_back();  // `name`-prefill-lws-99 is 52 characters
  EXPECT_TRUE(ServingDisaggregatedDeployment(long_name).ok());
  ServingDisaggregatedSpec no_workers = long_name;
  no_workers.name = "x";
  no_workers.decode.workers = 0;
  EXPECT_EQ(ServingDisaggregatedDeployment(no_workers).status().message(),
            "the decode workload needs at least one worker of one GPU");
}

}  // namespace
}  // namespace meshtune::tuner
