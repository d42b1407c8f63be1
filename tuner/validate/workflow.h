// RunValidation: `tune validate`'s workflow as a function, callable in
// process: search, run the selected candidates for real in interleaved
// rounds, compare predicted with measured step times, learn this machine's
// efficiency factors and record everything in the results database. The
// command (tuner/commands/validate.cc) parses flags, calls it and prints
// the result (tuner/validate/report.h).
#ifndef MESHTUNE_TUNER_VALIDATE_WORKFLOW_H_
#define MESHTUNE_TUNER_VALIDATE_WORKFLOW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "costmodel/estimate.h"
#include "costmodel/fitted_calibration.h"
#include "results/store.h"
#include "search_spaces/status.h"
#include "tuner/inputs/inputs.h"
#include "tuner/validate/analysis.h"
#include "tuner/validate/runner.h"

namespace meshtune::tuner {

// What to validate, parsed and checked by the caller.
struct ValidationRequest {
  InputFlags flags;        // as typed: recorded with the search
  Inputs inputs;           // resolved; cp and ep {1} (the engine runs neither)
  int64_t top = 5;         // analytical best candidates to run
  int64_t extra = 3;       // deliberately different ones
  int64_t spread = 0;      // across the predicted range; 0 (off) or >= 2
  int64_t steps = 8;       // training steps per run, the first 2 warm-up
  int64_t repeats = 3;     // interleaved runs per candidate
  double timeout_s = 600;  // per run
  std::string backend = "cpu";  // engine: cpu or cuda
  // The machine the runs are filed under (LocalHardwareId, or with cuda
  // FileGpuMachine's answer).
  std::string hardware_id;
  bool learn = true;  // refit this machine's efficiency factors
  // Runs one candidate; RunCandidate (a child `tune train`) by default.
  // Tests pass a function that measures without starting processes.
  std::function<CandidateRunResult(const CandidateRunRequest&)> run =
      RunCandidate;
};

// One selected candidate and what its runs measured.
struct ValidatedCandidate {
  SelectedCandidate pick;
  int64_t candidate_id = 0;  // in the recorded search
  costmodel::Estimate estimate;
  std::vector<double> runs_s;   // each run's median step time, in run order
  std::string error;            // the failed run's one line; "" while ok
  double wall_s = 0;            // all its runs, start-up included
  int64_t training_run_id = 0;  // the latest recorded run

  bool ok() const { return error.empty() && !runs_s.empty(); }
  RepeatedRuns measured() const { return SummarizeRuns(runs_s); }
  double measured_s() const { return measured().median_s; }
};

struct ValidationResult {
  int64_t search_id = 0;
  int64_t validation_id = 0;
  std::string calibration;                     // the search's calibration name
  std::vector<ValidatedCandidate> candidates;  // in selection order
  ValidationStats stats;
  std::optional<costmodel::FitResult> fit;  // learned factors, if any
};

// Seconds the validation has left: the mean wall time of the runs so far
// (start-up included) times the runs left. 0 before the first run.
double ValidationEtaSeconds(int64_t runs_done, double wall_done_s,
                            int64_t runs_left);

// Runs the validation against `store` (not null; its path must be one the
// child processes can open). `progress` gets one line per run ("tune:
// validate [i/n] rank R ... s/step (predicted ...), ETA 4m 05s", the ETA
// from ValidationEtaSeconds and left out after the last run). Errors: no
// feasible or no trainable configuration (InvalidArgument), store errors. Every
// candidate failing is not an error here: stats.measured is 0.
StatusOr<ValidationResult> RunValidation(const ValidationRequest& request,
                                         results::Store* store,
                                         std::ostream& progress);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_VALIDATE_WORKFLOW_H_
