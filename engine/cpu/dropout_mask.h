// Counter-based dropout masks (inverted dropout: kept elements are scaled
// by 1/(1 − p), dropped ones are 0; Megatron --hidden-dropout and
// --attention-dropout).
//
// Megatron draws masks from per-rank CUDA generators (a "model-parallel"
// stream under sequence parallelism, the default stream otherwise), so its
// masks depend on the parallel layout. Ours are a pure function of an
// element's global coordinates instead:
//   keep(key, a, b, c) = U(SplitMix64(RowSeed(key, a, b) + (c+1)·φ)) >= p
//   RowSeed(key, a, b) = SplitMix64(SplitMix64(key ^ a·φ') ^ b)
// where U takes the top 24 bits as a float in [0, 1), key names the stream
// (seed, layer, site) and (a, b, c) = (global sample index, row coordinate,
// column). Every layout (tp, sp, pp, dp, micro-batch size) and every
// recompute pass therefore draws the same mask, nothing is stored for the
// backward (it regenerates the mask), and layouts stay comparable with the
// single-rank run to fp32 rounding. The per-element cost is one SplitMix64.
#ifndef MESHTUNE_ENGINE_CPU_DROPOUT_MASK_H_
#define MESHTUNE_ENGINE_CPU_DROPOUT_MASK_H_

#include <cstdint>

// The mask functions are also compiled into the CUDA backend's kernels
// (engine/cuda/kernels/dropout.cu) so both backends draw the same masks;
// outside nvcc the annotation is empty and this stays a plain C++ header.
#if defined(__CUDACC__)
#define MESHTUNE_HOST_DEVICE __host__ __device__
#else
#define MESHTUNE_HOST_DEVICE
#endif

namespace meshtune::engine::cpu {

// SplitMix64 finalizer (Steele, Lea & Flood 2014): a bijective 64-bit mix.
MESHTUNE_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Seed of the row of elements (a, b, ·) in stream `key`.
MESHTUNE_HOST_DEVICE inline uint64_t DropoutRowSeed(uint64_t key, int64_t a,
                                                    int64_t b) {
  const uint64_t ka =
      SplitMix64(key ^ (static_cast<uint64_t>(a) * 0xd1b54a32d192ed03ULL));
  return SplitMix64(ka ^ static_cast<uint64_t>(b));
}

// Uniform draw in [0, 1) (24-bit resolution) of column c of a row.
MESHTUNE_HOST_DEVICE inline float DropoutUniform(uint64_t row_seed, int64_t c) {
  const uint64_t bits = SplitMix64(row_seed + (static_cast<uint64_t>(c) + 1) *
                                                  0x9e3779b97f4a7c15ULL);
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// Which elements an op drops, in global coordinates.
struct DropoutSpec {
  float p = 0.0f;    // drop probability in [0, 1); 0 = no dropout
  uint64_t key = 0;  // stream: DropoutKey(seed, layer, site)
  // Global dataset index of the micro-batch's sample bi = 0 (samples bi of
  // a micro-batch are first_sample + bi).
  int64_t first_sample = 0;
  // Hidden dropout: global row (si·b + bi) of local row 0, i.e. the
  // sequence-parallel shard offset (0 without SP).
  int64_t first_row = 0;
  // Attention dropout: global index of local head 0 (tp_rank·heads).
  int64_t first_head = 0;

  bool active() const { return p > 0.0f; }
  float scale() const { return 1.0f / (1.0f - p); }
};

// Where in the model a mask is drawn (part of the stream key).
enum class DropoutSite : uint64_t {
  kEmbedding = 1,       // embedding output (Megatron embedding_dropout)
  kAttentionProbs = 2,  // softmax output (attention_dropout)
  kAttentionOut = 3,    // attention projection + bias (hidden_dropout)
  kMlpOut = 4,          // fc2 + bias (hidden_dropout)
};

// Stream key of `site` in transformer layer `layer` (−1 for the
// embedding).
inline uint64_t DropoutKey(uint64_t seed, int64_t layer, DropoutSite site) {
  return SplitMix64(SplitMix64(seed ^ 0x64726f706f7574ULL) ^
                    (static_cast<uint64_t>(layer + 1) << 8) ^
                    static_cast<uint64_t>(site));
}

}  // namespace meshtune::engine::cpu

#endif  // MESHTUNE_ENGINE_CPU_DROPOUT_MASK_H_
