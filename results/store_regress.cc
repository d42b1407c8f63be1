// Store: `tune regress` benchmark results and named baselines (schema v2,
// tables regress_results and regress_baselines; see V2Sql in store.cc).
#include <sqlite3.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "results/sqlite_statement.h"
#include "results/store.h"
#include "results/store_rows.h"

namespace meshtune::results {
namespace {

// The result columns shared by both tables, in V2 schema order.
constexpr const char* kResultColumns =
    "benchmark, spec, hardware_id, threads, warmup_steps, steps_per_repeat, "
    "tokens_per_step, tokens_per_s_json, cpu_tokens_per_s_json, "
    "tokens_per_s_median, tokens_per_s_spread, cpu_tokens_per_s_median, "
    "cpu_tokens_per_s_spread, losses_json";
constexpr int kResultColumnCount = 14;

// "?,?,...,?" with n marks.
std::string Marks(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i == 0 ? "?" : ",?";
  return s;
}

// A JSON array of numbers with 17 significant digits, which round-trips
// every double exactly (the loss comparison depends on that).
std::string ToJsonArray(const std::vector<double>& values) {
  std::string s = "[";
  char buf[32];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.17g", values[i]);
    s += (i == 0 ? "" : ",") + std::string(buf);
  }
  return s + "]";
}

// Parses what ToJsonArray writes; false on anything else (a damaged row).
bool FromJsonArray(const std::string& text, std::vector<double>* out) {
  out->clear();
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return false;
  }
  const char* p = text.c_str() + 1;
  const char* end = text.c_str() + text.size() - 1;
  while (p < end) {
    char* next = nullptr;
    errno = 0;
    const double v = std::strtod(p, &next);
    if (next == p || errno == ERANGE) return false;
    out->push_back(v);
    p = next;
    if (p < end && *p++ != ',') return false;
  }
  return true;
}

bool AllFinite(const std::vector<double>& values) {
  for (double v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

Status CheckResult(const std::string& path, const RegressResult& r) {
  const auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(
        path + ": regress result for '" + r.benchmark + "' " + what,
        "store what 'tune regress run' measured, unchanged");
  };
  if (r.benchmark.empty()) return bad("has no benchmark name");
  if (r.tokens_per_s.empty() ||
      r.tokens_per_s.size() != r.cpu_tokens_per_s.size()) {
    return bad("has no repeats, or wall and CPU repeats differ in number");
  }
  if (r.losses.empty()) return bad("has no losses");
  if (!AllFinite(r.tokens_per_s) || !AllFinite(r.cpu_tokens_per_s) ||
      !AllFinite(r.losses) || !std::isfinite(r.tokens_per_s_median) ||
      !std::isfinite(r.tokens_per_s_spread) ||
      !std::isfinite(r.cpu_tokens_per_s_median) ||
      !std::isfinite(r.cpu_tokens_per_s_spread)) {
    return bad("has a number that is not finite");
  }
  return Status::Ok();
}

// Binds the result columns at first .. first+13.
void BindResult(Statement& st, int first, const RegressResult& r) {
  st.Bind(first + 0, r.benchmark);
  st.Bind(first + 1, r.spec);
  st.Bind(first + 2, r.hardware_id);
  st.Bind(first + 3, r.threads);
  st.Bind(first + 4, r.warmup_steps);
  st.Bind(first + 5, r.steps_per_repeat);
  st.Bind(first + 6, r.tokens_per_step);
  st.Bind(first + 7, ToJsonArray(r.tokens_per_s));
  st.Bind(first + 8, ToJsonArray(r.cpu_tokens_per_s));
  st.Bind(first + 9, r.tokens_per_s_median);
  st.Bind(first + 10, r.tokens_per_s_spread);
  st.Bind(first + 11, r.cpu_tokens_per_s_median);
  st.Bind(first + 12, r.cpu_tokens_per_s_spread);
  st.Bind(first + 13, ToJsonArray(r.losses));
}

// Reads the result columns starting at `first`; a damaged array is an
// error naming the table.
Status ReadResult(const Statement& st, int first, const std::string& path,
                  const char* table, RegressResult* r) {
  r->benchmark = st.Text(first + 0);
  r->spec = st.Text(first + 1);
  r->hardware_id = st.Text(first + 2);
  r->threads = st.Int(first + 3);
  r->warmup_steps = st.Int(first + 4);
  r->steps_per_repeat = st.Int(first + 5);
  r->tokens_per_step = st.Int(first + 6);
  r->tokens_per_s_median = st.Double(first + 9);
  r->tokens_per_s_spread = st.Double(first + 10);
  r->cpu_tokens_per_s_median = st.Double(first + 11);
  r->cpu_tokens_per_s_spread = st.Double(first + 12);
  if (!FromJsonArray(st.Text(first + 7), &r->tokens_per_s) ||
      !FromJsonArray(st.Text(first + 8), &r->cpu_tokens_per_s) ||
      !FromJsonArray(st.Text(first + 13), &r->losses)) {
    return Status::InvalidArgument(
        path + ": a row of " + table + " holds a damaged number list",
        "the database was edited by hand; delete that row or use another "
        "--db");
  }
  return Status::Ok();
}

bool IsForeignKeyError(const Status& s) {
  return !s.ok() && s.message().find("FOREIGN KEY") != std::string::npos;
}

}  // namespace

StatusOr<int64_t> Store::PutRegressResult(const RegressResult& r,
                                          const Provenance& prov) {
  MESHTUNE_RETURN_IF_ERROR(CheckResult(path_, r));
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(
      st.Prepare(std::string("INSERT INTO regress_results (") + kResultColumns +
                 ", tool_version, git_revision, created_unix_s) VALUES (" +
                 Marks(kResultColumnCount + 3) + ")"));
  BindResult(st, 1, r);
  internal::BindProvenance(st, kResultColumnCount + 1, prov);
  const Status s = st.Run();
  if (IsForeignKeyError(s)) {
    return Status::InvalidArgument(
        path_ + ": regress result for unknown hardware id '" + r.hardware_id +
            "'",
        "store the fingerprint with PutHardware first");
  }
  if (!s.ok()) return s;
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

StatusOr<std::vector<RegressResult>> Store::GetRegressResults(
    const std::string& benchmark, const std::string& hardware_id) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      std::string("SELECT id, ") + kResultColumns +
      ", tool_version, git_revision, created_unix_s FROM regress_results "
      "WHERE (?1 = '' OR benchmark = ?1) AND (?2 = '' OR hardware_id = ?2) "
      "ORDER BY id"));
  st.Bind(1, benchmark);
  st.Bind(2, hardware_id);
  std::vector<RegressResult> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    RegressResult r;
    r.id = st.Int(0);
    MESHTUNE_RETURN_IF_ERROR(ReadResult(st, 1, path_, "regress_results", &r));
    r.provenance = internal::ReadProvenance(st, 1 + kResultColumnCount);
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<RegressResult> Store::GetRegressResult(int64_t id) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      std::string("SELECT id, ") + kResultColumns +
      ", tool_version, git_revision, created_unix_s FROM regress_results "
      "WHERE id = ?"));
  st.Bind(1, id);
  StatusOr<bool> row = st.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return Status::NotFound(
        path_ + ": no regress result " + std::to_string(id),
        "'tune regress results' lists the stored results with their ids");
  }
  RegressResult r;
  r.id = st.Int(0);
  MESHTUNE_RETURN_IF_ERROR(ReadResult(st, 1, path_, "regress_results", &r));
  r.provenance = internal::ReadProvenance(st, 1 + kResultColumnCount);
  return r;
}

Status Store::PutRegressBaseline(const RegressBaseline& b,
                                 const Provenance& prov) {
  if (b.name.empty()) {
    return Status::InvalidArgument("a regress baseline needs a name",
                                   "pass --name, e.g. --name main");
  }
  MESHTUNE_RETURN_IF_ERROR(CheckResult(path_, b.result));
  MESHTUNE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Statement st(db_, path_);
  // Replacing keeps (name, benchmark) unique: promotion is a new row.
  Status s = st.Prepare(
      "DELETE FROM regress_baselines WHERE name = ? AND benchmark = ?");
  if (s.ok()) {
    st.Bind(1, b.name);
    st.Bind(2, b.result.benchmark);
    s = st.Run();
  }
  if (s.ok()) {
    s = st.Prepare(std::string("INSERT INTO regress_baselines (name, "
                               "source_result_id, ") +
                   kResultColumns +
                   ", result_tool_version, result_git_revision, "
                   "result_created_unix_s, tool_version, git_revision, "
                   "created_unix_s) VALUES (" +
                   Marks(2 + kResultColumnCount + 6) + ")");
  }
  if (s.ok()) {
    st.Bind(1, b.name);
    if (b.source_result_id == 0) {
      st.BindNull(2);
    } else {
      st.Bind(2, b.source_result_id);
    }
    BindResult(st, 3, b.result);
    int i = 3 + kResultColumnCount;
    st.Bind(i++, b.result.provenance.tool_version);
    st.Bind(i++, b.result.provenance.git_revision);
    st.Bind(i++, b.result.provenance.created_unix_s);
    st.Bind(i++, prov.tool_version);
    st.Bind(i++, prov.git_revision);
    st.Bind(i++, prov.created_unix_s);
    s = st.Run();
    if (IsForeignKeyError(s)) {
      s = Status::InvalidArgument(
          path_ + ": baseline '" + b.name + "' refers to unknown hardware '" +
              b.result.hardware_id + "' or result " +
              std::to_string(b.source_result_id),
          "store the fingerprint (PutHardware) and the result first");
    }
  }
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok()) Exec("ROLLBACK");
  return s;
}

StatusOr<std::vector<RegressBaseline>> Store::ListRegressBaselines(
    const std::string& benchmark) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      std::string("SELECT name, ifnull(source_result_id, 0), ") +
      kResultColumns +
      ", result_tool_version, result_git_revision, result_created_unix_s, "
      "tool_version, git_revision, created_unix_s FROM regress_baselines "
      "WHERE ?1 = '' OR benchmark = ?1 ORDER BY benchmark, name"));
  st.Bind(1, benchmark);
  std::vector<RegressBaseline> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    RegressBaseline b;
    b.name = st.Text(0);
    b.source_result_id = st.Int(1);
    b.result.id = b.source_result_id;
    MESHTUNE_RETURN_IF_ERROR(
        ReadResult(st, 2, path_, "regress_baselines", &b.result));
    b.result.provenance = internal::ReadProvenance(st, 2 + kResultColumnCount);
    b.provenance = internal::ReadProvenance(st, 5 + kResultColumnCount);
    out.push_back(std::move(b));
  }
  return out;
}

StatusOr<RegressBaseline> Store::GetRegressBaseline(
    const std::string& name, const std::string& benchmark) const {
  StatusOr<std::vector<RegressBaseline>> all = ListRegressBaselines(benchmark);
  if (!all.ok()) return all.status();
  for (RegressBaseline& b : all.value()) {
    if (b.name == name) return std::move(b);
  }
  return Status::NotFound(path_ + ": no baseline '" + name + "' for " +
                          benchmark);
}

}  // namespace meshtune::results
