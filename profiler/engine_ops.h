// Timing the training engine's own kernels (issue 4: "attention (the
// engine's own kernel) and memory-bound elementwise/normalization"; issue 8
// the same with the CUDA kernels). The cost model's datasheet prices these
// ops as streamed bytes; the CPU engine's are not bandwidth-bound (GELU's
// tanhf dominates), so `tune profile --model M` times them at the model's
// shapes and the measured calibration answers from the rows.
//
// Store rows (results::Measurement, no schema change):
//   "elem:<op>:fwd|bwd"  m = elements as costmodel::ElementwiseOp counts
//                        them (<op>: norm, bias_dropout_add, residual_add,
//                        gelu, swiglu, rope, cross_entropy, embedding)
//   "attn:fwd|bwd"       m = batch_heads, n = seq_len, k = head_dim of the
//                        engine's causal self-attention
// The kernels run with one thread: the local cluster plans one core per
// rank, which is what `tune train` gives each rank on a full machine.
#ifndef MESHTUNE_PROFILER_ENGINE_OPS_H_
#define MESHTUNE_PROFILER_ENGINE_OPS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "results/store.h"
#include "search_spaces/model_spec.h"

namespace meshtune::profiler {

enum class EngineKernel {
  kLayerNorm,     // row "elem:norm"
  kRmsNorm,       // row "elem:norm"
  kResidualAdd,   // row "elem:bias_dropout_add" (GPT) or "elem:residual_add"
  kGelu,          // row "elem:gelu"
  kSwiglu,        // row "elem:swiglu"
  kRope,          // row "elem:rope"
  kCrossEntropy,  // row "elem:cross_entropy"
  kEmbedding,     // row "elem:embedding"
  kAttention,     // row "attn"
};

// One kernel at one shape, per tensor-parallel rank.
struct EngineOpCase {
  std::string label;  // for the output, e.g. "tp2.gelu"
  std::string op;     // the row's op before ":fwd"/":bwd": "elem:gelu", "attn"
  EngineKernel kernel = EngineKernel::kGelu;
  int64_t rows = 0;   // token rows (s·b, or the SP shard of them)
  int64_t width = 0;  // elements per row: h, f/tp, vocab/tp
  // RoPE and attention: sequence, micro-batch, local heads, local query
  // groups, head dimension (rows = seq·batch).
  int64_t seq = 0, batch = 0, heads = 0, groups = 0, head_dim = 0;
  bool learned_positions = false;  // embedding: add learned positions
  // The row's m column: the element count the cost model charges, or the
  // attention's batch_heads (n = seq, k = head_dim).
  int64_t elements = 0;
};

// The engine kernels of one layer plus the logits and embedding of `model`
// on one rank of tensor-parallel size `tp` with `tokens` tokens per
// micro-batch (seq = min(tokens, model seq_length), batch = tokens / seq):
// norm and residual over the SP shard tokens/tp × h, the activation over
// tokens × f/tp, RoPE over the local q/k heads, cross-entropy over tokens ×
// vocab/tp, the embedding lookup over tokens × h, attention over
// batch·heads/tp heads. Lists of several tp sizes may repeat a case (the
// embedding does not depend on tp); the sweep runs each once.
std::vector<EngineOpCase> TransformerEngineOps(
    const search_spaces::ModelSpec& model, int64_t tp, int64_t tokens);

// Runs every case forward and backward on `backend`, prints one row per
// case and direction (after PrintEngineOpTableHeader) and returns the store
// rows for `hardware_id` with `dtype` ("fp32" on cpu, "bf16" on cuda).
// Duplicated (op, shape) cases run once.
StatusOr<std::vector<results::Measurement>> RunEngineOpSweep(
    ProfilerBackend& backend, const std::vector<EngineOpCase>& cases,
    const std::string& dtype, int warmup, int reps,
    const std::string& hardware_id, std::ostream& out, std::ostream& progress);

// The CPU engine's kernels (engine/cpu/ops.h) for one case, `warmup`
// untimed then `reps` timed runs with steady_clock, on one thread. The
// backward runs the forward once first for what it reads (norm statistics,
// attention probabilities, the softmax sums).
StatusOr<Sample> TimeCpuEngineOp(const EngineOpCase& c, bool backward,
                                 int warmup, int reps);

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_ENGINE_OPS_H_
