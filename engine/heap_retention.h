// Keeping the CPU engine's freed memory in the process.
//
// The CPU engine allocates a micro-batch's activations, its gradients and
// every collective's scratch as std::vectors and frees them within the
// step. glibc's malloc returns large blocks to the kernel: a block above
// the mmap threshold (128 KiB at start, raised to the largest block freed
// so far, at most 32 MiB) is munmap'd on free, and the heap's top is
// trimmed when more than the trim threshold (twice the mmap threshold) is
// free. The next micro-batch then touches fresh pages, one page fault and
// one zeroed 4 KiB page each. On a virtual machine a fault also exits to
// the hypervisor: on the 2-core VM of docs/validate.md a tp2 gpt-tiny step
// at mbs 1 (gbs 8, seq 128) took 20 000 faults per rank and 0.60-0.73 s
// against 0.28 s with the memory kept; dp2 at mbs 4 0.42 s against 0.22 s
// (`perf stat -e page-faults`, 12 steps against 2).
#ifndef MESHTUNE_ENGINE_HEAP_RETENTION_H_
#define MESHTUNE_ENGINE_HEAP_RETENTION_H_

namespace meshtune::engine {

// Blocks up to kRetainedBlockMaxBytes come from the heap and the heap is
// never trimmed below kRetainedHeapTrimBytes of free space, so freed
// memory is reused by the next allocation instead of being faulted in
// again. Idempotent; a no-op outside glibc. Returns whether glibc took
// both settings.
bool RetainFreedHeapMemory();

// glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX):
// blocks above it are still mapped and unmapped one by one.
inline constexpr int kRetainedBlockMaxBytes = 32 << 20;
// Free heap space kept before trimming: 1 GiB, far above a CPU run's
// per-step churn.
inline constexpr int kRetainedHeapTrimBytes = 1 << 30;

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_HEAP_RETENTION_H_
