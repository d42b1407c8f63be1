// YAML text for the manifests tuner/interop writes (kubernetes_job.h,
// serving_manifest.h): one home for how a value becomes a scalar.
#ifndef MESHTUNE_TUNER_INTEROP_YAML_TEXT_H_
#define MESHTUNE_TUNER_INTEROP_YAML_TEXT_H_

#include <string>

namespace meshtune::tuner {

// `text` as a YAML double-quoted scalar: quotes and backslashes escaped,
// a newline as \n and any other control character as \u00XX (JSON's
// escapes, which are YAML's), so that any value reads back as itself.
std::string YamlQuoted(const std::string& text);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_YAML_TEXT_H_
