// Google Benchmark of the CPU reference ops at GPT-2-small shapes (hidden
// 768, 12 heads of 64, seq 1024, one sequence): the Linear GEMMs of the qkv
// (768 -> 2304) and MLP fc1 (768 -> 3072) projections, and causal
// attention. Counters report FLOP/s:
//   LinearForward  2·n·k·m, LinearBackward 4·n·k·m (din and dweight);
//   AttentionForward 2·s²·d·heads·b (QKᵀ and P·V over the causal half),
//   AttentionBackward twice that (dP, dQ, dK, dV).
// Run e.g. `build/bench/cpu_ops_bench --benchmark_min_time=0.2s`.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/cpu/ops.h"

namespace meshtune::engine::cpu {
namespace {

std::vector<float> Random(int64_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(count));
  for (float& x : out) x = dist(gen);
  return out;
}

void SetFlops(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOP/s"] = benchmark::Counter(
      flops_per_iteration * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

// Args: n, k, m.
void BM_LinearForward(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const auto in = Random(n * k, 1), weight = Random(m * k, 2),
             bias = Random(m, 3);
  std::vector<float> out(static_cast<size_t>(n * m));
  for (auto _ : state) {
    LinearForward(in.data(), weight.data(), bias.data(), out.data(), n, k, m);
    benchmark::DoNotOptimize(out.data());
  }
  SetFlops(state, 2.0 * n * k * m);
}

void BM_LinearBackward(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const auto in = Random(n * k, 1), weight = Random(m * k, 2),
             dout = Random(n * m, 3);
  std::vector<float> din(static_cast<size_t>(n * k)),
      dweight(static_cast<size_t>(m * k)), dbias(static_cast<size_t>(m));
  for (auto _ : state) {
    LinearBackward(dout.data(), in.data(), weight.data(), din.data(),
                   dweight.data(), dbias.data(), n, k, m);
    benchmark::DoNotOptimize(din.data());
    benchmark::DoNotOptimize(dweight.data());
  }
  SetFlops(state, 4.0 * n * k * m);
}

// Args: s, b, heads, head_dim (groups = heads, GPT-2).
void BM_AttentionForward(benchmark::State& state) {
  const int64_t s = state.range(0), b = state.range(1), heads = state.range(2),
                d = state.range(3);
  const auto qkv = Random(s * b * 3 * heads * d, 4);
  std::vector<float> out(static_cast<size_t>(s * b * heads * d)),
      probs(static_cast<size_t>(b * heads * s * s));
  for (auto _ : state) {
    AttentionForward(qkv.data(), out.data(), probs.data(), s, b, heads, heads,
                     d);
    benchmark::DoNotOptimize(out.data());
  }
  SetFlops(state, 2.0 * s * s * d * heads * b);
}

void BM_AttentionBackward(benchmark::State& state) {
  const int64_t s = state.range(0), b = state.range(1), heads = state.range(2),
                d = state.range(3);
  const auto qkv = Random(s * b * 3 * heads * d, 4);
  const auto dout = Random(s * b * heads * d, 5);
  std::vector<float> out(static_cast<size_t>(s * b * heads * d)),
      probs(static_cast<size_t>(b * heads * s * s)),
      dqkv(static_cast<size_t>(s * b * 3 * heads * d));
  AttentionForward(qkv.data(), out.data(), probs.data(), s, b, heads, heads, d);
  for (auto _ : state) {
    AttentionBackward(dout.data(), qkv.data(), probs.data(), dqkv.data(), s, b,
                      heads, heads, d);
    benchmark::DoNotOptimize(dqkv.data());
  }
  SetFlops(state, 4.0 * s * s * d * heads * b);
}

BENCHMARK(BM_LinearForward)
    ->Args({1024, 768, 2304})
    ->Args({1024, 768, 3072})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LinearBackward)
    ->Args({1024, 768, 2304})
    ->Args({1024, 768, 3072})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionForward)
    ->Args({1024, 1, 12, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionBackward)
    ->Args({1024, 1, 12, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace meshtune::engine::cpu

BENCHMARK_MAIN();
