#include "tuner/store/stored_candidates.h"

namespace meshtune::tuner {

StatusOr<results::SearchRecord> FindStoredSearch(const results::Store& store,
                                                 int64_t id,
                                                 const std::string& flag) {
  auto searches = store.ListSearches();
  if (!searches.ok()) return searches.status();
  for (const results::SearchRecord& s : searches.value()) {
    if (s.id == id) return s;
  }
  const std::string db = AbsoluteDbPath(store.path());
  return Status::InvalidArgument(
      flag + ": no search " + std::to_string(id) + " in " + db,
      "list the recorded searches with 'tune db searches --db " + db + "'");
}

StatusOr<std::vector<results::CandidateRecord>> FindStoredRanks(
    const results::Store& store, const results::SearchRecord& search,
    const std::vector<int64_t>& ranks, const std::string& flag) {
  auto candidates = store.GetCandidates(search.id);
  if (!candidates.ok()) return candidates.status();
  const auto stored = static_cast<int64_t>(candidates->size());
  std::vector<results::CandidateRecord> found;
  for (int64_t rank : ranks) {
    bool hit = false;
    for (const results::CandidateRecord& c : candidates.value()) {
      if (c.rank == rank) {
        found.push_back(c);
        hit = true;
        break;
      }
    }
    if (hit) continue;
    const std::string id = std::to_string(search.id);
    if (stored == 0) {
      return Status::InvalidArgument(
          flag + ": search " + id + " stores no candidates",
          "search again; 'tune search --top K' stores the best K");
    }
    return Status::InvalidArgument(
        flag + ": search " + id + " stores " + std::to_string(stored) +
            " candidate" + (stored == 1 ? "" : "s") + ", not rank " +
            std::to_string(rank),
        (stored == 1
             ? "use rank 1, the only one stored"
             : std::string(flag == "--rank" ? "pick a rank" : "pick ranks") +
                   " from 1 to " + std::to_string(stored)) +
            ", or search again with --top K to store more");
  }
  return found;
}

StatusOr<StoredCandidate> FindCandidate(const results::Store& store,
                                        int64_t search_id, int64_t rank) {
  StatusOr<results::SearchRecord> search =
      FindStoredSearch(store, search_id, "--from-search");
  if (!search.ok()) return search.status();
  StatusOr<std::vector<results::CandidateRecord>> found =
      FindStoredRanks(store, search.value(), {rank}, "--rank");
  if (!found.ok()) return found.status();
  return StoredCandidate{AbsoluteDbPath(store.path()), search.value(),
                         found->front()};
}

}  // namespace meshtune::tuner
