// Calibration: where the cost model's hardware numbers come from.
//
// The datasheet calibration derives GEMM and collective speeds from the
// cluster preset through size-dependent efficiency curves. A measured
// calibration (issue 4: `tune profile` tables in SQLite) will implement the
// same interface, so the estimator never knows which one it has.
#ifndef MESHTUNE_COSTMODEL_CALIBRATION_H_
#define MESHTUNE_COSTMODEL_CALIBRATION_H_

#include <cstdint>
#include <string>

#include "costmodel/model_options.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/collective.h"

namespace meshtune::costmodel {

// The collectives priced here (search_spaces/collective.h holds the enum
// and its names).
using search_spaces::Collective;

// Where a collective runs: group size and how it lies on the fabric.
struct CommGroup {
  int64_t size = 1;            // ranks in the group
  int64_t nodes = 1;           // nodes it spans (1 = all on NVLink)
  int64_t ranks_per_node = 1;  // members per node
};

// The memory-bound elementwise and normalization work of a layer, each
// counted per element of the tensor named below. The datasheet prices them
// as bytes streamed through HBM (bytes per element: ElementwiseBytes); a
// measured calibration can time the engine's own kernels instead (issue 4),
// which matters where they are not bandwidth-bound (the CPU engine's GELU is
// tanhf-bound).
enum class ElementwiseOp {
  kNorm,            // LayerNorm / RMSNorm, per element of the normed tensor
  kBiasDropoutAdd,  // GPT's bias-dropout-add, per element of the residual
  kResidualAdd,     // LLaMA's plain residual add, per element of the residual
  kGelu,            // per element of the f-wide activation
  kSwiglu,          // per output (f-wide) element
  kRope,            // per rotated q/k element
  kCrossEntropy,    // per logit: Megatron's unfused fp32 softmax + loss
  kEmbedding,       // per output element of the lookup
  kCrossEntropyNative,  // per logit: --cross-entropy-fusion-impl native
  kCrossEntropyTe,      // per logit: --cross-entropy-fusion-impl te
};
inline constexpr int kNumElementwiseOps = 10;
// "norm", "bias_dropout_add", "residual_add", "gelu", "swiglu", "rope",
// "cross_entropy", "embedding", "cross_entropy_native", "cross_entropy_te"
// (the profiler's "elem:<name>:fwd|bwd" rows).
const char* ToString(ElementwiseOp op);
// The inverse of ToString; false for any other name.
bool ParseElementwiseOp(const std::string& name, ElementwiseOp* op);

// HBM bytes per element of each elementwise op in the datasheet model
// (bf16 activations, fp32 where Megatron computes in fp32).
//  - Norm: read x, write y (2 + 2); backward reads x, dy and writes dx, with
//    the saved statistics (2×).
//  - Bias-dropout-add: read the branch output, the residual and the dropout
//    mask (1 B), write the sum: 7 B; the plain add has no mask: 6 B;
//    backward 2×.
//  - GELU: read the fc1 output, write the activation (4 B per f element);
//    SwiGLU reads gate and up, writes the product (6 B per output element);
//    backward 2× (they read the saved input and the incoming gradient).
//  - RoPE: read and write q and k in place (4 B per element); backward 2×.
//  - Cross-entropy: Megatron's vocab-parallel cross-entropy in fp32
//    (tensor_parallel/cross_entropy.py), per logit forward: upcast (read 2,
//    write 4), max (4), subtract max (4 + 4), exp in place (4 + 4), sum (4),
//    divide in place, kept for backward (4 + 4) = 38 B; backward: softmax
//    minus one-hot times the loss gradient in place (4 + 4), cast to the
//    16-bit logits gradient (4 + 2) = 14 B.
//  - Cross-entropy, --cross-entropy-loss-fusion with the native impl
//    (megatron/core/fusions/fused_cross_entropy.py, three jit-fused
//    pieces): the max reads the 16-bit logits and writes their fp32 copy
//    (2 + 4), the predicted-logit pass reads it and writes exp (4 + 4), the
//    loss pass divides it in place into the saved softmax (4 + 4) = 22 B;
//    backward reads the softmax and writes the 16-bit gradient (4 + 2) =
//    6 B.
//  - Cross-entropy with the te impl (Transformer Engine
//    parallel_cross_entropy, Triton): one online max/sum pass over the
//    16-bit logits (2), a second that reads them and writes the gradient in
//    their place (2 + 2) = 6 B; backward scales that gradient by the loss
//    gradient in place (2 + 2) = 4 B.
//  - Embedding: gather the rows (+ positions, dropout) forward: 8 B;
//    scatter-add of the gradient into the table backward: 8 B.
double ElementwiseBytes(ElementwiseOp op, bool backward);

// Every timing method takes the ModelOptions of the estimate, so refinements
// that live in the calibration (GEMM curve, kernel efficiency, collective
// ramp, hierarchy, NVLS) can be switched off per call for ablation.
class Calibration {
 public:
  virtual ~Calibration() = default;
  // "datasheet" or "measured:<hardware id>".
  virtual std::string Name() const = 0;
  // Seconds for one dense GEMM [m, k] x [k, n] in `precision`.
  virtual double GemmTime_s(int64_t m, int64_t n, int64_t k,
                            search_spaces::Precision precision,
                            const ModelOptions& options) const = 0;
  // Seconds for one expert's GEMM [m, k] x [k, n] of a grouped MoE expert
  // MLP. `fused`: the CuTeDSL fused grouped MLP (Megatron
  // --use-transformer-engine-op-fuser, ModelSpec::use_transformer_engine_
  // op_fuser) instead of Transformer Engine's GroupedLinear, which runs the
  // experts as separate cuBLASLt GEMMs on several streams. The same as a
  // dense GEMM unless a calibration knows better (DatasheetCalibration:
  // Blackwell Ultra).
  virtual double GroupedGemmTime_s(int64_t m, int64_t n, int64_t k,
                                   search_spaces::Precision precision,
                                   bool fused,
                                   const ModelOptions& options) const {
    (void)fused;
    return GemmTime_s(m, n, k, precision, options);
  }
  // Seconds for one flash-attention forward: `batch_heads` independent
  // heads (micro-batch × local heads) of `q_len` queries against `kv_len`
  // keys of dimension `head_dim`; `causal` halves the (query, key) pairs.
  // FLOPs = 4·batch_heads·q_len·kv_len·head_dim (×½ causal with flash).
  virtual double AttentionForwardTime_s(int64_t batch_heads, int64_t q_len,
                                        int64_t kv_len, int64_t head_dim,
                                        bool causal,
                                        const ModelOptions& options) const = 0;
  // The matching backward (flash: 2.5× the forward FLOPs, since it
  // recomputes QKᵀ; unfused: 2× the GEMMs plus the score-gradient traffic).
  virtual double AttentionBackwardTime_s(int64_t batch_heads, int64_t q_len,
                                         int64_t kv_len, int64_t head_dim,
                                         bool causal,
                                         const ModelOptions& options) const = 0;
  // True when core attention is a fused flash-attention kernel (current
  // Megatron/TE); false for the unfused baddbmm + softmax + dropout + bmm
  // path of Megatron 2021-22, which also stores the 5·a·s²·b softmax
  // activations without recompute. AttentionForwardTime_s covers both.
  virtual bool UsesFlashAttention() const { return true; }
  // Time multiplier of an fp8 backward (dgrad/wgrad) GEMM relative to the
  // forward at the same shape: Transformer Engine runs them with the split
  // accumulator (CUBLASLT_MATMUL_DESC_FAST_ACCUM off), which costs extra
  // promotion instructions on Hopper. 1 where there is no such mode.
  virtual double Fp8BackwardGemmSlowdown(const ModelOptions& options) const {
    (void)options;
    return 1.0;
  }
  // Seconds of `flops` of Mamba-2 chunked-scan work (the SSD kernels:
  // segment sums, exponentials, intra-chunk products and the inter-chunk
  // state passing), counted as Megatron counts the scan: 7·d_in·N FLOPs
  // per token forward (docs/costmodel.md §Mamba scan).
  virtual double ScanTime_s(double flops,
                            const ModelOptions& options) const = 0;
  // Seconds to stream `bytes` through HBM (read + write counted by caller).
  virtual double MemoryTime_s(double bytes,
                              const ModelOptions& options) const = 0;
  // Seconds for one elementwise op over `elements` elements (counted as
  // ElementwiseOp says), forward or backward. Default: the datasheet byte
  // count, ElementwiseBytes(op, backward)·elements through MemoryTime_s.
  virtual double ElementwiseTime_s(ElementwiseOp op, double elements,
                                   bool backward,
                                   const ModelOptions& options) const {
    return MemoryTime_s(ElementwiseBytes(op, backward) * elements, options);
  }
  // Seconds for one collective over `group`; `bytes` is the full buffer size
  // in nccl-tests convention (all-reduce: the array; all-gather: the output;
  // reduce-scatter: the input; send/recv: the message).
  virtual double CollectiveTime_s(Collective op, double bytes,
                                  const CommGroup& group,
                                  const ModelOptions& options) const = 0;
};

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_CALIBRATION_H_
