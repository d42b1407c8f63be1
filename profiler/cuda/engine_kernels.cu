// CudaBackend::TimeEngineOp: the CUDA engine's own kernels (engine/cuda/
// ops.h; the attention the CUDA model runs:
// engine/cuda/kernels/flash_attention.h, or engine/cuda/kernels/attention.h
// under MESHTUNE_CUDA_ATTENTION=unfused) at the profiler's engine-op cases
// (profiler/engine_ops.h), timed like every CUDA row: CUPTI kernel time per
// repetition, cross-checked with CUDA events (TimeRepetitions). Inputs are
// zeros: the kernels' speed does not depend on the values, and zeros cannot
// overflow over the repetitions. The CUDA backend is built only with the
// engine's CUDA library (profiler/CMakeLists.txt).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/kernels/attention.h"
#include "engine/cuda/kernels/flash_attention.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/device.h"
#include "profiler/cuda/cuda_backend.h"
#include "profiler/cuda/cuda_backend_impl.cuh"
#include "profiler/cuda/cuda_check.cuh"
#include "profiler/engine_ops.h"

namespace meshtune::profiler::cuda {

namespace {

namespace ec = engine::cuda;
using ec::Bf16;

// Zeroed device buffers of one case, allocated by Take.
class Buffers {
 public:
  template <typename T>
  StatusOr<T*> Take(int64_t count) {
    auto b = ec::DeviceBuffer::Allocate(
        static_cast<size_t>(std::max<int64_t>(1, count)) * sizeof(T));
    if (!b.ok()) return b.status();
    MESHTUNE_RETURN_IF_ERROR(b->Zero());
    T* p = b->template as<T>();
    owned_.push_back(std::move(b).value());
    return p;
  }

 private:
  std::vector<ec::DeviceBuffer> owned_;
};

// The attention kernel of a case: the one the CUDA model runs.
struct AttentionKernels {
  std::unique_ptr<ec::Attention> unfused;
  std::unique_ptr<ec::FlashAttention> flash;
};

// The CUDA model's choice (engine/cuda/gpt_model.cc): flash attention
// unless MESHTUNE_CUDA_ATTENTION=unfused.
bool UnfusedAttention() {
  const char* value = std::getenv("MESHTUNE_CUDA_ATTENTION");
  return value != nullptr && std::strcmp(value, "unfused") == 0;
}

// Forward and backward enqueuers of one case on `stream`.
struct Launchers {
  std::function<Status()> forward, backward;
};

StatusOr<Launchers> Prepare(const EngineOpCase& c, ec::Stream stream,
                            Buffers* buf, ec::GemmContext* gemm,
                            AttentionKernels* attention) {
  const int64_t n = c.rows, w = c.width;
#define TAKE(type, name, count)                   \
  auto name##_or = buf->Take<type>(count);        \
  if (!name##_or.ok()) return name##_or.status(); \
  type* name = *name##_or
  Launchers l;
  switch (c.kernel) {
    case EngineKernel::kLayerNorm:
    case EngineKernel::kRmsNorm: {
      TAKE(Bf16, x, n * w);
      TAKE(Bf16, y, n * w);
      TAKE(Bf16, dy, n * w);
      TAKE(Bf16, dx, n * w);
      TAKE(Bf16, weight, w);
      TAKE(Bf16, bias, w);
      TAKE(float, dweight, w);
      TAKE(float, dbias, w);
      TAKE(float, mean, n);
      TAKE(float, rstd, n);
      if (c.kernel == EngineKernel::kLayerNorm) {
        l.forward = [=] {
          return ec::LayerNormForward(x, nullptr, nullptr, weight, bias, y,
                                      mean, rstd, n, w, 1e-5f, stream);
        };
        l.backward = [=] {
          return ec::LayerNormBackward(dy, x, weight, mean, rstd, nullptr, dx,
                                       dweight, dbias, n, w, stream);
        };
      } else {
        l.forward = [=] {
          return ec::RmsNormForward(x, nullptr, nullptr, weight, y, rstd, n, w,
                                    1e-5f, stream);
        };
        l.backward = [=] {
          return ec::RmsNormBackward(dy, x, weight, rstd, nullptr, dx, dweight,
                                     n, w, stream);
        };
      }
      break;
    }
    case EngineKernel::kResidualAdd: {
      TAKE(Bf16, x, n * w);
      TAKE(Bf16, y, n * w);
      l.forward = l.backward = [=] { return ec::Add(x, y, n * w, stream); };
      break;
    }
    case EngineKernel::kGelu:
    case EngineKernel::kSwiglu: {
      const bool swiglu = c.kernel == EngineKernel::kSwiglu;
      const int64_t in = swiglu ? 2 * n * w : n * w;
      TAKE(Bf16, x, in);
      TAKE(Bf16, dx, in);
      TAKE(Bf16, y, n * w);
      TAKE(Bf16, dy, n * w);
      if (swiglu) {
        l.forward = [=] { return ec::SwigluForward(x, y, n, w, stream); };
        l.backward = [=] {
          return ec::SwigluBackward(dy, x, dx, n, w, stream);
        };
      } else {
        l.forward = [=] { return ec::GeluForward(x, y, n * w, stream); };
        l.backward = [=] { return ec::GeluBackward(dy, x, dx, n * w, stream); };
      }
      break;
    }
    case EngineKernel::kRope: {
      TAKE(Bf16, qkv, n * (c.heads + 2 * c.groups) * c.head_dim);
      l.forward = [=] {
        return ec::RopeForward(qkv, c.seq, c.batch, c.heads, c.groups,
                               c.head_dim, 10000.0f, 0, stream);
      };
      l.backward = [=] {
        return ec::RopeBackward(qkv, c.seq, c.batch, c.heads, c.groups,
                                c.head_dim, 10000.0f, 0, stream);
      };
      break;
    }
    case EngineKernel::kCrossEntropy: {
      TAKE(Bf16, logits, n * w);
      TAKE(Bf16, dlogits, n * w);
      TAKE(int32_t, targets, n);
      TAKE(float, row_max, n);
      TAKE(float, sum_exp, n);
      TAKE(float, target_logit, n);
      TAKE(float, loss, n);
      TAKE(float, scale, n);
      l.forward = [=] {
        MESHTUNE_RETURN_IF_ERROR(
            ec::CrossEntropyLocalMax(logits, row_max, n, w, 0, w, stream));
        MESHTUNE_RETURN_IF_ERROR(
            ec::CrossEntropyLocalSums(logits, targets, row_max, sum_exp,
                                      target_logit, n, w, 0, w, stream));
        return ec::CrossEntropyLoss(row_max, sum_exp, target_logit, loss, n,
                                    stream);
      };
      l.backward = [=] {
        return ec::CrossEntropyBackward(logits, targets, row_max, sum_exp,
                                        scale, dlogits, n, w, 0, w, stream);
      };
      break;
    }
    case EngineKernel::kEmbedding: {
      // All tokens are 0 (zeroed buffer): one table row, the worst case
      // for the backward's atomics, as a repeated token is in training.
      const int64_t vocab = std::min<int64_t>(4 * n, 1 << 20);
      TAKE(int32_t, tokens, n);
      TAKE(Bf16, table, vocab * w);
      TAKE(float, dtable, vocab* w);
      TAKE(Bf16, y, n * w);
      TAKE(Bf16, dy, n * w);
      TAKE(Bf16, pos, c.seq * w);
      TAKE(float, dpos, c.seq* w);
      const bool positions = c.learned_positions;
      l.forward = [=] {
        MESHTUNE_RETURN_IF_ERROR(
            ec::EmbeddingForward(tokens, table, y, n, w, 0, vocab, stream));
        if (!positions) return Status::Ok();
        return ec::PositionEmbeddingForward(pos, y, c.seq, c.batch, w, 0,
                                            stream);
      };
      l.backward = [=] {
        if (positions) {
          MESHTUNE_RETURN_IF_ERROR(ec::PositionEmbeddingBackward(
              dy, dpos, c.seq, c.batch, w, 0, stream));
        }
        return ec::EmbeddingBackward(tokens, dy, dtable, n, w, 0, vocab,
                                     stream);
      };
      break;
    }
    case EngineKernel::kAttention: {
      const int64_t qkv_width = (c.heads + 2 * c.groups) * c.head_dim;
      TAKE(Bf16, qkv, n * qkv_width);
      TAKE(Bf16, dqkv, n * qkv_width);
      TAKE(Bf16, out, n * c.heads * c.head_dim);
      TAKE(Bf16, dout, n * c.heads * c.head_dim);
      if (UnfusedAttention()) {
        auto a = ec::Attention::Create(gemm, c.seq, c.batch, c.heads, c.groups,
                                       c.head_dim);
        if (!a.ok()) return a.status();
        attention->unfused = std::move(a).value();
        ec::Attention* attn = attention->unfused.get();
        TAKE(Bf16, probs, attn->probs_elements());
        l.forward = [=] { return attn->Forward(qkv, out, probs, stream); };
        l.backward = [=] {
          return attn->Backward(dout, qkv, probs, dqkv, stream);
        };
      } else {
        auto a = ec::FlashAttention::Create(c.seq, c.batch, c.heads, c.groups,
                                            c.head_dim);
        if (!a.ok()) return a.status();
        attention->flash = std::move(a).value();
        ec::FlashAttention* attn = attention->flash.get();
        TAKE(float, lse, attn->lse_elements());
        l.forward = [=] { return attn->Forward(qkv, out, lse, stream); };
        l.backward = [=] {
          return attn->Backward(dout, qkv, out, lse, dqkv, stream);
        };
      }
      break;
    }
  }
#undef TAKE
  return l;
}

}  // namespace

StatusOr<Sample> CudaBackend::TimeEngineOp(const EngineOpCase& c, bool backward,
                                           int warmup, int reps) {
  if (c.rows < 1 || c.width < 1 || reps < 1 || warmup < 0) {
    return Status::InvalidArgument(
        "engine kernel " + c.label + " (" + std::to_string(c.rows) +
            " rows x " + std::to_string(c.width) + ") is not measurable",
        "use positive shapes and at least one repetition");
  }
  CUDA_CHECK(cudaSetDevice(0));
  ec::Stream stream = impl_->streams[0];
  std::unique_ptr<ec::GemmContext> gemm;
  if (c.kernel == EngineKernel::kAttention && UnfusedAttention()) {
    auto g = ec::GemmContext::Create();
    if (!g.ok()) return g.status();
    gemm = std::move(g).value();
  }
  Buffers buffers;
  AttentionKernels attention;
  StatusOr<Launchers> l = Prepare(c, stream, &buffers, gemm.get(), &attention);
  if (!l.ok()) return l.status();
  // The buffers were zeroed with cudaMemset on the legacy stream, which a
  // non-blocking stream does not wait for: finish it before any kernel reads.
  MESHTUNE_RETURN_IF_ERROR(ec::Synchronize("zero buffers"));
  // The backward reads what one forward leaves (statistics, probabilities).
  if (backward) MESHTUNE_RETURN_IF_ERROR(l->forward());
  Status launch_status = Status::Ok();
  const std::function<Status()>& run = backward ? l->backward : l->forward;
  Sample sample = impl_->TimeRepetitions(
      1,
      [&] {
        Status s = run();
        if (launch_status.ok()) launch_status = s;
      },
      warmup, reps);
  MESHTUNE_RETURN_IF_ERROR(launch_status);
  MESHTUNE_RETURN_IF_ERROR(ec::Synchronize(c.op.c_str()));
  return sample;
}

}  // namespace meshtune::profiler::cuda
