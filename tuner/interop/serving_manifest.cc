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
    } else if (ch == '\n') {
      out += "\\n";
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
// The port vLLM's data-parallel engines meet the leader's API server on in
// a LeaderWorkerSet group (--data-parallel-rpc-port), as vLLM's data
// parallel deployment guide uses.
constexpr int kVllmDpRpcPort = 13345;
// The port SGLang's ranks meet on in a LeaderWorkerSet group
// (--dist-init-addr), as the LWS project's SGLang example uses.
constexpr int kSglangDistPort = 20000;
// The port every serving container listens on (vLLM's default; SGLang is
// told to use it).
constexpr int kServePort = 8000;
// The port a SGLang prefill worker's KV bootstrap server listens on
// (--disaggregation-bootstrap-port, which the commands leave at its
// default), announced to the router through the pod annotation its
// Kubernetes discovery reads.
constexpr int kSglangBootstrapPort = 8998;
constexpr const char* kSglangBootstrapAnnotation = "sglang.ai/bootstrap-port";
// Where a TensorRT-LLM pod finds its --extra_llm_api_options file: the
// ConfigMap `name`-options mounted read-only.
constexpr const char* kTrtllmOptionsDir = "/etc/tune-serve";
constexpr const char* kTrtllmOptionsFile = "extra_llm_api_options.yaml";
// TensorRT-LLM's disaggregated server's configuration, in the ConfigMap
// `name`-router-config mounted at the same place, and the seconds it
// waits for its workers to start and for a request.
constexpr const char* kTrtllmDisaggFile = "disagg_config.yaml";
constexpr int kTrtllmRouterTimeout_s = 3600;
// The Secret and key every engine container takes HF_TOKEN from when the
// Secret exists (gated checkpoints need it), as vLLM's Kubernetes guide
// names them.
constexpr const char* kHfTokenSecret = "hf-token-secret";
constexpr const char* kHfTokenKey = "token";
// The engines' health endpoint (vLLM, SGLang and trtllm-serve serve it on
// their HTTP port): ready once the model is loaded.
constexpr const char* kHealthPath = "/health";
// What a LeaderWorkerSet's name takes after the plan's: the LWS controller
// creates a headless Service named after the LWS for its pods' DNS names
// (LWS_LEADER_ADDRESS), so the LWS cannot share its name with the Service
// written here.
constexpr const char* kLwsSuffix = "-lws";

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
  ServingManifestEngine engine = ServingManifestEngine::kVllm;
  // The engine's command split: the program ("vllm", "serve" or "python3",
  // "-m", "sglang.launch_server") and its arguments.
  std::vector<std::string> program;
  std::vector<std::string> args;
  int64_t workers = 1;
  int64_t pods_per_worker = 1;  // > 1: a LeaderWorkerSet group
  int64_t gpus_per_pod = 1;
  // Annotations of the serving pods (an LWS group's leader): YAML lines.
  std::string annotations;
  // TensorRT-LLM: the --extra_llm_api_options file's text ("" otherwise),
  // served from the ConfigMap `name`-options.
  std::string options_yaml;
  // vLLM data-parallel ranks per pod of a group over several nodes
  // (--data-parallel-size-local); 0 = no data-parallel ranks there.
  int64_t dp_ranks_per_pod = 0;
  // A StatefulSet, not a Deployment: its pods have stable DNS names
  // (`name`-I.`name`-pods, a headless Service) for a router that lists
  // them (TensorRT-LLM's disaggregated server).
  bool stateful = false;
};

std::string PodsServiceName(const Workload& w) { return w.name + "-pods"; }

// The DNS name and port of pod `index` of a StatefulSet workload, as the
// pods of its namespace resolve it.
std::string PodAddress(const Workload& w, int64_t index) {
  return w.name + "-" + std::to_string(index) + "." + PodsServiceName(w) + ":" +
         std::to_string(kServePort);
}

std::string OptionsConfigMapName(const Workload& w) {
  return w.name + "-options";
}

// `words` as a YAML flow list of double-quoted scalars.
std::string FlowList(const std::vector<std::string>& words) {
  std::string y = "[";
  for (size_t i = 0; i < words.size(); ++i) {
    y += (i == 0 ? "" : ", ") + Quoted(words[i]);
  }
  return y + "]";
}

// SGLang's arguments for one pod: the plan's, its HTTP endpoint where the
// pod serves, and in a LeaderWorkerSet group the multi-node rendezvous.
std::vector<std::string> SglangArgs(const Workload& w, bool serves) {
  std::vector<std::string> args = w.args;
  if (w.pods_per_worker > 1) {
    args.insert(
        args.end(),
        {"--dist-init-addr",
         "$(LWS_LEADER_ADDRESS):" + std::to_string(kSglangDistPort), "--nnodes",
         "$(LWS_GROUP_SIZE)", "--node-rank", "$(LWS_WORKER_INDEX)"});
  }
  if (serves) {
    args.insert(args.end(),
                {"--host", "0.0.0.0", "--port", std::to_string(kServePort)});
  }
  return args;
}

// The arguments of a pod that serves HTTP on kServePort: SGLang's and
// TensorRT-LLM's are told the address (trtllm-serve listens on localhost
// by default); vLLM's default is it.
std::vector<std::string> ServingArgs(const Workload& w) {
  if (w.engine == ServingManifestEngine::kSglang) return SglangArgs(w, true);
  std::vector<std::string> args = w.args;
  if (w.engine == ServingManifestEngine::kTensorRtLlm) {
    args.insert(args.end(),
                {"--host", "0.0.0.0", "--port", std::to_string(kServePort)});
  }
  return args;
}

std::string Labels(const Workload& w, const char* lws_role) {
  std::string y = "app: " + w.app + "\n";
  if (!w.role.empty()) y += "serving-role: " + w.role + "\n";
  if (lws_role != nullptr) y += "role: " + std::string(lws_role) + "\n";
  return y;
}

// A pod spec (at indent 0) of one container: `command` and `args` (YAML
// flow list and words), HF_TOKEN from the optional Secret, for a vLLM
// disaggregated role the NIXL side channel's host, the GPUs and /dev/shm;
// `port`: the pod serves HTTP, ready when the engine's health endpoint
// answers (Services send nothing to a pod still loading its weights).
std::string PodSpec(const Workload& w, const std::string& image,
                    const std::string& container, const std::string& command,
                    const std::vector<std::string>& args, bool port) {
  std::string y = "containers:\n";
  y += "  - name: " + container + "\n";
  y += "    image: " + Quoted(image) + "\n";
  y += "    command: " + command + "\n";
  y += "    args:\n";
  for (const std::string& a : args) y += "      - " + Quoted(a) + "\n";
  y += "    env:\n      - name: HF_TOKEN\n        valueFrom:\n"
       "          secretKeyRef:\n            name: " +
       std::string(kHfTokenSecret) + "\n            key: " + kHfTokenKey +
       "\n            optional: true\n";
  if (!w.role.empty() && w.engine == ServingManifestEngine::kVllm) {
    y += "      - name: VLLM_NIXL_SIDE_CHANNEL_HOST\n"
         "        valueFrom:\n          fieldRef:\n"
         "            fieldPath: status.podIP\n";
  }
  if (port) {
    const std::string serve = std::to_string(kServePort);
    y += "    ports:\n      - containerPort: " + serve + "\n";
    y += "    readinessProbe:\n      httpGet:\n        path: " +
         std::string(kHealthPath) + "\n        port: " + serve +
         "\n      periodSeconds: 10\n";
  }
  y += "    resources:\n      limits:\n        nvidia.com/gpu: " +
       std::to_string(w.gpus_per_pod) + "\n";
  // Tensor-parallel workers share tensors through /dev/shm.
  y += "    volumeMounts:\n      - name: shm\n        mountPath: /dev/shm\n";
  if (!w.options_yaml.empty()) {
    y += "      - name: options\n        mountPath: " +
         std::string(kTrtllmOptionsDir) + "\n        readOnly: true\n";
  }
  y += "volumes:\n  - name: shm\n    emptyDir:\n      medium: Memory\n";
  if (!w.options_yaml.empty()) {
    y += "  - name: options\n    configMap:\n      name: " +
         OptionsConfigMapName(w) + "\n";
  }
  return y;
}

std::string Metadata(const std::string& name, const std::string& ns) {
  return "metadata:\n  name: " + name + "\n" +
         (ns.empty() ? "" : "  namespace: " + ns + "\n");
}

std::string DeploymentYaml(const Workload& w, const std::string& image,
                           const std::string& ns) {
  std::string y = std::string("apiVersion: apps/v1\nkind: ") +
                  (w.stateful ? "StatefulSet" : "Deployment") + "\n";
  y += Metadata(w.name, ns);
  y += "spec:\n";
  y += "  replicas: " + std::to_string(w.workers) + "\n";
  if (w.stateful) {
    // All pods at once, as a Deployment starts them.
    y += "  serviceName: " + PodsServiceName(w) +
         "\n  podManagementPolicy: Parallel\n";
  }
  y += "  selector:\n    matchLabels:\n" + Indent(Labels(w, nullptr), 6);
  y += "  template:\n    metadata:\n      labels:\n" +
       Indent(Labels(w, nullptr), 8);
  if (!w.annotations.empty()) {
    y += "      annotations:\n" + Indent(w.annotations, 8);
  }
  y += "    spec:\n";
  y += Indent(
      PodSpec(w, image, "server", FlowList(w.program), ServingArgs(w), true),
      6);
  return y;
}

// What the leader and the worker pods of a LeaderWorkerSet group run: each
// pod's container command (a YAML flow list) and args.
struct GroupCommands {
  std::string leader_command;
  std::vector<std::string> leader;
  std::string worker_command;
  std::vector<std::string> worker;
};

// vLLM: the leader starts the Ray head, then vLLM once every pod of the
// group has joined (vLLM checks the cluster's GPUs when it starts); each
// worker joins the head.
GroupCommands VllmGroup(const Workload& w) {
  const std::string size = std::to_string(w.pods_per_worker);
  std::string vllm;
  for (const std::string& word : w.program) vllm += ShellWord(word) + " ";
  for (const std::string& word : w.args) vllm += ShellWord(word) + " ";
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
  return {"[\"sh\", \"-c\"]", {leader}, "[\"sh\", \"-c\"]", {worker}};
}

// vLLM's data-parallel ranks over the group's nodes, as vLLM's data
// parallel deployment guide runs them: every pod starts its
// dp_ranks_per_pod engines, the leader with the API server and ranks from
// 0, each worker headless from rank LWS_WORKER_INDEX · dp_ranks_per_pod
// (a shell computes it: Kubernetes expands variables, not arithmetic),
// all meeting at the leader's address.
GroupCommands VllmDataParallelGroup(const Workload& w) {
  const std::string local = std::to_string(w.dp_ranks_per_pod);
  const std::string rpc = std::to_string(kVllmDpRpcPort);
  std::vector<std::string> leader = w.args;
  leader.insert(leader.end(),
                {"--data-parallel-size-local", local, "--data-parallel-address",
                 "$(LWS_LEADER_ADDRESS)", "--data-parallel-rpc-port", rpc});
  std::string worker = "exec";
  for (const std::string& word : w.program) worker += " " + ShellWord(word);
  for (const std::string& word : w.args) worker += " " + ShellWord(word);
  worker += " --headless --data-parallel-size-local " + local +
            " --data-parallel-start-rank $((LWS_WORKER_INDEX * " + local +
            ")) --data-parallel-address \"$LWS_LEADER_ADDRESS\" "
            "--data-parallel-rpc-port " +
            rpc;
  return {FlowList(w.program), leader, "[\"sh\", \"-c\"]", {worker}};
}

// SGLang: every pod runs the plan's command with its rank.
GroupCommands SglangGroup(const Workload& w) {
  return {FlowList(w.program), SglangArgs(w, true), FlowList(w.program),
          SglangArgs(w, false)};
}

std::string LeaderWorkerSetYaml(const Workload& w, const std::string& image,
                                const std::string& ns) {
  const GroupCommands g = w.engine == ServingManifestEngine::kSglang
                              ? SglangGroup(w)
                          : w.dp_ranks_per_pod > 0 ? VllmDataParallelGroup(w)
                                                   : VllmGroup(w);
  std::string y = "apiVersion: leaderworkerset.x-k8s.io/v1\n";
  y += "kind: LeaderWorkerSet\n";
  y += Metadata(w.name + kLwsSuffix, ns);
  y += "spec:\n";
  y += "  replicas: " + std::to_string(w.workers) + "\n";
  y += "  leaderWorkerTemplate:\n";
  y += "    size: " + std::to_string(w.pods_per_worker) + "\n";
  y += "    restartPolicy: RecreateGroupOnPodRestart\n";
  y += "    leaderTemplate:\n      metadata:\n        labels:\n" +
       Indent(Labels(w, "leader"), 10);
  if (!w.annotations.empty()) {
    y += "        annotations:\n" + Indent(w.annotations, 10);
  }
  y += "      spec:\n" +
       Indent(PodSpec(w, image, "server", g.leader_command, g.leader, true), 8);
  y += "    workerTemplate:\n      metadata:\n        labels:\n" +
       Indent(Labels(w, "worker"), 10);
  y +=
      "      spec:\n" +
      Indent(PodSpec(w, image, "worker", g.worker_command, g.worker, false), 8);
  return y;
}

std::string ServiceYaml(const Workload& w, const std::string& ns) {
  std::string y = "apiVersion: v1\nkind: Service\n";
  y += Metadata(w.name, ns);
  y += "spec:\n  selector:\n" +
       Indent(Labels(w, w.pods_per_worker > 1 ? "leader" : nullptr), 4);
  y += "  ports:\n    - port: " + std::to_string(kServePort) +
       "\n      targetPort: " + std::to_string(kServePort) + "\n";
  return y;
}

// The words of `command`, the program ("vllm", "serve"; "python3", "-m",
// "sglang.launch_server"; "trtllm-serve") and its arguments, into `w`;
// InvalidArgument when it is not the engine's. TensorRT-LLM's
// --extra_llm_api_options is pointed at the mounted ConfigMap.
Status SplitCommand(ServingManifestEngine engine, const std::string& command,
                    const std::string& options_yaml, Workload* w) {
  const char* what = engine == ServingManifestEngine::kSglang
                         ? "the SGLang command"
                     : engine == ServingManifestEngine::kTensorRtLlm
                         ? "the TensorRT-LLM command"
                         : "the vLLM command";
  auto words = SplitShellWords(command, what);
  if (!words.ok()) return words.status();
  std::vector<std::string> all = words.value();
  size_t program = 0;
  if (engine == ServingManifestEngine::kSglang) {
    for (size_t i = 0; i + 1 < all.size(); ++i) {
      if (all[i] == "-m" && all[i + 1] == "sglang.launch_server") {
        program = i + 2;
      }
    }
    if (program < 3) {  // an interpreter, -m, the module
      return Status::InvalidArgument(
          "not a 'python3 -m sglang.launch_server ...' command",
          "give the command tune serve printed");
    }
    auto config = ParseSglangServeCommand(command, nullptr);
    if (!config.ok()) return config.status();
  } else if (engine == ServingManifestEngine::kTensorRtLlm) {
    if (all.size() < 2 || all[0] != "trtllm-serve") {
      return Status::InvalidArgument("not a 'trtllm-serve MODEL ...' command",
                                     "give the command tune serve printed");
    }
    auto config = ParseTrtllmServeCommand(command, options_yaml, nullptr);
    if (!config.ok()) return config.status();
    program = 1;
    const std::string path =
        std::string(kTrtllmOptionsDir) + "/" + kTrtllmOptionsFile;
    bool pointed = false;
    for (size_t i = 1; i + 1 < all.size(); ++i) {
      if (all[i] == "--extra_llm_api_options") {
        all[i + 1] = path;
        pointed = true;
      }
    }
    if (!pointed && !options_yaml.empty()) {
      all.insert(all.end(), {"--extra_llm_api_options", path});
    }
    w->options_yaml = options_yaml;
  } else {
    if (all.size() < 3 || all[0] != "vllm" || all[1] != "serve") {
      return Status::InvalidArgument("not a 'vllm serve MODEL ...' command",
                                     "give the command tune serve printed");
    }
    program = 2;
  }
  w->program.assign(all.begin(), all.begin() + program);
  w->args.assign(all.begin() + program, all.end());
  return Status::Ok();
}

// Checks one group and splits it over pods.
StatusOr<Workload> MakeWorkload(const std::string& name, const std::string& app,
                                const std::string& role,
                                ServingManifestEngine engine,
                                const ServingWorkerGroup& group,
                                int64_t gpus_per_node) {
  const std::string what = role.empty() ? "a serving" : "the " + role;
  const int64_t gpus_per_worker = group.gpus_per_worker;
  if (group.workers < 1 || gpus_per_worker < 1) {
    return Status::InvalidArgument(
        what + " workload needs at least one worker of one GPU",
        "give the plan tune serve chose");
  }
  if (gpus_per_node < 1) {
    return Status::InvalidArgument("GPUs per node must be at least 1, got " +
                                       std::to_string(gpus_per_node),
                                   "give the cluster's GPUs per node");
  }
  Workload w;
  w.name = name;
  w.app = app;
  w.role = role;
  w.engine = engine;
  w.workers = group.workers;
  MESHTUNE_RETURN_IF_ERROR(
      SplitCommand(engine, group.command, group.options_yaml, &w));
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
  if (w.pods_per_worker > 1 && engine == ServingManifestEngine::kTensorRtLlm) {
    return Status::InvalidArgument(
        "a worker of " + std::to_string(gpus_per_worker) +
            " GPUs spans nodes, and trtllm-serve starts the ranks of several "
            "nodes with MPI (mpirun, or srun with trtllm-llmapi-launch), "
            "which these manifests do not describe",
        "write SGLang's manifests (--k8s-engine sglang), or pick a plan "
        "whose replica fits a node");
  }
  if (w.pods_per_worker > 1 && engine == ServingManifestEngine::kVllm) {
    auto config = ParseVllmServeCommand(group.command, nullptr);
    if (!config.ok()) return config.status();
    const search_spaces::ServingConfig& c = config.value();
    if (c.attention_dp > 1) {
      // Each pod starts whole data-parallel ranks of tp · pp GPUs.
      const int64_t rank_gpus = c.tp * c.pp;
      if (w.gpus_per_pod % rank_gpus != 0) {
        return Status::InvalidArgument(
            "a worker of " + std::to_string(gpus_per_worker) +
                " GPUs spans nodes with vLLM data-parallel ranks "
                "(--data-parallel-size " +
                std::to_string(c.attention_dp) + ") of " +
                std::to_string(rank_gpus) +
                " GPUs, which do not split into whole ranks per node of " +
                std::to_string(w.gpus_per_pod) + " GPUs",
            "write SGLang's manifests (--k8s-engine sglang), or pick a plan "
            "whose replica fits a node");
      }
      w.dp_ranks_per_pod = w.gpus_per_pod / rank_gpus;
    }
  }
  return w;
}

// TensorRT-LLM's options file as the ConfigMap its pods mount.
std::string OptionsConfigMapYaml(const Workload& w, const std::string& ns) {
  return "apiVersion: v1\nkind: ConfigMap\n" +
         Metadata(OptionsConfigMapName(w), ns) + "data:\n  " +
         kTrtllmOptionsFile + ": " + Quoted(w.options_yaml) + "\n---\n";
}

// The headless Service that names a StatefulSet's pods.
std::string PodsServiceYaml(const Workload& w, const std::string& ns) {
  std::string y = "apiVersion: v1\nkind: Service\n";
  y += Metadata(PodsServiceName(w), ns);
  y +=
      "spec:\n  clusterIP: None\n  selector:\n" + Indent(Labels(w, nullptr), 4);
  y += "  ports:\n    - port: " + std::to_string(kServePort) + "\n";
  return y;
}

std::string WorkloadYaml(const Workload& w, const std::string& image,
                         const std::string& ns) {
  return (w.options_yaml.empty() ? "" : OptionsConfigMapYaml(w, ns)) +
         (w.pods_per_worker > 1 ? LeaderWorkerSetYaml(w, image, ns)
                                : DeploymentYaml(w, image, ns)) +
         "---\n" + ServiceYaml(w, ns) +
         (w.stateful ? "---\n" + PodsServiceYaml(w, ns) : "");
}

// SGLang's router's selector of one role's serving pods: the labels that
// Labels() gives them (an LWS group's leader only), as key=value words.
std::vector<std::string> RouterSelector(const Workload& w) {
  std::vector<std::string> words = {"app=" + w.app, "serving-role=" + w.role};
  if (w.pods_per_worker > 1) words.push_back("role=leader");
  return words;
}

// The router of a disaggregated plan: one pod (no GPU) of the plan's
// image, a Deployment `name`-router, and the Service `name` in front of
// it, the deployment's entry point.
struct Router {
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::string service_account;  // "" = the namespace's default
  bool pod_namespace = false;   // POD_NAMESPACE from the downward API
  std::string config_map;       // mounted at kTrtllmOptionsDir; "" = none
};

std::string RouterYaml(const std::string& name, const std::string& image,
                       const std::string& ns, const Router& r) {
  Workload w;
  w.app = name;
  w.role = "router";
  std::string y = "apiVersion: apps/v1\nkind: Deployment\n" +
                  Metadata(name + "-router", ns);
  y += "spec:\n  replicas: 1\n";
  y += "  selector:\n    matchLabels:\n" + Indent(Labels(w, nullptr), 6);
  y += "  template:\n    metadata:\n      labels:\n" +
       Indent(Labels(w, nullptr), 8);
  y += "    spec:\n";
  std::string pod;
  if (!r.service_account.empty()) {
    pod += "serviceAccountName: " + r.service_account + "\n";
  }
  pod += "containers:\n  - name: router\n";
  pod += "    image: " + Quoted(image) + "\n";
  pod += "    command: " + FlowList(r.command) + "\n";
  pod += "    args:\n";
  for (const std::string& a : r.args) pod += "      - " + Quoted(a) + "\n";
  if (r.pod_namespace) {
    pod +=
        "    env:\n      - name: POD_NAMESPACE\n"
        "        valueFrom:\n          fieldRef:\n"
        "            fieldPath: metadata.namespace\n";
  }
  pod +=
      "    ports:\n      - containerPort: " + std::to_string(kServePort) + "\n";
  if (!r.config_map.empty()) {
    pod += "    volumeMounts:\n      - name: config\n        mountPath: " +
           std::string(kTrtllmOptionsDir) + "\n        readOnly: true\n";
    pod += "volumes:\n  - name: config\n    configMap:\n      name: " +
           r.config_map + "\n";
  }
  y += Indent(pod, 6) + "---\n";
  w.name = name;
  return y + ServiceYaml(w, ns);
}

// SGLang's router in front of a disaggregated plan's `prefill` and
// `decode` workers (serving_manifest.h): the ServiceAccount, Role and
// RoleBinding it discovers the workers under, and the router.
std::string SglangRouterYaml(const std::string& name, const std::string& image,
                             const std::string& ns, const Workload& prefill,
                             const Workload& decode) {
  const std::string router = name + "-router";
  std::string y =
      "apiVersion: v1\nkind: ServiceAccount\n" + Metadata(router, ns) + "---\n";
  y += "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n" +
       Metadata(router, ns);
  y += "rules:\n  - apiGroups: [\"\"]\n    resources: [\"pods\"]\n"
       "    verbs: [\"get\", \"list\", \"watch\"]\n---\n";
  // A ServiceAccount subject without a namespace is the binding's own.
  y += "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n" +
       Metadata(router, ns);
  y += "subjects:\n  - kind: ServiceAccount\n    name: " + router + "\n" +
       (ns.empty() ? "" : "    namespace: " + ns + "\n");
  y += "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n"
       "  name: " +
       router + "\n---\n";
  Router r;
  r.command = {"python3", "-m", "sglang_router.launch_router"};
  r.args = {"--pd-disaggregation", "--service-discovery"};
  for (const auto& [flag, group] :
       {std::pair<const char*, const Workload*>{"--prefill-selector", &prefill},
        {"--decode-selector", &decode}}) {
    r.args.push_back(flag);
    for (const std::string& word : RouterSelector(*group)) {
      r.args.push_back(word);
    }
  }
  r.args.insert(r.args.end(),
                {"--service-discovery-namespace", "$(POD_NAMESPACE)",
                 "--service-discovery-port", std::to_string(kServePort),
                 "--host", "0.0.0.0", "--port", std::to_string(kServePort)});
  r.service_account = router;
  r.pod_namespace = true;
  return y + RouterYaml(name, image, ns, r);
}

// TensorRT-LLM's disaggregated server in front of a plan's `prefill`
// (context) and `decode` (generation) StatefulSets: its configuration,
// every worker pod's address, as a ConfigMap, and the router.
std::string TrtllmRouterYaml(const std::string& name, const std::string& image,
                             const std::string& ns, const Workload& prefill,
                             const Workload& decode) {
  std::string config =
      "hostname: 0.0.0.0\nport: " + std::to_string(kServePort) +
      "\nbackend: pytorch\n";
  for (const auto& [key, group] :
       {std::pair<const char*, const Workload*>{"context_servers", &prefill},
        {"generation_servers", &decode}}) {
    config += std::string(key) +
              ":\n  num_instances: " + std::to_string(group->workers) +
              "\n  urls:\n";
    for (int64_t i = 0; i < group->workers; ++i) {
      config += "    - \"" + PodAddress(*group, i) + "\"\n";
    }
  }
  const std::string config_map = name + "-router-config";
  std::string y = "apiVersion: v1\nkind: ConfigMap\n" +
                  Metadata(config_map, ns) + "data:\n  " + kTrtllmDisaggFile +
                  ": " + Quoted(config) + "\n---\n";
  Router r;
  r.command = {"trtllm-serve", "disaggregated"};
  // The workers load their weights before they answer: wait an hour for
  // them (the server's default is 180 s), and as long for a request.
  r.args = {"-c", std::string(kTrtllmOptionsDir) + "/" + kTrtllmDisaggFile,
            "-t", std::to_string(kTrtllmRouterTimeout_s),
            "-r", std::to_string(kTrtllmRouterTimeout_s)};
  r.config_map = config_map;
  return y + RouterYaml(name, image, ns, r);
}

Status CheckNames(const std::string& name, const std::string& ns) {
  MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("--k8s name", name));
  if (name.size() > kMaxServingNameLength) {
    return Status::InvalidArgument(
        "--k8s name '" + name + "' is longer than " +
            std::to_string(kMaxServingNameLength) + " characters",
        "shorten it: the workloads' StatefulSets add up to 26 characters");
  }
  if (!ns.empty()) {
    MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("namespace", ns));
  }
  return Status::Ok();
}

}  // namespace

const char* DefaultServingImage(ServingManifestEngine engine) {
  switch (engine) {
    case ServingManifestEngine::kSglang:
      return "lmsysorg/sglang:latest";
    case ServingManifestEngine::kTensorRtLlm:
      return "";
    case ServingManifestEngine::kVllm:
      break;
  }
  return "vllm/vllm-openai:latest";
}

StatusOr<ServingManifestEngine> ParseServingManifestEngine(
    const std::string& name) {
  if (name == "vllm") return ServingManifestEngine::kVllm;
  if (name == "sglang") return ServingManifestEngine::kSglang;
  if (name == "trtllm") return ServingManifestEngine::kTensorRtLlm;
  return Status::InvalidArgument(
      "--k8s-engine must be vllm, sglang or trtllm, got '" + name + "'",
      "pick one of the three engines");
}

StatusOr<std::string> ServingImage(ServingManifestEngine engine,
                                   const std::string& image) {
  if (image.empty()) {
    if (engine == ServingManifestEngine::kTensorRtLlm) {
      return Status::InvalidArgument(
          "TensorRT-LLM's manifests need an image: NGC publishes its release "
          "image by version only",
          "add --k8s-image nvcr.io/nvidia/tensorrt-llm/release:TAG with the "
          "release that serves this model");
    }
    return std::string(DefaultServingImage(engine));
  }
  for (char ch : image) {
    if (std::isspace(static_cast<unsigned char>(ch)) ||
        static_cast<unsigned char>(ch) < 0x20) {
      return Status::InvalidArgument(
          "--k8s-image '" + image + "' holds whitespace",
          "give an image reference such as registry/name:tag");
    }
  }
  return image;
}

const char* ServingWorkloadKind(int64_t gpus_per_worker,
                                int64_t gpus_per_node) {
  return gpus_per_worker > gpus_per_node ? "LeaderWorkerSet" : "Deployment";
}

StatusOr<std::string> ServingDeployment(const ServingManifestSpec& spec) {
  MESHTUNE_RETURN_IF_ERROR(CheckNames(spec.name, spec.namespace_name));
  auto image = ServingImage(spec.engine, spec.image);
  if (!image.ok()) return image.status();
  auto w = MakeWorkload(
      spec.name, spec.name, "", spec.engine,
      {spec.command, spec.replicas, spec.gpus_per_replica, spec.options_yaml},
      spec.gpus_per_node);
  if (!w.ok()) return w.status();
  return WorkloadYaml(w.value(), image.value(), spec.namespace_name);
}

StatusOr<std::string> ServingDisaggregatedDeployment(
    const ServingDisaggregatedSpec& spec) {
  MESHTUNE_RETURN_IF_ERROR(CheckNames(spec.name, spec.namespace_name));
  auto image = ServingImage(spec.engine, spec.image);
  if (!image.ok()) return image.status();
  std::vector<Workload> roles;
  for (const auto& [role, group] :
       {std::pair<std::string, const ServingWorkerGroup*>{"prefill",
                                                          &spec.prefill},
        {"decode", &spec.decode}}) {
    auto w = MakeWorkload(spec.name + "-" + role, spec.name, role, spec.engine,
                          *group, spec.gpus_per_node);
    if (!w.ok()) return w.status();
    roles.push_back(std::move(w.value()));
  }
  const bool sglang = spec.engine == ServingManifestEngine::kSglang;
  const bool trtllm = spec.engine == ServingManifestEngine::kTensorRtLlm;
  // TensorRT-LLM's router lists every worker pod: StatefulSets name them.
  for (Workload& w : roles) w.stateful = trtllm;
  if (sglang) {
    roles[0].annotations = std::string(kSglangBootstrapAnnotation) + ": " +
                           Quoted(std::to_string(kSglangBootstrapPort)) + "\n";
  }
  std::string y = WorkloadYaml(roles[0], image.value(), spec.namespace_name) +
                  "---\n" +
                  WorkloadYaml(roles[1], image.value(), spec.namespace_name);
  if (sglang) {
    y += "---\n" + SglangRouterYaml(spec.name, image.value(),
                                    spec.namespace_name, roles[0], roles[1]);
  }
  if (trtllm) {
    y += "---\n" + TrtllmRouterYaml(spec.name, image.value(),
                                    spec.namespace_name, roles[0], roles[1]);
  }
  return y;
}

}  // namespace meshtune::tuner
