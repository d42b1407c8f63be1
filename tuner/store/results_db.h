// The results database as the tuner commands use it: where it is (--db,
// $TUNE_DB, ./tune.db), the provenance of this build, and how a search is
// recorded (docs/design.md §4, §7; docs/results.md).
//
// Policy for `tune search`: a database named explicitly (--db) must open, or
// the command fails before searching (a foreign/corrupt/newer file is an
// input error, exit 2; a locked or unwritable one a runtime error, exit 1).
// The implicit default (./tune.db or $TUNE_DB) never breaks a search: if it
// cannot be opened or written, a one-line warning goes to stderr and the
// report and exit code are unchanged. --no-db skips the database entirely.
#ifndef MESHTUNE_TUNER_STORE_RESULTS_DB_H_
#define MESHTUNE_TUNER_STORE_RESULTS_DB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "results/store.h"
#include "search_spaces/status.h"
#include "tuner/inputs/inputs.h"
#include "tuner/search/search_driver.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace meshtune::tuner {

// The database file used when --db is absent.
inline constexpr const char* kDefaultDbPath = "tune.db";

// `flag` if non-empty, else $TUNE_DB if set and non-empty, else "tune.db".
std::string ResolveDbPath(const std::string& flag);

// Adds --db PATH, bound to `path`, to `command`: the one way commands take
// the database. Help: "results database[ <purpose>] (default $TUNE_DB,
// else ./tune.db)"; `purpose` says what the command does with it ("whose
// measurements, if any, calibrate the estimates").
CLI::Option* AddDbOption(CLI::App* command, std::string* path,
                         const std::string& purpose = "");

// InvalidArgument (exit 2) naming --db when a parsed (sub)command of `app`
// got --db with an empty value: ResolveDbPath cannot tell it from an absent
// flag and would silently use $TUNE_DB or ./tune.db. Checked once, after
// parsing, for every command that has --db.
Status CheckDbFlags(const CLI::App& app);

// The search flags as a command line, "tune search --model M --gpus N ...":
// the searches.arguments column, and what `tune report` re-parses.
std::string DescribeFlags(const InputFlags& flags);

// Tool version and git revision of this build, stamped now.
results::Provenance ToolProvenance();

// "tune: recording searches in ./tune.db (created); --no-db records
// nothing, --db PATH chooses the file" (no newline).
std::string CreatedDbNote(const std::string& path);

// Opens the database for a search per the policy above. Returns null (and
// has written a warning to `err`) when the implicit default cannot be used,
// and null without a warning when `no_db` is set. When the implicit default
// did not exist and is created now, writes CreatedDbNote to `err` unless
// QuietMode() (tuner/io/terminal.h): a search leaves a file behind, said
// once, on the search that creates it, not on every search.
StatusOr<std::unique_ptr<results::Store>> OpenSearchDb(const InputFlags& flags,
                                                       std::ostream& err);

// Records the search and its best `top_k` candidates (with the cost model's
// predictions and full JSON estimates). Returns the search id.
StatusOr<int64_t> RecordSearch(results::Store* store, const InputFlags& flags,
                               const Inputs& inputs, const SearchResult& result,
                               int64_t top_k);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_STORE_RESULTS_DB_H_
