#include "engine/data/shuffle.h"

#include <utility>

#include "search_spaces/status.h"

namespace meshtune::engine::data {

uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  MESHTUNE_CHECK(bound >= 1);
  // (2^64 - bound) mod bound == 2^64 mod bound, computed without overflow.
  const uint64_t threshold = (0 - bound) % bound;
  while (true) {
    const uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

void Shuffle(std::mt19937_64& rng, std::vector<int64_t>* values) {
  for (size_t i = values->size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(UniformBelow(rng, i));
    std::swap((*values)[i - 1], (*values)[j]);
  }
}

}  // namespace meshtune::engine::data
