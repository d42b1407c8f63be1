#include "tuner/inputs/search_link.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "search_spaces/parallel_config.h"

namespace meshtune::tuner {
namespace {

std::string Batch(int64_t gbs, int64_t seq) {
  return "gbs " + std::to_string(gbs) + ", seq " + std::to_string(seq);
}

// Same file: compared after resolving symlinks and "..", so that
// "./t.db" and "/work/t.db" match.
bool SameFile(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec_a, ec_b;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a), ec_a);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b), ec_b);
  if (ec_a || ec_b) return AbsoluteDbPath(a) == AbsoluteDbPath(b);
  return ca == cb;
}

}  // namespace

SearchLink MakeSearchLink(const StoredCandidate& c) {
  SearchLink link;
  link.db = c.db;
  link.search_id = c.search.id;
  link.rank = c.candidate.rank;
  link.candidate_id = c.candidate.id;
  link.predicted_step_time_s = c.candidate.step_time_s;
  return link;
}

std::string AbsoluteDbPath(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

LinkCheck CheckRunLink(const results::Store* store, bool no_db,
                       const SearchLink& link, const engine::TrainConfig& run) {
  LinkCheck check;
  auto unlinked = [&check](std::string reason) {
    check.reason = std::move(reason);
    return check;
  };
  if (no_db) return unlinked("--no-db records nothing");
  if (store == nullptr) return unlinked("there is no results database");
  const std::string db = AbsoluteDbPath(store->path());
  if (!SameFile(link.db, store->path())) {
    return unlinked("the search was recorded in " + link.db +
                    ", but this run records into " + db + " (pass --db " +
                    link.db + " to link it)");
  }
  StatusOr<std::vector<results::SearchRecord>> searches = store->ListSearches();
  if (!searches.ok()) return unlinked(searches.status().message());
  const auto search =
      std::find_if(searches->begin(), searches->end(),
                   [&](const auto& s) { return s.id == link.search_id; });
  if (search == searches->end()) {
    return unlinked("there is no search " + std::to_string(link.search_id) +
                    " in " + db);
  }
  StatusOr<std::vector<results::CandidateRecord>> candidates =
      store->GetCandidates(link.search_id);
  if (!candidates.ok()) return unlinked(candidates.status().message());
  const auto candidate =
      std::find_if(candidates->begin(), candidates->end(), [&](const auto& c) {
        return c.id == link.candidate_id && c.rank == link.rank;
      });
  if (candidate == candidates->end()) {
    return unlinked("search " + std::to_string(link.search_id) + " in " + db +
                    " has no candidate " + std::to_string(link.candidate_id) +
                    " at rank " + std::to_string(link.rank));
  }
  if (run.model.name != search->model) {
    return unlinked("the run trains " + run.model.name +
                    ", the search was for " + search->model);
  }
  if (run.global_batch_size != search->gbs || run.seq() != search->seq_length) {
    return unlinked("the run's batch (" +
                    Batch(run.global_batch_size, run.seq()) +
                    ") differs from the search's (" +
                    Batch(search->gbs, search->seq_length) + ")");
  }
  if (!(run.parallel == candidate->config)) {
    return unlinked("the run's config " +
                    search_spaces::ToString(run.parallel) +
                    " differs from the candidate's " +
                    search_spaces::ToString(candidate->config));
  }
  check.linked = true;
  check.stored = StoredCandidate{db, *search, *candidate};
  return check;
}

std::string NotLinkedWarning(const SearchLink& link,
                             const std::string& reason) {
  return "tune: warning: this run is not linked to search " +
         std::to_string(link.search_id) + " rank " + std::to_string(link.rank) +
         " (candidate " + std::to_string(link.candidate_id) + "): " + reason;
}

}  // namespace meshtune::tuner
