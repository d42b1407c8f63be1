// `tune serve --k8s FILE`: an aggregated serving plan as Kubernetes
// manifests: a Deployment (apps/v1) of one pod per replica, each holding
// the replica's GPUs (resources.limits nvidia.com/gpu) and running the
// plan's `vllm serve` command in vLLM's OpenAI-server image, and a
// ClusterIP Service on port 8000 in front of them (the load balancer the
// replicas sit behind). docs/serving.md §6 describes it.
//
// A replica larger than a node cannot be one pod (that needs a
// LeaderWorkerSet); disaggregated plans need a router the manifest does not
// describe. Both are InvalidArgument, as are names that are not Kubernetes
// names and vLLM commands that do not parse.
#ifndef MESHTUNE_TUNER_INTEROP_SERVING_MANIFEST_H_
#define MESHTUNE_TUNER_INTEROP_SERVING_MANIFEST_H_

#include <cstdint>
#include <string>

#include "search_spaces/status.h"

namespace meshtune::tuner {

struct ServingManifestSpec {
  std::string name;            // metadata.name of both objects
  std::string namespace_name;  // metadata.namespace; "" = kubectl's current
  std::string image = "vllm/vllm-openai:latest";
  std::string vllm_command;  // as VllmServeCommand writes it
  int64_t replicas = 1;
  int64_t gpus_per_replica = 1;
  int64_t gpus_per_node = 8;
};

StatusOr<std::string> ServingDeployment(const ServingManifestSpec& spec);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_SERVING_MANIFEST_H_
