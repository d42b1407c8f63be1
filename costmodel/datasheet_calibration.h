// DatasheetCalibration: hardware speeds derived from the cluster preset alone
// (datasheet peaks and commonly measured ceilings), through size- and
// shape-dependent efficiency curves. Name() = "datasheet".
//
// GEMM: time = 2·m·n·k / (peak · eff), with
//   eff = ceiling(precision) · m·n·k-size factor · shape factor,
//   size factor  = F / (F + F0),  F = 2·m·n·k FLOPs,
//                  F0 = kGemmHalfSizeSeconds · the precision's peak
//                  (2 GFLOP at an A100's bf16 peak)
//   shape factor = Π_{d∈{m,n,k}} d / (d + 48)
// The ceiling is the GPU's best measured dense GEMM (gemm_max_efficiency_*,
// "MAMF" in ml-engineering). The size factor reproduces the fall-off for small
// problems (launch and wave quantisation; Calculon's table gives 0.6 at
// 1 GFLOP, ours 0.33 at 1 GFLOP and 0.9 at 18 GFLOP); the shape factor the
// fall-off of skinny GEMMs (tile quantisation: a dimension of 128 runs at
// 73 %, 4096 at 99 %).
//
// Flash attention: its FLOPs at kAttentionRelativeEfficiency × the bf16 GEMM
// ceiling (attention runs in 16-bit even in fp8 recipes), with the same
// size factor as GEMMs. Unfused attention (kUnfused): the QKᵀ and PV batched
// GEMMs over the full (unmasked) score matrix at the GEMM curve, plus the
// score tensor's HBM traffic (kUnfusedScoreBytes*).
//
// Memory-bound work: bytes / (hbm_gbps · hbm_efficiency).
//
// Collectives: comm_model.h alpha-beta per tier. Inside an NVLink domain the
// ring busbw is nvlink_busbw_gbps (all-reduce uses NVLS busbw when the GPU
// has it and the group has more than 2 ranks); across domains a ring over
// one NIC per rank at nic_busbw_gbps; groups with several ranks per domain
// run hierarchically (intra-domain reduce-scatter, inter-domain collective on
// S/ranks_per_node with all NICs in parallel, intra-domain all-gather).
#ifndef MESHTUNE_COSTMODEL_DATASHEET_CALIBRATION_H_
#define MESHTUNE_COSTMODEL_DATASHEET_CALIBRATION_H_

#include <cstdint>
#include <string>

#include "costmodel/calibration.h"
#include "costmodel/comm_model.h"
#include "search_spaces/cluster_spec.h"

namespace meshtune::costmodel {

// Which core-attention implementation the training software runs.
//   kFlash    fused kernels native to the GPU (FlashAttention-2 on Ampere,
//             FlashAttention-3 or cuDNN's fused attention on Hopper and
//             later): current Megatron / Transformer Engine.
//   kFlash2   FlashAttention-2's kernels wherever they run: what 2023 to
//             mid-2024 containers called (FlashAttention-3 appeared in July
//             2024). On Ampere the same as kFlash; on Hopper they use none
//             of its asynchronous tensor-core instructions (WGMMA, TMA) and
//             reach kFlash2HopperRelativeEfficiency of the GEMM ceiling.
//   kUnfused  Megatron 2021-22's baddbmm + softmax + dropout + bmm.
enum class AttentionKernel { kFlash, kFlash2, kUnfused };

class DatasheetCalibration : public Calibration {
 public:
  // Copies the numbers it needs; `cluster` need not outlive this object.
  // kUnfused reproduces Megatron 2021-22 (the published A100 reference runs).
  explicit DatasheetCalibration(
      const search_spaces::ClusterSpec& cluster,
      AttentionKernel attention = AttentionKernel::kFlash);

  std::string Name() const override { return "datasheet"; }
  double GemmTime_s(int64_t m, int64_t n, int64_t k,
                    search_spaces::Precision precision,
                    const ModelOptions& options) const override;
  // GemmTime_s times GroupedGemmSlowdown.
  double GroupedGemmTime_s(int64_t m, int64_t n, int64_t k,
                           search_spaces::Precision precision, bool fused,
                           const ModelOptions& options) const override;
  // An expert GEMM's time over a dense GEMM's of its shape: kernel η /
  // TrainingGroupedGemmEfficiency for Transformer Engine's GroupedLinear
  // (not `fused`), else 1; 1 with the grouped_gemm or kernel_efficiency
  // refinement off. MeasuredCalibration scales its measured GEMMs by it.
  double GroupedGemmSlowdown(bool fused, const ModelOptions& options) const;
  double AttentionForwardTime_s(int64_t batch_heads, int64_t q_len,
                                int64_t kv_len, int64_t head_dim, bool causal,
                                const ModelOptions& options) const override;
  double AttentionBackwardTime_s(int64_t batch_heads, int64_t q_len,
                                 int64_t kv_len, int64_t head_dim, bool causal,
                                 const ModelOptions& options) const override;
  bool UsesFlashAttention() const override {
    return attention_ != AttentionKernel::kUnfused;
  }
  double Fp8BackwardGemmSlowdown(const ModelOptions& options) const override;
  // flops / (FP32 peak · kScanFp32Efficiency); GPUs without a stated FP32
  // peak fall back to the 16-bit GEMM ceiling.
  double ScanTime_s(double flops, const ModelOptions& options) const override;
  double MemoryTime_s(double bytes, const ModelOptions& options) const override;
  double CollectiveTime_s(Collective op, double bytes, const CommGroup& group,
                          const ModelOptions& options) const override;

  // Fraction of the precision's peak a GEMM of this shape reaches: the
  // GPU's ceiling for the precision (GpuSpec::GemmMaxEfficiency; NVFP4 and
  // blockwise FP8 under training's kernel efficiency take FP8's, the fitted
  // training constants being FP8's) times the size and shape fall-offs.
  double GemmEfficiency(int64_t m, int64_t n, int64_t k,
                        search_spaces::Precision precision,
                        const ModelOptions& options = ModelOptions()) const;

  // Curve constants (see the file comment and docs/costmodel.md).
  // The size ramp stands for fixed per-kernel costs (launch, prologue and
  // epilogue, the tail wave), which take time, not FLOPs: F0 is the work
  // the GPU's peak does in kGemmHalfSizeSeconds, in the GEMM's own
  // precision (an fp8 GEMM's fixed cost forgoes fp8 FLOPs). Fitted on the
  // A100 runs as F0 = 2 GFLOP, 6.4 µs of its 312 TFLOP/s; the same 6.4 µs
  // is 6.3 GFLOP of an H100's bf16 peak, 28.8 GFLOP of a B200's fp8, and a
  // few hundred kFLOP of a CPU core (the `local` preset).
  static constexpr double kGemmHalfSizeSeconds = 2e9 / 312e12;
  static constexpr double kGemmHalfDim = 48;     // per-dimension
  static constexpr double kRampSeconds = 50e-6;  // τ of busbw(S)
  // Flash attention (16-bit) forward runs at this fraction of the bf16 GEMM
  // ceiling: FlashAttention-2 reaches up to 73 % of A100 peak forward
  // against a GEMM ceiling of 87 % (Dao 2023, §4.1), i.e. ~0.8 (0.84 at
  // its best shapes).
  static constexpr double kAttentionRelativeEfficiency = 0.8;
  // Its backward reaches a lower fraction: up to 63 % of peak against 73 %
  // forward (Dao 2023, §4.1): 63/73.
  static constexpr double kAttentionBackwardRelative = 0.86;
  // FlashAttention-2's kernels on Hopper (and later): 0.55 of the bf16 GEMM
  // ceiling instead of 0.8, i.e. 0.55 · 0.803 · 0.83 = 37 % of the H100
  // peak forward inside training. Fitted on the nine NeMo 24.03
  // long-sequence rows (LLaMA-2 7B, 4k to 1M tokens, whose error grew with
  // the attention share to the same 1.46× everywhere); the FlashAttention-3
  // paper (Shah et al. 2024, §1) puts FlashAttention-2 at 35 % utilisation
  // of an H100, against 75 % for FlashAttention-3.
  static constexpr double kFlash2HopperRelativeEfficiency = 0.55;
  // fp8 dgrad/wgrad with TE's split accumulator vs the fast-accumulation
  // forward: 1.1–1.2× slower (pytorch/ao#2377, measured on H100; TE's
  // _2X_ACC_DGRAD = _2X_ACC_WGRAD = True, _2X_ACC_FPROP = False). Hopper
  // only: sm100 has no fast-accumulation mode (TransformerEngine#2748).
  static constexpr double kHopperFp8SplitAccumulatorSlowdown = 1.15;
  // Unfused attention streams the [b, a/t, s/c, s] score tensor: forward
  // writes scores (2 B), fused scale-mask-softmax (2 + 2), dropout (2 + 2 +
  // 1-byte mask), read by the PV batched GEMM (2): 13 B per element;
  // backward ~1.5× that (grad in/out of dropout and softmax, both GEMMs).
  static constexpr double kUnfusedScoreBytesFwd = 13;
  static constexpr double kUnfusedScoreBytesBwd = 20;

  // Fraction of the microbenchmark ceilings (GEMM MAMF, flash attention,
  // HBM streaming) that kernels reach inside a real training step: launch
  // gaps, small kernels, host overhead, clocks under sustained load (a
  // power-capped GPU running every SM at once clocks below the
  // microbenchmark). One constant per GPU generation, fitted to the dense
  // (LLaMA, Nemotron-4, GPT) runs of that generation -- Ampere on
  // tests/data/published_calibration.csv, Hopper on its H100 rows and the
  // dense H100 rows of published_dev.csv together, Blackwell and Blackwell
  // Ultra on the dense rows of published_dev.csv -- never per model or row
  // (docs/costmodel.md §Calibration has the fit and its ablation).
  // Generation from the GPU's peaks: no fp8 → Ampere; bf16 peak < 1500
  // TFLOP/s → Hopper; NVFP4 ≥ 2.5× FP8 → Blackwell Ultra; else Blackwell.
  static double TrainingKernelEfficiency(const search_spaces::GpuSpec& gpu);
  // The Blackwell Ultra rule above (B300, GB300).
  static bool IsBlackwellUltra(const search_spaces::GpuSpec& gpu);
  static constexpr double kAmpereKernelEfficiency = 0.85;
  static constexpr double kHopperKernelEfficiency = 0.84;
  static constexpr double kBlackwellKernelEfficiency = 0.72;
  static constexpr double kBlackwellUltraKernelEfficiency = 0.90;
  // The same fraction for memory-bound kernels (HBM streaming). Blackwell
  // Ultra's higher η is its tensor cores' sustained clock under a higher
  // power limit (1100-1400 W against 1000-1200 W); its HBM3e is Blackwell's
  // (8 TB/s), so its memory-bound kernels keep η_Blackwell. Every other
  // generation: TrainingKernelEfficiency.
  static double TrainingMemoryEfficiency(const search_spaces::GpuSpec& gpu);
  // The same fraction for the expert GEMMs of Transformer Engine's
  // GroupedLinear, which runs each local expert as its own cuBLASLt GEMM on
  // several streams (TransformerEngine issues #1386, #1499): many
  // medium-sized GEMMs bound by their own fixed costs, tails and stream
  // scheduling, not by the power-limited clock that Blackwell Ultra raises,
  // so on Blackwell Ultra they keep η_Blackwell; the CuTeDSL fused grouped
  // MLP (one persistent kernel) reaches the generation's η. Every other
  // generation: TrainingKernelEfficiency. Fitted on the MoE rows of
  // published_dev.csv (docs/costmodel.md §4, Grouped GEMMs).
  static double TrainingGroupedGemmEfficiency(
      const search_spaces::GpuSpec& gpu);
  // NVFP4 GEMMs inside training reach this fraction of the FP4 peak times
  // the FP8 ceiling: the 16x1 block scales, the random Hadamard transform
  // of wgrad inputs and the 2D weight scaling cost tensor-core time FP8
  // does not pay. Fitted with the generation constants on the NVFP4
  // LLaMA-3 70B rows (GB200, GB300), before a measured NVFP4 ceiling
  // existed; the forward-only serving GEMMs use that measured ceiling
  // (GpuSpec::gemm_max_efficiency_fp4) instead.
  static constexpr double kNvfp4RelativeEfficiency = 0.74;
  // Mamba-2's chunked scan (mamba_ssm's Triton SSD kernels, which Megatron
  // calls) reaches this fraction of the GPU's FP32 CUDA-core peak, counted
  // in Megatron's 7·d_in·N scan FLOPs per token. The kernels' cumulative
  // sums, segment-sum exponentials and fp32 state passing run on the CUDA
  // cores, so their speed follows the FP32 rate (H100 67, Blackwell 75-80
  // TFLOP/s), not the tensor-core rate that grew 2.3× from Hopper to
  // Blackwell. One constant for every generation, fitted on the Nemotron 3
  // Nano rows of published_dev.csv (docs/costmodel.md §Mamba scan).
  static constexpr double kScanFp32Efficiency = 0.38;

 private:
  double AttentionTime_s(int64_t batch_heads, int64_t q_len, int64_t kv_len,
                         int64_t head_dim, bool causal, bool backward,
                         const ModelOptions& options) const;

  // TrainingKernelEfficiency, or 1 when the refinement is off.
  double KernelEfficiency(const ModelOptions& options) const;
  // TrainingMemoryEfficiency, or 1 when the refinement is off.
  double MemoryEfficiency(const ModelOptions& options) const;
  // F/(F + F0), or 1 when kGemmSizeEfficiency is off.
  // F/(F + F0) with F0 = half_size (one of the half_size_*_flops_ below).
  double SizeFactor(double flops, double half_size,
                    const ModelOptions& options) const;
  double half_size_bf16_flops_ = 0;  // F0 at the bf16 peak
  double half_size_fp8_flops_ = 0;   // at the fp8 peak (bf16's without fp8)
  double half_size_fp4_flops_ = 0;   // at the fp4 peak (fp8's without fp4)
  double half_dim_ = kGemmHalfDim;   // GpuSpec::gemm_tile_half_dim

  AttentionKernel attention_ = AttentionKernel::kFlash;
  double kernel_efficiency_ = 1.0;  // TrainingKernelEfficiency(gpu)
  double memory_efficiency_ = 1.0;  // TrainingMemoryEfficiency(gpu)
  // TrainingKernelEfficiency / TrainingGroupedGemmEfficiency (>= 1).
  double grouped_gemm_slowdown_ = 1.0;
  double fp8_bwd_slowdown_ = 1.0;  // split accumulator (Hopper), else 1
  double peak_bf16_flops_ = 0;     // FLOP/s, datasheet
  double peak_fp8_flops_ = 0;
  double peak_fp4_flops_ = 0;
  double peak_fp32_flops_ = 0;  // CUDA cores; 0 = not stated
  double ceiling_bf16_ = 0;
  double ceiling_fp8_ = 0;
  double ceiling_fp4_ = 0;            // GpuSpec::GemmMaxEfficiency(kNvfp4)
  double ceiling_fp8_blockwise_ = 0;  // ...(kFp8Blockwise)
  double hbm_Bps_ = 0;  // streaming bandwidth, bytes/s (× hbm_efficiency)
  LinkTier nvlink_;
  double nvls_allreduce_Bps_ = 0;
  LinkTier network_;
};

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_DATASHEET_CALIBRATION_H_
