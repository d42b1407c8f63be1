// Why `tune profile --backend cpu` cannot measure the collectives on this
// machine. The cpu collectives run in the helper executable
// meshtune_mpi_bench, started with mpirun from the directory of the running
// `tune`; three different things can be missing, and each needs another fix:
// MPI at configure time (install it and reconfigure), the helper binary in a
// tree that has MPI (build that one target), or mpirun at run time (PATH).
#ifndef MESHTUNE_TUNER_MACHINE_MPI_BENCH_NOTE_H_
#define MESHTUNE_TUNER_MACHINE_MPI_BENCH_NOTE_H_

#include <string>

namespace meshtune::tuner {

// What RunMpiBench found; tests fill it in by hand.
struct MpiBenchSetup {
  bool mpi_built = false;  // configure found MPI (engine::MpiAvailable())
  std::string tune_dir;    // directory of the running tune ("" if unknown)
  bool bench_executable = false;        // <tune_dir>/meshtune_mpi_bench runs
  bool tune_dir_is_build_tree = false;  // <tune_dir>/CMakeCache.txt exists
  bool mpirun_on_path = false;
};

// The reason the collectives are skipped, one line without the "# collectives
// skipped: " prefix, or "" when mpirun can start the helper. When MPI was
// found but the helper is missing, the reason names the exact command that
// builds it (the build tree tune runs from, else `build`).
std::string MpiBenchSkipReason(const MpiBenchSetup& setup);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_MACHINE_MPI_BENCH_NOTE_H_
