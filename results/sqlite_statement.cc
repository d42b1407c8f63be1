#include "results/sqlite_statement.h"

#include <sqlite3.h>

namespace meshtune::results {

Status SqliteError(const std::string& path, sqlite3* db, int rc,
                   const std::string& what) {
  const int primary = rc & 0xff;
  const std::string detail =
      db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string msg = path + ": " + what + ": " + detail;
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::IoError(
          msg,
          "another process holds the database; retry when it finishes, "
          "or pass --db with another file");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return Status::IoError(msg,
                             "check that the file and its directory are "
                             "writable, or pass --db with a writable path");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::InvalidArgument(
          msg,
          "the file is damaged or not a meshtune results database (it "
          "was not modified); move it away or pass --db with another "
          "file");
    case SQLITE_FULL:
      return Status::IoError(msg, "free disk space and retry");
    default:
      return Status::IoError(msg);
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Status Statement::Prepare(const std::string& sql) {
  sql_ = sql;
  sqlite3_finalize(stmt_);
  stmt_ = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) return SqliteError(path_, db_, rc, "cannot prepare");
  return Status::Ok();
}

void Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
}
void Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
}
void Statement::Bind(int index, const std::string& value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                    SQLITE_TRANSIENT);
}
void Statement::BindNull(int index) { sqlite3_bind_null(stmt_, index); }

StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(path_, db_, rc, "query failed");
}

Status Statement::Run() {
  for (;;) {
    StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::Int(int column) const {
  return sqlite3_column_int64(stmt_, column);
}
double Statement::Double(int column) const {
  return sqlite3_column_double(stmt_, column);
}
std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}
bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}
int Statement::ColumnCount() const { return sqlite3_column_count(stmt_); }
std::string Statement::ColumnName(int column) const {
  return sqlite3_column_name(stmt_, column);
}

}  // namespace meshtune::results
