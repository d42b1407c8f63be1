// Stopping a run cleanly when a supervisor asks: Slurm preemption and
// `scancel` send SIGTERM, a terminal sends SIGINT (Ctrl-C) or SIGHUP, and
// mpirun turns all three into SIGTERM for every rank. A handler only
// records the signal; the trainer checks it once per step, all ranks agree
// on it (trainer.cc folds it into the per-step loss all-reduce, so every
// rank stops after the same iteration), saves a checkpoint when the run
// has --save, and returns a Status naming the signal. A checkpoint save in
// progress therefore always finishes: the signal is not looked at during
// it.
#ifndef MESHTUNE_ENGINE_STOP_SIGNAL_H_
#define MESHTUNE_ENGINE_STOP_SIGNAL_H_

#include <cstdint>
#include <string>

#include "search_spaces/status.h"

namespace meshtune::engine {

// Installs handlers for SIGTERM, SIGINT and SIGHUP (those not ignored, so
// nohup keeps working) that record the first signal. With `repeat_kills`, a
// second one takes its default action (an interactive user who presses Ctrl-C
// twice wants out now); without, it is ignored (a rank under mpirun or srun may
// get the same SIGTERM twice, from the launcher and from Slurm, and must still
// stop at a step boundary).
void InstallStopSignalHandlers(bool repeat_kills);

// The signal that asked this process to stop (0 = none).
int StopSignal();

// Records `signal` as if it had arrived (the trainer marks every rank once
// they agreed to stop; tests). The first recorded signal is kept.
void RequestStop(int signal);

// Forgets a recorded signal and a stop (tests).
void ClearStopRequest();

// Set by the trainer on every rank once the ranks agreed to stop at a step
// boundary: the run ends with an error Status, but every rank ends it the
// same way, so none needs to abort the others.
void MarkStoppedAtStepBoundary();
bool StoppedAtStepBoundary();

// What a trainer (CPU or CUDA) returns once the ranks agreed to stop after
// `iteration` of `train_iters` (its checkpoint, if the run has a `save_dir`,
// already saved): marks this rank as stopped (MarkStoppedAtStepBoundary),
// so a rank whose own signal had not arrived also knows how it ends, and
// names the signal, the iteration and the checkpoint.
Status StopAtStepBoundary(int64_t iteration, int64_t train_iters,
                          const std::string& save_dir);

// "SIGTERM", "SIGINT", "SIGHUP", else "signal N".
std::string SignalName(int signal);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_STOP_SIGNAL_H_
