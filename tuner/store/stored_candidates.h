// Finding a recorded search and its candidates in the results database:
// the one lookup behind --search (compare, export, launch, report, db runs)
// and --from-search (train), with one error text for each way it fails.
#ifndef MESHTUNE_TUNER_STORE_STORED_CANDIDATES_H_
#define MESHTUNE_TUNER_STORE_STORED_CANDIDATES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "results/store.h"
#include "search_spaces/status.h"
#include "tuner/inputs/search_link.h"

namespace meshtune::tuner {

// Search `id` of `store`. InvalidArgument "<flag>: no search 7 in /abs/t.db"
// (the database's absolute path) with a hint naming 'tune db searches
// --db /abs/t.db' when there is none; a read failure as is.
StatusOr<results::SearchRecord> FindStoredSearch(
    const results::Store& store, int64_t id,
    const std::string& flag = "--search");

// The stored candidates of `search` with the given ranks, in that order.
// `flag` names the flag in messages ("--rank", "--ranks"): a rank the
// search did not store is InvalidArgument "--ranks: search 3 stores 10
// candidates, not rank 11" with a hint naming the valid range, and a search
// with none "--rank: search 3 stores no candidates".
StatusOr<std::vector<results::CandidateRecord>> FindStoredRanks(
    const results::Store& store, const results::SearchRecord& search,
    const std::vector<int64_t>& ranks, const std::string& flag);

// Candidate `rank` of search `search_id`, as `tune train --from-search ID
// --rank R` names them: FindStoredSearch with "--from-search", then
// FindStoredRanks with "--rank".
StatusOr<StoredCandidate> FindCandidate(const results::Store& store,
                                        int64_t search_id, int64_t rank);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_STORE_STORED_CANDIDATES_H_
