#include "tuner/regress/benchmarks.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "costmodel/model_stats.h"
#include "engine/backends/registry.h"
#include "engine/comm/local_communicator.h"
#include "engine/data/synthetic_dataset.h"
#include "engine/trainer.h"
#include "profiler/cpu_backend.h"
#include "search_spaces/presets/presets.h"
#include "tuner/machine/calibration_source.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace meshtune::tuner {
namespace {

// Sets the OpenMP thread count for its lifetime and restores the previous
// one, so an in-process caller keeps its own setting.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) {
#ifdef _OPENMP
    previous_ = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
  }
  ~ScopedThreads() {
#ifdef _OPENMP
    omp_set_num_threads(previous_);
#endif
  }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_ = 1;
};

// CPU seconds used by this process so far (all threads): unlike wall time
// it does not grow while other processes hold the cores, which is what
// makes the gate usable on shared CI machines.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string FormatFloat(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

std::string RegressBenchmark::Spec() const {
  return "model=" + model + " tp=1 pp=1 dp=1 mbs=" + std::to_string(gbs) +
         " gbs=" + std::to_string(gbs) + " seq=" + std::to_string(seq_length) +
         " warmup=" + std::to_string(warmup_steps) +
         " steps=" + std::to_string(steps_per_repeat) +
         " seed=" + std::to_string(seed) + " lr=" + FormatFloat(lr) +
         " lr_decay=constant threads=" + std::to_string(threads) +
         (backend == "cuda" ? " backend=cuda" : "") + " data=" + data;
}

const std::vector<RegressBenchmark>& RegressBenchmarks() {
  // Sized so one run with the default repeats (12 steps of 64 tokens) takes
  // about a second of CPU time on one core of this 2-vCPU EPYC machine: the
  // tests run a dozen of them. A repeat (2 steps) is still ~0.15 s of CPU,
  // long against the clock's resolution and the scheduler's time slice.
  static const std::vector<RegressBenchmark> benchmarks = {
      {"cpu-gpt-tiny-v1",
       "gpt-tiny (GPT-3 architecture, 4 layers, hidden 256), 1 rank, fp32",
       "gpt-tiny", 2, 32, 2, 2, 5, 1234, 1e-3f, 1, "synthetic-v1", "cpu"},
      {"cpu-llama-tiny-v1",
       "llama-tiny (RMSNorm, SwiGLU, RoPE, GQA), 1 rank, fp32", "llama-tiny", 2,
       32, 2, 2, 5, 1234, 1e-3f, 1, "synthetic-v1", "cpu"},
      // One GPU: 32 sequences of gpt-tiny's full 256 positions per step
      // keep the kernels (not the launch overhead) the larger part of a
      // step; 3 warm-up steps cover cuBLASLt's heuristics and the first
      // allocations. With the start-up, a run is a few seconds.
      {"cuda-gpt-tiny-v1",
       "gpt-tiny (GPT-3 architecture, 4 layers, hidden 256), 1 GPU, bf16",
       "gpt-tiny", 32, 256, 3, 5, 5, 1234, 1e-3f, 1, "synthetic-v1", "cuda"},
  };
  return benchmarks;
}

StatusOr<const RegressBenchmark*> FindRegressBenchmark(
    const std::string& name) {
  std::string known;
  for (const RegressBenchmark& b : RegressBenchmarks()) {
    if (b.name == name) return &b;
    known += (known.empty() ? "" : ", ") + b.name;
  }
  return Status::NotFound(
      "unknown benchmark '" + name + "'",
      "use one of: " + known + " ('tune regress list' describes them)");
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double MedianAbsoluteDeviation(const std::vector<double>& values) {
  const double median = Median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double v : values) deviations.push_back(std::fabs(v - median));
  return Median(deviations);
}

results::HardwareFingerprint RegressHardware(const RegressBenchmark& b) {
  if (b.backend == "cuda") {
    return GpuMachineFingerprint(engine::backends::CudaDeviceName(),
                                 engine::backends::CudaDeviceCount());
  }
  ScopedThreads threads(b.threads);
  return profiler::CpuFingerprint(profiler::ReadCpuInfo());
}

Status CheckRegressBackend(const RegressBenchmark& b,
                           const std::string& command) {
  if (b.backend != "cuda") return Status::Ok();
  if (!engine::backends::TrainerBackendBuilt("cuda")) {
    return Status::Unimplemented(
        command + " --benchmark " + b.name +
            " needs the CUDA engine, and this tune was built without it "
            "(CMake found no CUDA toolkit with cuBLASLt and NCCL)",
        "rebuild where the CUDA toolkit is installed (/usr/local/cuda), or "
        "use a cpu- benchmark");
  }
  if (engine::backends::CudaDeviceCount() == 0) {
    return Status::InvalidArgument(
        command + " --benchmark " + b.name +
            " found no CUDA device on this machine (cudaGetDeviceCount found "
            "none)",
        "run it on a machine with an NVIDIA GPU and driver, or use a cpu- "
        "benchmark");
  }
  return Status::Ok();
}

std::string PlantedSlowdownSetting() {
  const char* value = std::getenv("MESHTUNE_PLANTED_SLOWDOWN");
  return value == nullptr ? "" : value;
}

StatusOr<results::RegressResult> RunRegressBenchmark(const RegressBenchmark& b,
                                                     int64_t repeats,
                                                     std::ostream& progress) {
  if (repeats < 1 || repeats > 1000) {
    return Status::InvalidArgument(
        "--repeats " + std::to_string(repeats) + " is out of range",
        "pass --repeats N with N from 1 to 1000 (default " +
            std::to_string(b.default_repeats) + ")");
  }
  StatusOr<search_spaces::ModelSpec> model =
      search_spaces::ResolveModel(b.model);
  if (!model.ok()) return model.status();
  engine::TrainConfig c;
  c.model = model.value();
  c.parallel.mbs = b.gbs;
  c.global_batch_size = b.gbs;
  c.seq_length = b.seq_length;
  c.train_iters = b.warmup_steps + repeats * b.steps_per_repeat;
  c.seed = b.seed;
  c.optimizer.lr = b.lr;
  c.optimizer.min_lr = b.lr;
  c.optimizer.lr_warmup_iters = 0;
  c.optimizer.lr_decay_style = engine::OptimizerConfig::DecayStyle::kConstant;
  c.log_interval = 1;
  c.model_flops_per_iteration = costmodel::ModelFlopsPerStep(
      c.model, c.global_batch_size, c.seq(), c.padded_vocab_size());
  MESHTUNE_RETURN_IF_ERROR(c.Validate());
  const bool cuda = b.backend == "cuda";
  if (cuda) {
    MESHTUNE_RETURN_IF_ERROR(CheckRegressBackend(b, "tune regress run"));
    MESHTUNE_RETURN_IF_ERROR(
        engine::backends::CheckTrainerSupported("cuda", c));
  }

  const engine::data::SyntheticDataset dataset(b.seq_length,
                                               c.model.vocab_size);
  ScopedThreads threads(b.threads);
  std::vector<std::unique_ptr<engine::Communicator>> world =
      engine::MakeLocalWorld(1);
  StatusOr<std::unique_ptr<engine::Trainer>> trainer =
      engine::backends::CreateTrainer(cuda ? "cuda" : "cpu", c, &dataset,
                                      world[0].get());
  if (!trainer.ok()) return trainer.status();

  results::RegressResult r;
  r.benchmark = b.name;
  r.spec = b.Spec();
  r.threads = b.threads;
  r.warmup_steps = b.warmup_steps;
  r.steps_per_repeat = b.steps_per_repeat;
  r.tokens_per_step = b.tokens_per_step();
  // Each step's process CPU time is the CPU clock between two log
  // callbacks (the trainer calls on_log right after a step, in this thread).
  double cpu_mark_s = ProcessCpuSeconds();
  double repeat_wall_s = 0, repeat_cpu_s = 0;
  const auto on_log = [&](const engine::IterationLog& log) {
    const double cpu_now_s = ProcessCpuSeconds();
    const double cpu_s = cpu_now_s - cpu_mark_s;
    cpu_mark_s = cpu_now_s;
    r.losses.push_back(log.loss);
    if (log.iteration <= b.warmup_steps) return;
    repeat_wall_s += log.step_s;
    repeat_cpu_s += cpu_s;
    if ((log.iteration - b.warmup_steps) % b.steps_per_repeat != 0) return;
    const double tokens =
        static_cast<double>(b.tokens_per_step() * b.steps_per_repeat);
    r.tokens_per_s.push_back(tokens / repeat_wall_s);
    r.cpu_tokens_per_s.push_back(tokens / std::max(repeat_cpu_s, 1e-9));
    char line[160];
    std::snprintf(line, sizeof(line),
                  "  repeat %zu/%lld: %.1f tokens/s wall, %.1f tokens per CPU "
                  "second, loss %.6f\n",
                  r.tokens_per_s.size(), static_cast<long long>(repeats),
                  r.tokens_per_s.back(), r.cpu_tokens_per_s.back(), log.loss);
    progress << line << std::flush;
    repeat_wall_s = repeat_cpu_s = 0;
  };
  MESHTUNE_RETURN_IF_ERROR(trainer.value()->Run(on_log));
  r.tokens_per_s_median = Median(r.tokens_per_s);
  r.tokens_per_s_spread = MedianAbsoluteDeviation(r.tokens_per_s);
  r.cpu_tokens_per_s_median = Median(r.cpu_tokens_per_s);
  r.cpu_tokens_per_s_spread = MedianAbsoluteDeviation(r.cpu_tokens_per_s);
  return r;
}

}  // namespace meshtune::tuner
