// Reading `tune serve --k8s` manifests back in tests: the documents of a
// YAML text, a pod template's one container, its GPUs, args and
// environment variables.
#ifndef MESHTUNE_TESTS_TUNER_INTEROP_MANIFEST_YAML_H_
#define MESHTUNE_TESTS_TUNER_INTEROP_MANIFEST_YAML_H_

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

namespace meshtune::tuner::testing {

// The documents of a multi-document YAML text.
inline std::vector<YAML::Node> Documents(const std::string& yaml) {
  return YAML::LoadAll(yaml);
}

// The one container of a pod template.
inline YAML::Node Container(const YAML::Node& pod_template) {
  const YAML::Node containers = pod_template["spec"]["containers"];
  EXPECT_EQ(containers.size(), 1u);
  return containers[0];
}

inline int64_t Gpus(const YAML::Node& container) {
  return container["resources"]["limits"]["nvidia.com/gpu"].as<int64_t>();
}

// The names of a container's environment variables.
inline std::vector<std::string> EnvNames(const YAML::Node& container) {
  std::vector<std::string> out;
  for (const YAML::Node& e : container["env"]) {
    out.push_back(e["name"].as<std::string>());
  }
  return out;
}

// Every value of a container's args, as Kubernetes passes them.
inline std::vector<std::string> Args(const YAML::Node& container) {
  std::vector<std::string> out;
  for (const YAML::Node& a : container["args"]) {
    out.push_back(a.as<std::string>());
  }
  return out;
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_INTEROP_MANIFEST_YAML_H_
