#include "tuner/interop/serving_manifest.h"

#include <cctype>
#include <utility>
#include <vector>

#include "tuner/interop/kubernetes_job.h"
#include "tuner/interop/serving_router.h"
#include "tuner/interop/serving_workload.h"

namespace meshtune::tuner {

namespace {

using internal::MakeWorkload;
using internal::Workload;
using internal::WorkloadYaml;

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

// An image reference reaches the YAML quoted, but one with whitespace or
// control characters is a mistake (two words, a pasted line).
Status CheckImage(const char* flag, const std::string& image) {
  for (char ch : image) {
    if (std::isspace(static_cast<unsigned char>(ch)) ||
        static_cast<unsigned char>(ch) < 0x20) {
      return Status::InvalidArgument(
          std::string(flag) + " '" + image + "' holds whitespace",
          "give an image reference such as registry/name:tag");
    }
  }
  return Status::Ok();
}

// TensorRT-LLM's disaggregated server lists every worker pod by name, so
// its roles run as StatefulSets (an LWS names its group leaders already).
bool StatefulRoles(ServingManifestEngine engine) {
  return engine == ServingManifestEngine::kTensorRtLlm;
}

// The comment that opens manifests whose pods mount the SSH Secret: how to
// create it (the pods wait for it, ContainerCreating, until it exists).
std::string SshSecretComment(const std::string& name, const std::string& ns) {
  return "# TensorRT-LLM's workers over several nodes start their ranks with "
         "mpirun over SSH.\n# Before applying this file, create the Secret " +
         ServingSshSecret(name) + " with a key of your own:\n#   " +
         ServingSshSecretCommand(name, ns) + "\n";
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
  MESHTUNE_RETURN_IF_ERROR(CheckImage("--k8s-image", image));
  return image;
}

const char* ServingWorkloadKind(int64_t gpus_per_worker,
                                int64_t gpus_per_node) {
  return gpus_per_worker > gpus_per_node ? "LeaderWorkerSet" : "Deployment";
}

const char* ServingRoleWorkloadKind(ServingManifestEngine engine,
                                    int64_t gpus_per_worker,
                                    int64_t gpus_per_node) {
  return StatefulRoles(engine) && gpus_per_worker <= gpus_per_node
             ? "StatefulSet"
             : ServingWorkloadKind(gpus_per_worker, gpus_per_node);
}

bool ServingNeedsSshSecret(ServingManifestEngine engine,
                           int64_t gpus_per_worker, int64_t gpus_per_node) {
  return engine == ServingManifestEngine::kTensorRtLlm &&
         gpus_per_worker > gpus_per_node;
}

std::string ServingSshSecret(const std::string& name) { return name + "-ssh"; }

std::string ServingSshSecretCommand(const std::string& name,
                                    const std::string& ns) {
  return "d=\"$(mktemp -d)\" && ssh-keygen -q -t ed25519 -N '' -f "
         "\"$d/key\" && kubectl create secret generic " +
         ServingSshSecret(name) +
         " --type=kubernetes.io/ssh-auth "
         "--from-file=ssh-privatekey=\"$d/key\"" +
         (ns.empty() ? "" : " --namespace " + ns) + "; rm -rf \"$d\"";
}

const char* ServingRouterName(ServingManifestEngine engine) {
  switch (engine) {
    case ServingManifestEngine::kSglang:
      return "SGLang's router";
    case ServingManifestEngine::kTensorRtLlm:
      return "TensorRT-LLM's disaggregated server";
    case ServingManifestEngine::kVllm:
      break;
  }
  return "vLLM's router";
}

StatusOr<std::string> ServingRouterImage(ServingManifestEngine engine,
                                         const std::string& image,
                                         const std::string& router_image) {
  if (!router_image.empty()) {
    MESHTUNE_RETURN_IF_ERROR(CheckImage("--k8s-router-image", router_image));
    return router_image;
  }
  if (engine == ServingManifestEngine::kVllm)
    return std::string(kVllmRouterImage);
  return ServingImage(engine, image);
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
  return (w.value().ssh_secret.empty()
              ? ""
              : SshSecretComment(spec.name, spec.namespace_name)) +
         WorkloadYaml(w.value(), image.value(), spec.namespace_name);
}

StatusOr<std::string> ServingDisaggregatedDeployment(
    const ServingDisaggregatedSpec& spec) {
  MESHTUNE_RETURN_IF_ERROR(CheckNames(spec.name, spec.namespace_name));
  auto image = ServingImage(spec.engine, spec.image);
  if (!image.ok()) return image.status();
  auto router_image =
      ServingRouterImage(spec.engine, spec.image, spec.router_image);
  if (!router_image.ok()) return router_image.status();
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
  for (Workload& w : roles) w.stateful = StatefulRoles(spec.engine);
  if (spec.engine == ServingManifestEngine::kSglang) {
    roles[0].annotations = internal::SglangPrefillAnnotations();
  }
  std::string y = roles[0].ssh_secret.empty() && roles[1].ssh_secret.empty()
                      ? ""
                      : SshSecretComment(spec.name, spec.namespace_name);
  y += WorkloadYaml(roles[0], image.value(), spec.namespace_name) + "---\n" +
       WorkloadYaml(roles[1], image.value(), spec.namespace_name) + "---\n";
  auto router = internal::VllmRouterYaml;
  if (spec.engine == ServingManifestEngine::kSglang) {
    router = internal::SglangRouterYaml;
  } else if (spec.engine == ServingManifestEngine::kTensorRtLlm) {
    router = internal::TrtllmRouterYaml;
  }
  return y + router(spec.name, router_image.value(), spec.namespace_name,
                    roles[0], roles[1]);
}

}  // namespace meshtune::tuner
