// Seeded, platform-independent random permutations for the data pipeline.
//
// std::shuffle and std::uniform_int_distribution are implementation-defined
// (libstdc++ and libc++ draw different numbers from the same engine), so a
// seed would give different samples on different machines. std::mt19937_64
// itself is fully specified by the standard ([rand.eng.mers]), so the
// functions here use only its raw 64-bit outputs: the same seed gives the
// same permutation everywhere.
#ifndef MESHTUNE_ENGINE_DATA_SHUFFLE_H_
#define MESHTUNE_ENGINE_DATA_SHUFFLE_H_

#include <cstdint>
#include <random>
#include <vector>

namespace meshtune::engine::data {

// A uniform integer in [0, bound) for bound >= 1, by rejection: raw outputs
// below 2^64 mod bound are redrawn so that every residue is equally likely
// (no modulo bias).
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound);

// Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm 3.4.2P) shuffle in place:
// for i = n-1 down to 1, swap values[i] with values[UniformBelow(rng, i+1)].
void Shuffle(std::mt19937_64& rng, std::vector<int64_t>* values);

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_SHUFFLE_H_
