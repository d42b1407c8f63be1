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

// The GEMM precision recipe of a run (Megatron --bf16 / --fp16, --fp8-format
// with --fp8-recipe, --fp4-format; docs/sources.md §2.5 and §4.9). kFp8 is
// Megatron's default FP8 recipe, delayed scaling. Attention, master weights
// and optimizer states stay in high precision in every recipe.
enum class Precision {
  kBf16,
  kFp16,
  kFp8,            // --fp8-recipe delayed: per-tensor, amax history
  kFp8Tensorwise,  // --fp8-recipe tensorwise: per-tensor current scaling
  kFp8Blockwise,   // --fp8-recipe blockwise: 1x128 / 128x128 FP32 scales
  kMxfp8,          // --fp8-recipe mxfp8: 1x32 E8M0 scales (Blackwell)
  kNvfp4,          // --fp4-format e2m1 --fp4-recipe nvfp4 (Blackwell)
};
// Canonical --precision spelling: "bf16", "fp16", "fp8" (delayed),
// "fp8-tensorwise", "fp8-blockwise", "mxfp8", "nvfp4".
const char* ToString(Precision p);
// Every precision, in the order above (for listings and round-trip tests).
inline constexpr Precision kAllPrecisions[] = {
    Precision::kBf16,          Precision::kFp16,         Precision::kFp8,
    Precision::kFp8Tensorwise, Precision::kFp8Blockwise, Precision::kMxfp8,
    Precision::kNvfp4};
// FP8 GEMMs (every FP8 recipe, MXFP8 included).
inline bool IsFp8(Precision p) {
  return p == Precision::kFp8 || p == Precision::kFp8Tensorwise ||
         p == Precision::kFp8Blockwise || p == Precision::kMxfp8;
}
// GEMM operands quantised below 16 bits (FP8 or FP4): quantised weight
// copies, casts before each GEMM, BF16 attention.
inline bool IsQuantized(Precision p) {
  return IsFp8(p) || p == Precision::kNvfp4;
}
// Recipes that need Blackwell's block-scaled tensor cores.
inline bool NeedsBlackwell(Precision p) {
  return p == Precision::kMxfp8 || p == Precision::kNvfp4;
}

struct GpuSpec {
  std::string display_name;     // "NVIDIA A100 SXM4 80GB"
  double peak_bf16_tflops = 0;  // also FP16
  double peak_fp8_tflops = 0;   // 0 = no FP8 tensor cores
  double peak_fp4_tflops = 0;   // dense NVFP4; 0 = no FP4 tensor cores
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
  double gemm_max_efficiency_fp4 = 0;  // 0 = the FP8 value
  // Achieved fraction of hbm_gbps for large streaming transfers.
  double hbm_efficiency = 0.9;
  // GEMM shape fall-off d/(d + half_dim) per dimension (tile quantisation;
  // costmodel/datasheet_calibration.h). 48 fits GPUs' 128/256-wide tiles; a
  // CPU's register blocks are a few elements wide (the `local` preset).
  double gemm_tile_half_dim = 48;
  // Rows a decode step's GEMM costs at least (the serving cost model,
  // costmodel/serving_model.h): small-batch kernels (swap-AB GEMMs, GEMVs)
  // put the tokens on the tensor-core MMA's narrow side, 8-16 wide, so a
  // batch of 1 costs what 16 cost. A CPU's SIMD FMAs vectorise along the
  // weights' rows instead (the `local` preset: 1).
  double decode_gemm_min_rows = 16;
  // Fraction of the BF16 weight-streaming rate that NVFP4 decode GEMMs reach
  // (the serving cost model): their small-batch kernels stream 4-bit
  // weights and block scales more slowly than BF16's stream 16-bit ones.
  // 1 = as fast (GPUs without FP4, where NVFP4 is not served).
  double nvfp4_stream_relative = 1.0;
  // Fraction of the dense GEMM rate (the ceiling, size and shape terms) that
  // the serving engines' fused MoE GEMMs reach where they are compute-bound
  // (their CUTLASS grouped GEMMs over the routed experts). 1 = the dense
  // rate, which NVIDIA's sweeps show on Hopper.
  double moe_gemm_relative = 1.0;
  // Fraction of the per-tensor FP8 GEMM rate that blockwise-scaled FP8
  // GEMMs reach (1x128 activation and 128x128 weight scales, DeepSeek-V3's
  // checkpoints; the serving model): the scales' loads and the per-block
  // rescaling in the main loop cost tensor-core time. Its ceiling is
  // gemm_max_efficiency_fp8 times this. 1 = as fast.
  double fp8_blockwise_relative = 1.0;
  // Fraction of that blockwise rate which the serving engines' fused MoE
  // reaches where its grouped GEMMs are compute-bound (the serving model,
  // on top of moe_gemm_relative): the per-block rescaling costs the grouped
  // kernel more than the dense one, by NVIDIA's MoE sweeps of TensorRT-LLM
  // 1.2 on Hopper and Blackwell. 1 = as the dense blockwise GEMM (GPUs
  // without a sweep).
  double moe_fp8_blockwise_relative = 1.0;
  // The same for NVFP4 experts, against the NVFP4 GEMM ceiling
  // (gemm_max_efficiency_fp4): the fused MoE's CUTLASS grouped GEMM reaches
  // about half of what the dense GEMM sweep does on Blackwell. 1 = as the
  // dense NVFP4 GEMM (GPUs without FP4 or without a sweep).
  double moe_nvfp4_relative = 1.0;
  // Bytes the serving engines' fused MoE moves per routed token copy and
  // hidden element on the GPU that holds the copy, beside its GEMMs (the
  // serving model): the permute that copies each token to its experts, the
  // fc2 partial sums at full hidden width and the finalize that reads them
  // back. NVIDIA's MoE sweeps of TensorRT-LLM on this GPU, fitted as
  // GEMM time plus these bytes at the serving HBM rate: the term that makes
  // narrow expert slices (moe_tp > 1, small experts) slow. 0 = not swept:
  // the permute and finalize priced at 16-bit copies instead.
  double moe_copy_bytes = 0.0;
  // The same for blockwise-FP8 experts; 0 = moe_copy_bytes. Hopper's
  // blockwise path quantizes and rescales the copies in kernels of its own.
  double moe_fp8_blockwise_copy_bytes = 0.0;
  // Fraction of the FP8 GEMM ceiling (peak_fp8_tflops ·
  // gemm_max_efficiency_fp8) that MLA's decode attention reaches over an
  // FP8 latent cache (the serving model): TensorRT-LLM's Blackwell kernels
  // run its MMAs in FP8. 0 = it runs at the BF16 ceiling, as on Hopper,
  // whose kernels dequantize the cache to BF16.
  double mla_fp8_kv_relative = 0.0;
  // Fixed time of MLA's decode attention per sequence and local head, per
  // layer, in nanoseconds, beside its context-proportional time (the
  // kernel's per-tile prologue and split-KV combine). 0 = not priced.
  double mla_decode_head_ns = 0.0;

  // Peak for a precision (bf16 and fp16 share tensor-core rate, every FP8
  // recipe runs at the FP8 rate); 0 if absent.
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
  // Margin the user keeps free on top of the reserve (GiB per GPU; 0 = none):
  // `--memory-headroom` or the cluster YAML key memory_headroom_gib. A
  // percentage ("--memory-headroom 5%") is resolved against CapacityGib() when
  // the inputs are read (tuner/inputs/inputs.cc), so this is always GiB. Plans
  // must fit in what is left, so a search keeps the margin on every candidate.
  double memory_headroom_gib = 0;

  // Host CPU: how long it takes to launch eager kernels from Python, relative
  // to the x86 hosts of DGX H100/B200/B300 the host-launch constants were
  // fitted on (costmodel/host_launch.h; 1 = such a host). Grace (GB200,
  // GB300) is slower per core: 1.5 (docs/costmodel.md §4, Host launches).
  double host_launch_factor = 1.0;

  // CPU cores per node that the ranks of a node share; 0 = one device per
  // rank (every GPU preset). Set by the `local` preset (the CPU engine runs
  // one process per rank), where a node may hold more ranks than cores.
  int host_cores = 0;

  // The memory the driver exposes per GPU in GiB: gpu.hbm_capacity_gib, or
  // gpu.hbm_gb·1e9 bytes when that is unknown.
  double CapacityGib() const;
  // Usable HBM in GiB: CapacityGib() − memory_reserve_gib −
  // memory_headroom_gib. The cost model's Estimate::memory_capacity_bytes.
  double UsableMemoryGib() const;
  Status Validate(const std::string& where = "") const;
};

// A plan whose predicted total memory is at least this fraction of its usable
// memory (and still fits) is flagged "near capacity" in reports. The cost
// model predicts the caching allocator's fragmentation as one fraction of the
// allocated peak, but measured runs of the same configuration range from 2.8
// to 7.9 % (docs/costmodel.md §2 "Memory", the fragmentation row; SimuMax's
// B200 runs), and fragmentation varies from run to run with allocation order:
// a plan within 5 % of the limit may run out of memory where the prediction
// says it fits. --memory-headroom keeps a margin instead.
inline constexpr double kNearCapacityFraction = 0.95;

// True when a plan fits (total_bytes <= capacity_bytes) and total_bytes >=
// kNearCapacityFraction · capacity_bytes. Bytes, per GPU; false for a capacity
// <= 0.
bool IsNearMemoryCapacity(double total_bytes, double capacity_bytes);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_CLUSTER_SPEC_H_
