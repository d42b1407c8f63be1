// Deterministic parameter initialization that does not depend on the
// parallel layout: element (row, col) of the global tensor `name` gets the
// same value on whichever rank holds it, so a tp=2 or pp=2 model starts
// bit-identical to the single-rank one (the "full then slice" idea of
// Megatron's --use-cpu-initialization, without materializing the tensor).
//
// Values: N(0, std²) from a counter-based generator (SplitMix64 of the seed,
// the FNV-1a hash of the name and the global element index; Box-Muller), so
// they are also identical across platforms and thread counts.
#ifndef MESHTUNE_ENGINE_PARAM_INIT_H_
#define MESHTUNE_ENGINE_PARAM_INIT_H_

#include <cstdint>

#include "engine/param_store.h"

namespace meshtune::engine {

enum class InitKind { kNormal, kOnes, kZeros };

// Fills parameter `index` of `store` (its local shard; kVocab padding rows
// get zeros). `std` is used by kNormal.
void InitParam(ParamStore& store, int index, InitKind kind, float std,
               uint64_t seed);

// The value kNormal gives global element `flat_index` of tensor `name`.
float NormalInitValue(uint64_t seed, const std::string& name,
                      int64_t flat_index, float std);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_PARAM_INIT_H_
