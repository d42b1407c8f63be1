#include "engine/inference/kv_cache.h"

#include "search_spaces/status.h"

namespace meshtune::engine::inference {

KvCache::KvCache(int64_t layers, int64_t batch, int64_t groups,
                 int64_t capacity, int64_t head_dim)
    : batch_(batch),
      capacity_(capacity),
      per_layer_(batch * groups * capacity * head_dim),
      keys_(layers * per_layer_, 0.0f),
      values_(layers * per_layer_, 0.0f) {
  MESHTUNE_CHECK(layers >= 0 && batch > 0 && groups > 0 && capacity > 0 &&
                 head_dim > 0);
}

}  // namespace meshtune::engine::inference
