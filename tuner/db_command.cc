// `tune db`: read the results database (docs/results.md).
//   tune db hardware                                 list machine fingerprints
//   tune db measurements [--hardware ID] [--op OP]   microbenchmark rows
//   tune db export --table T --csv FILE              one table or view as CSV
// Every form takes --db PATH (default $TUNE_DB, else ./tune.db) and opens the
// file read-only: `tune db` never creates or changes a database.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "results/store.h"
#include "tuner/command.h"
#include "tuner/results_db.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kDbExamples = R"(Examples:
  tune db hardware                                 machines with measurements
  tune db measurements --op gemm                   GEMM timings of all machines
  tune db measurements --hardware cpu-0123456789abcdef --op all_reduce
  tune db export --table measurements --csv m.csv  any table as CSV
  tune db hardware --db /data/cluster.db           another database file)";

// Ops a Measurement may carry (results/store.h).
const std::vector<std::string>& KnownOps() {
  static const std::vector<std::string> ops = {
      "gemm",       "attention",      "stream",     "all_reduce",
      "all_gather", "reduce_scatter", "all_to_all", "send_recv"};
  return ops;
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

std::string Fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

class DbCommand : public Command {
 public:
  explicit DbCommand(CLI::App* app) {
    db_app_ = app->add_subcommand(
        "db", "list and export the results database (hardware, measurements)");
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
    for (CLI::App* sub : {hardware_, measurements_, export_}) {
      sub->add_option("--db", db_,
                      "results database (default: $TUNE_DB, else ./tune.db)")
          ->type_name("PATH");
      sub->footer(kDbExamples);
    }
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    // Validate flags before touching the file.
    if (measurements_->parsed() && !op_.empty() &&
        std::find(KnownOps().begin(), KnownOps().end(), op_) ==
            KnownOps().end()) {
      return Status::InvalidArgument("--op: unknown op '" + op_ + "'",
                                     "use one of: " + Join(KnownOps()));
    }
    if (export_->parsed()) {
      const auto& tables = results::Store::ExportableTables();
      if (std::find(tables.begin(), tables.end(), table_) == tables.end()) {
        return Status::InvalidArgument(
            "--table: unknown table '" + table_ + "'",
            "use one of: " + Join(tables));
      }
    }
    results::OpenOptions options;
    options.read_only = true;
    auto store = results::Store::Open(ResolveDbPath(db_), options);
    if (!store.ok()) return store.status();
    if (hardware_->parsed()) return ListHardware(**store, out, err);
    if (measurements_->parsed()) return ListMeasurements(**store, out, err);
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
      const std::string shape = m.op == "gemm" ? std::to_string(m.m) + "x" +
                                                     std::to_string(m.n) + "x" +
                                                     std::to_string(m.k)
                                               : "-";
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

  Status Export(const results::Store& store, std::ostream& out,
                std::ostream& err) {
    std::ostringstream csv;
    MESHTUNE_RETURN_IF_ERROR(store.ExportCsv(table_, csv));
    if (csv_file_ == "-") {
      out << csv.str();
      return Status::Ok();
    }
    std::ofstream file(csv_file_, std::ios::binary);
    file << csv.str();
    file.close();
    if (!file) {
      return Status::IoError("--csv: cannot write '" + csv_file_ + "'",
                             "check that the directory exists and is "
                             "writable");
    }
    err << "tune: wrote " << table_ << " to " << csv_file_ << "\n";
    return Status::Ok();
  }

  CLI::App* db_app_ = nullptr;
  CLI::App* hardware_ = nullptr;
  CLI::App* measurements_ = nullptr;
  CLI::App* export_ = nullptr;
  std::string db_;
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
