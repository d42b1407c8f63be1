// The built-in registry of `tune regress` benchmarks and the code that runs
// one (docs/regress.md).
//
// A benchmark is a fixed, short training run of the CPU engine, or of the
// CUDA engine on one GPU (the "cuda-" ones): a model preset, one rank,
// batch and sequence length, warm-up steps, the steps of one timed repeat,
// seed, learning rate, OpenMP thread count and data. Its
// name ends in a version suffix ("-v1"): a definition is never changed in
// place (results and baselines of different definitions cannot be compared);
// a changed benchmark gets a new version. Spec() is the definition as one
// line of text, stored with every result so a mismatch is detected.
//
// Determinism: one thread and a constant learning rate, so the loss at step
// i is the same for any number of repeats, and the data are generated in
// code (not the built-in corpus, whose files differ between Debian releases)
// so losses compare across machines. CUDA benchmarks are deterministic on
// one GPU model (the kernels' reduction orders are fixed), not across GPUs.
#ifndef MESHTUNE_TUNER_REGRESS_BENCHMARKS_H_
#define MESHTUNE_TUNER_REGRESS_BENCHMARKS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "results/store.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

struct RegressBenchmark {
  std::string name;         // e.g. "cpu-gpt-tiny-v1"
  std::string description;  // one line for `tune regress list`
  std::string model;        // model preset (search_spaces/models/)
  int64_t gbs = 0;          // sequences per step (one micro-batch of gbs)
  int64_t seq_length = 0;
  int64_t warmup_steps = 0;      // untimed steps before the repeats
  int64_t steps_per_repeat = 0;  // steps timed together as one repeat
  int64_t default_repeats = 0;   // --repeats default
  uint64_t seed = 0;
  float lr = 0;         // constant (no warm-up, no decay)
  int threads = 1;      // OpenMP threads for the run
  std::string data;     // "synthetic-v1": engine/data/synthetic_dataset.h
  std::string backend;  // "cpu" or "cuda" (one GPU, bf16)

  // "model=gpt-tiny tp=1 pp=1 dp=1 mbs=2 gbs=2 seq=64 warmup=2 steps=3
  // seed=1234 lr=0.001 lr_decay=constant threads=1 data=synthetic-v1";
  // CUDA benchmarks add "backend=cuda" before "data=".
  std::string Spec() const;
  int64_t tokens_per_step() const { return gbs * seq_length; }
};

// `tune regress check`'s default --loss-rtol for CUDA benchmarks. Their
// losses do not repeat bit for bit: the embedding, norm, attention and
// linear backward kernels accumulate with atomics, whose order varies from
// run to run, and bf16 rounding carries the difference into the next
// steps. Loose enough for that, tight enough for a changed kernel or
// initialization (which moves the first steps' losses by percents).
inline constexpr double kCudaLossRtol = 5e-3;

// All benchmarks, in `tune regress list` order.
const std::vector<RegressBenchmark>& RegressBenchmarks();

// The benchmark called `name`; NotFound listing the known names.
StatusOr<const RegressBenchmark*> FindRegressBenchmark(const std::string& name);

// Median of `values` (mean of the middle two for an even count); 0 if empty.
double Median(std::vector<double> values);
// Median absolute deviation from the median (not scaled); 0 if empty.
double MedianAbsoluteDeviation(const std::vector<double>& values);

// Runs `b` with `repeats` timed repeats on this machine: warm-up steps, then
// repeats × steps_per_repeat steps; each repeat's throughput is its tokens
// over the sum of its steps' wall time, and over the process CPU time spent
// in those steps. Sets threads to b.threads for the run (and restores
// them). Progress lines go to `progress`. Fills every field of the result
// but id, hardware_id and provenance. Errors: repeats < 1 (InvalidArgument),
// engine failures as the engine reports them.
StatusOr<results::RegressResult> RunRegressBenchmark(const RegressBenchmark& b,
                                                     int64_t repeats,
                                                     std::ostream& progress);

// This machine's fingerprint as `b` sees it: profiler::CpuFingerprint taken
// with b.threads OpenMP threads, so the id (which names the Eigen thread
// count) does not depend on the caller's OMP_NUM_THREADS. For a CUDA
// benchmark the GPU machine (GpuMachineFingerprint: its GPUs, CPU and
// memory), so results of different GPU machines are never compared as one.
results::HardwareFingerprint RegressHardware(const RegressBenchmark& b);

// Whether `b` can run here: always for a CPU benchmark; for a CUDA one an
// error naming what is missing (the CUDA engine in this build, a device).
// `command` starts the message ("tune regress run").
Status CheckRegressBackend(const RegressBenchmark& b,
                           const std::string& command);

// The planted-slowdown test hook (engine/cpu/linear.cc) as set in the
// environment: its value, or "" when unset.
std::string PlantedSlowdownSetting();

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_REGRESS_BENCHMARKS_H_
