#include "tuner/interop/serving_manifest.h"

#include <cctype>
#include <utility>
#include <vector>

#include "tuner/interop/kubernetes_job.h"
#include "tuner/interop/launch_script.h"
#include "tuner/interop/serving_commands.h"
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

// The port of the Ray head in a LeaderWorkerSet group.
constexpr int kRayPort = 6379;

// `text` with every line indented by `spaces` more.
std::string Indent(const std::string& text, int spaces) {
  const std::string pad(spaces, ' ');
  std::string out;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    out += pad + text.substr(begin, end - begin + 1);
    begin = end + 1;
  }
  return out;
}

// `word` for sh: as is when it holds only characters sh takes literally,
// single-quoted otherwise.
std::string ShellWord(const std::string& word) {
  if (word.empty()) return ShellQuote(word);
  for (char ch : word) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (!std::isalnum(u) &&
        std::string("_./:=,+@%-").find(ch) == std::string::npos) {
      return ShellQuote(word);
    }
  }
  return word;
}

// One group of workers as the manifest writes it.
struct Workload {
  std::string name;  // metadata.name of the workload and its Service
  std::string app;   // the app label
  std::string role;  // serving-role label: "" (aggregated), prefill, decode
  std::vector<std::string> vllm_words;  // "vllm", "serve", model, flags...
  int64_t workers = 1;
  int64_t pods_per_worker = 1;  // > 1: a LeaderWorkerSet group
  int64_t gpus_per_pod = 1;
};

std::string Labels(const Workload& w, const char* lws_role) {
  std::string y = "app: " + w.app + "\n";
  if (!w.role.empty()) y += "serving-role: " + w.role + "\n";
  if (lws_role != nullptr) y += "role: " + std::string(lws_role) + "\n";
  return y;
}

// A pod spec (at indent 0) of one container: `command` and `args` (YAML
// flow list and words), the GPUs, /dev/shm, and for a disaggregated role
// the NIXL side channel's host.
std::string PodSpec(const Workload& w, const std::string& image,
                    const std::string& container, const std::string& command,
                    const std::vector<std::string>& args, bool port) {
  std::string y = "containers:\n";
  y += "  - name: " + container + "\n";
  y += "    image: " + Quoted(image) + "\n";
  y += "    command: " + command + "\n";
  y += "    args:\n";
  for (const std::string& a : args) y += "      - " + Quoted(a) + "\n";
  if (!w.role.empty()) {
    y += "    env:\n      - name: VLLM_NIXL_SIDE_CHANNEL_HOST\n"
         "        valueFrom:\n          fieldRef:\n"
         "            fieldPath: status.podIP\n";
  }
  if (port) y += "    ports:\n      - containerPort: 8000\n";
  y += "    resources:\n      limits:\n        nvidia.com/gpu: " +
       std::to_string(w.gpus_per_pod) + "\n";
  // Tensor-parallel workers share tensors through /dev/shm.
  y += "    volumeMounts:\n      - name: shm\n        mountPath: /dev/shm\n";
  y += "volumes:\n  - name: shm\n    emptyDir:\n      medium: Memory\n";
  return y;
}

std::string Metadata(const std::string& name, const std::string& ns) {
  return "metadata:\n  name: " + name + "\n" +
         (ns.empty() ? "" : "  namespace: " + ns + "\n");
}

std::string DeploymentYaml(const Workload& w, const std::string& image,
                           const std::string& ns) {
  std::string y = "apiVersion: apps/v1\nkind: Deployment\n";
  y += Metadata(w.name, ns);
  y += "spec:\n";
  y += "  replicas: " + std::to_string(w.workers) + "\n";
  y += "  selector:\n    matchLabels:\n" + Indent(Labels(w, nullptr), 6);
  y += "  template:\n    metadata:\n      labels:\n" +
       Indent(Labels(w, nullptr), 8);
  y += "    spec:\n";
  const std::vector<std::string> args(w.vllm_words.begin() + 2,
                                      w.vllm_words.end());
  y += Indent(PodSpec(w, image, "server", "[\"vllm\", \"serve\"]", args, true),
              6);
  return y;
}

std::string LeaderWorkerSetYaml(const Workload& w, const std::string& image,
                                const std::string& ns) {
  const std::string size = std::to_string(w.pods_per_worker);
  // The leader: the Ray head, then vLLM once every pod of the group has
  // joined (vLLM checks the cluster's GPUs when it starts).
  std::string vllm;
  for (const std::string& word : w.vllm_words) vllm += ShellWord(word) + " ";
  const std::string leader =
      "ray start --head --port=" + std::to_string(kRayPort) +
      " && until python3 -c " +
      ShellQuote(
          "import ray, sys; ray.init(address=\"auto\"); "
          "sys.exit(sum(n[\"Alive\"] for n in ray.nodes()) < " +
          size + ")") +
      "; do sleep 5; done && exec " + vllm +
      "--distributed-executor-backend ray";
  const std::string worker =
      "until ray start --address=\"$LWS_LEADER_ADDRESS\":" +
      std::to_string(kRayPort) + " --block; do sleep 5; done";
  std::string y = "apiVersion: leaderworkerset.x-k8s.io/v1\n";
  y += "kind: LeaderWorkerSet\n";
  y += Metadata(w.name, ns);
  y += "spec:\n";
  y += "  replicas: " + std::to_string(w.workers) + "\n";
  y += "  leaderWorkerTemplate:\n";
  y += "    size: " + size + "\n";
  y += "    restartPolicy: RecreateGroupOnPodRestart\n";
  y += "    leaderTemplate:\n      metadata:\n        labels:\n" +
       Indent(Labels(w, "leader"), 10);
  y += "      spec:\n" +
       Indent(PodSpec(w, image, "server", "[\"sh\", \"-c\"]", {leader}, true),
              8);
  y += "    workerTemplate:\n      metadata:\n        labels:\n" +
       Indent(Labels(w, "worker"), 10);
  y += "      spec:\n" +
       Indent(PodSpec(w, image, "worker", "[\"sh\", \"-c\"]", {worker}, false),
              8);
  return y;
}

std::string ServiceYaml(const Workload& w, const std::string& ns) {
  std::string y = "apiVersion: v1\nkind: Service\n";
  y += Metadata(w.name, ns);
  y += "spec:\n  selector:\n" +
       Indent(Labels(w, w.pods_per_worker > 1 ? "leader" : nullptr), 4);
  y += "  ports:\n    - port: 8000\n      targetPort: 8000\n";
  return y;
}

// Checks one group and splits it over pods.
StatusOr<Workload> MakeWorkload(const std::string& name, const std::string& app,
                                const std::string& role,
                                const std::string& vllm_command,
                                int64_t workers, int64_t gpus_per_worker,
                                int64_t gpus_per_node) {
  const std::string what = role.empty() ? "a serving" : "the " + role;
  if (workers < 1 || gpus_per_worker < 1) {
    return Status::InvalidArgument(
        what + " workload needs at least one worker of one GPU",
        "give the plan tune serve chose");
  }
  if (gpus_per_node < 1) {
    return Status::InvalidArgument("GPUs per node must be at least 1, got " +
                                       std::to_string(gpus_per_node),
                                   "give the cluster's GPUs per node");
  }
  auto words = SplitShellWords(vllm_command, "the vLLM command");
  if (!words.ok()) return words.status();
  Workload w;
  w.name = name;
  w.app = app;
  w.role = role;
  w.vllm_words = words.value();
  w.workers = workers;
  if (w.vllm_words.size() < 3 || w.vllm_words[0] != "vllm" ||
      w.vllm_words[1] != "serve") {
    return Status::InvalidArgument("not a 'vllm serve MODEL ...' command",
                                   "give the command tune serve printed");
  }
  w.pods_per_worker = (gpus_per_worker + gpus_per_node - 1) / gpus_per_node;
  if (gpus_per_worker % w.pods_per_worker != 0) {
    return Status::InvalidArgument(
        "a worker of " + std::to_string(gpus_per_worker) +
            " GPUs does not split evenly over " +
            std::to_string(w.pods_per_worker) + " nodes of " +
            std::to_string(gpus_per_node) + " GPUs",
        "pick a plan whose GPUs per replica are a multiple or divisor of "
        "the GPUs per node");
  }
  w.gpus_per_pod = gpus_per_worker / w.pods_per_worker;
  if (w.pods_per_worker > 1) {
    auto config = ParseVllmServeCommand(vllm_command, nullptr);
    if (!config.ok()) return config.status();
    if (config.value().attention_dp > 1) {
      return Status::InvalidArgument(
          "a worker of " + std::to_string(gpus_per_worker) +
              " GPUs spans nodes and runs vLLM data-parallel ranks "
              "(--data-parallel-size " +
              std::to_string(config.value().attention_dp) +
              "), which vLLM starts per node: one LeaderWorkerSet leader "
              "cannot start them",
          "deploy the SGLang or TensorRT-LLM command by hand, or pick a "
          "plan whose replica fits a node");
    }
  }
  return w;
}

std::string WorkloadYaml(const Workload& w, const std::string& image,
                         const std::string& ns) {
  return (w.pods_per_worker > 1 ? LeaderWorkerSetYaml(w, image, ns)
                                : DeploymentYaml(w, image, ns)) +
         "---\n" + ServiceYaml(w, ns);
}

Status CheckNames(const std::string& name, const std::string& ns) {
  MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("--k8s name", name));
  if (!ns.empty()) {
    MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("namespace", ns));
  }
  return Status::Ok();
}

}  // namespace

const char* ServingWorkloadKind(int64_t gpus_per_worker,
                                int64_t gpus_per_node) {
  return gpus_per_worker > gpus_per_node ? "LeaderWorkerSet" : "Deployment";
}

StatusOr<std::string> ServingDeployment(const ServingManifestSpec& spec) {
  MESHTUNE_RETURN_IF_ERROR(CheckNames(spec.name, spec.namespace_name));
  auto w =
      MakeWorkload(spec.name, spec.name, "", spec.vllm_command, spec.replicas,
                   spec.gpus_per_replica, spec.gpus_per_node);
  if (!w.ok()) return w.status();
  return WorkloadYaml(w.value(), spec.image, spec.namespace_name);
}

StatusOr<std::string> ServingDisaggregatedDeployment(
    const ServingDisaggregatedSpec& spec) {
  MESHTUNE_RETURN_IF_ERROR(CheckNames(spec.name, spec.namespace_name));
  std::string y;
  for (const auto& [role, group] :
       {std::pair<std::string, const ServingWorkerGroup*>{"prefill",
                                                          &spec.prefill},
        {"decode", &spec.decode}}) {
    const std::string name = spec.name + "-" + role;
    MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("--k8s name", name));
    auto w =
        MakeWorkload(name, spec.name, role, group->vllm_command, group->workers,
                     group->gpus_per_worker, spec.gpus_per_node);
    if (!w.ok()) return w.status();
    if (!y.empty()) y += "---\n";
    y += WorkloadYaml(w.value(), spec.image, spec.namespace_name);
  }
  return y;
}

}  // namespace meshtune::tuner
