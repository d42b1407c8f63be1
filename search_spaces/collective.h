// The collectives the cost model prices, the profiler times and the results
// store names (results::Measurement::op, "elem"/"gemm" aside): one enum and
// one spelling for all of them.
#ifndef MESHTUNE_SEARCH_SPACES_COLLECTIVE_H_
#define MESHTUNE_SEARCH_SPACES_COLLECTIVE_H_

#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

enum class Collective {
  kAllReduce,      // "all_reduce"
  kAllGather,      // "all_gather"
  kReduceScatter,  // "reduce_scatter"
  kAllToAll,       // "all_to_all"
  kSendRecv,       // "send_recv": one point-to-point exchange
};

// The name above ("all_reduce").
const char* CollectiveName(Collective c);

// The collective a name spells; InvalidArgument listing the five names.
StatusOr<Collective> ParseCollective(const std::string& name);

// All five, in the order above (the order the profiler's sweeps run them).
const std::vector<Collective>& AllCollectives();

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_COLLECTIVE_H_
