// Elementwise helpers and the float64 sum of squares (engine/cpu/ops.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

// SumSquares splits its range into fixed chunks of this many elements (not
// one chunk per thread), sums each chunk in order and then the chunk sums in
// order, so the result is the same for every thread count.
constexpr int64_t kSumChunk = 1 << 16;

}  // namespace

void Add(const float* x, float* y, int64_t count) {
  MESHTUNE_CHECK(count >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) y[i] += x[i];
}

double SumSquares(const float* x, int64_t count) {
  MESHTUNE_CHECK(count >= 0);
  const int64_t chunks = (count + kSumChunk - 1) / kSumChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(count, (c + 1) * kSumChunk);
    double sum = 0.0;
    for (int64_t i = c * kSumChunk; i < end; ++i) {
      sum += static_cast<double>(x[i]) * x[i];
    }
    partial[c] = sum;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

void Scale(float* x, int64_t count, float s) {
  MESHTUNE_CHECK(count >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) x[i] *= s;
}

}  // namespace meshtune::engine::cpu
