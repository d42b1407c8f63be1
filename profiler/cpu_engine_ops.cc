// The CPU engine's kernels timed for the profiler (TimeCpuEngineOp in
// profiler/engine_ops.h). This file is compiled with OpenMP where the engine
// is (profiler/CMakeLists.txt) so it can pin the kernels to one thread; the
// rest of the profiler is not, so Eigen's GEMM timings and the machine's
// fingerprint keep their single-threaded meaning.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "profiler/engine_ops.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace meshtune::profiler {
namespace {

namespace cpu = engine::cpu;

// One OpenMP thread for its lifetime (one core per rank, as `tune train`
// runs a full machine), restoring the caller's setting.
class OneThread {
 public:
  OneThread() {
#ifdef _OPENMP
    previous_ = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
  }
  ~OneThread() {
#ifdef _OPENMP
    omp_set_num_threads(previous_);
#endif
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int previous_ = 1;
};

// Deterministic values in [-1, 1): the kernels' speed must not depend on
// special values (denormals, infinities).
std::vector<float> Filled(int64_t count, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  uint32_t x = seed * 2654435761u + 1u;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

// The buffers of one case, with the forward and backward calls.
class Kernel {
 public:
  explicit Kernel(const EngineOpCase& c) : c_(c) {
    const int64_t n = c.rows, w = c.width;
    switch (c.kernel) {
      case EngineKernel::kLayerNorm:
      case EngineKernel::kRmsNorm:
        x_ = Filled(n * w, 1);
        y_ = Filled(n * w, 2);
        dy_ = Filled(n * w, 3);
        weight_ = Filled(w, 4);
        bias_ = Filled(w, 5);
        dweight_.assign(w, 0.0f);
        dbias_.assign(w, 0.0f);
        stats_a_.assign(n, 0.0f);
        stats_b_.assign(n, 0.0f);
        break;
      case EngineKernel::kResidualAdd:
        x_ = Filled(n * w, 1);
        y_ = Filled(n * w, 2);
        break;
      case EngineKernel::kGelu:
        x_ = Filled(n * w, 1);
        y_ = Filled(n * w, 2);
        dy_ = Filled(n * w, 3);
        dx_.assign(n * w, 0.0f);
        break;
      case EngineKernel::kSwiglu:
        x_ = Filled(n * 2 * w, 1);
        y_ = Filled(n * w, 2);
        dy_ = Filled(n * w, 3);
        dx_.assign(n * 2 * w, 0.0f);
        break;
      case EngineKernel::kRope:
      case EngineKernel::kAttention: {
        const int64_t qkv = (c.heads + 2 * c.groups) * c.head_dim;
        x_ = Filled(n * qkv, 1);
        dx_.assign(n * qkv, 0.0f);
        y_.assign(n * c.heads * c.head_dim, 0.0f);
        dy_ = Filled(n * c.heads * c.head_dim, 3);
        if (c.kernel == EngineKernel::kAttention) {
          probs_.assign(c.batch * c.heads * c.seq * c.seq, 0.0f);
        }
        break;
      }
      case EngineKernel::kCrossEntropy:
        x_ = Filled(n * w, 1);
        dx_.assign(n * w, 0.0f);
        stats_a_.assign(n, 0.0f);  // row max
        stats_b_.assign(n, 0.0f);  // sum of exp
        target_logit_.assign(n, 0.0f);
        scale_.assign(n, 1.0f / static_cast<float>(n));
        tokens_.resize(n);
        for (int64_t i = 0; i < n; ++i) {
          tokens_[i] = static_cast<int32_t>((i * 7919) % w);
        }
        break;
      case EngineKernel::kEmbedding: {
        // Every token row is gathered; a table of a few rows per token
        // keeps memory bounded at large vocabularies without changing the
        // rows touched.
        vocab_rows_ = std::max<int64_t>(1, std::min<int64_t>(4 * n, 1 << 20));
        table_ = Filled(vocab_rows_ * w, 4);
        dtable_.assign(vocab_rows_ * w, 0.0f);
        y_.assign(n * w, 0.0f);
        dy_ = Filled(n * w, 3);
        pos_ = Filled(c.seq * w, 5);
        dpos_.assign(c.seq * w, 0.0f);
        tokens_.resize(n);
        for (int64_t i = 0; i < n; ++i) {
          tokens_[i] = static_cast<int32_t>((i * 7919) % vocab_rows_);
        }
        break;
      }
    }
  }

  void Forward() {
    const int64_t n = c_.rows, w = c_.width;
    switch (c_.kernel) {
      case EngineKernel::kLayerNorm:
        cpu::LayerNormForward(x_.data(), weight_.data(), bias_.data(),
                              y_.data(), stats_a_.data(), stats_b_.data(), n, w,
                              1e-5f);
        break;
      case EngineKernel::kRmsNorm:
        cpu::RmsNormForward(x_.data(), weight_.data(), y_.data(),
                            stats_b_.data(), n, w, 1e-5f);
        break;
      case EngineKernel::kResidualAdd:
        cpu::Add(x_.data(), y_.data(), n * w);
        break;
      case EngineKernel::kGelu:
        cpu::GeluForward(x_.data(), y_.data(), n * w);
        break;
      case EngineKernel::kSwiglu:
        cpu::SwigluForward(x_.data(), y_.data(), n, w);
        break;
      case EngineKernel::kRope:
        cpu::RopeForward(x_.data(), c_.seq, c_.batch, c_.heads, c_.groups,
                         c_.head_dim, 10000.0f, 0);
        break;
      case EngineKernel::kCrossEntropy:
        cpu::CrossEntropyLocalMax(x_.data(), stats_a_.data(), n, w, 0, w);
        cpu::CrossEntropyLocalSums(x_.data(), tokens_.data(), stats_a_.data(),
                                   stats_b_.data(), target_logit_.data(), n, w,
                                   0, w);
        break;
      case EngineKernel::kEmbedding:
        cpu::EmbeddingForward(tokens_.data(), table_.data(), y_.data(), n, w, 0,
                              vocab_rows_);
        if (c_.learned_positions) {
          cpu::PositionEmbeddingForward(pos_.data(), y_.data(), c_.seq,
                                        c_.batch, w, 0);
        }
        break;
      case EngineKernel::kAttention:
        cpu::AttentionForward(x_.data(), y_.data(), probs_.data(), c_.seq,
                              c_.batch, c_.heads, c_.groups, c_.head_dim);
        break;
    }
  }

  void Backward() {
    const int64_t n = c_.rows, w = c_.width;
    switch (c_.kernel) {
      case EngineKernel::kLayerNorm:
        cpu::LayerNormBackward(dy_.data(), x_.data(), weight_.data(),
                               stats_a_.data(), stats_b_.data(), y_.data(),
                               dweight_.data(), dbias_.data(), n, w);
        break;
      case EngineKernel::kRmsNorm:
        cpu::RmsNormBackward(dy_.data(), x_.data(), weight_.data(),
                             stats_b_.data(), y_.data(), dweight_.data(), n, w);
        break;
      case EngineKernel::kResidualAdd:
        // The gradients of the two branches meet in one add.
        cpu::Add(x_.data(), y_.data(), n * w);
        break;
      case EngineKernel::kGelu:
        cpu::GeluBackward(dy_.data(), x_.data(), dx_.data(), n * w);
        break;
      case EngineKernel::kSwiglu:
        cpu::SwigluBackward(dy_.data(), x_.data(), dx_.data(), n, w);
        break;
      case EngineKernel::kRope:
        cpu::RopeBackward(x_.data(), c_.seq, c_.batch, c_.heads, c_.groups,
                          c_.head_dim, 10000.0f, 0);
        break;
      case EngineKernel::kCrossEntropy:
        cpu::CrossEntropyBackward(x_.data(), tokens_.data(), stats_a_.data(),
                                  stats_b_.data(), scale_.data(), dx_.data(), n,
                                  w, 0, w);
        break;
      case EngineKernel::kEmbedding:
        if (c_.learned_positions) {
          cpu::PositionEmbeddingBackward(dy_.data(), dpos_.data(), c_.seq,
                                         c_.batch, w, 0);
        }
        cpu::EmbeddingBackward(tokens_.data(), dy_.data(), dtable_.data(), n, w,
                               0, vocab_rows_);
        break;
      case EngineKernel::kAttention:
        cpu::AttentionBackward(dy_.data(), x_.data(), probs_.data(), dx_.data(),
                               c_.seq, c_.batch, c_.heads, c_.groups,
                               c_.head_dim);
        break;
    }
  }

 private:
  const EngineOpCase& c_;
  std::vector<float> x_, y_, dy_, dx_, weight_, bias_, dweight_, dbias_;
  std::vector<float> stats_a_, stats_b_, target_logit_, scale_, probs_;
  std::vector<float> table_, dtable_, pos_, dpos_;
  std::vector<int32_t> tokens_;
  int64_t vocab_rows_ = 0;
};

}  // namespace

StatusOr<Sample> TimeCpuEngineOp(const EngineOpCase& c, bool backward,
                                 int warmup, int reps) {
  const bool attention_like =
      c.kernel == EngineKernel::kRope || c.kernel == EngineKernel::kAttention;
  if (c.rows < 1 || c.width < 1 || reps < 1 || warmup < 0 ||
      (attention_like &&
       (c.seq < 1 || c.batch < 1 || c.heads < 1 || c.groups < 1 ||
        c.head_dim < 1 || c.heads % c.groups != 0 ||
        c.seq * c.batch != c.rows))) {
    return Status::InvalidArgument(
        "engine kernel " + c.label + " (" + std::to_string(c.rows) +
            " rows x " + std::to_string(c.width) + ", " + std::to_string(reps) +
            " repetitions) is not measurable",
        "use positive shapes with rows = seq x batch, heads a multiple of "
        "the query groups, and at least one repetition");
  }
  OneThread one_thread;
  Kernel kernel(c);
  if (backward) kernel.Forward();  // what the backward reads
  Sample sample;
  sample.timer = "steady_clock";
  for (int i = 0; i < warmup + reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (backward) {
      kernel.Backward();
    } else {
      kernel.Forward();
    }
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (i >= warmup) sample.times_s.push_back(t);
  }
  return sample;
}

}  // namespace meshtune::profiler
