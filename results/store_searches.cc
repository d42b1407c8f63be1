// Store: searches with their ranked candidates, training runs, the
// predicted-vs-measured join and CSV export.
#include <sqlite3.h>

#include <algorithm>

#include "results/sqlite_statement.h"
#include "results/store.h"
#include "results/store_rows.h"

namespace meshtune::results {
using internal::BindProvenance;
using internal::ReadProvenance;

namespace {

using search_spaces::ParallelConfig;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;

// The 17 configuration columns (V1's 13, then V4's 4) as an SQL list.
constexpr const char* kConfigColumns =
    "tp, pp, vpp, cp, dp, ep, sp, mbs, recompute, recompute_method, "
    "recompute_num_layers, dist_opt, config_text, etp, layout_first_layers, "
    "layout_last_layers, recompute_modules";
constexpr int kConfigColumnCount = 17;

// Binds `c` at indices first .. first+16.
void BindConfig(Statement& st, int first, const ParallelConfig& c) {
  st.Bind(first + 0, c.tp);
  st.Bind(first + 1, c.pp);
  st.Bind(first + 2, c.vpp);
  st.Bind(first + 3, c.cp);
  st.Bind(first + 4, c.dp);
  st.Bind(first + 5, c.ep);
  st.Bind(first + 6, static_cast<int64_t>(c.sp));
  st.Bind(first + 7, c.mbs);
  st.Bind(first + 8, std::string(ToString(c.recompute.granularity)));
  st.Bind(first + 9, std::string(ToString(c.recompute.method)));
  st.Bind(first + 10, c.recompute.num_layers);
  st.Bind(first + 11, static_cast<int64_t>(c.dist_opt));
  st.Bind(first + 12, search_spaces::ToString(c));
  st.Bind(first + 13, c.etp);
  st.Bind(first + 14, c.layout_first_layers);
  st.Bind(first + 15, c.layout_last_layers);
  st.Bind(first + 16, static_cast<int64_t>(c.recompute.modules));
}

// Reads the configuration columns starting at column `first`.
ParallelConfig ReadConfig(const Statement& st, int first,
                          std::string* config_text) {
  ParallelConfig c;
  c.tp = st.Int(first + 0);
  c.pp = st.Int(first + 1);
  c.vpp = st.Int(first + 2);
  c.cp = st.Int(first + 3);
  c.dp = st.Int(first + 4);
  c.ep = st.Int(first + 5);
  c.sp = st.Int(first + 6) != 0;
  c.mbs = st.Int(first + 7);
  const std::string granularity = st.Text(first + 8);
  c.recompute.granularity = granularity == "full" ? RecomputeGranularity::kFull
                            : granularity == "selective"
                                ? RecomputeGranularity::kSelective
                                : RecomputeGranularity::kNone;
  c.recompute.method = st.Text(first + 9) == "block"
                           ? RecomputeMethod::kBlock
                           : RecomputeMethod::kUniform;
  c.recompute.num_layers = st.Int(first + 10);
  c.dist_opt = st.Int(first + 11) != 0;
  *config_text = st.Text(first + 12);
  c.etp = st.Int(first + 13);
  c.layout_first_layers = st.Int(first + 14);
  c.layout_last_layers = st.Int(first + 15);
  c.recompute.modules = static_cast<uint32_t>(st.Int(first + 16));
  return c;
}

// "?,?,...,?" with n marks.
std::string Marks(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i == 0 ? "?" : ",?";
  return s;
}

// RFC 4180: quote fields holding a comma, quote or line break.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

StatusOr<int64_t> Store::PutSearch(
    const SearchRecord& search, const std::vector<CandidateRecord>& candidates,
    const Provenance& prov) {
  MESHTUNE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [this](Status s) -> StatusOr<int64_t> {
    Exec("ROLLBACK");
    return s;
  };
  Statement st(db_, path_);
  Status s = st.Prepare(
      "INSERT INTO searches (model, gpu, gpus, gpus_per_node, gbs, "
      "seq_length, precision, hardware_id, arguments, evaluated, feasible, "
      "elapsed_s, tool_version, git_revision, created_unix_s) VALUES (" +
      Marks(15) + ")");
  if (!s.ok()) return fail(s);
  st.Bind(1, search.model);
  st.Bind(2, search.gpu);
  st.Bind(3, search.gpus);
  st.Bind(4, search.gpus_per_node);
  st.Bind(5, search.gbs);
  st.Bind(6, search.seq_length);
  st.Bind(7, search.precision);
  if (search.hardware_id.empty()) {
    st.BindNull(8);
  } else {
    st.Bind(8, search.hardware_id);
  }
  st.Bind(9, search.arguments);
  st.Bind(10, search.evaluated);
  st.Bind(11, search.feasible);
  st.Bind(12, search.elapsed_s);
  BindProvenance(st, 13, prov);
  s = st.Run();
  if (!s.ok()) return fail(s);
  const int64_t search_id = sqlite3_last_insert_rowid(db_);

  Statement cand(db_, path_);
  s = cand.Prepare(std::string("INSERT INTO candidates (search_id, rank, ") +
                   kConfigColumns +
                   ", fits, infeasible_reason, step_time_s, tokens_per_s, "
                   "mfu, memory_gib, calibration, estimate_json, "
                   "tool_version, git_revision, created_unix_s) VALUES (" +
                   Marks(2 + kConfigColumnCount + 11) + ")");
  if (!s.ok()) return fail(s);
  for (const CandidateRecord& c : candidates) {
    cand.Reset();
    cand.Bind(1, search_id);
    cand.Bind(2, c.rank);
    BindConfig(cand, 3, c.config);
    int i = 3 + kConfigColumnCount;
    cand.Bind(i++, static_cast<int64_t>(c.fits));
    cand.Bind(i++, c.infeasible_reason);
    cand.Bind(i++, c.step_time_s);
    cand.Bind(i++, c.tokens_per_s);
    cand.Bind(i++, c.mfu);
    cand.Bind(i++, c.memory_gib);
    cand.Bind(i++, c.calibration);
    cand.Bind(i++, c.estimate_json);
    BindProvenance(cand, i, prov);
    s = cand.Run();
    if (!s.ok()) return fail(s);
  }
  s = Exec("COMMIT");
  if (!s.ok()) return fail(s);
  return search_id;
}

StatusOr<std::vector<SearchRecord>> Store::ListSearches() const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "SELECT id, model, gpu, gpus, gpus_per_node, gbs, seq_length, "
      "precision, ifnull(hardware_id, ''), arguments, evaluated, feasible, "
      "elapsed_s, tool_version, git_revision, created_unix_s FROM searches "
      "ORDER BY id"));
  std::vector<SearchRecord> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    SearchRecord r;
    r.id = st.Int(0);
    r.model = st.Text(1);
    r.gpu = st.Text(2);
    r.gpus = st.Int(3);
    r.gpus_per_node = st.Int(4);
    r.gbs = st.Int(5);
    r.seq_length = st.Int(6);
    r.precision = st.Text(7);
    r.hardware_id = st.Text(8);
    r.arguments = st.Text(9);
    r.evaluated = st.Int(10);
    r.feasible = st.Int(11);
    r.elapsed_s = st.Double(12);
    r.provenance = ReadProvenance(st, 13);
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<std::vector<CandidateRecord>> Store::GetCandidates(
    int64_t search_id) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(
      st.Prepare(std::string("SELECT id, search_id, rank, ") + kConfigColumns +
                 ", fits, infeasible_reason, step_time_s, tokens_per_s, mfu, "
                 "memory_gib, calibration, estimate_json FROM candidates "
                 "WHERE search_id = ? ORDER BY rank"));
  st.Bind(1, search_id);
  std::vector<CandidateRecord> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    CandidateRecord c;
    c.id = st.Int(0);
    c.search_id = st.Int(1);
    c.rank = st.Int(2);
    c.config = ReadConfig(st, 3, &c.config_text);
    int i = 3 + kConfigColumnCount;
    c.fits = st.Int(i++) != 0;
    c.infeasible_reason = st.Text(i++);
    c.step_time_s = st.Double(i++);
    c.tokens_per_s = st.Double(i++);
    c.mfu = st.Double(i++);
    c.memory_gib = st.Double(i++);
    c.calibration = st.Text(i++);
    c.estimate_json = st.Text(i++);
    out.push_back(std::move(c));
  }
  return out;
}

StatusOr<int64_t> Store::PutTrainingRun(const TrainingRun& run,
                                        const Provenance& prov) {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      std::string("INSERT INTO training_runs (candidate_id, hardware_id, "
                  "model, ") +
      kConfigColumns +
      ", gbs, seq_length, steps, step_time_median_s, step_time_min_s, "
      "step_time_p99_s, step_time_cv, tokens_per_s, final_loss, "
      "tool_version, git_revision, created_unix_s) VALUES (" +
      Marks(3 + kConfigColumnCount + 12) + ")"));
  if (run.candidate_id == 0) {
    st.BindNull(1);
  } else {
    st.Bind(1, run.candidate_id);
  }
  if (run.hardware_id.empty()) {
    st.BindNull(2);
  } else {
    st.Bind(2, run.hardware_id);
  }
  st.Bind(3, run.model);
  BindConfig(st, 4, run.config);
  int i = 4 + kConfigColumnCount;
  st.Bind(i++, run.gbs);
  st.Bind(i++, run.seq_length);
  st.Bind(i++, run.steps);
  st.Bind(i++, run.step_time_median_s);
  st.Bind(i++, run.step_time_min_s);
  st.Bind(i++, run.step_time_p99_s);
  st.Bind(i++, run.step_time_cv);
  st.Bind(i++, run.tokens_per_s);
  st.Bind(i++, run.final_loss);
  BindProvenance(st, i, prov);
  Status s = st.Run();
  if (!s.ok() && s.message().find("FOREIGN KEY") != std::string::npos) {
    return Status::InvalidArgument(
        path_ + ": training run refers to unknown candidate " +
            std::to_string(run.candidate_id) + " or hardware '" +
            run.hardware_id + "'",
        "store the search (PutSearch) and hardware (PutHardware) first");
  }
  if (!s.ok()) return s;
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

StatusOr<std::vector<TrainingRun>> Store::GetTrainingRuns(
    int64_t candidate_id) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      std::string("SELECT id, ifnull(candidate_id, 0), "
                  "ifnull(hardware_id, ''), model, ") +
      kConfigColumns +
      ", gbs, seq_length, steps, step_time_median_s, step_time_min_s, "
      "step_time_p99_s, step_time_cv, tokens_per_s, final_loss, "
      "tool_version, git_revision, created_unix_s FROM training_runs "
      "WHERE ?1 = 0 OR candidate_id = ?1 ORDER BY id"));
  st.Bind(1, candidate_id);
  std::vector<TrainingRun> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    TrainingRun r;
    r.id = st.Int(0);
    r.candidate_id = st.Int(1);
    r.hardware_id = st.Text(2);
    r.model = st.Text(3);
    r.config = ReadConfig(st, 4, &r.config_text);
    int i = 4 + kConfigColumnCount;
    r.gbs = st.Int(i++);
    r.seq_length = st.Int(i++);
    r.steps = st.Int(i++);
    r.step_time_median_s = st.Double(i++);
    r.step_time_min_s = st.Double(i++);
    r.step_time_p99_s = st.Double(i++);
    r.step_time_cv = st.Double(i++);
    r.tokens_per_s = st.Double(i++);
    r.final_loss = st.Double(i++);
    r.provenance = ReadProvenance(st, i);
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<std::vector<PredictedVsMeasured>> Store::GetPredictedVsMeasured(
    int64_t search_id) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "SELECT search_id, candidate_id, rank, config_text, training_run_id, "
      "predicted_step_time_s, measured_step_time_s, relative_error "
      "FROM predicted_vs_measured WHERE ?1 = 0 OR search_id = ?1 "
      "ORDER BY search_id, rank, training_run_id"));
  st.Bind(1, search_id);
  std::vector<PredictedVsMeasured> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    PredictedVsMeasured r;
    r.search_id = st.Int(0);
    r.candidate_id = st.Int(1);
    r.rank = st.Int(2);
    r.config_text = st.Text(3);
    r.training_run_id = st.Int(4);
    r.predicted_step_time_s = st.Double(5);
    r.measured_step_time_s = st.Double(6);
    r.relative_error = st.Double(7);
    out.push_back(r);
  }
  return out;
}

const std::vector<std::string>& Store::ExportableTables() {
  static const std::vector<std::string> tables = {
      "hardware",        "measurements",      "searches",
      "candidates",      "training_runs",     "predicted_vs_measured",
      "regress_results", "regress_baselines", "validations",
      "validation_runs", "fitted_factors"};
  return tables;
}

Status Store::ExportCsv(const std::string& table, std::ostream& out) const {
  const std::vector<std::string>& known = ExportableTables();
  if (std::find(known.begin(), known.end(), table) == known.end()) {
    std::string list;
    for (const std::string& t : known) list += (list.empty() ? "" : ", ") + t;
    return Status::InvalidArgument("unknown table '" + table + "'",
                                   "use one of: " + list);
  }
  // `table` is one of the fixed names above, so building the SQL from it
  // splices no user text.
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare("SELECT * FROM " + table));
  for (int c = 0; c < st.ColumnCount(); ++c) {
    out << (c == 0 ? "" : ",") << CsvField(st.ColumnName(c));
  }
  out << "\n";
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    for (int c = 0; c < st.ColumnCount(); ++c) {
      out << (c == 0 ? "" : ",") << CsvField(st.Text(c));
    }
    out << "\n";
  }
  return Status::Ok();
}

}  // namespace meshtune::results
