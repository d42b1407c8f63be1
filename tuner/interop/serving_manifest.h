// `tune serve --k8s FILE`: a serving plan as Kubernetes manifests running
// the plan's `vllm serve` command in vLLM's OpenAI-server image, its
// `python3 -m sglang.launch_server` command in SGLang's image
// (`--k8s-engine sglang`), or its `trtllm-serve` command in the
// TensorRT-LLM release image the user names (`--k8s-engine trtllm
// --k8s-image ...`; docs/serving.md §6 describes them).
//
// A group of identical workers (the replicas of an aggregated plan, or one
// side of a disaggregated plan) becomes one workload:
//   - a worker that fits a node: a Deployment (apps/v1) of one pod per
//     worker, holding its GPUs (resources.limits nvidia.com/gpu) and a
//     memory-backed /dev/shm;
//   - a worker whose GPUs span nodes (gpus > gpus_per_node): a
//     LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, the LWS controller must
//     be installed) of one group per worker, size = its pods, ceil(gpus /
//     gpus_per_node), each pod holding gpus / size of them. A group
//     restarts as a whole (restartPolicy RecreateGroupOnPodRestart).
//     vLLM: as vLLM's LWS guide does, the pods form a Ray cluster: the
//     leader runs `ray start --head`, waits until all `size` nodes are
//     alive, then runs the plan's `vllm serve` (its --tensor-parallel-size
//     and --pipeline-parallel-size span the group) with
//     --distributed-executor-backend ray; each worker pod joins with `ray
//     start --address=$LWS_LEADER_ADDRESS:6379 --block` (LWS sets
//     LWS_LEADER_ADDRESS), retrying until the head is up.
//     vLLM with data-parallel ranks (--data-parallel-size > 1): as vLLM's
//     data parallel deployment guide does, no Ray; each pod starts its
//     gpus / (tp · pp) ranks (--data-parallel-size-local), all meeting at
//     --data-parallel-address $(LWS_LEADER_ADDRESS) --data-parallel-rpc-port
//     13345: the leader with the API server from rank 0, each worker
//     --headless from rank LWS_WORKER_INDEX · those ranks (--data-parallel-
//     start-rank, computed by sh), when tp · pp divides a pod's GPUs.
//     Ranks that each span whole pods (tp · pp a multiple of a pod's GPUs)
//     run over the group's Ray cluster as above, placed by vLLM's Ray
//     data-parallel backend: the leader exports
//     VLLM_RAY_DP_PACK_STRATEGY=span and adds --data-parallel-backend ray.
//     SGLang: as the LWS project's SGLang example does, every pod runs the
//     plan's command with SGLang's own multi-node flags, --dist-init-addr
//     $(LWS_LEADER_ADDRESS):20000 --nnodes $(LWS_GROUP_SIZE) --node-rank
//     $(LWS_WORKER_INDEX) (Kubernetes expands the variables LWS sets); the
//     leader, node rank 0, serves HTTP.
//     TensorRT-LLM: as trtllm-serve runs over several nodes, one MPI
//     world: each worker pod runs sshd on port 2222 (kSshPort) accepting
//     the key of the Secret `app`-ssh (ServingSshSecret, which the user
//     creates: ServingSshSecretCommand), mounted at /etc/tune-ssh; the
//     leader waits until every worker answers over SSH, then runs `mpirun
//     -np GPUS -H leader:G,worker-1:G,... trtllm-llmapi-launch` and the
//     plan's trtllm-serve (rank 0, on the leader, serves HTTP). The image
//     needs sshd, ssh and mpirun: a pod whose image lacks one stops,
//     naming it. The manifests start with a comment saying how to create
//     the Secret.
// TensorRT-LLM's --extra_llm_api_options file is a ConfigMap
// `workload`-options, mounted read-only at /etc/tune-serve, where its
// command is pointed; trtllm-serve is told --host 0.0.0.0 --port 8000.
// Each workload has a ClusterIP Service on port 8000 in front of its
// serving pods (an LWS group's leader); SGLang is started with --host
// 0.0.0.0 --port 8000 to match. A LeaderWorkerSet is named after its
// Service with "-lws" added: the LWS controller creates a headless Service
// named after the LWS for the DNS names of its pods (LWS_LEADER_ADDRESS),
// and finds it already there if the Service written here takes that name.
//
// Aggregated (ServingDeployment): one workload and one Service named
// `name`, pods labelled app: name. Disaggregated
// (ServingDisaggregatedDeployment): a workload and a Service per role,
// `name`-prefill and `name`-decode, pods labelled app: name and
// serving-role: prefill|decode, with their worker counts; their commands
// carry the KV-transfer flags (serving_commands.h, ServingRole), and with
// vLLM every pod gets VLLM_NIXL_SIDE_CHANNEL_HOST = its pod IP so that the
// NIXL connectors of the other role reach it. With SGLang, the router is
// written too: a Deployment `name`-router of one pod running SGLang's
// router (`python3 -m sglang_router.launch_router --pd-disaggregation`,
// from the same image) that finds the workers through the Kubernetes API
// (--service-discovery, --prefill-selector and --decode-selector on the
// labels above; an LWS group's leader only) in its own namespace, and
// learns each prefill worker's KV bootstrap port (8998, SGLang's default)
// from the pod annotation sglang.ai/bootstrap-port; the ServiceAccount,
// Role (get, list, watch pods) and RoleBinding it runs under, all named
// `name`-router; and the Service `name` in front of it, the deployment's
// entry point. With TensorRT-LLM each role's workers are a StatefulSet
// (podManagementPolicy Parallel) with a headless Service `role`-pods, so
// that pod I is `name`-`role`-I.`name`-`role`-pods:8000 (a role over
// several nodes: its LeaderWorkerSet, whose group I's leader is
// `name`-`role`-lws-I.`name`-`role`-lws:8000), and the router is
// `trtllm-serve disaggregated -c` its configuration (hostname 0.0.0.0,
// port 8000, context_servers and generation_servers listing every pod, a
// ConfigMap `name`-router-config), waiting an hour for the workers to
// start and for a request (-t 3600 -r 3600; the defaults are 180 s), the
// same Deployment and Service. With vLLM the router is vLLM's own
// (vllm-project/router, image vllm/vllm-router), SGLang's router's fork:
// `vllm-router --vllm-pd-disaggregation` with the same discovery arguments,
// ServiceAccount, Role, RoleBinding, Deployment and Service as SGLang's;
// its default KV connector, NIXL, is the workers' own. The router's image
// is the spec's router_image, else vLLM's vllm/vllm-router:latest or the
// engine's image, where SGLang (sgl-router) and TensorRT-LLM ship theirs.
//
// InvalidArgument: names that are not Kubernetes names or longer than
// kMaxServingNameLength, fewer than one worker or GPU, a worker whose GPUs do
// not split evenly over its nodes, a command that is not the engine's (or
// does not parse; TensorRT-LLM's with its options file), with vLLM a
// multi-node worker whose data-parallel ranks straddle nodes unevenly
// (tp · pp neither dividing a pod's GPUs nor a multiple of them), with
// TensorRT-LLM no image (ServingImage), a router image with whitespace. Every
// user value reaches the YAML as a double-quoted scalar.
#ifndef MESHTUNE_TUNER_INTEROP_SERVING_MANIFEST_H_
#define MESHTUNE_TUNER_INTEROP_SERVING_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "search_spaces/status.h"

namespace meshtune::tuner {

// The longest `name` the manifests take: the longest name derived from it,
// `name`-prefill-lws, has StatefulSets `name`-prefill-lws-N whose pods
// carry a controller-revision-hash label of the StatefulSet's name and 11
// characters more, which must stay within Kubernetes' 63 (N below 100).
inline constexpr size_t kMaxServingNameLength = 37;

// The engine the manifests run.
enum class ServingManifestEngine { kVllm, kSglang, kTensorRtLlm };
// The engine's image when the spec names none: vllm/vllm-openai:latest,
// lmsysorg/sglang:latest; "" for TensorRT-LLM, whose NGC release image
// (nvcr.io/nvidia/tensorrt-llm/release) is published by version only, so
// its manifests need one named.
const char* DefaultServingImage(ServingManifestEngine engine);
// The image the manifests run: `image`, which must hold no whitespace, or
// the engine's default; InvalidArgument for TensorRT-LLM without one.
StatusOr<std::string> ServingImage(ServingManifestEngine engine,
                                   const std::string& image);
// The image of a disaggregated plan's router: `router_image`, which must
// hold no whitespace, else kVllmRouterImage for vLLM, else the engine's
// image (ServingImage of `image`).
inline constexpr const char* kVllmRouterImage = "vllm/vllm-router:latest";
StatusOr<std::string> ServingRouterImage(ServingManifestEngine engine,
                                         const std::string& image,
                                         const std::string& router_image);
// "vllm", "sglang" or "trtllm" (the --k8s-engine values); InvalidArgument
// otherwise.
StatusOr<ServingManifestEngine> ParseServingManifestEngine(
    const std::string& name);

// An aggregated plan.
struct ServingManifestSpec {
  std::string name;            // metadata.name of both objects
  std::string namespace_name;  // metadata.namespace; "" = kubectl's current
  ServingManifestEngine engine = ServingManifestEngine::kVllm;
  std::string image;         // "" = DefaultServingImage(engine)
  std::string command;       // as VllmServeCommand, SglangServeCommand or
                             // TrtllmServeCommand writes it
  std::string options_yaml;  // TensorRT-LLM: the --extra_llm_api_options text
  int64_t replicas = 1;
  int64_t gpus_per_replica = 1;
  int64_t gpus_per_node = 8;
};

StatusOr<std::string> ServingDeployment(const ServingManifestSpec& spec);

// One side of a disaggregated plan.
struct ServingWorkerGroup {
  std::string command;  // the engine's command with the role's KV transfer
  int64_t workers = 1;
  int64_t gpus_per_worker = 1;
  std::string options_yaml;  // TensorRT-LLM: the --extra_llm_api_options text
};

// A disaggregated plan: prefill and decode workers.
struct ServingDisaggregatedSpec {
  std::string name;  // the prefix of `name`-prefill and `name`-decode
  std::string namespace_name;
  ServingManifestEngine engine = ServingManifestEngine::kVllm;
  std::string image;         // "" = DefaultServingImage(engine)
  std::string router_image;  // "" = ServingRouterImage's default
  int64_t gpus_per_node = 8;
  ServingWorkerGroup prefill;
  ServingWorkerGroup decode;
};

StatusOr<std::string> ServingDisaggregatedDeployment(
    const ServingDisaggregatedSpec& spec);

// "Deployment" for a worker of `gpus_per_worker` GPUs that fits a node of
// `gpus_per_node`, "LeaderWorkerSet" for one that spans nodes.
const char* ServingWorkloadKind(int64_t gpus_per_worker, int64_t gpus_per_node);
// The workload one side of a disaggregated plan runs as: "StatefulSet"
// with TensorRT-LLM for a worker that fits a node (its disaggregated
// server lists the pods by name), else ServingWorkloadKind.
const char* ServingRoleWorkloadKind(ServingManifestEngine engine,
                                    int64_t gpus_per_worker,
                                    int64_t gpus_per_node);
// Whether `engine`'s workers of `gpus_per_worker` GPUs on nodes of
// `gpus_per_node` need the SSH Secret: TensorRT-LLM over several nodes.
bool ServingNeedsSshSecret(ServingManifestEngine engine,
                           int64_t gpus_per_worker, int64_t gpus_per_node);
// The Secret (type kubernetes.io/ssh-auth, key ssh-privatekey) holding
// the key that mpirun on a TensorRT-LLM leader reaches its workers with:
// `name`-ssh. The manifests mount it; the user creates it, with a key of
// their own, before applying them.
std::string ServingSshSecret(const std::string& name);
// The shell commands that create it in namespace `ns` ("" = kubectl's
// current): a new ed25519 key without a passphrase, then `kubectl create
// secret generic`.
std::string ServingSshSecretCommand(const std::string& name,
                                    const std::string& ns);
// What ServingDisaggregatedDeployment writes in front of the workers:
// "vLLM's router", "SGLang's router" or "TensorRT-LLM's disaggregated
// server".
const char* ServingRouterName(ServingManifestEngine engine);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_SERVING_MANIFEST_H_
