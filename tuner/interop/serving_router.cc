#include "tuner/interop/serving_router.h"

#include <string>
#include <utility>
#include <vector>

namespace meshtune::tuner::internal {

namespace {

// The port a SGLang prefill worker's KV bootstrap server listens on
// (--disaggregation-bootstrap-port, which the commands leave at its
// default), announced to the router through the pod annotation its
// Kubernetes discovery reads.
constexpr int kSglangBootstrapPort = 8998;
constexpr const char* kSglangBootstrapAnnotation = "sglang.ai/bootstrap-port";
// TensorRT-LLM's disaggregated server's configuration, in the ConfigMap
// `name`-router-config mounted at kConfigDir, and the seconds it
// waits for its workers to start and for a request.
constexpr const char* kTrtllmDisaggFile = "disagg_config.yaml";
constexpr int kTrtllmRouterTimeout_s = 3600;

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
  std::string config_map;       // mounted at kConfigDir; "" = none
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
  pod += "    image: " + YamlQuoted(image) + "\n";
  pod += "    command: " + FlowList(r.command) + "\n";
  pod += "    args:\n";
  for (const std::string& a : r.args) pod += "      - " + YamlQuoted(a) + "\n";
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
           std::string(kConfigDir) + "\n        readOnly: true\n";
    pod += "volumes:\n  - name: config\n    configMap:\n      name: " +
           r.config_map + "\n";
  }
  y += Indent(pod, 6) + "---\n";
  w.name = name;
  return y + ServiceYaml(w, ns);
}

// The ServiceAccount `router` and the Role and RoleBinding that let it
// watch the pods of its namespace, as YAML documents: what a router that
// discovers its workers through the Kubernetes API runs under.
std::string PodReaderYaml(const std::string& router, const std::string& ns) {
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
  return y;
}

// SGLang's router or vLLM's (a fork of it), `command` in its disaggregated
// mode `pd_flag`, finding `prefill` and `decode` through the Kubernetes
// API in its own namespace and serving on kServePort: the documents of
// PodReaderYaml and RouterYaml. The two routers share these arguments.
std::string DiscoveringRouterYaml(const std::string& name,
                                  const std::string& image,
                                  const std::string& ns,
                                  std::vector<std::string> command,
                                  const char* pd_flag, const Workload& prefill,
                                  const Workload& decode) {
  Router r;
  r.command = std::move(command);
  r.args = {pd_flag, "--service-discovery"};
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
  r.service_account = name + "-router";
  r.pod_namespace = true;
  return PodReaderYaml(r.service_account, ns) + RouterYaml(name, image, ns, r);
}

}  // namespace

std::string SglangPrefillAnnotations() {
  return std::string(kSglangBootstrapAnnotation) + ": " +
         YamlQuoted(std::to_string(kSglangBootstrapPort)) + "\n";
}

std::string SglangRouterYaml(const std::string& name, const std::string& image,
                             const std::string& ns, const Workload& prefill,
                             const Workload& decode) {
  return DiscoveringRouterYaml(name, image, ns,
                               {"python3", "-m", "sglang_router.launch_router"},
                               "--pd-disaggregation", prefill, decode);
}

std::string VllmRouterYaml(const std::string& name, const std::string& image,
                           const std::string& ns, const Workload& prefill,
                           const Workload& decode) {
  // NIXL (the router's default --kv-connector) is what the workers'
  // --kv-transfer-config names; its handshake needs no bootstrap port.
  return DiscoveringRouterYaml(name, image, ns, {"vllm-router"},
                               "--vllm-pd-disaggregation", prefill, decode);
}

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
                  ": " + YamlQuoted(config) + "\n---\n";
  Router r;
  r.command = {"trtllm-serve", "disaggregated"};
  // The workers load their weights before they answer: wait an hour for
  // them (the server's default is 180 s), and as long for a request.
  r.args = {"-c", std::string(kConfigDir) + "/" + kTrtllmDisaggFile,
            "-t", std::to_string(kTrtllmRouterTimeout_s),
            "-r", std::to_string(kTrtllmRouterTimeout_s)};
  r.config_map = config_map;
  return y + RouterYaml(name, image, ns, r);
}

}  // namespace meshtune::tuner::internal
