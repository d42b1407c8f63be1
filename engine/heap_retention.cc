#include "engine/heap_retention.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace meshtune::engine {

bool RetainFreedHeapMemory() {
#if defined(__GLIBC__)
  // A fixed M_MMAP_THRESHOLD also turns off glibc's dynamic threshold, so
  // the trim threshold below stays as set (mallopt(3)).
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, kRetainedBlockMaxBytes) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, kRetainedHeapTrimBytes) == 1;
  return mmap_set && trim_set;
#else
  return false;
#endif
}

}  // namespace meshtune::engine
