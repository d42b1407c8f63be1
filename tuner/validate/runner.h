// Running one candidate of a recorded search for real, for `tune validate`:
// a child process
//   <this executable> train --from-search ID --rank R --steps S --db DB
//                     --nproc W --json [--backend cuda --gpu PRESET]
// so a run that crashes, is killed (the kernel's out-of-memory killer sends
// SIGKILL) or hangs past its time limit fails alone: the child runs in its
// own process group, which is killed as a whole on timeout, and the
// validation goes on with the next candidate. With the CUDA backend `tune
// train` runs one rank per GPU (data parallel over W GPUs). `tune train` itself
// records the measured run in the database, linked to the candidate.
//
// Test hook: MESHTUNE_VALIDATE_KILL_RANK=R in validate's environment kills
// the run of search rank R with SIGKILL as soon as it starts, exactly what
// the out-of-memory killer does to a rank (tests/tuner/validate_*_test.cc).
#ifndef MESHTUNE_TUNER_VALIDATE_RUNNER_H_
#define MESHTUNE_TUNER_VALIDATE_RUNNER_H_

#include <cstdint>
#include <string>

namespace meshtune::tuner {

inline constexpr char kValidateKillRankEnv[] = "MESHTUNE_VALIDATE_KILL_RANK";

struct CandidateRunRequest {
  int64_t search_id = 0;
  int64_t rank = 0;   // 1-based rank in the search
  int64_t world = 1;  // ranks (tp·pp·dp); > 1 launches through mpirun
  int64_t steps = 0;
  std::string db;               // results database path (absolute)
  double timeout_s = 600;       // wall-clock limit of the whole run
  std::string backend = "cpu";  // tune train --backend: cpu or cuda
  std::string gpu;              // with cuda: the GPU preset (tune train --gpu)
};

struct CandidateRunResult {
  bool ok = false;
  // One line when !ok: the child's "tune: error: ..." line when it printed
  // one, else how it ended ("killed by signal 9 (Killed): out of memory?",
  // "timed out after 600 s", "exit status 1").
  std::string error;
  double step_time_median_s = 0;  // measured (after the warm-up steps)
  double final_loss = 0;
  double wall_s = 0;  // the child's whole run, including start-up
};

CandidateRunResult RunCandidate(const CandidateRunRequest& request);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_VALIDATE_RUNNER_H_
