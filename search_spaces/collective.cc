#include "search_spaces/collective.h"

namespace meshtune::search_spaces {

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kSendRecv:
      return "send_recv";
  }
  return "unknown";
}

const std::vector<Collective>& AllCollectives() {
  static const std::vector<Collective> kAll = {
      Collective::kAllReduce, Collective::kAllGather,
      Collective::kReduceScatter, Collective::kAllToAll, Collective::kSendRecv};
  return kAll;
}

StatusOr<Collective> ParseCollective(const std::string& name) {
  std::string names;
  for (Collective c : AllCollectives()) {
    if (name == CollectiveName(c)) return c;
    names += std::string(names.empty() ? "" : ", ") + CollectiveName(c);
  }
  return Status::InvalidArgument("unknown collective '" + name + "'",
                                 "use one of: " + names);
}

}  // namespace meshtune::search_spaces
