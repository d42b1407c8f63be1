// The "cpu" profiler backend: Eigen GEMMs and a STREAM-style triad, timed
// with std::chrono::steady_clock. Built into every binary (MakeCpuBackend in
// profiler/backend.h); collectives across processes are measured by
// meshtune_mpi_bench under mpirun instead (profiler/mpi_bench_main.cc).
//
// This header exposes the pieces tests and the MPI bench reuse: reading the
// machine description and the nominal peak.
#ifndef MESHTUNE_PROFILER_CPU_BACKEND_H_
#define MESHTUNE_PROFILER_CPU_BACKEND_H_

#include <cstdint>
#include <string>

#include "results/store.h"

namespace meshtune::profiler {

// What /proc/cpuinfo and /proc/meminfo say about this machine.
struct CpuInfo {
  std::string model;  // "model name", e.g. "AMD EPYC"; "unknown" if absent
  int64_t logical_cpus = 0;  // std::thread::hardware_concurrency()
  double mhz = 0;            // first "cpu MHz" line; 0 if absent
  bool avx512f = false, avx2 = false, fma = false;
  double memory_gib = 0;  // MemTotal / 2^30
};

// Parses the text of /proc/cpuinfo and /proc/meminfo (either may be "").
CpuInfo ParseCpuInfo(const std::string& cpuinfo, const std::string& meminfo);
// Reads the real files.
CpuInfo ReadCpuInfo();

// Nominal fp32 FLOPs per cycle per core from the vector ISA: two FMA pipes of
// 16 (AVX-512) or 8 (AVX2+FMA) lanes, 2 FLOPs per FMA lane; 8 without FMA
// (one 4-lane add and one 4-lane multiply per cycle, SSE). An upper bound:
// AVX-512 clocks down, and some cores have one 512-bit FMA pipe.
double NominalFp32FlopsPerCycle(const CpuInfo& info);

// The fingerprint of this machine for the cpu backend. Its id does not
// depend on which process computes it (tune or meshtune_mpi_bench).
results::HardwareFingerprint CpuFingerprint(const CpuInfo& info);

// Threads Eigen uses for a GEMM (1 unless built with OpenMP).
int EigenThreads();

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_CPU_BACKEND_H_
