#include "tuner/machine/mpi_bench_note.h"

namespace meshtune::tuner {

std::string MpiBenchSkipReason(const MpiBenchSetup& setup) {
  // Checked in the order a user fixes them: without MPI at configure time
  // neither the helper nor mpirun would help.
  if (!setup.mpi_built) {
    return "meshtune_mpi_bench was not built (configure found no MPI; "
           "install libopenmpi-dev and reconfigure)";
  }
  if (!setup.bench_executable) {
    const std::string dir = setup.tune_dir.empty() ? "." : setup.tune_dir;
    // The helper lands next to tune (RUNTIME_OUTPUT_DIRECTORY), so in a
    // build tree the command below puts it exactly where it is looked for.
    const std::string build_dir =
        setup.tune_dir_is_build_tree ? setup.tune_dir : "build";
    return "the MPI helper meshtune_mpi_bench is missing from " + dir +
           " (this tune was built with MPI); build it with `cmake --build " +
           build_dir + " --target meshtune_mpi_bench`";
  }
  if (!setup.mpirun_on_path) return "mpirun is not on PATH";
  return "";
}

}  // namespace meshtune::tuner
