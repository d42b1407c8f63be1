// Consistency checks for ModelSpec and ClusterSpec with per-key locations.
//
// ModelSpec::Validate(where) and ClusterSpec::Validate(where) prefix every
// message with one location; the YAML parsers call these variants instead so
// that each message points at the line of the key it is about. A KeyLocator
// maps a key name ("hidden_size"; GPU fields as "gpu.hbm_gb") to a location
// prefix ("models/x.yaml:7"), or "" for none.
#ifndef MESHTUNE_SEARCH_SPACES_SPEC_VALIDATION_H_
#define MESHTUNE_SEARCH_SPACES_SPEC_VALIDATION_H_

#include <functional>
#include <string>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/status.h"

namespace meshtune::search_spaces {

using KeyLocator = std::function<std::string(const std::string& key)>;

Status ValidateModel(const ModelSpec& model, const KeyLocator& where);
Status ValidateCluster(const ClusterSpec& cluster, const KeyLocator& where);

// "where: message", or just "message" when where is empty.
std::string Located(const std::string& where, const std::string& message);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_SPEC_VALIDATION_H_
