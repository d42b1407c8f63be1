#include "engine/param_init.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace meshtune::engine {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Uniform in (0, 1]: the top 53 bits, never 0 (log in Box-Muller).
double Uniform(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

// The draw of element `flat_index` of the tensor whose key is `key`
// (SplitMix64(seed ^ Fnv1a(name))): counter-based, so elements can be drawn
// in any order and on any thread with the same result.
float NormalFromKey(uint64_t key, int64_t flat_index, float std) {
  const uint64_t a = SplitMix64(key ^ (2 * static_cast<uint64_t>(flat_index)));
  const uint64_t b =
      SplitMix64(key ^ (2 * static_cast<uint64_t>(flat_index) + 1));
  const double r = std::sqrt(-2.0 * std::log(Uniform(a)));
  const double z = r * std::cos(2.0 * M_PI * Uniform(b));
  return static_cast<float>(z * std);
}

}  // namespace

float NormalInitValue(uint64_t seed, const std::string& name,
                      int64_t flat_index, float std) {
  return NormalFromKey(SplitMix64(seed ^ Fnv1a(name)), flat_index, std);
}

void InitParam(ParamStore& store, int index, InitKind kind, float std,
               uint64_t seed) {
  const ParamInfo& info = store.info(index);
  float* p = store.param(index);
  std::fill_n(p, info.numel, 0.0f);
  if (kind == InitKind::kZeros) return;
  const int64_t global_cols =
      info.global_shape.size() > 1 ? info.global_shape[1] : 1;
  const int64_t local_cols =
      info.local_shape.size() > 1 ? info.local_shape[1] : 1;
  // The name's hash once per tensor, and the rows on every thread: a 1.3 B
  // parameter model drew one value per element with a string hash each,
  // about a minute on one core.
  const uint64_t key = SplitMix64(seed ^ Fnv1a(info.name));
  const bool ones = kind == InitKind::kOnes;
  for (const ParamInfo::Block& blk : info.Blocks()) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < blk.rows; ++r) {
      for (int64_t c = 0; c < blk.cols; ++c) {
        const int64_t global =
            (blk.global_row0 + r) * global_cols + blk.global_col0 + c;
        const int64_t local =
            (blk.local_row0 + r) * local_cols + blk.local_col0 + c;
        p[local] = ones ? 1.0f : NormalFromKey(key, global, std);
      }
    }
  }
}

}  // namespace meshtune::engine
