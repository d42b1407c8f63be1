// meshtune_mpi_bench: MPI collectives across the ranks mpirun started, in the
// manner of nccl-tests (all_reduce, all_gather, reduce_scatter, all_to_all,
// send_recv; sizes doubling from --min-bytes to --max-bytes). Rank 0 prints
// the `#` header and one row per (op, size), and writes the rows to the
// results store (--db PATH, TUNE_DB, ./tune.db; --no-db to skip).
//
//   mpirun -np 2 --oversubscribe meshtune_mpi_bench --max-bytes 67108864
//
// Timing: every rank brackets each repetition with MPI_Wtime after a barrier;
// the repetition's time is the maximum over ranks (a collective is done when
// its slowest rank is), gathered at rank 0 with MPI_Reduce(MAX).
// Size conventions follow nccl-tests (doc/PERFORMANCE.md): all_reduce and
// all_to_all the per-rank buffer, all_gather the gathered output,
// reduce_scatter the input, send_recv the message each rank sends in a ring.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "profiler/cpu_backend.h"
#include "profiler/report.h"
#include "profiler/stats.h"
#include "profiler/sweep.h"
#include "results/store.h"

namespace {

// Aborts every rank with the failing expression, file:line, hostname and
// MPI's error string: a failed collective leaves nothing to recover.
#define MPI_CHECK(expr)                                                        \
  do {                                                                         \
    int mpi_check_rc = (expr);                                                 \
    if (mpi_check_rc != MPI_SUCCESS) {                                         \
      char mpi_check_msg[MPI_MAX_ERROR_STRING];                                \
      int mpi_check_len = 0;                                                   \
      MPI_Error_string(mpi_check_rc, mpi_check_msg, &mpi_check_len);           \
      char mpi_check_host[256] = "?";                                          \
      gethostname(mpi_check_host, sizeof(mpi_check_host) - 1);                 \
      std::fprintf(stderr, "%s:%d: %s failed on %s: %s\n", __FILE__, __LINE__, \
                   #expr, mpi_check_host, mpi_check_msg);                      \
      MPI_Abort(MPI_COMM_WORLD, 1);                                            \
    }                                                                          \
  } while (0)

namespace profiler = meshtune::profiler;
namespace results = meshtune::results;
using profiler::Collective;

struct Flags {
  double min_bytes = 8;
  double max_bytes = 64.0 * 1024 * 1024;  // CPU cap; --max-bytes raises it
  int warmup = 2;
  int iters = 10;
  std::vector<Collective> ops = meshtune::search_spaces::AllCollectives();
  std::string db;  // "" = TUNE_DB or ./tune.db
  bool no_db = false;
  bool quiet = false;      // no progress on stderr
  bool no_header = false;  // only the collectives line (tune profile)
};

const char kUsage[] =
    "usage: meshtune_mpi_bench [--min-bytes N] [--max-bytes N] [--warmup N] "
    "[--iters N] [--ops a,b] [--quick] [--db PATH | --no-db] [--quiet] "
    "[--no-header]\n";

// Parses argv; returns false (after printing on rank 0) on bad input.
bool ParseFlags(int argc, char** argv, int rank, Flags* f) {
  auto fail = [&](const std::string& msg) {
    if (rank == 0) {
      std::cerr << "meshtune_mpi_bench: error: " << msg << "\n" << kUsage;
    }
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--quick") {
      f->max_bytes = 64.0 * 1024;
      f->iters = 5;
      f->warmup = 1;
    } else if (a == "--no-db") {
      f->no_db = true;
    } else if (a == "--quiet") {
      f->quiet = true;
    } else if (a == "--no-header") {
      f->no_header = true;
    } else if (a == "--db" && value(&v)) {
      f->db = v;
    } else if ((a == "--min-bytes" || a == "--max-bytes") && value(&v)) {
      double b = std::atof(v.c_str());
      if (b < 1) return fail(a + " must be a byte count >= 1, got '" + v + "'");
      (a == "--min-bytes" ? f->min_bytes : f->max_bytes) = b;
    } else if ((a == "--warmup" || a == "--iters") && value(&v)) {
      int n = std::atoi(v.c_str());
      if (n < (a == "--iters" ? 1 : 0)) {
        return fail(a + " must be a count, got '" + v + "'");
      }
      (a == "--warmup" ? f->warmup : f->iters) = n;
    } else if (a == "--ops" && value(&v)) {
      f->ops.clear();
      std::stringstream ss(v);
      std::string name;
      while (std::getline(ss, name, ',')) {
        auto op = meshtune::search_spaces::ParseCollective(name);
        if (!op.ok()) return fail(op.status().message());
        f->ops.push_back(*op);
      }
    } else {
      return fail("unknown or incomplete argument '" + a + "'");
    }
  }
  if (f->min_bytes > f->max_bytes) {
    return fail("--min-bytes is larger than --max-bytes");
  }
  return true;
}

// Bytes rounded down to whole fp32 elements, divisible among `ranks` where
// the op splits its buffer; 0 if the size is too small to run.
double UsableBytes(Collective op, double bytes, int ranks) {
  int64_t elems = static_cast<int64_t>(bytes) / 4;
  if (op == Collective::kAllGather || op == Collective::kReduceScatter ||
      op == Collective::kAllToAll) {
    elems -= elems % ranks;
  }
  return static_cast<double>(elems) * 4;
}

// Runs one repetition of `op` on `bytes`; returns this rank's seconds.
double RunOnce(Collective op, double bytes, int rank, int ranks,
               std::vector<float>& send, std::vector<float>& recv) {
  const int count = static_cast<int>(bytes / 4);
  const int chunk = count / ranks;
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  double t0 = MPI_Wtime();
  switch (op) {
    case Collective::kAllReduce:
      MPI_CHECK(MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT,
                              MPI_SUM, MPI_COMM_WORLD));
      break;
    case Collective::kAllGather:
      MPI_CHECK(MPI_Allgather(send.data(), chunk, MPI_FLOAT, recv.data(), chunk,
                              MPI_FLOAT, MPI_COMM_WORLD));
      break;
    case Collective::kReduceScatter:
      MPI_CHECK(MPI_Reduce_scatter_block(send.data(), recv.data(), chunk,
                                         MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
      break;
    case Collective::kAllToAll:
      MPI_CHECK(MPI_Alltoall(send.data(), chunk, MPI_FLOAT, recv.data(), chunk,
                             MPI_FLOAT, MPI_COMM_WORLD));
      break;
    case Collective::kSendRecv:
      MPI_CHECK(MPI_Sendrecv(send.data(), count, MPI_FLOAT, (rank + 1) % ranks,
                             0, recv.data(), count, MPI_FLOAT,
                             (rank + ranks - 1) % ranks, 0, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE));
      break;
  }
  return MPI_Wtime() - t0;
}

// Checks an all-reduce of (rank + 1) sums to n(n+1)/2 on every rank.
bool AllReduceIsCorrect(int rank, int ranks) {
  std::vector<float> send(1024, static_cast<float>(rank + 1)), recv(1024, 0);
  MPI_CHECK(MPI_Allreduce(send.data(), recv.data(), 1024, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD));
  const float want = 0.5f * ranks * (ranks + 1);
  int ok = 1;
  for (float x : recv) ok &= (x == want);
  int all_ok = 0;
  MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all_ok == 1;
}

int Run(int argc, char** argv) {
  int rank = 0, ranks = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  Flags flags;
  if (!ParseFlags(argc, argv, rank, &flags)) return 2;

  // Ranks per node from a shared-memory split; nodes assumes equal counts.
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                                MPI_INFO_NULL, &local));
  int local_ranks = 1;
  MPI_CHECK(MPI_Comm_size(local, &local_ranks));
  MPI_CHECK(MPI_Comm_free(&local));
  const int nodes = ranks / local_ranks;

  if (!AllReduceIsCorrect(rank, ranks)) {
    if (rank == 0)
      std::cerr << "meshtune_mpi_bench: all_reduce gave wrong sums\n";
    return 1;
  }

  results::HardwareFingerprint hw =
      profiler::CpuFingerprint(profiler::ReadCpuInfo());
  std::unique_ptr<results::Store> store;
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string mpi_version(version, len);
    mpi_version = mpi_version.substr(0, mpi_version.find_first_of(",\n"));
    const std::string note =
        "collectives: " + std::to_string(ranks) + " MPI ranks on " +
        std::to_string(nodes) + " node(s), " + mpi_version +
        ", timer MPI_Wtime, warmup " + std::to_string(flags.warmup) +
        ", iters " + std::to_string(flags.iters) +
        "\nall_reduce correctness check: ok";
    if (flags.no_header) {
      profiler::PrintHeader(std::cout, profiler::GetBuildInfo(), hw, note,
                            /*extra_only=*/true);
    } else {
      profiler::PrintHeader(std::cout, profiler::GetBuildInfo(), hw, note);
    }
    profiler::PrintCollectiveTableHeader(std::cout);
    if (!flags.no_db) {
      std::string path = flags.db;
      if (path.empty()) {
        const char* env = std::getenv("TUNE_DB");
        path = env != nullptr && *env != '\0' ? env : "tune.db";
      }
      auto opened = results::Store::Open(path);
      meshtune::Status st = opened.status();
      if (st.ok()) {
        store = std::move(opened).value();
        st = store->PutHardware(hw, profiler::BuildProvenance());
      }
      if (!st.ok()) {
        std::cerr << "meshtune_mpi_bench: error: " << st.message() << "\n";
        if (!st.hint().empty()) std::cerr << "hint: " << st.hint() << "\n";
        MPI_Abort(MPI_COMM_WORLD, st.ExitCode());
      }
    }
  }

  const std::vector<double> sizes =
      profiler::DoublingSizes(flags.min_bytes, flags.max_bytes);
  const size_t max_elems = static_cast<size_t>(flags.max_bytes / 4) + 1;
  std::vector<float> send(max_elems, static_cast<float>(rank + 1));
  std::vector<float> recv(max_elems, 0);
  std::vector<results::Measurement> rows;
  int64_t done = 0;
  const int64_t total = static_cast<int64_t>(sizes.size() * flags.ops.size());
  for (Collective op : flags.ops) {
    for (double requested : sizes) {
      ++done;
      const double bytes = UsableBytes(op, requested, ranks);
      if (bytes <= 0) continue;
      // Fewer repetitions past 16 MiB keep the sweep within minutes on CPU.
      const int iters =
          bytes >= 16.0 * 1024 * 1024 ? std::min(flags.iters, 5) : flags.iters;
      for (int i = 0; i < flags.warmup; ++i) {
        RunOnce(op, bytes, rank, ranks, send, recv);
      }
      std::vector<double> times(iters), max_times(iters);
      for (int i = 0; i < iters; ++i) {
        times[i] = RunOnce(op, bytes, rank, ranks, send, recv);
      }
      MPI_CHECK(MPI_Reduce(times.data(), max_times.data(), iters, MPI_DOUBLE,
                           MPI_MAX, 0, MPI_COMM_WORLD));
      if (rank != 0) continue;
      profiler::TimingStats stats = profiler::Summarize(max_times);
      profiler::PrintCollectiveRow(std::cout, op, bytes, ranks, stats);
      rows.push_back(profiler::CollectiveMeasurement(
          op, bytes, ranks, nodes, stats, "mpi_wtime", hw.id));
      if (!flags.quiet) {
        profiler::PrintProgress(
            std::cerr, done, total,
            std::string(meshtune::search_spaces::CollectiveName(op)) + " " +
                std::to_string(int64_t(bytes)));
      }
    }
  }
  if (rank == 0 && !flags.quiet && done < total) std::cerr << "\n";
  if (rank == 0 && store != nullptr) {
    meshtune::Status st =
        store->PutMeasurements(rows, profiler::BuildProvenance());
    if (!st.ok()) {
      std::cerr << "meshtune_mpi_bench: error: " << st.message() << "\n";
      return st.ExitCode();
    }
    std::cout << "# stored " << rows.size() << " rows in " << store->path()
              << " (hardware " << hw.id << ")\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = Run(argc, argv);
  MPI_Finalize();
  return rc;
}
