// Enumeration of every structurally valid ParallelConfig under Megatron-Core's
// rules (DESIGN.md §2) and the user's pins. Memory feasibility is not decided
// here: the cost model does that.
//
// Candidates that break a rule are not errors: they are counted per reason
// code (stable snake_case strings used in reports and JSON "pruned").
#ifndef MESHTUNE_SEARCH_SPACES_ENUMERATE_H_
#define MESHTUNE_SEARCH_SPACES_ENUMERATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/search_space.h"
#include "search_spaces/training_spec.h"

namespace meshtune::search_spaces {

struct Enumeration {
  std::vector<ParallelConfig> configs;     // valid, in a deterministic order
  std::map<std::string, int64_t> pruned;   // reason code -> count
  int64_t considered = 0;                  // configs.size() + sum(pruned)
};

// Checks one fully given configuration against the rules. Returns "" when
// valid, otherwise the reason code; `detail` (optional) gets a one-line
// human explanation ("tp 3 does not divide num_attention_heads 96").
std::string CheckConfig(const ModelSpec& model, const TrainingSpec& training,
                        const ClusterSpec& cluster, const ParallelConfig& c,
                        std::string* detail = nullptr);

// Every valid configuration of `training.num_gpus` GPUs within `space`.
Enumeration EnumerateConfigs(const ModelSpec& model,
                             const TrainingSpec& training,
                             const ClusterSpec& cluster,
                             const SearchSpace& space);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_ENUMERATE_H_
