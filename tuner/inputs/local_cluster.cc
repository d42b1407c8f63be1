#include "tuner/inputs/local_cluster.h"

#include <algorithm>
#include <cstdint>

namespace meshtune::tuner {

search_spaces::ClusterSpec LocalCluster(const profiler::CpuInfo& info) {
  search_spaces::ClusterSpec c;
  c.name = kLocalCluster;
  const int64_t cores = std::max<int64_t>(1, info.logical_cpus);
  // Nominal fp32 peak of one core; 2 GHz when /proc gives no clock.
  const double ghz = info.mhz > 0 ? info.mhz / 1e3 : 2.0;
  const double core_tflops =
      profiler::NominalFp32FlopsPerCycle(info) * ghz * 1e9 / 1e12;
  c.gpu.display_name = info.model + " (one core per rank)";
  c.gpu.peak_bf16_tflops = core_tflops;
  c.gpu.peak_tf32_tflops = core_tflops;
  c.gpu.peak_fp32_tflops = core_tflops;
  // Host memory shared by the ranks; the reserve below is per rank.
  const double mem_gib = std::max(1.0, info.memory_gib);
  c.gpu.hbm_capacity_gib = mem_gib / static_cast<double>(cores);
  c.gpu.hbm_gb = c.gpu.hbm_capacity_gib * 1.073741824;
  // Nominal DRAM share per core (a DDR4/DDR5 channel feeds a few cores);
  // replaced by the measured STREAM bandwidth once profiled.
  c.gpu.hbm_gbps = 10.0;
  c.gpu.gemm_max_efficiency_bf16 = 0.8;
  // Eigen's fp32 GEMMs fall off far less with size than a GPU's tiles: on
  // this VM (tune profile --backend cpu) 256³ runs at 82 % of the 2048³
  // rate, which d/(d + 16) per dimension reproduces (85 %); the GPU value
  // 48 gives 64 % and made every micro-batch-1 configuration ~25 % too slow
  // against `tune validate`'s measurements.
  c.gpu.gemm_tile_half_dim = 16;
  c.gpu.decode_gemm_min_rows = 1;  // no MMA: a GEMV costs its FLOPs
  c.gpu.hbm_efficiency = 0.9;
  c.gpus_per_node = static_cast<int>(cores);
  c.nvlink_domain_gpus = static_cast<int>(cores);
  // The ranks share these cores; with more ranks than cores they take
  // turns (costmodel::CoreSharing_s), and ResolveInputs keeps them on this
  // one node (LocalNodeForRanks).
  c.host_cores = static_cast<int>(cores);
  // Ranks talk through shared memory: nominal until MPI collectives are
  // measured. One node, so the network is never used.
  c.nvlink_gbps = 10.0;
  c.nvlink_busbw_gbps = 5.0;
  c.nvlink_latency_us = 2.0;
  c.nic_gbps = 1.0;
  c.nic_busbw_gbps = 1.0;
  c.network_latency_us = 50.0;
  c.memory_reserve_gib = std::min(0.5, 0.1 * c.gpu.hbm_capacity_gib);
  return c;
}

void LocalNodeForRanks(int64_t ranks, search_spaces::ClusterSpec* cluster) {
  if (ranks <= cluster->gpus_per_node) return;
  // The host memory is shared too: each rank gets its share of it.
  const double share =
      static_cast<double>(cluster->gpus_per_node) / static_cast<double>(ranks);
  cluster->gpu.hbm_capacity_gib *= share;
  cluster->gpu.hbm_gb *= share;
  cluster->memory_reserve_gib =
      std::min(0.5, 0.1 * cluster->gpu.hbm_capacity_gib);
  cluster->gpus_per_node = static_cast<int>(ranks);
  cluster->nvlink_domain_gpus = static_cast<int>(ranks);
}

}  // namespace meshtune::tuner
