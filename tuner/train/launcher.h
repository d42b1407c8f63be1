// Starting the ranks of a multi-process `tune train` when the user did not
// use mpirun: the command re-runs itself as
//   mpirun -np W --oversubscribe --bind-to none [--allow-run-as-root]
//          <this executable> train <the same flags>
// waits for it and turns its exit status into a Status. mpirun aborts the
// remaining ranks when one exits with an error, so a dead rank never leaves
// the others hanging (Open MPI's default "abort the job on a non-zero exit").
//
// Stop signals: SIGTERM, SIGINT or SIGHUP to the launcher (a supervisor,
// Slurm preemption, Ctrl-C, a closed terminal) is forwarded to every rank;
// the ranks stop together at the next step boundary (engine/stop_signal.h),
// saving a checkpoint when the run has --save, and exit, which ends mpirun.
// A second stop signal, or ranks still running kStopGraceS seconds after
// the first, kills mpirun and the ranks. mpirun runs in its own process
// group (a terminal's Ctrl-C reaches only the launcher) with
// PR_SET_PDEATHSIG = SIGTERM, so even a SIGKILLed launcher leaves nothing
// running: mpirun then ends the ranks itself. The launcher exits 1 with
// one line naming the signal.
//
// The ranks find themselves under MPI through LaunchedUnderMpi()
// (engine/comm/mpi_communicator.h); the environment marker below also tells
// them that `tune train` started them, so a rank that somehow does not see
// MPI's variables refuses to launch again instead of recursing.
#ifndef MESHTUNE_TUNER_TRAIN_LAUNCHER_H_
#define MESHTUNE_TUNER_TRAIN_LAUNCHER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::tuner {

// Set ("1") in the environment of the ranks `tune train` launches.
inline constexpr char kTrainLaunchedEnv[] = "MESHTUNE_TRAIN_LAUNCHED";

// Seconds the ranks get to reach a step boundary (and finish a checkpoint)
// after a stop signal before the launcher kills them: Slurm's default
// KillWait, after which Slurm would kill them anyway.
inline constexpr int kStopGraceS = 30;

// True when kTrainLaunchedEnv is set in this process's environment.
bool LaunchedByTuneTrain();

// This executable's path (/proc/self/exe; "" when unreadable), so child
// processes run the same build as the parent.
std::string SelfExecutable();

// Full path of the first executable `name` on $PATH ("" when none).
std::string FindOnPath(const std::string& name);

// The mpirun argument vector (argv[0] = `mpirun`) that runs `world` copies
// of `exe train <train_args>`; `as_root` adds --allow-run-as-root (Open MPI
// refuses root without it).
std::vector<std::string> MpirunArgv(const std::string& mpirun, int64_t world,
                                    const std::string& exe,
                                    const std::vector<std::string>& train_args,
                                    bool as_root);

// The exit status of a finished mpirun (waitpid's `wait_status`) as a
// Status: OK for exit 0; otherwise "training rank failed (mpirun exit
// status N); see the rank's message above", exit code 2 when mpirun
// returned 2 (a rank rejected its input) and 1 otherwise. A signal is
// reported by number.
Status MpirunExitStatus(int wait_status);

// The launcher's error after a stop signal `signal` ("training stopped by
// SIGTERM; every rank has ended ..."), or after a second one made it kill
// the job (`killed`). Exit code 1.
Status StoppedBySignalStatus(int signal, bool killed);

// Runs `world` ranks of `tune train <train_args>` through mpirun from
// $PATH and waits. Without mpirun: exit 1 with a hint to install
// openmpi-bin. The ranks inherit stdout and stderr (rank 0 prints the
// report) and get OMP_NUM_THREADS = cores / world unless it is set, so W
// ranks do not each start a thread per core.
Status RunRanksUnderMpirun(int64_t world,
                           const std::vector<std::string>& train_args);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_TRAIN_LAUNCHER_H_
