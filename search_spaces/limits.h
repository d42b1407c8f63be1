// The largest sizes meshtune accepts from a file or a flag, in one place.
//
// Every integer a user types (model YAML, cluster YAML, search-space YAML,
// command-line flags, Megatron arguments) is a size the search and the cost
// model multiply, loop over or allocate by. Unbounded, a typo such as
// `num_layers: 2000000000` allocates gigabytes (the enumerator keeps state per
// layers-per-stage value), `--gbs 4611686018427387904` wraps gbs x seq_len to
// 0 tokens, and a pin of 2^62 overflows tp·pp·cp into a division by zero.
//
// The bounds are generous, 10 to 1000 times the largest published values, so
// no real model or cluster meets them, and small enough that every product
// the tuner forms stays far inside int64_t:
//   tokens per step  gbs · seq_length       <= 2^24 · 2^24 = 2^48
//   model parallel   tp · pp · cp           <= 2^20 · 2^20 · 2^20 = 2^60
//   GEMM tokens      mbs · seq_length       <= 2^48
//   query width      heads · kv_channels    <= 2^16 · 2^16 = 2^32
//   Megatron split   pp · layers per stage  <= 2^20 · 10^4 < 2^34
// Floating-point products (parameters, FLOPs, bytes) are computed in double
// and stay finite with these inputs.
//
// A value above its bound is an input error (exit 2): one line naming the
// value and the bound, and a hint saying what real values look like.
#ifndef MESHTUNE_SEARCH_SPACES_LIMITS_H_
#define MESHTUNE_SEARCH_SPACES_LIMITS_H_

#include <cstdint>
#include <string>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

// One bound: the largest accepted value, its unit in messages, and what real
// values look like (the hint).
struct SizeLimit {
  int64_t max;
  const char* unit;  // "layers", "GPUs"
  const char* real;  // "the largest published models have under 200 layers"
};

namespace limits {

// Model shape. GPT-3 175B has 96 layers, Megatron's 1T model 128, LLaMA-3
// 405B 126 layers, hidden 16384, 128 heads, FFN 53248, vocab 128256;
// DeepSeek-V3 has 256 routed experts; contexts reach a few million tokens.
inline constexpr SizeLimit kNumLayers{
    10000, "layers", "the largest published models have under 200 layers"};
inline constexpr SizeLimit kHiddenSize{
    1 << 20, "", "the largest published models have hidden sizes near 25000"};
inline constexpr SizeLimit kAttentionHeads{
    1 << 16, "heads", "the largest published models have under 200 heads"};
inline constexpr SizeLimit kKvChannels{
    1 << 16, "", "head dimensions are 64 to 256 in published models"};
inline constexpr SizeLimit kFfnHiddenSize{
    1 << 22, "", "the largest published models have FFN sizes near 100000"};
inline constexpr SizeLimit kVocabSize{
    1 << 24, "tokens", "published vocabularies have under 300000 tokens"};
inline constexpr SizeLimit kSeqLength{
    1 << 24, "tokens",
    "the longest published contexts are a few million tokens"};
inline constexpr SizeLimit kNumExperts{
    1 << 16, "experts",
    "published MoE models have at most a few hundred experts"};

// Cluster and training. The largest clusters have a few hundred thousand
// GPUs; nodes hold 4 to 8 GPUs (72 share NVLink in an NVL72 rack); global
// batches are hundreds to tens of thousands of sequences.
inline constexpr SizeLimit kNumGpus{
    1 << 20, "GPUs", "the largest clusters have a few hundred thousand GPUs"};
inline constexpr SizeLimit kGpusPerNode{
    1024, "GPUs", "nodes hold 4 to 8 GPUs (72 share NVLink in a GB200 NVL72)"};
inline constexpr SizeLimit kGlobalBatchSize{
    1 << 24, "sequences",
    "published global batches are 512 to 16384 sequences"};
// Token budgets (double): the largest published runs use tens of trillions.
inline constexpr double kMaxTrainTokens = 1e18;
// Training iterations (warm-up lengths): LLaMA-3 405B ran 1.2 M steps and
// warmed up over 8000.
inline constexpr SizeLimit kTrainIters{
    1LL << 40, "iterations", "published runs take at most a few million steps"};

// Parallel sizes and pins. tp, pp, cp, ep and dp split the GPUs, so they are
// bounded like the GPU count; vpp and recompute layer counts split layers;
// a micro-batch is part of the global batch.
inline constexpr SizeLimit kParallelSize{
    1 << 20, "", "a parallel size splits the GPUs, so it is at most --gpus"};
inline constexpr SizeLimit kLayerCount{
    10000, "", "it counts layers, and models have at most 10000 layers"};
inline constexpr SizeLimit kMicroBatchSize{
    1 << 24, "sequences", "micro-batches are 1 to 16 sequences in practice"};

}  // namespace limits

// OK when `value` <= limit.max. Otherwise InvalidArgument
// "<where>: <label>: <shown> is above the limit of <max> <unit>", where
// `shown` is the value as the user wrote it ("" = std::to_string(value)),
// with the hint "<real>; check the value". `where` ("file.yaml:3") may be "".
Status CheckLimit(int64_t value, const SizeLimit& limit,
                  const std::string& label, const std::string& where = "",
                  const std::string& shown = "");

// The same error for a value too large to hold in an int64_t at all
// ("99999999999999999999"), shown as written.
Status AboveLimit(const std::string& shown, const SizeLimit& limit,
                  const std::string& label, const std::string& where = "");

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_LIMITS_H_
