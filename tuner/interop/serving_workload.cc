#include "tuner/interop/serving_workload.h"

#include <cctype>
#include <utility>
#include <vector>

#include "tuner/interop/launch_script.h"
#include "tuner/interop/serving_commands.h"
#include "tuner/interop/shell_words.h"
#include "tuner/interop/yaml_text.h"

namespace meshtune::tuner::internal {

namespace {

// The port of the Ray head in a LeaderWorkerSet group.
constexpr int kRayPort = 6379;
// The port vLLM's data-parallel engines meet the leader's API server on in
// a LeaderWorkerSet group (--data-parallel-rpc-port), as vLLM's data
// parallel deployment guide uses.
constexpr int kVllmDpRpcPort = 13345;
// The port SGLang's ranks meet on in a LeaderWorkerSet group
// (--dist-init-addr), as the LWS project's SGLang example uses.
constexpr int kSglangDistPort = 20000;
// TensorRT-LLM's --extra_llm_api_options file, in the ConfigMap
// `name`-options mounted at kConfigDir.
constexpr const char* kTrtllmOptionsFile = "extra_llm_api_options.yaml";
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

std::string PodsServiceName(const Workload& w) { return w.name + "-pods"; }

std::string OptionsConfigMapName(const Workload& w) {
  return w.name + "-options";
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
  y += "    image: " + YamlQuoted(image) + "\n";
  y += "    command: " + command + "\n";
  y += "    args:\n";
  for (const std::string& a : args) y += "      - " + YamlQuoted(a) + "\n";
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
    y +=
        "      - name: options\n        mountPath: " + std::string(kConfigDir) +
        "\n        readOnly: true\n";
  }
  if (!w.ssh_secret.empty()) {
    y += "      - name: ssh\n        mountPath: " + std::string(kSshDir) +
         "\n        readOnly: true\n";
  }
  y += "volumes:\n  - name: shm\n    emptyDir:\n      medium: Memory\n";
  if (!w.options_yaml.empty()) {
    y += "  - name: options\n    configMap:\n      name: " +
         OptionsConfigMapName(w) + "\n";
  }
  if (!w.ssh_secret.empty()) {
    // 0400: ssh refuses a private key that others can read.
    y += "  - name: ssh\n    secret:\n      secretName: " + w.ssh_secret +
         "\n      defaultMode: 256\n";
  }
  return y;
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
// worker joins the head. Data-parallel ranks that span pods are placed by
// vLLM's Ray data-parallel backend, whose "span" strategy gathers each
// rank's tp · pp GPUs from whole nodes (vLLM's data parallel deployment
// guide; its placement asserts tp · pp is a multiple of a node's GPUs).
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
      "; do sleep 5; done && " +
      (w.dp_ranks_span_pods ? "export VLLM_RAY_DP_PACK_STRATEGY=span && "
                            : "") +
      "exec " + vllm +
      (w.dp_ranks_span_pods ? "--data-parallel-backend ray " : "") +
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

// A shell line that stops the pod, saying why, when the image lacks
// `tool` (a program on PATH, or an absolute path) that `use` needs.
std::string Require(const std::string& tool, const std::string& use) {
  const std::string test = tool[0] == '/'
                               ? "[ -x " + tool + " ]"
                               : "command -v " + tool + " >/dev/null";
  return test + " || { echo \"tune serve: this image has no " + tool + ", " +
         use + "\" >&2; exit 1; }\n";
}

// The shell lines every pod of a TensorRT-LLM group starts with: the
// group's key as the client's identity, and a client configuration that
// reaches the workers' sshd (kSshPort) without asking about host keys
// (each worker makes a new one when it starts).
std::string SshClientSetup() {
  const std::string port = std::to_string(kSshPort);
  return std::string("set -e\n") + "mkdir -p ~/.ssh\n" + "cp " + kSshDir +
         "/ssh-privatekey ~/.ssh/tune-ssh-key\n" +
         "chmod 600 ~/.ssh/tune-ssh-key\n" + "printf 'Host *\\n  Port " + port +
         "\\n  IdentityFile ~/.ssh/tune-ssh-key\\n"
         "  StrictHostKeyChecking no\\n  UserKnownHostsFile /dev/null\\n"
         "  LogLevel ERROR\\n' > ~/.ssh/config\n";
}

// TensorRT-LLM's leader: waits until each worker answers over SSH, then
// runs the plan's trtllm-serve under mpirun with trtllm-llmapi-launch, as
// trtllm-serve runs over several nodes: gpus_per_pod ranks per pod, the
// leader's first, so that rank 0 (the HTTP server) is the leader's. A
// worker's address is the leader's with the worker index after the pod
// name (`lws`-G-I.`lws`.NS, as LWS names the pods). MPI carries only
// control messages here (NCCL the tensors): TCP (pml ob1), which every
// cluster has. OpenMPI 4 (orte) and 5 (prte) each read their own variable
// that keeps the FQDNs, without which the pods' short names do not resolve.
std::string TrtllmLeaderScript(const Workload& w) {
  const std::string slots = std::to_string(w.gpus_per_pod);
  const std::string ranks = std::to_string(w.gpus_per_pod * w.pods_per_worker);
  const std::string use = "which TensorRT-LLM over several nodes needs";
  std::string serve = "trtllm-llmapi-launch";
  for (const std::string& word : w.program) serve += " " + ShellWord(word);
  for (const std::string& word : ServingArgs(w)) serve += " " + ShellWord(word);
  return Require("ssh", use) + Require("mpirun", use) +
         Require("trtllm-llmapi-launch", use) + SshClientSetup() +
         "hosts=\"$LWS_LEADER_ADDRESS:" + slots + "\"\n" + "i=1\n" +
         "while [ \"$i\" -lt \"$LWS_GROUP_SIZE\" ]; do\n" +
         "  host=\"${LWS_LEADER_ADDRESS%%.*}-$i.${LWS_LEADER_ADDRESS#*.}\"\n" +
         "  until ssh -o ConnectTimeout=5 \"$host\" true; do sleep 5; done\n" +
         "  hosts=\"$hosts,$host:" + slots + "\"\n" + "  i=$((i + 1))\n" +
         "done\n" +
         "export OMPI_MCA_orte_keep_fqdn_hostnames=1 "
         "PRTE_MCA_prte_keep_fqdn_hostnames=1\n" +
         "exec mpirun --allow-run-as-root -np " + ranks +
         " -H \"$hosts\" --mca pml ob1 --mca btl tcp,self -x PATH "
         "${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} ${HF_TOKEN:+-x HF_TOKEN} " +
         serve + "\n";
}

// TensorRT-LLM's worker: sshd in the foreground on kSshPort, accepting the
// group's key, with a host key of its own and the container's PATH and
// LD_LIBRARY_PATH for the sessions mpirun opens (sshd gives them neither;
// the MPI daemons and the ranks need both).
std::string TrtllmWorkerScript() {
  const std::string sshd = "/usr/sbin/sshd";
  const std::string use =
      "through which mpirun starts TensorRT-LLM's ranks on several nodes; "
      "use an image with openssh-server";
  return Require(sshd, use) + Require("ssh-keygen", use) + SshClientSetup() +
         "ssh-keygen -y -f ~/.ssh/tune-ssh-key > ~/.ssh/authorized_keys\n" +
         "rm -f ~/.ssh/tune-ssh-host-key ~/.ssh/tune-ssh-host-key.pub\n" +
         "ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/tune-ssh-host-key\n" +
         "printf 'PATH=%s\\nLD_LIBRARY_PATH=%s\\n' \"$PATH\" "
         "\"${LD_LIBRARY_PATH:-}\" > ~/.ssh/environment\n" +
         "printf 'Port " + std::to_string(kSshPort) +
         "\\nHostKey %s\\nPidFile %s\\nPermitRootLogin prohibit-password\\n"
         "PasswordAuthentication no\\nPermitUserEnvironment yes\\n' "
         "\"$HOME/.ssh/tune-ssh-host-key\" \"$HOME/.ssh/tune-sshd.pid\" "
         "> ~/.ssh/tune-sshd-config\n" +
         "mkdir -p /run/sshd\n" + "exec " + sshd +
         " -D -e -f ~/.ssh/tune-sshd-config\n";
}

// TensorRT-LLM: one MPI world over the group's pods.
GroupCommands TrtllmGroup(const Workload& w) {
  return {"[\"sh\", \"-c\"]",
          {TrtllmLeaderScript(w)},
          "[\"sh\", \"-c\"]",
          {TrtllmWorkerScript()}};
}

std::string LeaderWorkerSetYaml(const Workload& w, const std::string& image,
                                const std::string& ns) {
  const GroupCommands g =
      w.engine == ServingManifestEngine::kSglang        ? SglangGroup(w)
      : w.engine == ServingManifestEngine::kTensorRtLlm ? TrtllmGroup(w)
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
    const std::string path = std::string(kConfigDir) + "/" + kTrtllmOptionsFile;
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

// TensorRT-LLM's options file as the ConfigMap its pods mount.
std::string OptionsConfigMapYaml(const Workload& w, const std::string& ns) {
  return "apiVersion: v1\nkind: ConfigMap\n" +
         Metadata(OptionsConfigMapName(w), ns) + "data:\n  " +
         kTrtllmOptionsFile + ": " + YamlQuoted(w.options_yaml) + "\n---\n";
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

}  // namespace

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

std::string FlowList(const std::vector<std::string>& words) {
  std::string y = "[";
  for (size_t i = 0; i < words.size(); ++i) {
    y += (i == 0 ? "" : ", ") + YamlQuoted(words[i]);
  }
  return y + "]";
}

std::string Metadata(const std::string& name, const std::string& ns) {
  return "metadata:\n  name: " + name + "\n" +
         (ns.empty() ? "" : "  namespace: " + ns + "\n");
}

std::string Labels(const Workload& w, const char* lws_role) {
  std::string y = "app: " + w.app + "\n";
  if (!w.role.empty()) y += "serving-role: " + w.role + "\n";
  if (lws_role != nullptr) y += "role: " + std::string(lws_role) + "\n";
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

std::string PodAddress(const Workload& w, int64_t index) {
  // An LWS group's leader is pod `lws`-G of the headless Service `lws`.
  const std::string pod = w.pods_per_worker > 1 ? w.name + kLwsSuffix : w.name;
  const std::string domain =
      w.pods_per_worker > 1 ? w.name + kLwsSuffix : PodsServiceName(w);
  return pod + "-" + std::to_string(index) + "." + domain + ":" +
         std::to_string(kServePort);
}

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
  if (ServingNeedsSshSecret(engine, gpus_per_worker, gpus_per_node)) {
    w.ssh_secret = ServingSshSecret(app);
  }
  if (w.pods_per_worker > 1 && engine == ServingManifestEngine::kVllm) {
    auto config = ParseVllmServeCommand(group.command, nullptr);
    if (!config.ok()) return config.status();
    const search_spaces::ServingConfig& c = config.value();
    if (c.attention_dp > 1) {
      // Each pod starts whole data-parallel ranks of tp · pp GPUs, or each
      // rank spans whole pods (Ray's span placement).
      const int64_t rank_gpus = c.tp * c.pp;
      if (w.gpus_per_pod % rank_gpus == 0) {
        w.dp_ranks_per_pod = w.gpus_per_pod / rank_gpus;
      } else if (rank_gpus % w.gpus_per_pod == 0) {
        w.dp_ranks_span_pods = true;
      } else {
        return Status::InvalidArgument(
            "a worker of " + std::to_string(gpus_per_worker) +
                " GPUs spans nodes with vLLM data-parallel ranks "
                "(--data-parallel-size " +
                std::to_string(c.attention_dp) + ") of " +
                std::to_string(rank_gpus) +
                " GPUs, which neither split into whole ranks per node of " +
                std::to_string(w.gpus_per_pod) + " GPUs nor span whole nodes",
            "write SGLang's manifests (--k8s-engine sglang), or pick a plan "
            "whose tp x pp divides or is a multiple of the GPUs per node");
      }
    }
  }
  return w;
}

std::string WorkloadYaml(const Workload& w, const std::string& image,
                         const std::string& ns) {
  return (w.options_yaml.empty() ? "" : OptionsConfigMapYaml(w, ns)) +
         (w.pods_per_worker > 1 ? LeaderWorkerSetYaml(w, image, ns)
                                : DeploymentYaml(w, image, ns)) +
         "---\n" + ServiceYaml(w, ns) +
         // An LWS names its pods through the controller's headless Service.
         (w.stateful && w.pods_per_worker == 1
              ? "---\n" + PodsServiceYaml(w, ns)
              : "");
}

}  // namespace meshtune::tuner::internal
