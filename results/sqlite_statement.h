// Internal helpers for the results store: a prepared-statement wrapper and
// the translation of SQLite result codes into one-line Status values.
//
// Every SQL statement the store runs goes through Statement (prepared, values
// bound by index), so no user text is ever spliced into SQL.
#ifndef MESHTUNE_RESULTS_SQLITE_STATEMENT_H_
#define MESHTUNE_RESULTS_SQLITE_STATEMENT_H_

#include <cstdint>
#include <string>

#include "search_spaces/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace meshtune::results {

// A Status for SQLite result code `rc` from `db` while doing `what`, naming
// `path` and with a hint chosen by the kind of failure (locked, read-only,
// corrupt, disk full). Corrupt/foreign files are InvalidArgument (a bad
// --db, exit 2); everything else is IoError (exit 1).
Status SqliteError(const std::string& path, sqlite3* db, int rc,
                   const std::string& what);

// One prepared statement; finalized on destruction. Bind indices are 1-based
// as in SQLite; column indices are 0-based.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path) : db_(db), path_(path) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Status Prepare(const std::string& sql);
  void Bind(int index, int64_t value);
  void Bind(int index, double value);
  void Bind(int index, const std::string& value);
  void BindNull(int index);
  // Advances: true with a row, false when done; errors as Status.
  StatusOr<bool> Step();
  // Runs a statement that returns no rows to completion.
  Status Run();
  // Clears bindings and rewinds, for the next row of a batch insert.
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;  // "" for NULL
  bool IsNull(int column) const;
  int ColumnCount() const;
  std::string ColumnName(int column) const;

 private:
  sqlite3* db_;
  std::string path_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace meshtune::results

#endif  // MESHTUNE_RESULTS_SQLITE_STATEMENT_H_
