// What `tune train` prints: the start-up block, Megatron-style iteration
// lines, the end-of-run summary, and the --json object.
//
// The iteration line follows Megatron-LM's training_log
// (megatron/training/training.py): the same field names, order and number
// formats (`iteration {:8d}/{:8d}`, `consumed samples: {:12d}`, `elapsed
// time per iteration (ms): {:.1f}`, `learning rate: {:.6E}`, `global batch
// size: {:5d}`, `lm loss: {:.6E}`, `grad norm: {:.3f}`), with the throughput
// named per rank instead of per GPU (CPU ranks) and printed with three
// decimals (a CPU rank runs well under one TFLOP/s), plus tokens per second.
// As in Megatron, the time, loss and throughputs of a line are averages over
// the iterations since the previous line (--log-interval).
#ifndef MESHTUNE_TUNER_TRAIN_REPORT_H_
#define MESHTUNE_TUNER_TRAIN_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/train_config.h"
#include "engine/trainer.h"
#include "tuner/inputs/search_link.h"

namespace meshtune::tuner {

// Iterations left out of the step-time statistics (allocation, first-touch
// page faults and thread start-up make them slow).
inline constexpr int64_t kWarmupIterations = 2;

// One iteration line for the logs of one interval (non-empty, in order;
// the last one names the iteration). With `eta_s`, the line ends with
// Megatron-style " ETA: 4m 05s |" (FormatDuration; not a Megatron field:
// Megatron prints no estimate). No trailing newline.
std::string FormatIterationLine(const std::vector<engine::IterationLog>& logs,
                                int64_t train_iters, int64_t global_batch_size,
                                std::optional<double> eta_s = std::nullopt);

// Seconds left of the run: the mean step time of `run_logs` (every
// iteration this run has logged so far, in order, warm-up included: the
// mean of what was measured, not a guess at steady state) times the
// iterations left to `train_iters`. 0 when `run_logs` is empty.
double EtaSeconds(const std::vector<engine::IterationLog>& run_logs,
                  int64_t train_iters);

// A duration in plain hours, minutes and seconds, rounded to the second:
// "37s", "4m 05s", "2h 03m 09s".
std::string FormatDuration(double seconds);

// What `tune train` prints around a checkpoint save (no newline):
// "saving checkpoint to DIR (iteration N) ..." before it, "saved
// checkpoint of iteration N in 1.2 s" after it.
std::string FormatCheckpointLine(const engine::CheckpointEvent& event);

// Step-time statistics of a run.
struct TrainSummary {
  int64_t iterations = 0;      // logged iterations of this run
  int64_t measured_steps = 0;  // those after the warm-up (all if too few)
  double step_time_median_s = 0;
  double step_time_min_s = 0;
  double step_time_p99_s = 0;  // nearest rank (profiler/stats.h)
  double step_time_cv = 0;     // stddev / mean
  double tokens_per_s = 0;     // gbs·seq / median step time
  double final_loss = 0;       // lm loss of the last iteration
};

// Statistics over `logs` without the first kWarmupIterations (when the run
// has more than that many; otherwise over all of them).
TrainSummary SummarizeRun(const std::vector<engine::IterationLog>& logs,
                          int64_t tokens_per_step);

// The one step-time prediction a run is compared with, and where it comes
// from: the start-up block, the summary and --json all print this one
// number, so that a run never shows two predictions for one config.
//   linked run:   the search candidate's prediction as the search stored
//                 it (the number the run is recorded against and `tune db
//                 runs` compares), for the search's cluster and calibration
//   otherwise:    the cost model evaluated now for this machine (the
//                 `local` preset, or with --backend cuda the device's GPU
//                 preset), with the calibration the database gives it
struct StepTimePrediction {
  std::optional<double> step_time_s;  // nullopt: no prediction
  // What the number is ("search 3 rank 1, candidate 12 in /w/t.db: 2 x
  // local, datasheet calibration"), or why there is none.
  std::string source;
};

// The linked candidate's stored prediction.
StepTimePrediction CandidatePrediction(const StoredCandidate& linked);

// The start-up block's line: "  predicted:   12.5 ms per iteration
// (<source>)" or "  predicted:   n/a (<why>)" (newline-terminated).
std::string FormatPredictionLine(const StepTimePrediction& p);

// "summary: ..." lines (newline-terminated). With a prediction, the last
// one compares it with the measured median: "summary: predicted 12.5 ms per
// iteration (<source>), measured median 10.0 ms: error +25.0 %, measured /
// predicted = 0.80", the error signed as 100·(predicted − measured)/measured
// (the sign of results::PredictedVsMeasured::relative_error: negative =
// predicted too fast).
std::string FormatSummary(const TrainSummary& s,
                          const StepTimePrediction& prediction);

// 100·(predicted − measured)/measured.
double SignedErrorPercent(double predicted_s, double measured_s);

// Per-rank memory table (params, grads, optimizer bytes as MiB), one line
// per rank plus a header, newline-terminated.
std::string FormatMemoryTable(const std::vector<engine::RankMemory>& ranks);

// The --json object: {"model", "config", "iterations": [{"iteration", "lr",
// "loss", "grad_norm", "step_s", "tokens_per_s"}...], "step_time_median_s",
// "step_time_min_s", "step_time_p99_s", "step_time_cv", "tokens_per_s",
// "final_loss", "predicted_step_time_s" (the StepTimePrediction printed;
// null when there is none), "prediction_source" (its source text),
// "search_id", "candidate_id", "predicted_step_s" (the linked search
// candidate's prediction, then equal to predicted_step_time_s; all three
// null when the run is not linked), "memory": [{"rank", "tp_rank", "pp_rank",
// "dp_rank", "num_params", "param_bytes", "grad_bytes",
// "optimizer_bytes"}...]}. "config" has the docs/design.md §5 keys (precision
// "fp32" for the CPU engine, "bf16" for the CUDA one) plus seq_length and
// train_iters; "backend" ("cpu" or "cuda") and "model_flops_per_step"
// (Megatron's formula, the numerator of MFU) follow.
nlohmann::json TrainRunToJson(const engine::TrainConfig& config,
                              const std::vector<engine::IterationLog>& logs,
                              const TrainSummary& summary,
                              const std::vector<engine::RankMemory>& memory,
                              const StepTimePrediction& prediction,
                              const StoredCandidate* linked = nullptr,
                              const std::string& backend = "cpu");

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_TRAIN_REPORT_H_
