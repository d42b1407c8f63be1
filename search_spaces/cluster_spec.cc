#include "search_spaces/cluster_spec.h"

#include <sstream>
#include <utility>
#include <vector>

#include "search_spaces/spec_validation.h"

namespace meshtune::search_spaces {
namespace {

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
// A host that launches 100 times slower than a DGX's x86 is a typo; the
// bound also keeps host times finite.
constexpr double kMaxHostLaunchFactor = 100;

std::string Num(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

Status NotPositive(const KeyLocator& where, const std::string& key, double v) {
  return Status::InvalidArgument(
      Located(where(key),
              key + ": expected a positive number, got '" + Num(v) + "'"),
      "set " + key + " to the datasheet or measured value (> 0)");
}

Status Negative(const KeyLocator& where, const std::string& key, double v) {
  return Status::InvalidArgument(
      Located(where(key),
              key + ": expected a non-negative number, got '" + Num(v) + "'"),
      "set " + key + " to 0 or more");
}

// Efficiencies are fractions of a peak: in (0, 1].
Status CheckFraction(const KeyLocator& where, const std::string& key,
                     double v) {
  if (v > 0 && v <= 1) return Status::Ok();
  return Status::InvalidArgument(
      Located(where(key),
              key + ": expected a fraction in (0, 1], got '" + Num(v) + "'"),
      "write achieved / peak, e.g. 0.8 for 80 %");
}

}  // namespace

const char* ToString(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kFp8Tensorwise:
      return "fp8-tensorwise";
    case Precision::kFp8Blockwise:
      return "fp8-blockwise";
    case Precision::kMxfp8:
      return "mxfp8";
    case Precision::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

double GpuSpec::PeakTflops(Precision p) const {
  // BF16 and FP16 run at the same tensor-core rate on every GPU we model.
  if (p == Precision::kNvfp4) return peak_fp4_tflops;
  return IsFp8(p) ? peak_fp8_tflops : peak_bf16_tflops;
}

double GpuSpec::GemmMaxEfficiency(Precision p) const {
  if (p == Precision::kNvfp4 && gemm_max_efficiency_fp4 > 0) {
    return gemm_max_efficiency_fp4;
  }
  if (p == Precision::kFp8Blockwise) {
    return gemm_max_efficiency_fp8 * fp8_blockwise_relative;
  }
  return IsQuantized(p) ? gemm_max_efficiency_fp8 : gemm_max_efficiency_bf16;
}

double ClusterSpec::CapacityGib() const {
  return gpu.hbm_capacity_gib > 0 ? gpu.hbm_capacity_gib
                                  : gpu.hbm_gb * 1e9 / kBytesPerGib;
}

double ClusterSpec::UsableMemoryGib() const {
  return CapacityGib() - memory_reserve_gib - memory_headroom_gib;
}

bool IsNearMemoryCapacity(double total_bytes, double capacity_bytes) {
  return capacity_bytes > 0 && total_bytes <= capacity_bytes &&
         total_bytes >= kNearCapacityFraction * capacity_bytes;
}

Status ClusterSpec::Validate(const std::string& where) const {
  return ValidateCluster(*this, [&where](const std::string&) { return where; });
}

Status ValidateCluster(const ClusterSpec& c, const KeyLocator& where) {
  if (c.name.empty()) {
    return Status::InvalidArgument(
        Located(where("name"), "cluster has no name"),
        "add a line 'name: my-cluster'");
  }
  const GpuSpec& g = c.gpu;
  const std::vector<std::pair<std::string, double>> gpu_positive = {
      {"peak_bf16_tflops", g.peak_bf16_tflops},
      {"peak_tf32_tflops", g.peak_tf32_tflops},
      {"peak_fp32_tflops", g.peak_fp32_tflops},
      {"hbm_gb", g.hbm_gb},
      {"hbm_gbps", g.hbm_gbps},
  };
  for (const auto& [key, v] : gpu_positive) {
    if (!(v > 0)) return NotPositive(where, "gpu." + key, v);
  }
  if (g.peak_fp8_tflops < 0) {
    return Negative(where, "gpu.peak_fp8_tflops", g.peak_fp8_tflops);
  }
  if (g.hbm_capacity_gib < 0) {  // 0 = unknown: hbm_gb·1e9 bytes
    return Negative(where, "gpu.hbm_capacity_gib", g.hbm_capacity_gib);
  }
  MESHTUNE_RETURN_IF_ERROR(CheckFraction(where, "gpu.gemm_max_efficiency_bf16",
                                         g.gemm_max_efficiency_bf16));
  MESHTUNE_RETURN_IF_ERROR(
      CheckFraction(where, "gpu.hbm_efficiency", g.hbm_efficiency));
  MESHTUNE_RETURN_IF_ERROR(CheckFraction(where, "gpu.nvfp4_stream_relative",
                                         g.nvfp4_stream_relative));
  MESHTUNE_RETURN_IF_ERROR(
      CheckFraction(where, "gpu.moe_gemm_relative", g.moe_gemm_relative));
  if (g.gemm_max_efficiency_fp4 != 0) {  // 0 = FP8's
    MESHTUNE_RETURN_IF_ERROR(CheckFraction(where, "gpu.gemm_max_efficiency_fp4",
                                           g.gemm_max_efficiency_fp4));
  }
  MESHTUNE_RETURN_IF_ERROR(CheckFraction(where, "gpu.fp8_blockwise_relative",
                                         g.fp8_blockwise_relative));
  MESHTUNE_RETURN_IF_ERROR(CheckFraction(
      where, "gpu.moe_fp8_blockwise_relative", g.moe_fp8_blockwise_relative));
  MESHTUNE_RETURN_IF_ERROR(
      CheckFraction(where, "gpu.moe_nvfp4_relative", g.moe_nvfp4_relative));
  if (g.moe_copy_bytes < 0) {
    return Negative(where, "gpu.moe_copy_bytes", g.moe_copy_bytes);
  }
  if (g.moe_fp8_blockwise_copy_bytes < 0) {
    return Negative(where, "gpu.moe_fp8_blockwise_copy_bytes",
                    g.moe_fp8_blockwise_copy_bytes);
  }
  if (g.mla_decode_head_ns < 0) {
    return Negative(where, "gpu.mla_decode_head_ns", g.mla_decode_head_ns);
  }
  if (g.mla_fp8_kv_relative != 0) {  // 0 = the BF16 ceiling
    MESHTUNE_RETURN_IF_ERROR(
        CheckFraction(where, "gpu.mla_fp8_kv_relative", g.mla_fp8_kv_relative));
  }
  if (g.peak_fp8_tflops > 0) {
    MESHTUNE_RETURN_IF_ERROR(CheckFraction(where, "gpu.gemm_max_efficiency_fp8",
                                           g.gemm_max_efficiency_fp8));
  } else if (g.gemm_max_efficiency_fp8 != 0) {
    return Status::InvalidArgument(
        Located(where("gpu.gemm_max_efficiency_fp8"),
                "gpu.gemm_max_efficiency_fp8 is set but peak_fp8_tflops is 0"),
        "set peak_fp8_tflops for a GPU with FP8 tensor cores, or remove "
        "gemm_max_efficiency_fp8");
  }

  if (c.gpus_per_node < 1) {
    return NotPositive(where, "gpus_per_node", c.gpus_per_node);
  }
  if (c.nvlink_domain_gpus < c.gpus_per_node ||
      c.nvlink_domain_gpus % c.gpus_per_node != 0) {
    return Status::InvalidArgument(
        Located(where("nvlink_domain_gpus"),
                "nvlink_domain_gpus " + std::to_string(c.nvlink_domain_gpus) +
                    " is not a multiple of gpus_per_node " +
                    std::to_string(c.gpus_per_node)),
        "an NVLink domain spans whole nodes: use gpus_per_node (8 on "
        "HGX/DGX) or a multiple of it (72 on GB200 NVL72)");
  }
  const std::vector<std::pair<std::string, double>> positive = {
      {"nvlink_gbps", c.nvlink_gbps},
      {"nvlink_busbw_gbps", c.nvlink_busbw_gbps},
      {"nic_gbps", c.nic_gbps},
      {"nic_busbw_gbps", c.nic_busbw_gbps},
      {"host_launch_factor", c.host_launch_factor},
  };
  for (const auto& [key, v] : positive) {
    if (!(v > 0)) return NotPositive(where, key, v);
  }
  if (c.host_launch_factor > kMaxHostLaunchFactor) {
    return Status::InvalidArgument(
        Located(where("host_launch_factor"),
                "host_launch_factor " + Num(c.host_launch_factor) +
                    " is above " + Num(kMaxHostLaunchFactor)),
        "it is the host's launch time relative to a DGX x86 host: 1 for "
        "x86, 1.5 for Grace");
  }
  const std::vector<std::pair<std::string, double>> non_negative = {
      {"nvlink_latency_us", c.nvlink_latency_us},
      {"network_latency_us", c.network_latency_us},
      {"nvls_allreduce_busbw_gbps", c.nvls_allreduce_busbw_gbps},
      {"memory_reserve_gib", c.memory_reserve_gib},
      {"memory_headroom_gib", c.memory_headroom_gib},
  };
  for (const auto& [key, v] : non_negative) {
    if (v < 0) return Negative(where, key, v);
  }
  // A ring's bus bandwidth cannot beat the per-direction line rate (NVLS can,
  // because the switch reduces in-network, so it is not checked here).
  if (c.nvlink_busbw_gbps > c.nvlink_gbps) {
    return Status::InvalidArgument(
        Located(where("nvlink_busbw_gbps"),
                "nvlink_busbw_gbps " + Num(c.nvlink_busbw_gbps) +
                    " exceeds the line rate nvlink_gbps " + Num(c.nvlink_gbps)),
        "nvlink_busbw_gbps is the achieved ring bus bandwidth (e.g. 370 for "
        "H100); nvlink_gbps is per GPU, one direction (450 for H100)");
  }
  if (c.nic_busbw_gbps > c.nic_gbps) {
    return Status::InvalidArgument(
        Located(where("nic_busbw_gbps"),
                "nic_busbw_gbps " + Num(c.nic_busbw_gbps) +
                    " exceeds the line rate nic_gbps " + Num(c.nic_gbps)),
        "both are GB/s per GPU: 400 Gb/s NDR is nic_gbps 50, about 47 "
        "achieved");
  }
  if (c.UsableMemoryGib() <= 0) {
    if (c.memory_headroom_gib > 0) {
      return Status::InvalidArgument(
          Located(where("memory_headroom_gib"),
                  "memory_headroom_gib " + Num(c.memory_headroom_gib) +
                      " with memory_reserve_gib " + Num(c.memory_reserve_gib) +
                      " leaves no usable memory of " + Num(c.CapacityGib()) +
                      " GiB HBM"),
          "keep the headroom below " +
              Num(c.CapacityGib() - c.memory_reserve_gib) +
              " GiB; a few GiB or percent is typical");
    }
    return Status::InvalidArgument(
        Located(where("memory_reserve_gib"),
                "memory_reserve_gib " + Num(c.memory_reserve_gib) +
                    " leaves no usable memory of " + Num(c.CapacityGib()) +
                    " GiB HBM"),
        "the reserve is a few GiB per GPU (3 is typical)");
  }
  return Status::Ok();
}

}  // namespace meshtune::search_spaces
