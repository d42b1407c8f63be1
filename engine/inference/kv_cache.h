// KvCache: the keys and values one tensor-parallel rank keeps for inference
// (engine/inference/generator.h): for every transformer layer, the rank's
// kv groups (num_query_groups / tp) of every sequence of the batch, for
// positions [0, capacity). Layout per layer (engine/cpu/attention_cached.h):
//   keys[b, groups, capacity, head_dim], values[b, groups, capacity, head_dim]
// fp32. Which positions are filled is the generator's to know
// (Generator::position(): every sequence of a batch is at the same one).
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
  int64_t bytes() const {
    return static_cast<int64_t>(2 * keys_.size() * sizeof(float));
  }

 private:
  int64_t batch_, capacity_, per_layer_;
  std::vector<float> keys_, values_;  // [layers, b, groups, capacity, d]
};

}  // namespace meshtune::engine::inference

#endif  // MESHTUNE_ENGINE_INFERENCE_KV_CACHE_H_
