#include "costmodel/datasheet_calibration.h"

#include <algorithm>

namespace meshtune::costmodel {

using search_spaces::ClusterSpec;
using search_spaces::Precision;

DatasheetCalibration::DatasheetCalibration(const ClusterSpec& c,
                                           AttentionKernel attention)
    : attention_(attention) {
  kernel_efficiency_ = TrainingKernelEfficiency(c.gpu);
  memory_efficiency_ = TrainingMemoryEfficiency(c.gpu);
  grouped_gemm_slowdown_ =
      kernel_efficiency_ / TrainingGroupedGemmEfficiency(c.gpu);
  // Hopper: fp8 tensor cores and a bf16 peak below Blackwell's.
  if (c.gpu.peak_fp8_tflops > 0 && c.gpu.peak_bf16_tflops < 1500) {
    fp8_bwd_slowdown_ = kHopperFp8SplitAccumulatorSlowdown;
  }
  peak_bf16_flops_ = c.gpu.peak_bf16_tflops * 1e12;
  peak_fp8_flops_ = c.gpu.peak_fp8_tflops * 1e12;
  peak_fp4_flops_ = c.gpu.peak_fp4_tflops * 1e12;
  peak_fp32_flops_ = c.gpu.peak_fp32_tflops * 1e12;
  half_size_bf16_flops_ = peak_bf16_flops_ * kGemmHalfSizeSeconds;
  half_size_fp8_flops_ = peak_fp8_flops_ > 0
                             ? peak_fp8_flops_ * kGemmHalfSizeSeconds
                             : half_size_bf16_flops_;
  half_size_fp4_flops_ = peak_fp4_flops_ > 0
                             ? peak_fp4_flops_ * kGemmHalfSizeSeconds
                             : half_size_fp8_flops_;
  if (c.gpu.gemm_tile_half_dim > 0) half_dim_ = c.gpu.gemm_tile_half_dim;
  ceiling_bf16_ = c.gpu.gemm_max_efficiency_bf16;
  ceiling_fp8_ = c.gpu.gemm_max_efficiency_fp8;
  ceiling_fp4_ = c.gpu.GemmMaxEfficiency(Precision::kNvfp4);
  ceiling_fp8_blockwise_ = c.gpu.GemmMaxEfficiency(Precision::kFp8Blockwise);
  hbm_Bps_ = c.gpu.hbm_gbps * 1e9 * c.gpu.hbm_efficiency;
  nvlink_.busbw_Bps = c.nvlink_busbw_gbps * 1e9;
  nvlink_.latency_s = c.nvlink_latency_us * 1e-6;
  nvlink_.ramp_s = kRampSeconds;
  nvls_allreduce_Bps_ = c.nvls_allreduce_busbw_gbps * 1e9;
  network_.busbw_Bps = c.nic_busbw_gbps * 1e9;
  network_.latency_s = c.network_latency_us * 1e-6;
  network_.ramp_s = kRampSeconds;
}

double DatasheetCalibration::KernelEfficiency(const ModelOptions& o) const {
  return o.enabled(Refinement::kTrainingKernelEfficiency) ? kernel_efficiency_
                                                          : 1.0;
}

double DatasheetCalibration::MemoryEfficiency(const ModelOptions& o) const {
  return o.enabled(Refinement::kTrainingKernelEfficiency) ? memory_efficiency_
                                                          : 1.0;
}

double DatasheetCalibration::SizeFactor(double flops, double half_size,
                                        const ModelOptions& o) const {
  return o.enabled(Refinement::kGemmSizeEfficiency)
             ? flops / (flops + half_size)
             : 1.0;
}

double DatasheetCalibration::GemmEfficiency(int64_t m, int64_t n, int64_t k,
                                            Precision precision,
                                            const ModelOptions& o) const {
  if (m <= 0 || n <= 0 || k <= 0) return 1.0;
  const bool quantized = search_spaces::IsQuantized(precision);
  // NVFP4 and blockwise FP8 reach their own measured ceilings; training
  // instead keeps FP8's (NVFP4 under its fitted kNvfp4RelativeEfficiency,
  // GemmTime_s).
  const bool serving = !o.enabled(Refinement::kTrainingKernelEfficiency);
  double ceiling = quantized ? ceiling_fp8_ : ceiling_bf16_;
  if (serving && precision == Precision::kNvfp4) ceiling = ceiling_fp4_;
  if (serving && precision == Precision::kFp8Blockwise) {
    ceiling = ceiling_fp8_blockwise_;
  }
  // The fixed per-kernel time forgoes FLOPs at the GEMM's own rate.
  const double half_size =
      precision == Precision::kNvfp4
          ? half_size_fp4_flops_
          : (quantized ? half_size_fp8_flops_ : half_size_bf16_flops_);
  const double flops = 2.0 * static_cast<double>(m) * n * k;
  const double size = SizeFactor(flops, half_size, o);
  double shape = 1.0;
  if (o.enabled(Refinement::kGemmShapeEfficiency)) {
    const double dm = static_cast<double>(m), dn = static_cast<double>(n),
                 dk = static_cast<double>(k);
    shape =
        dm / (dm + half_dim_) * dn / (dn + half_dim_) * dk / (dk + half_dim_);
  }
  return ceiling * size * shape;
}

double DatasheetCalibration::GemmTime_s(int64_t m, int64_t n, int64_t k,
                                        Precision precision,
                                        const ModelOptions& o) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0.0;
  // fp8 on a GPU without fp8 tensor cores: the caller should have rejected
  // the config (CheckConfig); fall back to the 16-bit rate rather than
  // dividing by zero.
  // NVFP4 runs at the FP4 rate where the GPU has one (twice FP8 on B200),
  // with FP8's efficiency ceiling.
  const bool fp4 = precision == Precision::kNvfp4 && peak_fp4_flops_ > 0;
  const bool fp8 =
      !fp4 && search_spaces::IsQuantized(precision) && peak_fp8_flops_ > 0;
  const double peak =
      fp4 ? peak_fp4_flops_ : (fp8 ? peak_fp8_flops_ : peak_bf16_flops_);
  const double eff =
      GemmEfficiency(m, n, k, fp4 || fp8 ? precision : Precision::kBf16, o);
  const double fp4_relative =
      fp4 && o.enabled(Refinement::kTrainingKernelEfficiency)
          ? kNvfp4RelativeEfficiency
          : 1.0;
  return 2.0 * static_cast<double>(m) * n * k /
         (peak * KernelEfficiency(o) * eff * fp4_relative);
}

double DatasheetCalibration::GroupedGemmTime_s(int64_t m, int64_t n, int64_t k,
                                               Precision p, bool fused,
                                               const ModelOptions& o) const {
  return GemmTime_s(m, n, k, p, o) * GroupedGemmSlowdown(fused, o);
}

double DatasheetCalibration::GroupedGemmSlowdown(bool fused,
                                                 const ModelOptions& o) const {
  if (fused || !o.enabled(Refinement::kGroupedGemmEfficiency) ||
      !o.enabled(Refinement::kTrainingKernelEfficiency)) {
    return 1.0;
  }
  return grouped_gemm_slowdown_;
}

double DatasheetCalibration::AttentionTime_s(int64_t batch_heads, int64_t q_len,
                                             int64_t kv_len, int64_t head_dim,
                                             bool causal, bool backward,
                                             const ModelOptions& o) const {
  const double pairs = static_cast<double>(batch_heads) * q_len * kv_len;
  if (pairs <= 0) return 0.0;
  if (attention_ != AttentionKernel::kUnfused) {
    const double flops =
        4.0 * pairs * head_dim * (causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
    // FlashAttention-2 loses its Ampere efficiency from Hopper on (the
    // first GPUs with fp8 tensor cores).
    const double relative =
        attention_ == AttentionKernel::kFlash2 && peak_fp8_flops_ > 0
            ? kFlash2HopperRelativeEfficiency
            : kAttentionRelativeEfficiency;
    double eff = ceiling_bf16_ * relative *
                 SizeFactor(flops, half_size_bf16_flops_, o) *
                 KernelEfficiency(o);
    if (backward && o.enabled(Refinement::kAttentionBackwardEfficiency)) {
      eff *= kAttentionBackwardRelative;
    }
    return flops / (peak_bf16_flops_ * eff);
  }
  // Unfused: two batched GEMMs over the full score matrix, one kernel each
  // (size factor on the whole batch, shape factor on one head's GEMM).
  const double flops = 4.0 * pairs * head_dim * (backward ? 2.0 : 1.0);
  const double dq = static_cast<double>(q_len),
               dk = static_cast<double>(kv_len),
               dd = static_cast<double>(head_dim);
  const double shape = o.enabled(Refinement::kGemmShapeEfficiency)
                           ? dq / (dq + half_dim_) * dk / (dk + half_dim_) *
                                 dd / (dd + half_dim_)
                           : 1.0;
  const double eff = ceiling_bf16_ * shape *
                     SizeFactor(flops, half_size_bf16_flops_, o) *
                     KernelEfficiency(o);
  const double bytes =
      pairs * (backward ? kUnfusedScoreBytesBwd : kUnfusedScoreBytesFwd);
  return flops / (peak_bf16_flops_ * eff) + MemoryTime_s(bytes, o);
}

double DatasheetCalibration::AttentionForwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& o) const {
  return AttentionTime_s(batch_heads, q_len, kv_len, head_dim, causal, false,
                         o);
}

double DatasheetCalibration::AttentionBackwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& o) const {
  return AttentionTime_s(batch_heads, q_len, kv_len, head_dim, causal, true, o);
}

double DatasheetCalibration::TrainingKernelEfficiency(
    const search_spaces::GpuSpec& gpu) {
  if (gpu.peak_fp8_tflops <= 0) return kAmpereKernelEfficiency;
  if (gpu.peak_bf16_tflops < 1500) return kHopperKernelEfficiency;
  return IsBlackwellUltra(gpu) ? kBlackwellUltraKernelEfficiency
                               : kBlackwellKernelEfficiency;
}

bool DatasheetCalibration::IsBlackwellUltra(const search_spaces::GpuSpec& gpu) {
  // Blackwell Ultra (B300, GB300) triples its FP8 rate in NVFP4; Blackwell
  // (B200, GB200) doubles it.
  return gpu.peak_fp8_tflops > 0 && gpu.peak_bf16_tflops >= 1500 &&
         gpu.peak_fp4_tflops >= 2.5 * gpu.peak_fp8_tflops;
}

double DatasheetCalibration::TrainingMemoryEfficiency(
    const search_spaces::GpuSpec& gpu) {
  return IsBlackwellUltra(gpu) ? kBlackwellKernelEfficiency
                               : TrainingKernelEfficiency(gpu);
}

double DatasheetCalibration::TrainingGroupedGemmEfficiency(
    const search_spaces::GpuSpec& gpu) {
  return IsBlackwellUltra(gpu) ? kBlackwellKernelEfficiency
                               : TrainingKernelEfficiency(gpu);
}

double DatasheetCalibration::Fp8BackwardGemmSlowdown(
    const ModelOptions& o) const {
  return o.enabled(Refinement::kFp8SplitAccumulator) ? fp8_bwd_slowdown_ : 1.0;
}

double DatasheetCalibration::ScanTime_s(double flops,
                                        const ModelOptions& o) const {
  if (flops <= 0) return 0.0;
  if (peak_fp32_flops_ <= 0) {
    return flops / (peak_bf16_flops_ * ceiling_bf16_ * KernelEfficiency(o));
  }
  return flops / (peak_fp32_flops_ * kScanFp32Efficiency);
}

double DatasheetCalibration::MemoryTime_s(double bytes,
                                          const ModelOptions& o) const {
  return bytes > 0 ? bytes / (hbm_Bps_ * MemoryEfficiency(o)) : 0.0;
}

double DatasheetCalibration::CollectiveTime_s(Collective op, double bytes,
                                              const CommGroup& g,
                                              const ModelOptions& o) const {
  if (g.size <= 1 || bytes <= 0) return 0.0;
  LinkTier nvlink = nvlink_;
  LinkTier network = network_;
  if (!o.enabled(Refinement::kCollectiveRamp)) {
    nvlink.latency_s = nvlink.ramp_s = 0;
    network.latency_s = network.ramp_s = 0;
  }
  if (g.nodes <= 1) {
    if (op == Collective::kAllReduce && nvls_allreduce_Bps_ > 0 && g.size > 2 &&
        o.enabled(Refinement::kNvls)) {
      nvlink.busbw_Bps = nvls_allreduce_Bps_;
    }
    return FlatCollectiveTime_s(op, bytes, g.size, nvlink);
  }
  if (op == Collective::kSendRecv) {
    return FlatCollectiveTime_s(op, bytes, 2, network);
  }
  const int64_t r = std::max<int64_t>(1, g.ranks_per_node);
  if (r == 1 || !o.enabled(Refinement::kHierarchicalCollectives)) {
    return FlatCollectiveTime_s(op, bytes, g.size, network);
  }
  const double shard = bytes / static_cast<double>(r);
  // The alternative NCCL also has: one flat ring whose r channels leave
  // each domain through the members' r rail NICs, so every ring edge moves
  // at min(NVLink, r·NIC) busbw (nccl-tests multi-node busbw on 8-NIC
  // DGX nodes ≈ 8 × the NIC rate, capped by NVLink). NCCL's tuner picks
  // the faster of the two.
  LinkTier rail = network;
  rail.busbw_Bps = std::min(nvlink.busbw_Bps, r * network.busbw_Bps);
  switch (op) {
    case Collective::kAllReduce:
      // Intra RS, inter AR of S/r on each of the r NICs, intra AG
      // (ml-engineering network/README "hierarchical all-reduce").
      return std::min(
          FlatCollectiveTime_s(Collective::kReduceScatter, bytes, r, nvlink) +
              FlatCollectiveTime_s(Collective::kAllReduce, shard, g.nodes,
                                   network) +
              FlatCollectiveTime_s(Collective::kAllGather, bytes, r, nvlink),
          FlatCollectiveTime_s(op, bytes, g.size, rail));
    case Collective::kAllGather:
      return std::min(
          FlatCollectiveTime_s(Collective::kAllGather, shard, g.nodes,
                               network) +
              FlatCollectiveTime_s(Collective::kAllGather, bytes, r, nvlink),
          FlatCollectiveTime_s(op, bytes, g.size, rail));
    case Collective::kReduceScatter:
      return std::min(
          FlatCollectiveTime_s(Collective::kReduceScatter, bytes, r, nvlink) +
              FlatCollectiveTime_s(Collective::kReduceScatter, shard, g.nodes,
                                   network),
          FlatCollectiveTime_s(op, bytes, g.size, rail));
    case Collective::kAllToAll: {
      // Per rank: (r−1)/n of the buffer stays on NVLink, (n−r)/n leaves the
      // domain through the rank's NIC; the two proceed concurrently.
      const double n = static_cast<double>(g.size);
      const double intra = bytes * (r - 1) / n / nvlink.busbw_Bps;
      const double inter = bytes * (n - r) / n / network.busbw_Bps;
      return (g.size - 1) * network.latency_s + network.ramp_s +
             std::max(intra, inter);
    }
    case Collective::kSendRecv:
      break;
  }
  return 0.0;
}

}  // namespace meshtune::costmodel
