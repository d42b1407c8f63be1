// GpuSpec/ClusterSpec accessors, validation and the cluster YAML parser.
#include "search_spaces/cluster_spec.h"

#include <gtest/gtest.h>

#include <string>

#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

const char kCluster[] =
    "name: lab\n"                        // 1
    "gpu:\n"                             // 2
    "  peak_bf16_tflops: 100\n"          // 3
    "  peak_tf32_tflops: 50\n"           // 4
    "  peak_fp32_tflops: 10\n"           // 5
    "  hbm_gb: 32\n"                     // 6
    "  hbm_gbps: 1000\n"                 // 7
    "  gemm_max_efficiency_bf16: 0.8\n"  // 8
    "gpus_per_node: 4\n"                 // 9
    "nvlink_gbps: 100\n"                 // 10
    "nvlink_busbw_gbps: 80\n"            // 11
    "nvlink_latency_us: 3\n"             // 12
    "nic_gbps: 25\n"                     // 13
    "nic_busbw_gbps: 24\n"               // 14
    "network_latency_us: 10\n";          // 15

std::string Replace(std::string text, const std::string& from,
                    const std::string& to) {
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

Status ParseError(const std::string& text) {
  StatusOr<ClusterSpec> c = ParseClusterYaml(text, "c.yaml");
  EXPECT_FALSE(c.ok()) << "expected an error for:\n" << text;
  return c.status();
}

constexpr double kGib = 1024.0 * 1024.0 * 1024.0;

TEST(ClusterYamlTest, MinimalFileGetsDefaults) {
  StatusOr<ClusterSpec> c = ParseClusterYaml(kCluster, "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "lab");
  EXPECT_EQ(c->gpu.display_name, "lab");
  EXPECT_EQ(c->nvlink_domain_gpus, 4);  // one node
  EXPECT_EQ(c->gpu.peak_fp8_tflops, 0);
  EXPECT_EQ(c->gpu.hbm_efficiency, 0.9);
  EXPECT_EQ(c->memory_reserve_gib, 3.0);
  EXPECT_EQ(c->nvls_allreduce_busbw_gbps, 0);
  // 32e9 B = 29.8023 GiB, minus the 3 GiB reserve.
  EXPECT_NEAR(c->UsableMemoryGib(), 32e9 / kGib - 3.0, 1e-12);
  EXPECT_NEAR(c->UsableMemoryGib(), 26.8023, 1e-4);
}

TEST(ClusterYamlTest, PeaksAndEfficienciesByPrecision) {
  StatusOr<ClusterSpec> c =
      ParseClusterYaml(Replace(kCluster, "  hbm_gb: 32\n",
                               "  hbm_gb: 32\n  peak_fp8_tflops: 200\n"
                               "  gemm_max_efficiency_fp8: 0.7\n"),
                       "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->gpu.PeakTflops(Precision::kBf16), 100);
  EXPECT_EQ(c->gpu.PeakTflops(Precision::kFp16), 100);
  EXPECT_EQ(c->gpu.PeakTflops(Precision::kFp8), 200);
  EXPECT_EQ(c->gpu.GemmMaxEfficiency(Precision::kBf16), 0.8);
  EXPECT_EQ(c->gpu.GemmMaxEfficiency(Precision::kFp16), 0.8);
  EXPECT_EQ(c->gpu.GemmMaxEfficiency(Precision::kFp8), 0.7);
  EXPECT_STREQ(ToString(Precision::kBf16), "bf16");
  EXPECT_STREQ(ToString(Precision::kFp16), "fp16");
  EXPECT_STREQ(ToString(Precision::kFp8), "fp8");
}

TEST(ClusterYamlTest, GpuFromPreset) {
  const std::string text =
      Replace(kCluster,
              "gpu:\n  peak_bf16_tflops: 100\n  peak_tf32_tflops: 50\n"
              "  peak_fp32_tflops: 10\n  hbm_gb: 32\n  hbm_gbps: 1000\n"
              "  gemm_max_efficiency_bf16: 0.8\n",
              "gpu: H100\n");
  StatusOr<ClusterSpec> c = ParseClusterYaml(text, "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->gpu.peak_bf16_tflops, 989);
  EXPECT_EQ(c->gpu.hbm_gb, 80);
  EXPECT_EQ(c->gpus_per_node, 4);
  Status s = ParseError(Replace(text, "gpu: H100", "gpu: h900"));
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "c.yaml:2: gpu: unknown cluster preset 'h900'");
}

TEST(ClusterYamlTest, UnknownGpuKeyIsLocatedInsideTheGpuMapping) {
  Status s = ParseError(Replace(kCluster, "hbm_gbps:", "hmb_gbps:"));
  EXPECT_EQ(s.message(), "c.yaml:7: unknown key 'hmb_gbps' in gpu");
  EXPECT_EQ(s.hint(), "did you mean 'hbm_gbps'?");
  s = ParseError(Replace(kCluster, "nic_gbps:", "nic_gbs:"));
  EXPECT_EQ(s.message(), "c.yaml:13: unknown key 'nic_gbs' in cluster");
  EXPECT_EQ(s.hint(), "did you mean 'nic_gbps'?");
}

TEST(ClusterYamlTest, TypeAndRangeErrors) {
  Status s = ParseError(Replace(kCluster, "hbm_gb: 32", "hbm_gb: lots"));
  EXPECT_EQ(s.message(),
            "c.yaml:6: hbm_gb: expected a non-negative number, got 'lots'");
  s = ParseError(Replace(kCluster, "hbm_gb: 32", "hbm_gb: 0"));
  EXPECT_EQ(s.message(),
            "c.yaml:6: gpu.hbm_gb: expected a positive number, got '0'");
  s = ParseError(
      Replace(kCluster, "efficiency_bf16: 0.8", "efficiency_bf16: 1.2"));
  EXPECT_EQ(s.message(),
            "c.yaml:8: gpu.gemm_max_efficiency_bf16: expected a fraction in "
            "(0, 1], got '1.2'");
  s = ParseError(Replace(kCluster, "gpus_per_node: 4", "gpus_per_node: 0"));
  EXPECT_EQ(s.message(),
            "c.yaml:9: gpus_per_node: expected a positive integer, got '0'");
}

TEST(ClusterYamlTest, ConsistencyErrors) {
  Status s = ParseError(std::string(kCluster) + "nvlink_domain_gpus: 6\n");
  EXPECT_EQ(s.message(),
            "c.yaml:16: nvlink_domain_gpus 6 is not a multiple of "
            "gpus_per_node 4");
  s = ParseError(Replace(kCluster, "nic_busbw_gbps: 24", "nic_busbw_gbps: 30"));
  EXPECT_EQ(s.message(),
            "c.yaml:14: nic_busbw_gbps 30 exceeds the line rate nic_gbps 25");
  s = ParseError(
      Replace(kCluster, "nvlink_busbw_gbps: 80", "nvlink_busbw_gbps: 120"));
  EXPECT_EQ(s.message(),
            "c.yaml:11: nvlink_busbw_gbps 120 exceeds the line rate "
            "nvlink_gbps 100");
  s = ParseError(Replace(kCluster, "  hbm_gb: 32\n",
                         "  hbm_gb: 32\n  gemm_max_efficiency_fp8: 0.7\n"));
  EXPECT_EQ(s.message(),
            "c.yaml:7: gpu.gemm_max_efficiency_fp8 is set but "
            "peak_fp8_tflops is 0");
  s = ParseError(std::string(kCluster) + "memory_reserve_gib: 40\n");
  EXPECT_EQ(s.message().rfind("c.yaml:16: memory_reserve_gib 40 leaves no "
                              "usable memory of 29.8",
                              0),
            0u)
      << s.message();
}

TEST(ClusterSpecTest, HeadroomComesOffTheUsableMemory) {
  // The h100 preset: nvidia-smi total 81559 MiB written as 79.65 GiB, a
  // 3 GiB reserve. By hand: 79.65 - 3 = 76.65; with 4 GiB headroom 72.65.
  StatusOr<ClusterSpec> h100 = ResolveCluster("h100");
  ASSERT_TRUE(h100.ok()) << h100.status().message();
  ClusterSpec c = *h100;
  EXPECT_EQ(c.memory_headroom_gib, 0.0);
  EXPECT_NEAR(c.CapacityGib(), 79.65, 1e-12);
  EXPECT_NEAR(c.UsableMemoryGib(), 76.65, 1e-12);
  c.memory_headroom_gib = 4;
  EXPECT_NEAR(c.UsableMemoryGib(), 72.65, 1e-12);
  EXPECT_NEAR(c.CapacityGib(), 79.65, 1e-12);  // capacity is unchanged
  EXPECT_TRUE(c.Validate().ok());
  // Headroom + reserve must leave something.
  c.memory_headroom_gib = 76.65;
  const Status s = c.Validate("h100");
  EXPECT_EQ(s.message(),
            "h100: memory_headroom_gib 76.65 with memory_reserve_gib 3 leaves "
            "no usable memory of 79.65 GiB HBM");
  EXPECT_EQ(s.hint(),
            "keep the headroom below 76.65 GiB; a few GiB or percent is "
            "typical");
  c.memory_headroom_gib = -1;
  EXPECT_EQ(c.Validate("h100").message(),
            "h100: memory_headroom_gib: expected a non-negative number, got "
            "'-1'");
}

TEST(ClusterYamlTest, MemoryHeadroomKey) {
  StatusOr<ClusterSpec> c = ParseClusterYaml(
      std::string(kCluster) + "memory_headroom_gib: 2.5\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->memory_headroom_gib, 2.5);
  // 32e9 B = 29.8023 GiB, minus the 3 GiB reserve and 2.5 GiB headroom.
  EXPECT_NEAR(c->UsableMemoryGib(), 32e9 / kGib - 5.5, 1e-12);
  EXPECT_NEAR(c->UsableMemoryGib(), 24.3023, 1e-4);

  Status s = ParseError(std::string(kCluster) + "memory_headroom_gib: -1\n");
  EXPECT_EQ(s.message(),
            "c.yaml:16: memory_headroom_gib: expected a non-negative number, "
            "got '-1'");
  s = ParseError(std::string(kCluster) + "memory_headroom_gib: 5%\n");
  EXPECT_EQ(s.message(),
            "c.yaml:16: memory_headroom_gib: expected a non-negative number, "
            "got '5%'");
  s = ParseError(std::string(kCluster) + "memory_headroom_gib: 27\n");
  EXPECT_EQ(s.message(),
            "c.yaml:16: memory_headroom_gib 27 with memory_reserve_gib 3 "
            "leaves no usable memory of 29.8023 GiB HBM");
}

// The host CPU's launch speed: 1 (an x86 DGX host) unless the file says
// otherwise; Grace presets 1.5; positive and at most 100.
TEST(ClusterYamlTest, HostLaunchFactorKey) {
  StatusOr<ClusterSpec> c = ParseClusterYaml(kCluster, "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->host_launch_factor, 1.0);
  c = ParseClusterYaml(std::string(kCluster) + "host_launch_factor: 1.5\n",
                       "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->host_launch_factor, 1.5);
  EXPECT_EQ(ResolveCluster("gb200").value().host_launch_factor, 1.5);
  EXPECT_EQ(ResolveCluster("gb300").value().host_launch_factor, 1.5);
  EXPECT_EQ(ResolveCluster("b300").value().host_launch_factor, 1.0);

  Status s = ParseError(std::string(kCluster) + "host_launch_factor: 0\n");
  EXPECT_EQ(s.message(),
            "c.yaml:16: host_launch_factor: expected a positive number, got "
            "'0'");
  s = ParseError(std::string(kCluster) + "host_launch_factor: 250\n");
  EXPECT_EQ(s.message(), "c.yaml:16: host_launch_factor 250 is above 100");
  EXPECT_EQ(s.hint(),
            "it is the host's launch time relative to a DGX x86 host: 1 for "
            "x86, 1.5 for Grace");
}

TEST(NearMemoryCapacityTest, FlagsWithinFivePercentOfUsable) {
  EXPECT_EQ(kNearCapacityFraction, 0.95);
  const double capacity = 100e9;
  EXPECT_TRUE(IsNearMemoryCapacity(96e9, capacity));
  EXPECT_TRUE(IsNearMemoryCapacity(95e9, capacity));  // the boundary counts
  EXPECT_TRUE(IsNearMemoryCapacity(100e9, capacity));
  EXPECT_FALSE(IsNearMemoryCapacity(94.9e9, capacity));
  EXPECT_FALSE(IsNearMemoryCapacity(90e9, capacity));
  EXPECT_FALSE(IsNearMemoryCapacity(101e9, capacity));  // does not fit at all
  EXPECT_FALSE(IsNearMemoryCapacity(0, 0));
}

TEST(ClusterYamlTest, MissingKeys) {
  Status s = ParseError(Replace(kCluster, "nic_gbps: 25\n", ""));
  EXPECT_EQ(s.message(),
            "c.yaml:1: cluster is missing required key 'nic_gbps'");
  s = ParseError(Replace(kCluster, "  hbm_gbps: 1000\n", ""));
  EXPECT_EQ(s.message(), "c.yaml:3: gpu is missing required key 'hbm_gbps'");
  s = ParseError("name: x\ngpus_per_node: 8\n");
  EXPECT_EQ(s.message(), "c.yaml:1: cluster is missing required key 'gpu'");
}

TEST(ClusterYamlTest, ClusterSection) {
  StatusOr<ClusterSpec> c = ParseClusterYaml(
      "model: gpt3-175b\ncluster: a100\ntraining: {gbs: 8}\n", "best.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "a100-80g");
  // The section `tune --out` writes: a preset plus the node size used.
  c = ParseClusterYaml(
      "model: {}\ncluster:\n  preset: \"h100\"\n  num_gpus: 64\n"
      "  gpus_per_node: 4\n",
      "best.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "h100");
  EXPECT_EQ(c->gpus_per_node, 4);
  EXPECT_EQ(c->nvlink_domain_gpus, 4);
  c = ParseClusterYaml("cluster:\n  preset: gb200\n  gpus_per_node: 2\n",
                       "best.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->nvlink_domain_gpus, 72);  // NVL72 spans trays
  c = ParseClusterYaml("cluster:\n  preset: h900\n", "best.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "best.yaml:2: preset: unknown cluster preset 'h900'");
  c = ParseClusterYaml("cluster:\n  preset: h100\n  nodes: 2\n", "best.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "best.yaml:3: unknown key 'nodes' in cluster");
}

TEST(ClusterSpecTest, ValidateProgrammaticSpec) {
  StatusOr<ClusterSpec> parsed = ParseClusterYaml(kCluster, "c.yaml");
  ASSERT_TRUE(parsed.ok());
  ClusterSpec c = *parsed;
  EXPECT_TRUE(c.Validate().ok());
  c.nic_gbps = 0;
  EXPECT_EQ(c.Validate("cfg").message(),
            "cfg: nic_gbps: expected a positive number, got '0'");
  // Every efficiency and relative rate is a fraction in (0, 1]; the error
  // names the key and echoes the value.
  struct Bad {
    double search_spaces::GpuSpec::*field;
    const char* key;
    double value;
    const char* shown;
  };
  using G = search_spaces::GpuSpec;
  for (const Bad& b : {
           Bad{&G::hbm_efficiency, "hbm_efficiency", 0, "0"},
           Bad{&G::nvfp4_stream_relative, "nvfp4_stream_relative", 1.6, "1.6"},
           Bad{&G::moe_gemm_relative, "moe_gemm_relative", 0, "0"},
           Bad{&G::fp8_blockwise_relative, "fp8_blockwise_relative", 1.2,
               "1.2"},
           Bad{&G::moe_fp8_blockwise_relative, "moe_fp8_blockwise_relative",
               -0.5, "-0.5"},
           Bad{&G::moe_nvfp4_relative, "moe_nvfp4_relative", 2, "2"},
           Bad{&G::mla_fp8_kv_relative, "mla_fp8_kv_relative", 1.5, "1.5"},
       }) {
    c = *parsed;
    c.gpu.*b.field = b.value;
    EXPECT_EQ(c.Validate().message(),
              std::string("gpu.") + b.key +
                  ": expected a fraction in (0, 1], got '" + b.shown + "'");
  }
  for (const auto& [field, key] :
       {std::pair{&G::moe_copy_bytes, "moe_copy_bytes"},
        std::pair{&G::moe_fp8_blockwise_copy_bytes,
                  "moe_fp8_blockwise_copy_bytes"}}) {
    c = *parsed;
    c.gpu.*field = -2;
    EXPECT_EQ(c.Validate().message(),
              std::string("gpu.") + key +
                  ": expected a non-negative number, got '-2'");
  }
  c = *parsed;
  c.gpu.mla_decode_head_ns = -1;
  EXPECT_EQ(c.Validate().message(),
            "gpu.mla_decode_head_ns: expected a non-negative number, got '-1'");
  c = *parsed;
  c.gpu.mla_fp8_kv_relative = 0;  // the BF16 ceiling
  EXPECT_TRUE(c.Validate().ok());
  // The NVFP4 ceiling is optional (0 = FP8's), else a fraction.
  c = *parsed;
  c.gpu.gemm_max_efficiency_fp4 = -0.5;
  EXPECT_EQ(c.Validate().message(),
            "gpu.gemm_max_efficiency_fp4: expected a fraction in (0, 1], got "
            "'-0.5'");
}

}  // namespace
}  // namespace meshtune::search_spaces
