// The workloads of `tune serve --k8s` (serving_manifest.h says what they
// are): one group of identical workers as a Deployment, a StatefulSet or a
// LeaderWorkerSet, with its Services, and the YAML pieces that the routers
// (serving_router.h) share. Internal to tuner/interop: serving_manifest.h
// is the interface.
#ifndef MESHTUNE_TUNER_INTEROP_SERVING_WORKLOAD_H_
#define MESHTUNE_TUNER_INTEROP_SERVING_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/status.h"
#include "tuner/interop/serving_manifest.h"
#include "tuner/interop/yaml_text.h"

namespace meshtune::tuner::internal {

// The port every serving container listens on (vLLM's default; SGLang and
// trtllm-serve are told to use it), and every Service's.
inline constexpr int kServePort = 8000;
// Where a pod finds the files of the ConfigMap it mounts read-only:
// TensorRT-LLM's options file, its disaggregated server's configuration.
inline constexpr const char* kConfigDir = "/etc/tune-serve";
// Where a TensorRT-LLM pod over several nodes finds the SSH key of its
// group (the Secret's key ssh-privatekey, ServingSshSecret), and the port
// the workers' sshd listens on (not 22: an unprivileged port, and no clash
// with a node's own sshd under host networking).
inline constexpr const char* kSshDir = "/etc/tune-ssh";
inline constexpr int kSshPort = 2222;

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
  // vLLM data-parallel ranks that each span whole pods (tp · pp a multiple
  // of a pod's GPUs): the group runs them over Ray, placed with
  // VLLM_RAY_DP_PACK_STRATEGY=span.
  bool dp_ranks_span_pods = false;
  // TensorRT-LLM over several nodes: the Secret holding the SSH key that
  // mpirun on the leader reaches the workers' sshd with, mounted read-only
  // at kSshDir in every pod of a group; "" otherwise.
  std::string ssh_secret;
  // A StatefulSet, not a Deployment: its pods have stable DNS names
  // (`name`-I.`name`-pods, a headless Service) for a router that lists
  // them (TensorRT-LLM's disaggregated server).
  bool stateful = false;
};

// `text` with every line indented by `spaces` more.
std::string Indent(const std::string& text, int spaces);
// `words` as a YAML flow list of double-quoted scalars.
std::string FlowList(const std::vector<std::string>& words);
// An object's metadata (at indent 0): its name and, unless "", namespace.
std::string Metadata(const std::string& name, const std::string& ns);
// The labels (YAML lines at indent 0) of `w`'s pods: app, the serving role
// unless aggregated, and an LWS group's `lws_role` unless null.
std::string Labels(const Workload& w, const char* lws_role);
// The ClusterIP Service `w.name` in front of `w`'s serving pods (an LWS
// group's leaders) on kServePort.
std::string ServiceYaml(const Workload& w, const std::string& ns);
// The DNS name and port of the serving pod of worker `index` of a
// StatefulSet workload (its pod `index`) or of a LeaderWorkerSet (its
// group `index`'s leader), as the pods of its namespace resolve it.
std::string PodAddress(const Workload& w, int64_t index);

// Checks one group of workers of `engine` running `group.command` and
// splits it over pods of at most `gpus_per_node` GPUs; InvalidArgument as
// serving_manifest.h lists.
StatusOr<Workload> MakeWorkload(const std::string& name, const std::string& app,
                                const std::string& role,
                                ServingManifestEngine engine,
                                const ServingWorkerGroup& group,
                                int64_t gpus_per_node);
// `w` as YAML documents: its options ConfigMap (TensorRT-LLM), its
// workload, its Service and, for a StatefulSet, the headless Service that
// names its pods.
std::string WorkloadYaml(const Workload& w, const std::string& image,
                         const std::string& ns);

}  // namespace meshtune::tuner::internal

#endif  // MESHTUNE_TUNER_INTEROP_SERVING_WORKLOAD_H_
