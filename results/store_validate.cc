// Store: `tune validate` records (validations, their candidates' runs) and
// the efficiency factors fitted to a machine's measured runs.
#include <sqlite3.h>

#include "results/sqlite_statement.h"
#include "results/store.h"
#include "results/store_rows.h"

namespace meshtune::results {
using internal::BindOptional;
using internal::BindProvenance;
using internal::ReadOptional;
using internal::ReadProvenance;

StatusOr<int64_t> Store::PutValidation(
    const ValidationRecord& v, const std::vector<ValidationRunRecord>& runs,
    const Provenance& prov) {
  MESHTUNE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [this](Status s) -> StatusOr<int64_t> {
    Exec("ROLLBACK");
    return s;
  };
  Statement st(db_, path_);
  Status s = st.Prepare(
      "INSERT INTO validations (search_id, hardware_id, steps, measured, "
      "spearman, mape_pct, top1_is_measured_best, top1_loss_pct, "
      "measured_best_candidate_id, tool_version, git_revision, "
      "created_unix_s) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
  if (!s.ok()) return fail(s);
  st.Bind(1, v.search_id);
  st.Bind(2, v.hardware_id);
  st.Bind(3, v.steps);
  st.Bind(4, v.measured);
  BindOptional(st, 5, v.spearman);
  BindOptional(st, 6, v.mape_pct);
  st.Bind(7, static_cast<int64_t>(v.top1_is_measured_best));
  BindOptional(st, 8, v.top1_loss_pct);
  if (v.measured_best_candidate_id > 0) {
    st.Bind(9, v.measured_best_candidate_id);
  } else {
    st.BindNull(9);
  }
  BindProvenance(st, 10, prov);
  s = st.Run();
  if (!s.ok()) return fail(s);
  const int64_t id = sqlite3_last_insert_rowid(db_);

  Statement run(db_, path_);
  s = run.Prepare(
      "INSERT INTO validation_runs (validation_id, candidate_id, reason, "
      "status, error, predicted_step_s, measured_step_s, training_run_id, "
      "wall_s) VALUES (?,?,?,?,?,?,?,?,?)");
  if (!s.ok()) return fail(s);
  for (const ValidationRunRecord& r : runs) {
    run.Reset();
    run.Bind(1, id);
    run.Bind(2, r.candidate_id);
    run.Bind(3, r.reason);
    run.Bind(4, r.status);
    run.Bind(5, r.error);
    run.Bind(6, r.predicted_step_s);
    BindOptional(run, 7, r.measured_step_s);
    if (r.training_run_id > 0) {
      run.Bind(8, r.training_run_id);
    } else {
      run.BindNull(8);
    }
    run.Bind(9, r.wall_s);
    s = run.Run();
    if (!s.ok()) return fail(s);
  }
  s = Exec("COMMIT");
  if (!s.ok()) return fail(s);
  return id;
}

StatusOr<std::vector<ValidationRecord>> Store::ListValidations() const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "SELECT id, search_id, hardware_id, steps, measured, spearman, "
      "mape_pct, top1_is_measured_best, top1_loss_pct, "
      "measured_best_candidate_id, tool_version, git_revision, "
      "created_unix_s FROM validations ORDER BY id"));
  std::vector<ValidationRecord> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ValidationRecord v;
    v.id = st.Int(0);
    v.search_id = st.Int(1);
    v.hardware_id = st.Text(2);
    v.steps = st.Int(3);
    v.measured = st.Int(4);
    v.spearman = ReadOptional(st, 5);
    v.mape_pct = ReadOptional(st, 6);
    v.top1_is_measured_best = st.Int(7) != 0;
    v.top1_loss_pct = ReadOptional(st, 8);
    v.measured_best_candidate_id = st.IsNull(9) ? 0 : st.Int(9);
    v.provenance = ReadProvenance(st, 10);
    out.push_back(std::move(v));
  }
  return out;
}

StatusOr<std::vector<ValidationRunRecord>> Store::GetValidationRuns(
    int64_t validation_id) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(
      st.Prepare("SELECT validation_id, candidate_id, reason, status, error, "
                 "predicted_step_s, measured_step_s, training_run_id, wall_s "
                 "FROM validation_runs WHERE validation_id = ? ORDER BY id"));
  st.Bind(1, validation_id);
  std::vector<ValidationRunRecord> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ValidationRunRecord r;
    r.validation_id = st.Int(0);
    r.candidate_id = st.Int(1);
    r.reason = st.Text(2);
    r.status = st.Text(3);
    r.error = st.Text(4);
    r.predicted_step_s = st.Double(5);
    r.measured_step_s = ReadOptional(st, 6);
    r.training_run_id = st.IsNull(7) ? 0 : st.Int(7);
    r.wall_s = st.Double(8);
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<int64_t> Store::PutFittedFactors(const FittedFactorsRecord& f,
                                          const Provenance& prov) {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "INSERT INTO fitted_factors (hardware_id, base_calibration, compute, "
      "memory, collective, runs, mape_before_pct, mape_after_pct, "
      "tool_version, git_revision, created_unix_s) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?)"));
  st.Bind(1, f.hardware_id);
  st.Bind(2, f.base_calibration);
  st.Bind(3, f.compute);
  st.Bind(4, f.memory);
  st.Bind(5, f.collective);
  st.Bind(6, f.runs);
  st.Bind(7, f.mape_before_pct);
  st.Bind(8, f.mape_after_pct);
  BindProvenance(st, 9, prov);
  MESHTUNE_RETURN_IF_ERROR(st.Run());
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

StatusOr<std::optional<FittedFactorsRecord>> Store::GetFittedFactors(
    const std::string& hardware_id, const std::string& base_calibration) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "SELECT id, hardware_id, base_calibration, compute, memory, "
      "collective, runs, mape_before_pct, mape_after_pct, tool_version, "
      "git_revision, created_unix_s FROM fitted_factors "
      "WHERE hardware_id = ? AND base_calibration = ? "
      "ORDER BY id DESC LIMIT 1"));
  st.Bind(1, hardware_id);
  st.Bind(2, base_calibration);
  StatusOr<bool> row = st.Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<FittedFactorsRecord>();
  FittedFactorsRecord f;
  f.id = st.Int(0);
  f.hardware_id = st.Text(1);
  f.base_calibration = st.Text(2);
  f.compute = st.Double(3);
  f.memory = st.Double(4);
  f.collective = st.Double(5);
  f.runs = st.Int(6);
  f.mape_before_pct = st.Double(7);
  f.mape_after_pct = st.Double(8);
  f.provenance = ReadProvenance(st, 9);
  return std::optional<FittedFactorsRecord>(f);
}

}  // namespace meshtune::results
