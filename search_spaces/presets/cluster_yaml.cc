// ParseClusterYaml: cluster and GPU keys (the field names of cluster_spec.h)
// -> ClusterSpec.
#include <filesystem>
#include <string>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/spec_validation.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {
namespace {

using yaml_util::MapReader;

const std::vector<std::string>& ClusterKeys() {
  static const std::vector<std::string> kKeys = {
      "name",
      "aliases",
      "gpu",
      "gpus_per_node",
      "nvlink_domain_gpus",
      "nvlink_gbps",
      "nvlink_busbw_gbps",
      "nvlink_latency_us",
      "nvls_allreduce_busbw_gbps",
      "nic_gbps",
      "nic_busbw_gbps",
      "network_latency_us",
      "memory_reserve_gib",
      "memory_headroom_gib",
      "host_launch_factor",
  };
  return kKeys;
}

// The GPU's numeric keys, each a field of GpuSpec of the same name, and
// whether a file must state it.
struct GpuNumber {
  const char* key;
  bool required;
  double GpuSpec::*field;
};
const std::vector<GpuNumber>& GpuNumbers() {
  static const std::vector<GpuNumber> kNumbers = {
      {"peak_bf16_tflops", true, &GpuSpec::peak_bf16_tflops},
      {"peak_fp8_tflops", false, &GpuSpec::peak_fp8_tflops},
      {"peak_fp4_tflops", false, &GpuSpec::peak_fp4_tflops},
      {"peak_tf32_tflops", true, &GpuSpec::peak_tf32_tflops},
      {"peak_fp32_tflops", true, &GpuSpec::peak_fp32_tflops},
      {"hbm_gb", true, &GpuSpec::hbm_gb},
      {"hbm_capacity_gib", false, &GpuSpec::hbm_capacity_gib},
      {"hbm_gbps", true, &GpuSpec::hbm_gbps},
      {"gemm_max_efficiency_bf16", true, &GpuSpec::gemm_max_efficiency_bf16},
      {"gemm_max_efficiency_fp8", false, &GpuSpec::gemm_max_efficiency_fp8},
      {"gemm_max_efficiency_fp4", false, &GpuSpec::gemm_max_efficiency_fp4},
      {"hbm_efficiency", false, &GpuSpec::hbm_efficiency},
      {"gemm_tile_half_dim", false, &GpuSpec::gemm_tile_half_dim},
      {"decode_gemm_min_rows", false, &GpuSpec::decode_gemm_min_rows},
      {"nvfp4_stream_relative", false, &GpuSpec::nvfp4_stream_relative},
      {"moe_gemm_relative", false, &GpuSpec::moe_gemm_relative},
      {"fp8_blockwise_relative", false, &GpuSpec::fp8_blockwise_relative},
      {"moe_fp8_blockwise_relative", false,
       &GpuSpec::moe_fp8_blockwise_relative},
      {"moe_nvfp4_relative", false, &GpuSpec::moe_nvfp4_relative},
      {"moe_copy_bytes", false, &GpuSpec::moe_copy_bytes},
      {"moe_fp8_blockwise_copy_bytes", false,
       &GpuSpec::moe_fp8_blockwise_copy_bytes},
      {"mla_fp8_kv_relative", false, &GpuSpec::mla_fp8_kv_relative},
      {"mla_decode_head_ns", false, &GpuSpec::mla_decode_head_ns},
  };
  return kNumbers;
}

const std::vector<std::string>& GpuKeys() {
  static const std::vector<std::string> kKeys = [] {
    std::vector<std::string> keys = {"display_name"};
    for (const GpuNumber& n : GpuNumbers()) keys.push_back(n.key);
    return keys;
  }();
  return kKeys;
}

// Default allocator/context reserve when a user file leaves it out: CUDA
// context (~0.5 GiB), NCCL and cuBLAS workspaces, and PyTorch-style caching
// allocator fragmentation; commonly 2-5 GB in total.
constexpr double kDefaultMemoryReserveGib = 3.0;

StatusOr<GpuSpec> ParseGpu(const YAML::Node& node, const std::string& source,
                           const std::string& cluster_name) {
  if (node.IsScalar() && !yaml_util::LooksLikePath(node.Scalar())) {
    // `gpu: h100` borrows the GPU of a cluster preset.
    StatusOr<ClusterSpec> preset = ResolveCluster(node.Scalar());
    if (!preset.ok() && preset.status().code() == Status::Code::kNotFound) {
      return Status::NotFound(yaml_util::Where(source, node) +
                                  ": gpu: " + preset.status().message(),
                              preset.status().hint());
    }
    if (!preset.ok()) return preset.status();
    return preset->gpu;
  }
  const MapReader r(node, source, "gpu");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(GpuKeys()));
  GpuSpec g;
  g.display_name = cluster_name;
  MESHTUNE_RETURN_IF_ERROR(r.String("display_name", false, &g.display_name));
  for (const GpuNumber& n : GpuNumbers()) {
    MESHTUNE_RETURN_IF_ERROR(r.Double(n.key, n.required, &(g.*n.field)));
  }
  return g;
}

StatusOr<ClusterSpec> ParseClusterMap(const YAML::Node& node,
                                      const std::string& source) {
  const MapReader r(node, source, "cluster");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(ClusterKeys()));

  ClusterSpec c;
  c.name = yaml_util::Lower(std::filesystem::path(source).stem().string());
  MESHTUNE_RETURN_IF_ERROR(r.String("name", false, &c.name));
  MESHTUNE_RETURN_IF_ERROR(r.StringList("aliases", &c.aliases));
  if (!r.Has("gpu")) return r.Missing("gpu", "h100");
  const YAML::Node gpu_node = node["gpu"];
  StatusOr<GpuSpec> gpu = ParseGpu(gpu_node, source, c.name);
  if (!gpu.ok()) return gpu.status();
  c.gpu = *gpu;

  int64_t gpus_per_node = 0;
  // Bounded before the narrowing to int below (search_spaces/limits.h).
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("gpus_per_node", true, 1, limits::kGpusPerNode, &gpus_per_node));
  int64_t domain = gpus_per_node;  // one node unless the fabric spans more
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("nvlink_domain_gpus", false, 1, limits::kNumGpus, &domain));
  c.gpus_per_node = static_cast<int>(gpus_per_node);
  c.nvlink_domain_gpus = static_cast<int>(domain);
  MESHTUNE_RETURN_IF_ERROR(r.Double("nvlink_gbps", true, &c.nvlink_gbps));
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("nvlink_busbw_gbps", true, &c.nvlink_busbw_gbps));
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("nvlink_latency_us", true, &c.nvlink_latency_us));
  MESHTUNE_RETURN_IF_ERROR(r.Double("nvls_allreduce_busbw_gbps", false,
                                    &c.nvls_allreduce_busbw_gbps));
  MESHTUNE_RETURN_IF_ERROR(r.Double("nic_gbps", true, &c.nic_gbps));
  MESHTUNE_RETURN_IF_ERROR(r.Double("nic_busbw_gbps", true, &c.nic_busbw_gbps));
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("network_latency_us", true, &c.network_latency_us));
  c.memory_reserve_gib = kDefaultMemoryReserveGib;
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("memory_reserve_gib", false, &c.memory_reserve_gib));
  // GiB only: a percentage is a command-line convenience (--memory-headroom).
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("memory_headroom_gib", false, &c.memory_headroom_gib));
  MESHTUNE_RETURN_IF_ERROR(
      r.Double("host_launch_factor", false, &c.host_launch_factor));

  // GPU keys ("gpu.hbm_gb") are located inside the gpu mapping.
  const MapReader gpu_reader(gpu_node, source, "gpu");
  MESHTUNE_RETURN_IF_ERROR(ValidateCluster(c, [&](const std::string& key) {
    if (key.rfind("gpu.", 0) == 0) {
      return gpu_node.IsMap() ? gpu_reader.WhereKey(key.substr(4))
                              : r.WhereKey("gpu");
    }
    return r.WhereKey(key);
  }));
  return c;
}

// The `cluster:` section of a `tune --out` file: {preset, num_gpus,
// gpus_per_node}. num_gpus belongs to the training request and is ignored.
StatusOr<ClusterSpec> ParsePresetRef(const YAML::Node& node,
                                     const std::string& source) {
  const MapReader r(node, source, "cluster");
  MESHTUNE_RETURN_IF_ERROR(
      r.CheckKeys({"preset", "num_gpus", "gpus_per_node"}));
  std::string preset;
  MESHTUNE_RETURN_IF_ERROR(r.String("preset", true, &preset));
  if (yaml_util::LooksLikePath(preset)) {
    return Status::InvalidArgument(
        r.WhereKey("preset") +
            ": preset: expected a cluster preset name, got '" + preset + "'",
        "write e.g. 'preset: h100'; run 'tune gpus' for the list");
  }
  StatusOr<ClusterSpec> c = ResolveCluster(preset);
  if (!c.ok() && c.status().code() == Status::Code::kNotFound) {
    return Status::NotFound(
        r.WhereKey("preset") + ": preset: " + c.status().message(),
        c.status().hint());
  }
  if (!c.ok()) return c.status();
  ClusterSpec out = *c;
  int64_t gpus_per_node = out.gpus_per_node;
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("gpus_per_node", false, 1, limits::kGpusPerNode, &gpus_per_node));
  // A node-sized NVLink domain follows the node size; a multi-node domain
  // (GB200 NVL72) is a property of the fabric and stays.
  if (out.nvlink_domain_gpus <= out.gpus_per_node) {
    out.nvlink_domain_gpus = static_cast<int>(gpus_per_node);
  }
  out.gpus_per_node = static_cast<int>(gpus_per_node);
  MESHTUNE_RETURN_IF_ERROR(ValidateCluster(
      out, [&r](const std::string& key) { return r.WhereKey(key); }));
  return out;
}

}  // namespace

StatusOr<ClusterSpec> ParseClusterYaml(const std::string& text,
                                       const std::string& source) {
  StatusOr<YAML::Node> root = yaml_util::Load(text, source);
  if (!root.ok()) return root.status();
  // Accept a `cluster:` section, as in files written by `tune --out`.
  if (root->IsMap() && (*root)["cluster"]) {
    const YAML::Node cluster = (*root)["cluster"];
    if (cluster.IsScalar() && !yaml_util::LooksLikePath(cluster.Scalar())) {
      return ResolveCluster(cluster.Scalar());
    }
    if (cluster.IsMap() && cluster["preset"])
      return ParsePresetRef(cluster, source);
    return ParseClusterMap(cluster, source);
  }
  return ParseClusterMap(*root, source);
}

}  // namespace meshtune::search_spaces
