// `tune db`: read the results database (docs/results.md).
//   tune db hardware                                 list machine fingerprints
//   tune db measurements [--hardware ID] [--op OP]   microbenchmark rows
//   tune db searches                                 recorded searches, best
//                                                    candidate of each
//   tune db runs [--search ID]                       training runs, with the
//                                                    prediction they are linked
//                                                    to
//                                                    (tuner/inputs/search_link.h)
//   tune db export --table T --csv FILE              one table or view as CSV
// Every form takes --db PATH (default $TUNE_DB, else ./tune.db) and opens the
// file read-only: `tune db` never creates or changes a database.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "results/store.h"
#include "search_spaces/collective.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/io/output_file.h"
#include "tuner/io/text_format.h"
#include "tuner/store/results_db.h"
#include "tuner/store/stored_candidates.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kDbExamples = R"(Examples:
  tune db hardware                                 machines with measurements
  tune db measurements --op gemm                   GEMM timings of all machines
  tune db measurements --hardware cpu-0123456789abcdef --op all_reduce
  tune db searches                                 searches and their best candidate
  tune db runs --search 3                          training runs of search 3's candidates
  tune db export --table measurements --csv m.csv  any table as CSV
  tune db hardware --db /data/cluster.db           another database file)";

// Ops a Measurement may carry (results/store.h; the collectives by
// search_spaces::CollectiveName), and the engine-kernel families of
// profiler/engine_ops.h.
const std::vector<std::string>& KnownOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v = {"gemm", "attention", "stream"};
    for (search_spaces::Collective c : search_spaces::AllCollectives()) {
      v.push_back(search_spaces::CollectiveName(c));
    }
    v.insert(v.end(), {"attn:fwd", "attn:bwd", "elem:<op>:fwd|bwd"});
    return v;
  }();
  return ops;
}

// "norm, bias_dropout_add, ..." (costmodel::ElementwiseOp).
std::string ElementwiseOpNames() {
  std::string names;
  for (int i = 0; i < costmodel::kNumElementwiseOps; ++i) {
    if (i > 0) names += ", ";
    names += costmodel::ToString(static_cast<costmodel::ElementwiseOp>(i));
  }
  return names;
}

bool IsKnownOp(const std::string& op) {
  if (op != KnownOps().back() &&  // the family's pattern, not an op
      std::find(KnownOps().begin(), KnownOps().end(), op) != KnownOps().end()) {
    return true;
  }
  for (const char* dir : {":fwd", ":bwd"}) {
    const std::string suffix(dir);
    if (op.rfind("elem:", 0) == 0 && op.size() > 5 + suffix.size() &&
        op.compare(op.size() - suffix.size(), suffix.size(), suffix) == 0) {
      costmodel::ElementwiseOp parsed;
      return costmodel::ParseElementwiseOp(
          op.substr(5, op.size() - 5 - suffix.size()), &parsed);
    }
  }
  return false;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// A fixed-width text table: columns sized to their widest cell, numbers
// right-aligned (cells flagged by `right`).
void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<bool>& right,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (c > 0) s += "  ";
      s += right[c] ? pad + cells[c] : cells[c] + pad;
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// Prediction data of a linked training run (view predicted_vs_measured).
struct RunLink {
  int64_t search_id = 0;
  int64_t rank = 0;
  double predicted_step_time_s = 0;
  double relative_error = 0;
};

class DbCommand : public Command {
 public:
  explicit DbCommand(CLI::App* app) {
    db_app_ = app->add_subcommand(
        "db",
        "list and export the results database (hardware, measurements, "
        "searches, training runs)");
    db_app_->require_subcommand(1);
    db_app_->footer(kDbExamples);
    hardware_ = db_app_->add_subcommand(
        "hardware", "list the machine fingerprints measurements belong to");
    measurements_ = db_app_->add_subcommand("measurements",
                                            "list microbenchmark measurements");
    measurements_
        ->add_option("--hardware", hardware_id_,
                     "only this machine (an id from 'tune db hardware')")
        ->type_name("ID");
    measurements_->add_option("--op", op_, "only this op: " + Join(KnownOps()))
        ->type_name("OP");
    searches_ = db_app_->add_subcommand(
        "searches", "list recorded searches with their best candidate");
    runs_ = db_app_->add_subcommand(
        "runs",
        "list training runs (tune train) with the predictions they are "
        "linked to");
    runs_
        ->add_option("--search", search_id_text_,
                     "only runs of this search's candidates (an id from "
                     "'tune db searches')")
        ->type_name("ID");
    export_ = db_app_->add_subcommand("export", "write a table as CSV");
    export_
        ->add_option(
            "--table", table_,
            "table or view: " + Join(results::Store::ExportableTables()))
        ->required()
        ->type_name("T");
    export_->add_option("--csv", csv_file_, "output CSV file ('-' = stdout)")
        ->required()
        ->type_name("FILE");
    for (CLI::App* sub :
         {hardware_, measurements_, searches_, runs_, export_}) {
      AddDbOption(sub, &db_);
      sub->footer(kDbExamples);
    }
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    // Validate flags before touching the file.
    if (measurements_->parsed() && !op_.empty() && !IsKnownOp(op_)) {
      return Status::InvalidArgument("--op: unknown op '" + op_ + "'",
                                     "use one of: " + Join(KnownOps()) +
                                         " (<op>: " + ElementwiseOpNames() +
                                         ")");
    }
    if (export_->parsed()) {
      const auto& tables = results::Store::ExportableTables();
      if (std::find(tables.begin(), tables.end(), table_) == tables.end()) {
        return Status::InvalidArgument(
            "--table: unknown table '" + table_ + "'",
            "use one of: " + Join(tables));
      }
    }
    if (export_->parsed() && csv_file_ != "-") {
      MESHTUNE_RETURN_IF_ERROR(CheckOutputPath(csv_file_, "--csv"));
    }
    int64_t search_id = 0;
    if (runs_->parsed() && !search_id_text_.empty()) {
      auto id = ParsePositiveInt(search_id_text_, "--search");
      if (!id.ok()) return id.status();
      search_id = id.value();
    }
    results::OpenOptions options;
    options.read_only = true;
    auto store = results::Store::Open(ResolveDbPath(db_), options);
    if (!store.ok()) return store.status();
    if (hardware_->parsed()) return ListHardware(**store, out, err);
    if (measurements_->parsed()) return ListMeasurements(**store, out, err);
    if (searches_->parsed()) return ListSearches(**store, out, err);
    if (runs_->parsed()) return ListRuns(**store, search_id, out, err);
    return Export(**store, out, err);
  }

 private:
  Status ListHardware(const results::Store& store, std::ostream& out,
                      std::ostream& err) {
    auto machines = store.ListHardware();
    if (!machines.ok()) return machines.status();
    if (machines->empty()) {
      err << "tune: " << store.path()
          << " holds no hardware yet; 'tune profile' adds this machine\n";
      return Status::Ok();
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& hw : *machines) {
      rows.push_back({hw.id, hw.backend, OrDash(hw.cpu_model),
                      std::to_string(hw.cpu_cores), Fixed(hw.memory_gib, 1),
                      OrDash(hw.gpu_model), std::to_string(hw.gpu_count),
                      OrDash(hw.driver_version), OrDash(hw.library_versions)});
    }
    PrintTable(out,
               {"id", "backend", "cpu_model", "cpu_cores", "memory_gib",
                "gpu_model", "gpu_count", "driver", "libraries"},
               {false, false, false, true, true, false, true, false, false},
               rows);
    return Status::Ok();
  }

  Status ListMeasurements(const results::Store& store, std::ostream& out,
                          std::ostream& err) {
    if (!hardware_id_.empty()) {
      auto machines = store.ListHardware();
      if (!machines.ok()) return machines.status();
      const bool known =
          std::any_of(machines->begin(), machines->end(),
                      [&](const auto& hw) { return hw.id == hardware_id_; });
      if (!known) {
        return Status::InvalidArgument(
            "--hardware: no machine '" + hardware_id_ + "' in " + store.path(),
            "list the stored machines with 'tune db hardware'");
      }
    }
    auto rows = store.GetMeasurements(hardware_id_, op_);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) {
      err << "tune: no measurements match in " << store.path()
          << "; 'tune profile' records them\n";
      return Status::Ok();
    }
    std::vector<std::vector<std::string>> table;
    for (const results::Measurement& m : *rows) {
      // GEMMs and attention rows fill m x n x k; elementwise rows carry
      // their element count in m alone.
      std::string shape = "-";
      if (m.op == "gemm" || m.op.rfind("attn:", 0) == 0) {
        shape = std::to_string(m.m) + "x" + std::to_string(m.n) + "x" +
                std::to_string(m.k);
      } else if (m.op.rfind("elem:", 0) == 0) {
        shape = std::to_string(m.m);
      }
      table.push_back({m.hardware_id, m.op, m.dtype, shape,
                       m.bytes > 0 ? Fixed(m.bytes, 0) : "-",
                       std::to_string(m.group_size), std::to_string(m.nodes),
                       std::to_string(m.samples), Fixed(m.median_s * 1e6, 2),
                       Fixed(m.min_s * 1e6, 2), Fixed(m.p99_s * 1e6, 2),
                       Fixed(m.cv, 3), m.timer});
    }
    PrintTable(
        out,
        {"hardware_id", "op", "dtype", "m x n x k", "bytes", "group", "nodes",
         "samples", "median_us", "min_us", "p99_us", "cv", "timer"},
        {false, false, false, true, true, true, true, true, true, true, true,
         true, false},
        table);
    return Status::Ok();
  }

  Status ListSearches(const results::Store& store, std::ostream& out,
                      std::ostream& err) {
    auto searches = store.ListSearches();
    if (!searches.ok()) return searches.status();
    if (searches->empty()) {
      err << "tune: " << store.path()
          << " holds no searches yet; 'tune search' records them\n";
      return Status::Ok();
    }
    std::vector<std::vector<std::string>> rows;
    for (const results::SearchRecord& s : *searches) {
      auto candidates = store.GetCandidates(s.id);
      if (!candidates.ok()) return candidates.status();
      // Candidates come by rank: the first one is the best.
      const results::CandidateRecord* best =
          candidates->empty() ? nullptr : &candidates->front();
      rows.push_back(
          {std::to_string(s.id), UtcMinuteText(s.provenance.created_unix_s),
           s.model, std::to_string(s.gpus), s.gpu, std::to_string(s.gbs),
           std::to_string(s.seq_length), std::to_string(s.evaluated),
           std::to_string(s.feasible), best ? best->config_text : "-",
           best ? Fixed(best->step_time_s * 1e3, 1) : "-"});
    }
    PrintTable(
        out,
        {"id", "time_utc", "model", "gpus", "gpu", "gbs", "seq", "evaluated",
         "feasible", "best_config", "best_step_ms"},
        {true, false, false, true, false, true, true, true, true, false, true},
        rows);
    return Status::Ok();
  }

  // `search_id` 0 = every run; else only runs linked to that search.
  Status ListRuns(const results::Store& store, int64_t search_id,
                  std::ostream& out, std::ostream& err) {
    if (search_id > 0) {
      MESHTUNE_RETURN_IF_ERROR(FindStoredSearch(store, search_id).status());
    }
    auto runs = store.GetTrainingRuns();
    if (!runs.ok()) return runs.status();
    auto joined = store.GetPredictedVsMeasured(search_id);
    if (!joined.ok()) return joined.status();
    std::map<int64_t, RunLink> links;  // by training run id
    for (const results::PredictedVsMeasured& p : *joined) {
      links[p.training_run_id] = {p.search_id, p.rank, p.predicted_step_time_s,
                                  p.relative_error};
    }
    std::vector<std::vector<std::string>> rows;
    for (const results::TrainingRun& r : *runs) {
      const auto link = links.find(r.id);
      if (search_id > 0 && link == links.end()) continue;
      const bool linked = link != links.end();
      rows.push_back(
          {std::to_string(r.id), UtcMinuteText(r.provenance.created_unix_s),
           r.model, r.config_text, std::to_string(r.steps),
           Fixed(r.step_time_median_s * 1e3, 1), Fixed(r.tokens_per_s, 0),
           Fixed(r.final_loss, 4),
           linked ? std::to_string(link->second.search_id) : "-",
           linked ? std::to_string(link->second.rank) : "-",
           linked ? Fixed(link->second.predicted_step_time_s * 1e3, 1) : "-",
           linked ? SignedPercent(link->second.relative_error) : "-"});
    }
    if (rows.empty()) {
      err << "tune: no training runs"
          << (search_id > 0 ? " of search " + std::to_string(search_id) : "")
          << " in " << store.path()
          << (search_id > 0 ? "; 'tune train --from-search " +
                                  std::to_string(search_id) + "' records one\n"
                            : "; 'tune train' records them\n");
      return Status::Ok();
    }
    PrintTable(out,
               {"id", "time_utc", "model", "config", "steps", "median_ms",
                "tokens_per_s", "final_loss", "search", "rank", "predicted_ms",
                "error_pct"},
               {true, false, false, false, true, true, true, true, true, true,
                true, true},
               rows);
    return Status::Ok();
  }

  // "+12.3" / "-4.0": the signed relative error in percent.
  static std::string SignedPercent(double relative_error) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%+.1f", 100 * relative_error);
    return buf;
  }

  Status Export(const results::Store& store, std::ostream& out,
                std::ostream& err) {
    std::ostringstream csv;
    MESHTUNE_RETURN_IF_ERROR(store.ExportCsv(table_, csv));
    if (csv_file_ == "-") {
      out << csv.str();
      return Status::Ok();
    }
    MESHTUNE_RETURN_IF_ERROR(WriteOutputFile(csv_file_, csv.str(), "--csv"));
    err << "tune: wrote " << table_ << " to " << csv_file_ << "\n";
    return Status::Ok();
  }

  CLI::App* db_app_ = nullptr;
  CLI::App* hardware_ = nullptr;
  CLI::App* measurements_ = nullptr;
  CLI::App* searches_ = nullptr;
  CLI::App* runs_ = nullptr;
  CLI::App* export_ = nullptr;
  std::string db_;
  std::string search_id_text_;
  std::string hardware_id_;
  std::string op_;
  std::string table_;
  std::string csv_file_;
};

}  // namespace

std::unique_ptr<Command> AddDbCommand(CLI::App* app) {
  return std::make_unique<DbCommand>(app);
}

}  // namespace meshtune::tuner
