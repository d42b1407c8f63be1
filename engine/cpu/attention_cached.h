// Causal attention of t new positions against a key/value cache: the
// attention of inference (a prefill of t prompt tokens, or a decode step of
// t = 1), on the CPU. Conventions and the packed qkv layout of
// engine/cpu/ops.h (AttentionForward); GQA; scale 1/√head_dim.
//
// The cache holds, per sequence and kv group, the keys and values of
// positions [0, capacity) contiguously:
//   k_cache[b, groups, capacity, d], v_cache[b, groups, capacity, d]
// (contiguous positions per head so that one decode step's scores are one
// GEMV over the head's keys). Every sequence of the batch is at the same
// position: the new rows are positions [past, past + t) of each sequence.
#ifndef MESHTUNE_ENGINE_CPU_ATTENTION_CACHED_H_
#define MESHTUNE_ENGINE_CPU_ATTENTION_CACHED_H_

#include <cstdint>

#include "engine/cpu/attention_chunk.h"

namespace meshtune::engine::cpu {

// Copies the k and v parts of qkv[t·b, (heads + 2·groups)·d] (rows
// sequence-major: row ti·b + bi is position past + ti of sequence bi) into
// the caches at positions [past, past + t). REQUIRES past + t <= capacity.
void KvCacheAppend(const float* qkv, int64_t t, int64_t past, int64_t capacity,
                   const AttentionChunkShape& shape, float* k_cache,
                   float* v_cache);

// out[t·b, heads·d] (overwritten): query row ti·b + bi (its q part of qkv)
// attends to the cached keys [0, past + ti] of sequence bi: S = scale·q·Kᵀ,
// P = softmax(S), O = P·V. The new positions must already be appended.
// Equals rows [past·b, (past + t)·b) of AttentionForward over the whole
// sequence [0, past + t) up to float rounding.
void AttentionCachedForward(const float* qkv, const float* k_cache,
                            const float* v_cache, int64_t t, int64_t past,
                            int64_t capacity, const AttentionChunkShape& shape,
                            float* out);

}  // namespace meshtune::engine::cpu

#endif  // MESHTUNE_ENGINE_CPU_ATTENTION_CACHED_H_
