// Ring attention on the GPU (engine/cuda/context_parallel/ring_attention.h):
// the CPU ring of engine/context_parallel/ring_attention.cc on the flash
// chunk kernels and device Send/Recv.
#include "engine/cuda/context_parallel/ring_attention.h"

#include <string>
#include <utility>

namespace meshtune::engine::cuda {
namespace {

// Whether query chunk [q_pos0, q_pos0 + c) sees any key of [k_pos0, ...):
// Transformer Engine skips the pairs the causal mask hides entirely.
bool Visible(int64_t q_pos0, int64_t k_pos0, int64_t c) {
  return k_pos0 <= q_pos0 + c - 1;
}

}  // namespace

Status DeviceRingAttention::CheckShape(
    const context_parallel::SequenceChunks& chunks, int64_t b, int64_t heads,
    int64_t groups, int64_t head_dim) {
  if (chunks.cp() < 2) {
    return Status::Internal("ring attention needs cp > 1, got cp = " +
                            std::to_string(chunks.cp()));
  }
  return FlashAttention::CheckShape(chunks.chunk_len(), b, heads, groups,
                                    head_dim);
}

StatusOr<std::unique_ptr<DeviceRingAttention>> DeviceRingAttention::Create(
    const context_parallel::SequenceChunks& chunks, int64_t b, int64_t heads,
    int64_t groups, int64_t head_dim, DeviceCommunicator* cp) {
  MESHTUNE_RETURN_IF_ERROR(CheckShape(chunks, b, heads, groups, head_dim));
  if (cp == nullptr || cp->size() != chunks.cp() ||
      cp->rank() != chunks.rank()) {
    return Status::Internal(
        "ring attention: the cp device communicator must have cp = " +
        std::to_string(chunks.cp()) + " ranks and this rank's cp rank " +
        std::to_string(chunks.rank()));
  }
  std::unique_ptr<DeviceRingAttention> r(new DeviceRingAttention(chunks));
  r->b_ = b;
  r->heads_ = heads;
  r->groups_ = groups;
  r->d_ = head_dim;
  r->c_ = chunks.chunk_len();
  r->cp_ = cp;
  MESHTUNE_ASSIGN_OR_RETURN(
      r->flash_, FlashChunkAttention::Create(chunks.seq(), r->c_, b, heads,
                                             groups, head_dim));
  const size_t rows = static_cast<size_t>(2 * r->c_ * b);
  const size_t kv = static_cast<size_t>(2 * groups * head_dim);
  const size_t hd = static_cast<size_t>(heads * head_dim);
  for (int i = 0; i < 2; ++i) {
    MESHTUNE_ASSIGN_OR_RETURN(r->kv_[i],
                              DeviceBuffer::Allocate(rows * kv * sizeof(Bf16)));
    MESHTUNE_ASSIGN_OR_RETURN(
        r->dkv_[i], DeviceBuffer::Allocate(rows * kv * sizeof(float)));
  }
  MESHTUNE_ASSIGN_OR_RETURN(r->out32_,
                            DeviceBuffer::Allocate(rows * hd * sizeof(float)));
  MESHTUNE_ASSIGN_OR_RETURN(
      r->part_, DeviceBuffer::Allocate(rows / 2 * hd * sizeof(float)));
  MESHTUNE_ASSIGN_OR_RETURN(
      r->part_lse_,
      DeviceBuffer::Allocate(static_cast<size_t>(b * heads * r->c_) *
                             sizeof(float)));
  return StatusOr<std::unique_ptr<DeviceRingAttention>>(std::move(r));
}

FlashChunkAttention::KvChunk DeviceRingAttention::KvOf(const Bf16* kv, int src,
                                                       int ki) const {
  const int64_t ld = 2 * groups_ * d_;
  const context_parallel::SequenceChunks src_chunks(chunks_.seq(), chunks_.cp(),
                                                    src);
  FlashChunkAttention::KvChunk k;
  k.k = kv + ki * c_ * b_ * ld;
  k.v = k.k + groups_ * d_;
  k.ld = ld;
  k.len = c_;
  k.pos0 = src_chunks.ChunkStart(ki);
  return k;
}

FlashChunkAttention::QueryChunk DeviceRingAttention::QueryOf(const Bf16* qkv,
                                                             int qi) const {
  const int64_t width = (heads_ + 2 * groups_) * d_;
  FlashChunkAttention::QueryChunk q;
  q.q = qkv + qi * c_ * b_ * width;
  q.ld = width;
  q.len = c_;
  q.pos0 = chunks_.ChunkStart(qi);
  return q;
}

template <typename T>
Status DeviceRingAttention::Exchange(const T* send, T* recv, int64_t count) {
  const int cp = chunks_.cp(), rank = chunks_.rank();
  const int next = (rank + 1) % cp, prev = (rank + cp - 1) % cp;
  MESHTUNE_RETURN_IF_ERROR(GroupStart());
  Status status = cp_->Send(send, count, next, nullptr);
  if (status.ok()) status = cp_->Recv(recv, count, prev, nullptr);
  const Status end = GroupEnd();
  MESHTUNE_RETURN_IF_ERROR(status);
  return end;
}

Status DeviceRingAttention::Forward(const Bf16* qkv, Bf16* out, float* lse,
                                    const cpu::DropoutSpec* dropout) {
  const int cp = chunks_.cp(), rank = chunks_.rank();
  const int64_t width = (heads_ + 2 * groups_) * d_, kvw = 2 * groups_ * d_;
  const int64_t hd = heads_ * d_;
  const int64_t chunk_rows = c_ * b_, rows = 2 * chunk_rows;
  const int64_t lse_chunk = b_ * heads_ * c_;
  float* run_out = out32_.as<float>();
  // Step 0 holds this rank's own K/V: the k|v columns of qkv.
  int held = 0;
  MESHTUNE_RETURN_IF_ERROR(
      CopyRows(qkv + hd, width, kv_[held].as<Bf16>(), kvw, rows, kvw, nullptr));
  bool started[2] = {false, false};
  for (int step = 0; step < cp; ++step) {
    const int src = (rank - step + cp) % cp;  // owner of the held K/V
    if (step + 1 < cp) {
      MESHTUNE_RETURN_IF_ERROR(
          Exchange(kv_[held].as<Bf16>(), kv_[1 - held].as<Bf16>(), rows * kvw));
    }
    for (int qi = 0; qi < 2; ++qi) {
      const FlashChunkAttention::QueryChunk q = QueryOf(qkv, qi);
      float* q_out = run_out + qi * chunk_rows * hd;
      float* q_lse = lse + qi * lse_chunk;
      for (int ki = 0; ki < 2; ++ki) {
        const FlashChunkAttention::KvChunk kv =
            KvOf(kv_[held].as<Bf16>(), src, ki);
        if (!Visible(q.pos0, kv.pos0, c_)) continue;
        if (!started[qi]) {  // the query chunk's first pair: no merge
          MESHTUNE_RETURN_IF_ERROR(
              flash_->Forward(q, kv, q_out, q_lse, nullptr, dropout));
          started[qi] = true;
          continue;
        }
        MESHTUNE_RETURN_IF_ERROR(flash_->Forward(
            q, kv, part_.as<float>(), part_lse_.as<float>(), nullptr, dropout));
        MESHTUNE_RETURN_IF_ERROR(FlashChunkAttention::Merge(
            q_out, q_lse, part_.as<float>(), part_lse_.as<float>(), c_, b_,
            heads_, d_, nullptr));
      }
    }
    held = 1 - held;  // the received K/V (unused after the last step)
  }
  // Step 0's diagonal pairs start both query chunks.
  MESHTUNE_CHECK(started[0] && started[1]);
  return CastRowsToBf16(run_out, hd, out, hd, rows, hd, nullptr);
}

Status DeviceRingAttention::Backward(const Bf16* dout, const Bf16* qkv,
                                     const Bf16* out, const float* lse,
                                     Bf16* dqkv,
                                     const cpu::DropoutSpec* dropout) {
  const int cp = chunks_.cp(), rank = chunks_.rank();
  const int64_t width = (heads_ + 2 * groups_) * d_, kvw = 2 * groups_ * d_;
  const int64_t hd = heads_ * d_;
  const int64_t chunk_rows = c_ * b_, rows = 2 * chunk_rows;
  const int64_t lse_chunk = b_ * heads_ * c_;
  float* dq = out32_.as<float>();  // fp32 [rows, heads·d]
  int held = 0, partial = 0;
  MESHTUNE_RETURN_IF_ERROR(
      CopyRows(qkv + hd, width, kv_[held].as<Bf16>(), kvw, rows, kvw, nullptr));
  MESHTUNE_RETURN_IF_ERROR(ZeroFloats(dq, rows * hd, nullptr));
  MESHTUNE_RETURN_IF_ERROR(
      ZeroFloats(dkv_[partial].as<float>(), rows * kvw, nullptr));
  for (int step = 0; step < cp; ++step) {
    const int src = (rank - step + cp) % cp;
    if (step + 1 < cp) {
      MESHTUNE_RETURN_IF_ERROR(
          Exchange(kv_[held].as<Bf16>(), kv_[1 - held].as<Bf16>(), rows * kvw));
    }
    float* dkv = dkv_[partial].as<float>();
    for (int qi = 0; qi < 2; ++qi) {
      const FlashChunkAttention::QueryChunk q = QueryOf(qkv, qi);
      for (int ki = 0; ki < 2; ++ki) {
        const FlashChunkAttention::KvChunk kv =
            KvOf(kv_[held].as<Bf16>(), src, ki);
        if (!Visible(q.pos0, kv.pos0, c_)) continue;
        float* dk = dkv + ki * chunk_rows * kvw;
        MESHTUNE_RETURN_IF_ERROR(flash_->Backward(
            dout + qi * chunk_rows * hd, out + qi * chunk_rows * hd,
            lse + qi * lse_chunk, q, kv, dq + qi * chunk_rows * hd, dk,
            dk + groups_ * d_, kvw, nullptr, dropout));
      }
    }
    // The partial dK/dV go on with their keys; after the last step the
    // next rank is their owner, and what arrives is this rank's own.
    MESHTUNE_RETURN_IF_ERROR(Exchange(
        dkv_[partial].as<float>(), dkv_[1 - partial].as<float>(), rows * kvw));
    partial = 1 - partial;
    held = 1 - held;
  }
  MESHTUNE_RETURN_IF_ERROR(
      CastRowsToBf16(dq, hd, dqkv, width, rows, hd, nullptr));
  return CastRowsToBf16(dkv_[partial].as<float>(), kvw, dqkv + hd, width, rows,
                        kvw, nullptr);
}

}  // namespace meshtune::engine::cuda
