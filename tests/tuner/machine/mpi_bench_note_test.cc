// MpiBenchSkipReason: each thing that keeps `tune profile --backend cpu` from
// measuring the collectives gets its own note and its own fix. Before, a
// tune built with MPI but without the helper binary (`--target tune` alone)
// said "configure found no MPI", which sent users to reinstall MPI.
#include "tuner/machine/mpi_bench_note.h"

#include <gtest/gtest.h>

namespace meshtune::tuner {
namespace {

MpiBenchSetup Runnable() {
  MpiBenchSetup setup;
  setup.mpi_built = true;
  setup.tune_dir = "/src/meshtune/build";
  setup.bench_executable = true;
  setup.tune_dir_is_build_tree = true;
  setup.mpirun_on_path = true;
  return setup;
}

TEST(MpiBenchSkipReason, NothingMissingRunsTheCollectives) {
  EXPECT_EQ(MpiBenchSkipReason(Runnable()), "");
}

TEST(MpiBenchSkipReason, MissingHelperInABuildTreeNamesItsBuildCommand) {
  MpiBenchSetup setup = Runnable();
  setup.bench_executable = false;
  EXPECT_EQ(MpiBenchSkipReason(setup),
            "the MPI helper meshtune_mpi_bench is missing from "
            "/src/meshtune/build (this tune was built with MPI); build it "
            "with `cmake --build /src/meshtune/build --target "
            "meshtune_mpi_bench`");
  // Also without mpirun: the helper is the first thing to fix.
  setup.mpirun_on_path = false;
  EXPECT_NE(MpiBenchSkipReason(setup).find("--target meshtune_mpi_bench"),
            std::string::npos);
}

TEST(MpiBenchSkipReason, MissingHelperOutsideABuildTreeNamesTheReadmeBuild) {
  MpiBenchSetup setup = Runnable();
  setup.tune_dir = "/usr/local/bin";
  setup.tune_dir_is_build_tree = false;
  setup.bench_executable = false;
  EXPECT_EQ(MpiBenchSkipReason(setup),
            "the MPI helper meshtune_mpi_bench is missing from /usr/local/bin "
            "(this tune was built with MPI); build it with `cmake --build "
            "build --target meshtune_mpi_bench`");
}

TEST(MpiBenchSkipReason, NoMpiAtConfigureTimeSaysSo) {
  MpiBenchSetup setup = Runnable();
  setup.mpi_built = false;
  setup.bench_executable = false;
  setup.mpirun_on_path = false;
  EXPECT_EQ(MpiBenchSkipReason(setup),
            "meshtune_mpi_bench was not built (configure found no MPI; "
            "install libopenmpi-dev and reconfigure)");
}

TEST(MpiBenchSkipReason, NoMpirunAtRunTime) {
  MpiBenchSetup setup = Runnable();
  setup.mpirun_on_path = false;
  EXPECT_EQ(MpiBenchSkipReason(setup), "mpirun is not on PATH");
}

}  // namespace
}  // namespace meshtune::tuner
