// KvCache: the keys and values one tensor-parallel rank keeps for inference
// (engine/inference/generator.h): for every transformer layer, the rank's
// kv groups (num_query_groups / tp) of every sequence of the batch, for
// positions [0, capacity). Layout per layer (engine/cpu/attention_cached.h):
//   keys[b, groups, capacity, head_dim], values[b, groups, capacity, head_dim]
// fp32. Every sequence of the batch is at the same position (prompts of one
// length), so one counter says how many positions are filled.
//
// Memory: 2 · layers · b · groups · capacity · head_dim · 4 bytes per rank,
// allocated once (what vLLM's paged blocks hold, without the paging: a
// batch here never grows past its capacity).
#ifndef MESHTUNE_ENGINE_INFERENCE_KV_CACHE_H_
#define MESHTUNE_ENGINE_INFERENCE_KV_CACHE_H_

#include <cstdint>
#include <vector>

namespace meshtune::engine::inference {

class KvCache {
 public:
  KvCache(int64_t layers, int64_t batch, int64_t groups, int64_t capacity,
          int64_t head_dim);

  float* keys(int64_t layer) { return keys_.data() + layer * per_layer_; }
  float* values(int64_t layer) { return values_.data() + layer * per_layer_; }

  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  // Positions filled so far (every sequence alike).
  int64_t length() const { return length_; }
  // Marks `positions` more as filled (after every layer appended them).
  // REQUIRES length() + positions <= capacity().
  void Advance(int64_t positions);
  // Forgets every position (a new batch of prompts); keeps the memory.
  void Reset() { length_ = 0; }
  int64_t bytes() const {
    return static_cast<int64_t>(2 * keys_.size() * sizeof(float));
  }

 private:
  int64_t batch_, capacity_, per_layer_;
  int64_t length_ = 0;
  std::vector<float> keys_, values_;  // [layers, b, groups, capacity, d]
};

}  // namespace meshtune::engine::inference

#endif  // MESHTUNE_ENGINE_INFERENCE_KV_CACHE_H_
