// The serving plan as Kubernetes manifests: exact text of the Deployment
// and Service, the engine's words quoted for YAML, and the plans that
// cannot be one pod per replica.
#include "tuner/interop/serving_manifest.h"

#include <gtest/gtest.h>

namespace meshtune::tuner {
namespace {

ServingManifestSpec Spec() {
  ServingManifestSpec s;
  s.name = "tune-serve-llama3-70b";
  s.vllm_command =
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
            "          ports:\n"
            "            - containerPort: 8000\n"
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
  s.vllm_command =
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

TEST(ServingDeployment, Errors) {
  ServingManifestSpec big = Spec();
  big.gpus_per_replica = 16;
  EXPECT_EQ(ServingDeployment(big).status().message(),
            "a replica of 16 GPUs spans nodes of 8: one Deployment pod cannot "
            "hold it");
  ServingManifestSpec name = Spec();
  name.name = "Bad_Name";
  EXPECT_FALSE(ServingDeployment(name).ok());
  ServingManifestSpec cmd = Spec();
  cmd.vllm_command = "python3 -m sglang.launch_server --tp 4";
  EXPECT_EQ(ServingDeployment(cmd).status().message(),
            "not a 'vllm serve MODEL ...' command");
}

}  // namespace
}  // namespace meshtune::tuner
