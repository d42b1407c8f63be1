// Google Benchmark of whole CPU training steps (forward, backward, gradient
// norm, AdamW) of the engine on one in-process rank, at the shapes of
// llm.c's fp32 CPU reference (karpathy/llm.c train_gpt2.c) so the two can be
// compared: GPT-2 small (124M: 12 layers, hidden 768, 12 heads of 64,
// ffn 3072, vocabulary 50257 padded to 50304, 1024 learned positions, tied
// embeddings) and the gpt-tiny preset for quick runs.
//
// One benchmark iteration is one training step of B sequences of T tokens
// (one micro-batch of B, no gradient accumulation, like llm.c). The trainer
// is built once per benchmark run and its first step (which allocates the
// activation and gradient buffers) runs before the timed loop. Counters:
//   tokens/s  B·T per step over real time;
//   TFLOP/s   Megatron's model FLOPs of a step (costmodel::ModelFlopsPerStep,
//             6·params·tokens plus attention and logits) over real time;
//   step_min_ms, step_max_ms  fastest and slowest timed step (the trainer's
//             own step timer), for the spread; loss  the last step's loss.
//
// Trainer::Run trains up to config.train_iters without returning, so it runs
// on a worker thread whose per-iteration log callback waits for the timed
// loop to ask for the next step (StepDriver below); the handoff costs
// microseconds against steps of milliseconds to seconds.
//
// Flags (besides Google Benchmark's own):
//   --steps=N        timed steps per case (default: 3 for GPT-2 small, 20 for
//                    gpt-tiny); Google Benchmark 1.7 has no iteration-count
//                    flag, and a fixed count keeps the expensive model build
//                    to one per case.
//   --batch=B --seq=T  run GPT-2 small at this shape instead of the two
//                    default ones (what scripts/compare-llmc uses).
// Examples:
//   OMP_NUM_THREADS=2 build/bench/train_step_bench
//   OMP_NUM_THREADS=2 build/bench/train_step_bench --batch=4 --seq=64
//       --steps=10 --benchmark_filter=Gpt2Small   (one command line)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "costmodel/model_stats.h"
#include "engine/comm/communicator.h"
#include "engine/comm/local_communicator.h"
#include "engine/data/dataset.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/presets/presets.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine {
namespace {

// GPT-2 small as in llm.c's gpt2_124M.bin and Hugging Face's "gpt2".
search_spaces::ModelSpec Gpt2Small() {
  search_spaces::ModelSpec m;
  m.name = "gpt2-124m";
  m.num_layers = 12;
  m.hidden_size = 768;
  m.num_attention_heads = 12;
  m.num_query_groups = 12;
  m.kv_channels = 64;
  m.ffn_hidden_size = 3072;
  m.vocab_size = 50257;  // padded to 50304 (multiple of 128), as llm.c's Vp
  m.seq_length = 1024;   // learned position table rows (llm.c maxT)
  return m;              // LayerNorm, GELU, learned positions, tied: defaults
}

// Optimizer settings of llm.c's train_gpt2.c loop (lr 1e-4, betas 0.9 and
// 0.999, eps 1e-8, no weight decay) at a constant rate; global-norm
// clipping at 1.0 stays on (Megatron's default), a little more work than
// llm.c does.
TrainConfig BenchConfig(const search_spaces::ModelSpec& model, int64_t batch,
                        int64_t seq, int64_t train_iters) {
  TrainConfig c;
  c.model = model;
  c.parallel.mbs = batch;
  c.global_batch_size = batch;
  c.seq_length = seq;
  c.train_iters = train_iters;
  c.optimizer.lr = 1e-4f;
  c.optimizer.min_lr = 1e-4f;
  c.optimizer.lr_decay_style = OptimizerConfig::DecayStyle::kConstant;
  c.optimizer.adam_beta2 = 0.999f;
  c.optimizer.weight_decay = 0.0f;
  c.log_interval = 1;
  c.model_flops_per_iteration =
      costmodel::ModelFlopsPerStep(model, batch, seq, c.padded_vocab_size());
  return c;
}

// Runs Trainer::Run on a worker thread one step at a time: the log callback
// of step k reports it and blocks until Next() asks for step k + 1. The
// last step (config.train_iters) does not block, so Run returns.
class StepDriver {
 public:
  StepDriver(Trainer* trainer, int64_t total_steps)
      : trainer_(trainer), total_steps_(total_steps) {
    worker_ = std::thread([this] {
      Status s =
          trainer_->Run([this](const IterationLog& log) { OnStepDone(log); });
      std::lock_guard<std::mutex> lock(mu_);
      status_ = s;
      finished_ = true;
      cv_.notify_all();
    });
  }
  ~StepDriver() {
    if (worker_.joinable()) worker_.join();
  }

  // Waits for the step in flight (the first one starts by itself); false if
  // the run ended instead (error).
  bool WaitStep() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ > taken_ || finished_; });
    if (done_ <= taken_) return false;
    ++taken_;
    return true;
  }
  // Lets the worker start the next step.
  void Next() {
    std::lock_guard<std::mutex> lock(mu_);
    ++allowed_;
    cv_.notify_all();
  }
  // Joins the worker; the run's status.
  Status Finish() {
    worker_.join();
    return status_;
  }

 private:
  void OnStepDone(const IterationLog& log) {
    std::unique_lock<std::mutex> lock(mu_);
    ++done_;
    cv_.notify_all();
    if (log.iteration >= total_steps_) return;
    cv_.wait(lock, [this] { return allowed_ >= done_; });
  }

  Trainer* trainer_;
  const int64_t total_steps_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t done_ = 0, taken_ = 0, allowed_ = 0;
  bool finished_ = false;
  Status status_;
};

// Args: B (sequences per step), T (tokens per sequence). Iterations() is
// set at registration: the number of timed steps.
void RunTrainSteps(benchmark::State& state,
                   const search_spaces::ModelSpec& model) {
  const int64_t batch = state.range(0), seq = state.range(1);
  const int64_t timed_steps = static_cast<int64_t>(state.max_iterations);
  const TrainConfig config =
      BenchConfig(model, batch, seq, /*train_iters=*/1 + timed_steps);
  const testing::SyntheticDataset data(seq, model.vocab_size);
  auto world = MakeLocalWorld(1);
  auto trainer = Trainer::Create(config, &data, world[0].get());
  if (!trainer.ok()) {
    state.SkipWithError(trainer.status().message().c_str());
    return;
  }
  StepDriver driver(trainer->get(), config.train_iters);
  if (!driver.WaitStep()) {  // warm-up step: allocations, first touches
    state.SkipWithError(driver.Finish().message().c_str());
    return;
  }
  bool ok = true;
  for (auto _ : state) {
    driver.Next();
    if (!driver.WaitStep()) {
      ok = false;
      break;
    }
  }
  const Status status = driver.Finish();
  if (!ok || !status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  const double steps = static_cast<double>(state.iterations());
  state.counters["tokens/s"] = benchmark::Counter(
      steps * static_cast<double>(batch * seq), benchmark::Counter::kIsRate);
  state.counters["TFLOP/s"] =
      benchmark::Counter(steps * config.model_flops_per_iteration / 1e12,
                         benchmark::Counter::kIsRate);
  // Spread of the timed steps by the trainer's own step timer (history()[0]
  // is the warm-up step).
  const auto& history = (*trainer)->history();
  double min_s = history.back().step_s, max_s = min_s;
  for (size_t i = 1; i < history.size(); ++i) {
    min_s = std::min(min_s, history[i].step_s);
    max_s = std::max(max_s, history[i].step_s);
  }
  state.counters["step_min_ms"] = min_s * 1e3;
  state.counters["step_max_ms"] = max_s * 1e3;
  state.counters["loss"] = history.back().loss;
}

// Parses "--name=<int>" into *value; true if `arg` is that flag.
bool ParseIntFlag(const char* arg, const char* name, int64_t* value) {
  const std::string prefix = std::string("--") + name + "=";
  if (std::strncmp(arg, prefix.c_str(), prefix.size()) != 0) return false;
  char* end = nullptr;
  const long long v = std::strtoll(arg + prefix.size(), &end, 10);
  if (*end != '\0' || v <= 0) {
    std::cerr << "train_step_bench: " << arg
              << " is not a positive integer; hint: write e.g. " << prefix
              << "4\n";
    std::exit(2);
  }
  *value = v;
  return true;
}

void Register(const std::string& name, const search_spaces::ModelSpec& model,
              const std::vector<std::vector<int64_t>>& shapes, int64_t steps) {
  auto* b = benchmark::RegisterBenchmark(
      name.c_str(),
      [model](benchmark::State& state) { RunTrainSteps(state, model); });
  b->ArgNames({"B", "T"});
  for (const auto& shape : shapes) b->Args(shape);
  b->Iterations(steps)->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace
}  // namespace meshtune::engine

int main(int argc, char** argv) {
  using meshtune::engine::Gpt2Small;
  using meshtune::engine::ParseIntFlag;
  using meshtune::engine::Register;
  int64_t steps = 0, batch = 0, seq = 0;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!ParseIntFlag(argv[i], "steps", &steps) &&
        !ParseIntFlag(argv[i], "batch", &batch) &&
        !ParseIntFlag(argv[i], "seq", &seq)) {
      rest.push_back(argv[i]);
    }
  }
  if ((batch > 0) != (seq > 0) || seq > 1024) {
    std::cerr << "train_step_bench: --batch and --seq go together, with "
                 "seq <= 1024; hint: e.g. --batch=4 --seq=64\n";
    return 2;
  }
  // llm.c's default (B=4, T=64) and one full-length sequence.
  std::vector<std::vector<int64_t>> gpt2_shapes = {{4, 64}, {1, 1024}};
  if (batch > 0) gpt2_shapes = {{batch, seq}};
  Register("BM_TrainStepGpt2Small", Gpt2Small(), gpt2_shapes,
           steps > 0 ? steps : 3);
  auto tiny = meshtune::search_spaces::ResolveModel("gpt-tiny");
  if (!tiny.ok()) {
    std::cerr << "train_step_bench: " << tiny.status().message() << "\n";
    return 1;
  }
  Register("BM_TrainStepGptTiny", *tiny, {{4, 256}}, steps > 0 ? steps : 20);

  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
