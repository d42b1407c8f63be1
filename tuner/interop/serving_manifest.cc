#include "tuner/interop/serving_manifest.h"

#include <vector>

#include "tuner/interop/kubernetes_job.h"
#include "tuner/interop/shell_words.h"

namespace meshtune::tuner {

namespace {

// `text` as a YAML double-quoted scalar: JSON's escapes are YAML's.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      static const char* kHex = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

StatusOr<std::string> ServingDeployment(const ServingManifestSpec& spec) {
  MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("--k8s name", spec.name));
  if (!spec.namespace_name.empty()) {
    MESHTUNE_RETURN_IF_ERROR(
        CheckKubernetesName("namespace", spec.namespace_name));
  }
  if (spec.replicas < 1 || spec.gpus_per_replica < 1) {
    return Status::InvalidArgument(
        "a serving Deployment needs at least one replica of one GPU",
        "give the plan tune serve chose");
  }
  if (spec.gpus_per_replica > spec.gpus_per_node) {
    return Status::InvalidArgument(
        "a replica of " + std::to_string(spec.gpus_per_replica) +
            " GPUs spans nodes of " + std::to_string(spec.gpus_per_node) +
            ": one Deployment pod cannot hold it",
        "run it with a LeaderWorkerSet, or pick a plan whose replica fits a "
        "node");
  }
  auto words = SplitShellWords(spec.vllm_command, "the vLLM command");
  if (!words.ok()) return words.status();
  const std::vector<std::string>& w = words.value();
  if (w.size() < 3 || w[0] != "vllm" || w[1] != "serve") {
    return Status::InvalidArgument("not a 'vllm serve MODEL ...' command",
                                   "give the command tune serve printed");
  }
  const std::string ns = spec.namespace_name.empty()
                             ? ""
                             : "  namespace: " + spec.namespace_name + "\n";
  std::string y;
  y += "apiVersion: apps/v1\n";
  y += "kind: Deployment\n";
  y += "metadata:\n  name: " + spec.name + "\n" + ns;
  y += "spec:\n";
  y += "  replicas: " + std::to_string(spec.replicas) + "\n";
  y += "  selector:\n    matchLabels:\n      app: " + spec.name + "\n";
  y += "  template:\n    metadata:\n      labels:\n        app: " + spec.name +
       "\n";
  y += "    spec:\n      containers:\n";
  y += "        - name: server\n";
  y += "          image: " + Quoted(spec.image) + "\n";
  y += "          command: [\"vllm\", \"serve\"]\n";
  y += "          args:\n";
  for (size_t i = 2; i < w.size(); ++i)
    y += "            - " + Quoted(w[i]) + "\n";
  y += "          ports:\n            - containerPort: 8000\n";
  y += "          resources:\n            limits:\n              "
       "nvidia.com/gpu: " +
       std::to_string(spec.gpus_per_replica) + "\n";
  // Tensor-parallel workers share tensors through /dev/shm.
  y += "          volumeMounts:\n            - name: shm\n              "
       "mountPath: /dev/shm\n";
  y += "      volumes:\n        - name: shm\n          emptyDir:\n"
       "            medium: Memory\n";
  y += "---\n";
  y += "apiVersion: v1\n";
  y += "kind: Service\n";
  y += "metadata:\n  name: " + spec.name + "\n" + ns;
  y += "spec:\n  selector:\n    app: " + spec.name + "\n";
  y += "  ports:\n    - port: 8000\n      targetPort: 8000\n";
  return y;
}

}  // namespace meshtune::tuner
