// ClusterSpec and GpuSpec: the hardware a configuration runs on.
//
// Peaks are dense (no sparsity) datasheet numbers; "measured ceilings" are the
// commonly achieved large-size values (sources in each clusters/*.yaml).
// Units: TFLOP/s, GB (1e9 bytes) for HBM capacity as vendors state it, GB/s
// (1e9 bytes/s) for bandwidths, microseconds for latencies.
#ifndef MESHTUNE_SEARCH_SPACES_CLUSTER_SPEC_H_
#define MESHTUNE_SEARCH_SPACES_CLUSTER_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

enum class Precision { kBf16, kFp16, kFp8 };
const char* ToString(Precision p);

struct GpuSpec {
  std::string display_name;     // "NVIDIA A100 SXM4 80GB"
  double peak_bf16_tflops = 0;  // also FP16
  double peak_fp8_tflops = 0;   // 0 = no FP8 tensor cores
  double peak_tf32_tflops = 0;
  double peak_fp32_tflops = 0;
  double hbm_gb = 0;  // capacity as the vendor states it ("80 GB")
  // Memory the driver exposes (nvidia-smi "Total", GiB). HBM stacks are
  // binary-sized, so an "80 GB" A100 exposes 80 GiB (81920 MiB) and an H100
  // 79.65 GiB (81559 MiB). 0 = unknown: hbm_gb·1e9 bytes is assumed.
  double hbm_capacity_gib = 0;
  double hbm_gbps = 0;  // datasheet HBM bandwidth
  // Best measured dense GEMM as a fraction of peak (MAMF / peak), per
  // precision; the GEMM efficiency curve saturates at this value.
  double gemm_max_efficiency_bf16 = 0;
  double gemm_max_efficiency_fp8 = 0;
  // Achieved fraction of hbm_gbps for large streaming transfers.
  double hbm_efficiency = 0.9;
  // GEMM shape fall-off d/(d + half_dim) per dimension (tile quantisation;
  // costmodel/datasheet_calibration.h). 48 fits GPUs' 128/256-wide tiles; a
  // CPU's register blocks are a few elements wide (the `local` preset).
  double gemm_tile_half_dim = 48;

  // Peak for a precision (bf16 and fp16 share tensor-core rate); 0 if absent.
  double PeakTflops(Precision p) const;
  double GemmMaxEfficiency(Precision p) const;
};

struct ClusterSpec {
  std::string name;  // canonical preset name ("a100-80g")
  std::vector<std::string> aliases;
  GpuSpec gpu;

  int gpus_per_node = 8;
  int nvlink_domain_gpus = 8;  // GPUs reachable over NVLink (72 on GB200 NVL72)

  // Scale-up (NVLink) fabric.
  double nvlink_gbps = 0;                // per GPU, one direction (datasheet)
  double nvlink_busbw_gbps = 0;          // achieved ring busbw (nccl-tests)
  double nvlink_latency_us = 0;          // per ring step
  double nvls_allreduce_busbw_gbps = 0;  // NVLink SHARP all-reduce; 0 = none

  // Scale-out (network) fabric, per GPU (rail-optimised, one NIC per GPU).
  double nic_gbps = 0;            // line rate per GPU in GB/s (400 Gb/s = 50)
  double nic_busbw_gbps = 0;      // achieved per-NIC ring bandwidth
  double network_latency_us = 0;  // per inter-node ring step

  // Memory the framework cannot use: CUDA context, NCCL and cuBLAS workspaces,
  // allocator fragmentation (GiB per GPU).
  double memory_reserve_gib = 0;

  // Usable HBM in GiB after the reserve.
  double UsableMemoryGib() const;
  Status Validate(const std::string& where = "") const;
};

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_CLUSTER_SPEC_H_
