// The router in front of a disaggregated plan's workers, as
// serving_manifest.h describes it: SGLang's router or vLLM's (a fork of
// it), discovering the workers through the Kubernetes API, or TensorRT-LLM's
// disaggregated server, listing every worker pod; each a one-pod Deployment
// `name`-router behind the Service `name`. Internal to tuner/interop.
#ifndef MESHTUNE_TUNER_INTEROP_SERVING_ROUTER_H_
#define MESHTUNE_TUNER_INTEROP_SERVING_ROUTER_H_

#include <string>

#include "tuner/interop/serving_workload.h"

namespace meshtune::tuner::internal {

// What SGLang's prefill pods announce to its router (YAML lines of pod
// annotations): their KV bootstrap port, 8998, SGLang's default
// --disaggregation-bootstrap-port.
std::string SglangPrefillAnnotations();

// SGLang's router in front of `prefill` and `decode`: its ServiceAccount,
// Role and RoleBinding (to watch pods), its Deployment and the Service
// `name`, as YAML documents.
std::string SglangRouterYaml(const std::string& name, const std::string& image,
                             const std::string& ns, const Workload& prefill,
                             const Workload& decode);

// vLLM's router (vllm-project/router) in front of `prefill` and `decode`,
// in the same documents as SglangRouterYaml: its NIXL mode (vLLM's
// --vllm-pd-disaggregation) sends each request to a prefill worker for
// one token, then to a decode worker with the KV-transfer parameters the
// prefill returned.
std::string VllmRouterYaml(const std::string& name, const std::string& image,
                           const std::string& ns, const Workload& prefill,
                           const Workload& decode);

// TensorRT-LLM's disaggregated server in front of the StatefulSets
// `prefill` (context) and `decode` (generation): its configuration, every
// worker pod's address, as a ConfigMap, its Deployment and the Service
// `name`, as YAML documents.
std::string TrtllmRouterYaml(const std::string& name, const std::string& image,
                             const std::string& ns, const Workload& prefill,
                             const Workload& decode);

}  // namespace meshtune::tuner::internal

#endif  // MESHTUNE_TUNER_INTEROP_SERVING_ROUTER_H_
