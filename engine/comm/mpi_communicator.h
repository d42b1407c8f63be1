// MPI communicator (OpenMPI): the real multi-process transport of the CPU
// engine. This header does not include <mpi.h>; only mpi_communicator.cc
// does (docs/design.md §3). Built when CMake finds MPI
// (MESHTUNE_ENGINE_HAVE_MPI).
#ifndef MESHTUNE_ENGINE_COMM_MPI_COMMUNICATOR_H_
#define MESHTUNE_ENGINE_COMM_MPI_COMMUNICATOR_H_

#include <memory>

#include "engine/comm/communicator.h"
#include "search_spaces/status.h"

namespace meshtune::engine {

// True when this binary was built with MPI support.
bool MpiAvailable();
// True when the process was started by mpirun/srun (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK set), so a world communicator should be made.
bool LaunchedUnderMpi();

// Initializes MPI once (MPI_Init_thread, funneled) and returns the world
// communicator (name "world"). Errors from MPI abort every rank with a
// message naming the failing call and rank (MPI_ERRORS_ARE_FATAL plus our
// own handler), so a dead rank never leaves the others hanging silently.
// A call that waits longer than timeout_s() (communicator.h) prints
// "tune: error: rank R: <call> on group '<g>' timed out after N s: rank P
// did not answer ..." (world ranks) and aborts every rank.
// Unimplemented when built without MPI.
StatusOr<std::unique_ptr<Communicator>> MakeMpiWorld();

// MPI_Finalize if MPI was initialized (idempotent).
void FinalizeMpi();

// Aborts all ranks (MPI_Abort) after printing `message` on stderr; used when
// one rank hits a fatal error (NaN loss, I/O) so the others do not wait.
[[noreturn]] void AbortAllRanks(const std::string& message, int exit_code);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_COMM_MPI_COMMUNICATOR_H_
