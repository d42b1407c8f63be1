// `tune profile`: microbenchmarks of this machine into the results store
// (issue 4). GEMMs (at a model's transformer shapes per tensor-parallel size,
// or a standard sweep) and a STREAM triad run in-process on the chosen
// backend; collectives run on the backend when it can form groups (cuda), and
// for the cpu backend in meshtune_mpi_bench started with mpirun.
// Output follows nccl-tests: a `#` header, then fixed-width tables.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/mpi_communicator.h"
#include "profiler/backend.h"
#include "profiler/engine_ops.h"
#include "profiler/report.h"
#include "profiler/stats.h"
#include "profiler/sweep.h"
#include "results/store.h"
#include "search_spaces/presets/presets.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/io/terminal.h"
#include "tuner/machine/mpi_bench_note.h"
#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

// Discards what is written (progress when stderr is not a terminal).
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The directory of the running executable ("" if unknown).
std::string ExecutableDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool IsExecutable(const std::string& path) {
  return access(path.c_str(), X_OK) == 0;
}

// `name` on $PATH, or "".
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && IsExecutable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

class ProfileCommand : public Command {
 public:
  explicit ProfileCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "profile", "microbenchmarks of this machine into the results store");
    sub->add_option("--backend", backend_, "cpu (always built) or cuda")
        ->capture_default_str();
    sub->add_flag("--quick", quick_,
                  "small shapes and sizes: seconds, for tests and smoke runs");
    sub->add_option("--model", model_,
                    "measure this model's transformer GEMM shapes and the "
                    "engine's attention and elementwise kernels (preset or "
                    "YAML); default: a standard GEMM sweep");
    sub->add_option("--tp", tp_,
                    "tensor-parallel sizes for --model shapes, e.g. 1,2,4")
        ->capture_default_str();
    sub->add_option("--tokens", tokens_,
                    "tokens per micro-batch (rows of the GEMMs) for --model, "
                    "one or a list, e.g. 128,1024 to cover micro-batches 1 "
                    "to 8 of sequence 128; default: the model's sequence "
                    "length")
        ->type_name("T[,T...]");
    sub->add_option("--dtype", dtypes_, "GEMM dtypes, e.g. fp32,bf16")
        ->capture_default_str();
    sub->add_option("--warmup", warmup_, "untimed runs before timing")
        ->capture_default_str();
    sub->add_option("--reps", reps_, "timed repetitions per measurement")
        ->capture_default_str();
    sub->add_option("--mpi-ranks", mpi_ranks_,
                    "ranks for the cpu collectives under mpirun (0 skips them)")
        ->capture_default_str();
    sub->add_option("--max-bytes", max_bytes_,
                    "largest collective message in bytes (default 64 MiB on "
                    "cpu, 64 KiB with --quick)");
    AddDbOption(sub, &db_, "storing the measurements");
    sub->add_flag("--no-db", no_db_, "print only; store nothing");
    sub->footer(
        "Examples:\n  tune profile --backend cpu\n"
        "  tune profile --backend cpu --quick --db /tmp/t.db\n"
        "  tune profile --backend cpu --model gpt3-1.3b --tp 1,2 --dtype fp32\n"
        "Rows go to the results store with the machine's fingerprint; "
        "'tune db measurements' lists them.");
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    StatusOr<std::unique_ptr<profiler::ProfilerBackend>> made =
        profiler::MakeBackend(backend_);
    if (!made.ok()) return made.status();
    std::unique_ptr<profiler::ProfilerBackend> backend =
        std::move(made).value();
    if (warmup_ < 0 || reps_ < 1) {
      return Status::InvalidArgument("--warmup must be >= 0 and --reps >= 1",
                                     "e.g. --warmup 2 --reps 10");
    }
    std::vector<profiler::DType> dtypes;
    MESHTUNE_ASSIGN_OR_RETURN(dtypes, ParseDtypes());
    ShapePlan plan;
    MESHTUNE_ASSIGN_OR_RETURN(plan, PlanShapes());

    StatusOr<results::HardwareFingerprint> fp = backend->Fingerprint();
    if (!fp.ok()) return fp.status();
    results::HardwareFingerprint hw = *fp;
    if (hw.id.empty()) hw.id = results::ComputeHardwareId(hw);

    std::unique_ptr<results::Store> store;
    const std::string db_path = ResolveDbPath(db_);
    if (!no_db_) {
      StatusOr<std::unique_ptr<results::Store>> opened =
          results::Store::Open(db_path);
      if (!opened.ok()) return opened.status();
      store = std::move(opened).value();
      MESHTUNE_RETURN_IF_ERROR(
          store->PutHardware(hw, profiler::BuildProvenance()));
    }

    NullBuffer null_buffer;
    std::ostream null_stream(&null_buffer);
    // Progress only on a terminal. There stdout and stderr share the
    // screen: every row first erases the "\r  [i/n] ..." line in front of
    // it (tuner/io/terminal.h), or the two would be glued together.
    ProgressAndRows screen(
        out, isatty(STDERR_FILENO) && &err == &std::cerr ? err : null_stream);
    std::ostream& rows_out = screen.out();
    std::ostream& progress = screen.progress();
    profiler::SweepOptions options;
    options.warmup = warmup_;
    options.reps = reps_;

    profiler::PrintHeader(rows_out, profiler::GetBuildInfo(), hw,
                          "backend " + backend->Name() + ", timer per row, " +
                              "warmup " + std::to_string(warmup_) + ", reps " +
                              std::to_string(reps_) + "\n" + plan.note);
    std::vector<results::Measurement> rows;
    MESHTUNE_ASSIGN_OR_RETURN(
        rows, MeasureKernels(*backend, dtypes, plan, hw.id, options, rows_out,
                             progress));
    if (store != nullptr) {
      MESHTUNE_RETURN_IF_ERROR(
          store->PutMeasurements(rows, profiler::BuildProvenance()));
    }
    int64_t stored = store != nullptr ? static_cast<int64_t>(rows.size()) : 0;

    rows_out << "#\n";
    if (backend->MaxGroupSize() > 1) {
      StatusOr<int64_t> n = RunBackendCollectives(*backend, hw, store.get(),
                                                  options, rows_out, progress);
      if (!n.ok()) return n.status();
      stored += *n;
    } else if (backend->Name() == "cpu") {
      rows_out.flush();
      MESHTUNE_RETURN_IF_ERROR(RunMpiBench(db_path, rows_out, err));
    }
    if (store != nullptr) {
      rows_out << "# stored " << stored << " rows from this process in "
               << store->path() << " (hardware " << hw.id << ")\n";
    }
    return Status::Ok();
  }

 private:
  // What the GEMM sweep measures: the standard shapes, or with --model the
  // model's per-tp-rank shapes (and the engine's own kernels) at each token
  // count; `note` describes it for the header.
  struct ShapePlan {
    std::vector<profiler::GemmShape> shapes;
    std::vector<profiler::EngineOpCase> engine_ops;  // --model only
    std::string note = "gemm shapes: standard sweep";
  };

  // --dtype as a list (default: the backend's training precision).
  StatusOr<std::vector<profiler::DType>> ParseDtypes() const {
    std::vector<profiler::DType> dtypes;
    const std::string list = dtypes_.empty() ? DefaultDtypes() : dtypes_;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      StatusOr<profiler::DType> d =
          profiler::ParseDType(list.substr(start, end - start));
      if (!d.ok()) {
        return Status::InvalidArgument("--dtype: " + d.status().message(),
                                       d.status().hint());
      }
      dtypes.push_back(*d);
      start = end + 1;
    }
    return dtypes;
  }

  StatusOr<ShapePlan> PlanShapes() const {
    ShapePlan plan;
    if (model_.empty()) {
      plan.shapes = profiler::StandardGemmShapes(quick_);
      return plan;
    }
    StatusOr<search_spaces::ModelSpec> model =
        search_spaces::ResolveModel(model_);
    if (!model.ok()) return model.status();
    StatusOr<std::vector<int64_t>> tps = ParseIntList(tp_, "--tp");
    if (!tps.ok()) return tps.status();
    std::vector<int64_t> token_counts;
    if (!tokens_.empty()) {
      MESHTUNE_ASSIGN_OR_RETURN(token_counts,
                                ParseIntList(tokens_, "--tokens"));
    } else if (model->seq_length >= 1) {
      token_counts = {model->seq_length};
    } else {
      return Status::InvalidArgument(
          "--tokens is needed: model '" + model_ + "' has no sequence length",
          "pass --tokens, e.g. --tokens 2048");
    }
    // Several token counts: the micro-batch sizes a search will price
    // (mbs·seq rows) are measured, instead of extrapolated from one.
    const bool several = token_counts.size() > 1;
    std::string tokens_note;
    for (int64_t tokens : token_counts) {
      tokens_note += (tokens_note.empty() ? "" : ",") + std::to_string(tokens);
      for (int64_t tp : *tps) {
        const std::string prefix =
            "tp" + std::to_string(tp) +
            (several ? ".t" + std::to_string(tokens) : "") + ".";
        for (profiler::GemmShape s :
             profiler::TransformerGemmShapes(*model, tp, tokens)) {
          s.name = prefix + s.name;
          plan.shapes.push_back(s);
        }
        for (const profiler::EngineOpCase& c :
             profiler::TransformerEngineOps(*model, tp, tokens)) {
          plan.engine_ops.push_back(c);
        }
      }
    }
    plan.note = "gemm shapes: " + model->name + " per tp rank, tp " + tp_ +
                ", " + tokens_note + " tokens";
    return plan;
  }

  // The GEMM sweep for each dtype, the engine's kernels (--model) and the
  // STREAM sweep, printed as they run; the rows to store.
  StatusOr<std::vector<results::Measurement>> MeasureKernels(
      profiler::ProfilerBackend& backend,
      const std::vector<profiler::DType>& dtypes, const ShapePlan& plan,
      const std::string& hardware_id, const profiler::SweepOptions& options,
      std::ostream& out, std::ostream& progress) const {
    std::vector<results::Measurement> rows;
    profiler::PrintGemmTableHeader(out);
    for (profiler::DType dtype : dtypes) {
      auto gemm = profiler::RunGemmSweep(backend, plan.shapes, dtype, options,
                                         hardware_id, out, progress);
      if (!gemm.ok()) return gemm.status();
      rows.insert(rows.end(), gemm->begin(), gemm->end());
    }
    if (!plan.engine_ops.empty()) {
      // The engine's own attention and elementwise kernels at the model's
      // shapes (profiler/engine_ops.h).
      out << "#\n";
      profiler::PrintEngineOpTableHeader(out);
      auto kernels = profiler::RunEngineOpSweep(
          backend, plan.engine_ops, backend.Name() == "cpu" ? "fp32" : "bf16",
          warmup_, reps_, hardware_id, out, progress);
      if (kernels.ok()) {
        rows.insert(rows.end(), kernels->begin(), kernels->end());
      } else if (kernels.status().code() == Status::Code::kUnimplemented) {
        // A backend without the engine's kernels keeps its GEMM and stream
        // rows; the calibration then uses the datasheet for these.
        out << "# engine kernels skipped: " << kernels.status().message()
            << "\n";
      } else {
        return kernels.status();
      }
    }
    out << "#\n";
    profiler::PrintStreamTableHeader(out);
    auto stream =
        profiler::RunStreamSweep(backend, profiler::StandardStreamSizes(quick_),
                                 options, hardware_id, out, progress);
    if (!stream.ok()) return stream.status();
    rows.insert(rows.end(), stream->begin(), stream->end());
    return rows;
  }

  std::string DefaultDtypes() const {
    return backend_ == "cpu" ? "fp32" : "bf16";
  }

  double MaxBytes() const {
    if (max_bytes_ > 0) return max_bytes_;
    return quick_ ? 64.0 * 1024 : 64.0 * 1024 * 1024;
  }

  // Collectives inside this process (cuda): group sizes 2, 4, .. up to the
  // local device count, sizes 8 B .. MaxBytes().
  StatusOr<int64_t> RunBackendCollectives(
      profiler::ProfilerBackend& backend,
      const results::HardwareFingerprint& hw, results::Store* store,
      const profiler::SweepOptions& options, std::ostream& out,
      std::ostream& progress) {
    profiler::PrintCollectiveTableHeader(out);
    std::vector<results::Measurement> rows;
    const std::vector<double> sizes = profiler::DoublingSizes(8, MaxBytes());
    for (int64_t group = 2; group <= backend.MaxGroupSize(); group *= 2) {
      int64_t i = 0;
      const int64_t total = static_cast<int64_t>(
          sizes.size() * search_spaces::AllCollectives().size());
      for (profiler::Collective op : search_spaces::AllCollectives()) {
        for (double bytes : sizes) {
          profiler::PrintProgress(
              progress, ++i, total,
              std::string(search_spaces::CollectiveName(op)) + " x" +
                  std::to_string(group));
          StatusOr<profiler::Sample> s = backend.TimeCollective(
              op, bytes, group, options.warmup, options.reps);
          if (!s.ok()) return s.status();
          profiler::TimingStats stats = profiler::Summarize(s->times_s);
          profiler::PrintCollectiveRow(out, op, bytes, group, stats);
          rows.push_back(profiler::CollectiveMeasurement(
              op, bytes, group, 1, stats, s->timer, hw.id));
        }
      }
    }
    if (store == nullptr) return int64_t{0};
    MESHTUNE_RETURN_IF_ERROR(
        store->PutMeasurements(rows, profiler::BuildProvenance()));
    return static_cast<int64_t>(rows.size());
  }

  // The cpu collectives: meshtune_mpi_bench (next to this executable) under
  // mpirun. Missing either is a note, not an error: GEMM and stream rows
  // are useful alone.
  Status RunMpiBench(const std::string& db_path, std::ostream& out,
                     std::ostream& err) {
    if (mpi_ranks_ == 0) {
      out << "# collectives skipped (--mpi-ranks 0)\n";
      return Status::Ok();
    }
    if (mpi_ranks_ < 2) {
      return Status::InvalidArgument(
          "--mpi-ranks must be 0 (skip) or at least 2, got " +
              std::to_string(mpi_ranks_),
          "e.g. --mpi-ranks 2");
    }
    MpiBenchSetup setup;
    setup.mpi_built = engine::MpiAvailable();
    setup.tune_dir = ExecutableDir();
    const std::string bench = setup.tune_dir + "/meshtune_mpi_bench";
    const std::string mpirun = FindOnPath("mpirun");
    setup.bench_executable = IsExecutable(bench);
    setup.tune_dir_is_build_tree =
        !setup.tune_dir.empty() &&
        access((setup.tune_dir + "/CMakeCache.txt").c_str(), F_OK) == 0;
    setup.mpirun_on_path = !mpirun.empty();
    const std::string skip_reason = MpiBenchSkipReason(setup);
    if (!skip_reason.empty()) {
      out << "# collectives skipped: " << skip_reason << "\n";
      return Status::Ok();
    }
    std::string cmd = ShellQuote(mpirun) + " -np " +
                      std::to_string(mpi_ranks_) + " --oversubscribe";
    if (geteuid() == 0) cmd += " --allow-run-as-root";
    cmd += " " + ShellQuote(bench) + " --no-header --quiet --max-bytes " +
           std::to_string(static_cast<int64_t>(MaxBytes()));
    if (quick_) cmd += " --iters 5 --warmup 1";
    cmd += no_db_ ? " --no-db" : " --db " + ShellQuote(db_path);
    cmd += " 2>&1";
    err << "tune: running " << cmd << "\n";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) {
      return Status::IoError("cannot start mpirun: " + cmd,
                             "check that OpenMPI is installed");
    }
    char line[1024];
    while (std::fgets(line, sizeof(line), pipe) != nullptr) {
      out << line;
      out.flush();
    }
    int rc = pclose(pipe);
    if (rc != 0) {
      return Status::IoError(
          "meshtune_mpi_bench failed (status " + std::to_string(rc) +
              "): " + cmd,
          "run that command by hand to see the MPI error; --mpi-ranks 0 "
          "skips collectives");
    }
    return Status::Ok();
  }

  std::string backend_ = "cpu";
  bool quick_ = false;
  std::string model_;
  std::string tp_ = "1";
  std::string tokens_;  // list; empty: the model's sequence length
  std::string dtypes_;
  int warmup_ = 2;
  int reps_ = 10;
  int mpi_ranks_ = 2;
  double max_bytes_ = 0;
  std::string db_;
  bool no_db_ = false;
};

}  // namespace

std::unique_ptr<Command> AddProfileCommand(CLI::App* app) {
  return std::make_unique<ProfileCommand>(app);
}

}  // namespace meshtune::tuner
