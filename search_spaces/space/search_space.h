// SearchSpace: which values of each axis the search may use (user pins).
//
// An empty list means "every value the rules allow". Filled from command-line
// pins (`--tp 8`, `--pp 4,8,16`, `--recompute selective`) and/or a search
// space YAML file (search_spaces/spaces/*.yaml, keys with Megatron names).
#ifndef MESHTUNE_SEARCH_SPACES_SPACE_SEARCH_SPACE_H_
#define MESHTUNE_SEARCH_SPACES_SPACE_SEARCH_SPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"

namespace meshtune::search_spaces {

struct SearchSpace {
  std::vector<int64_t> tp, pp, vpp, cp, ep, dp, mbs;
  // expert_tensor_parallel_size pins (MoE models only).
  std::vector<int64_t> etp;
  std::vector<bool> sp;
  std::vector<bool> dist_opt;
  // Recompute pins by granularity; a kFull entry with num_layers == 0 means
  // "any full-recompute variant" (every method and num_layers the rules allow).
  std::vector<Recompute> recompute;
  // Largest tp the search tries without a tp pin (0 = the NVLink domain).
  int64_t max_tp = 0;
  // Largest micro-batch size tried without an mbs pin.
  int64_t max_mbs = 16;

  // Intersects two spaces axis by axis (flags over file). Returns
  // InvalidArgument naming the axis when an intersection is empty
  // ("contradictory pins: tp 8 (flag) and tp 4 (space file)").
  static StatusOr<SearchSpace> Merge(const SearchSpace& file,
                                     const SearchSpace& flags);
};

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_SPACE_SEARCH_SPACE_H_
