// Ring attention (ring_attention.h): the P2P ring of Transformer Engine's
// AttnFuncWithCPAndKVP2P on the CPU chunk pieces.
#include "engine/context_parallel/ring_attention.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::engine::context_parallel {
namespace {

// Widths of one row: packed qkv, its k|v part, the attention output.
struct Widths {
  int64_t qkv, kv, out, q;
};

Widths WidthsOf(const cpu::AttentionChunkShape& s) {
  const int64_t d = s.head_dim;
  return {(s.heads + 2 * s.groups) * d, 2 * s.groups * d, s.heads * d,
          s.heads * d};
}

// kv[rows, kv] <- the k|v part of qkv[rows, qkv] (what travels the ring).
void PackKv(const float* qkv, float* kv, int64_t rows, const Widths& w) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(qkv + r * w.qkv + w.q, w.kv, kv + r * w.kv);
  }
}

// qkv[rows, qkv]'s k|v part <- kv[rows, kv]; its q part is left as is (the
// chunk functions read only k and v of a key/value chunk).
void UnpackKv(const float* kv, float* qkv, int64_t rows, const Widths& w) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(kv + r * w.kv, w.kv, qkv + r * w.qkv + w.q);
  }
}

void CheckGroup(const SequenceChunks& chunks, const Communicator* cp) {
  MESHTUNE_CHECK(cp != nullptr && chunks.cp() > 1);
  MESHTUNE_CHECK(cp->size() == chunks.cp() && cp->rank() == chunks.rank());
}

// Whether query chunk [q_pos0, q_pos0 + c) sees any key of [k_pos0, ...):
// TE skips the pairs the causal mask hides entirely (a later key chunk).
bool Visible(int64_t q_pos0, int64_t k_pos0, int64_t c) {
  return k_pos0 <= q_pos0 + c - 1;
}

}  // namespace

int64_t RingLseCount(const SequenceChunks& chunks,
                     const cpu::AttentionChunkShape& shape) {
  return 2 * shape.b * shape.heads * chunks.chunk_len();
}

void RingAttentionForward(const float* qkv, const SequenceChunks& chunks,
                          const cpu::AttentionChunkShape& shape,
                          Communicator* cp, float* out, float* lse,
                          const cpu::DropoutSpec* dropout) {
  CheckGroup(chunks, cp);
  const Widths w = WidthsOf(shape);
  const int cp_size = chunks.cp(), rank = chunks.rank();
  const int next = (rank + 1) % cp_size, prev = (rank + cp_size - 1) % cp_size;
  const int64_t c = chunks.chunk_len();
  const int64_t chunk_rows = c * shape.b;               // rows of one chunk
  const int64_t rows = 2 * chunk_rows;                  // s_local·b
  const int64_t lse_chunk = shape.b * shape.heads * c;  // [b, heads, c]

  std::fill(out, out + rows * w.out, 0.0f);
  std::fill(lse, lse + 2 * lse_chunk, -std::numeric_limits<float>::infinity());
  std::vector<float> held(rows * w.kv), incoming(rows * w.kv);  // K/V msgs
  PackKv(qkv, held.data(), rows, w);
  std::vector<float> kv_rows(rows * w.qkv, 0.0f);   // held K/V, qkv layout
  std::vector<float> part_out(chunk_rows * w.out);  // [c·b, heads·d]
  std::vector<float> part_lse(lse_chunk);           // [b, heads, c]
  for (int step = 0; step < cp_size; ++step) {
    const int src = (rank - step + cp_size) % cp_size;  // owner of held K/V
    const bool more = step + 1 < cp_size;
    // Send first: the transfer overlaps this step's compute (TE posts the
    // next step's P2P before its attention kernels).
    if (more) cp->Send(held.data(), rows * w.kv, next);
    const float* keys = qkv;  // step 0: this rank's own K/V
    if (step > 0) {
      UnpackKv(held.data(), kv_rows.data(), rows, w);
      keys = kv_rows.data();
    }
    const SequenceChunks src_chunks(chunks.seq(), cp_size, src);
    for (int qi = 0; qi < 2; ++qi) {
      const int64_t q_pos0 = chunks.ChunkStart(qi);
      for (int ki = 0; ki < 2; ++ki) {
        const int64_t k_pos0 = src_chunks.ChunkStart(ki);
        if (!Visible(q_pos0, k_pos0, c)) continue;
        cpu::AttentionChunkForward(qkv + qi * chunk_rows * w.qkv,
                                   keys + ki * chunk_rows * w.qkv, c, q_pos0, c,
                                   k_pos0, shape, part_out.data(),
                                   part_lse.data(), dropout, chunks.seq());
        cpu::AttentionMerge(out + qi * chunk_rows * w.out, lse + qi * lse_chunk,
                            part_out.data(), part_lse.data(), c, shape);
      }
    }
    if (more) {
      cp->Recv(incoming.data(), rows * w.kv, prev);
      held.swap(incoming);
    }
  }
}

void RingAttentionBackward(const float* dout, const float* qkv,
                           const float* out, const float* lse,
                           const SequenceChunks& chunks,
                           const cpu::AttentionChunkShape& shape,
                           Communicator* cp, float* dqkv,
                           const cpu::DropoutSpec* dropout) {
  CheckGroup(chunks, cp);
  const Widths w = WidthsOf(shape);
  const int cp_size = chunks.cp(), rank = chunks.rank();
  const int next = (rank + 1) % cp_size, prev = (rank + cp_size - 1) % cp_size;
  const int64_t c = chunks.chunk_len();
  const int64_t chunk_rows = c * shape.b;
  const int64_t rows = 2 * chunk_rows;
  const int64_t lse_chunk = shape.b * shape.heads * c;

  // dq accumulates in the q part of a qkv-layout buffer, dK/dV of the held
  // keys in the k|v part of another (cpu::AttentionChunkBackward's layout).
  std::vector<float> dq_rows(rows * w.qkv, 0.0f);               // [rows, width]
  std::vector<float> dkv_rows(rows * w.qkv, 0.0f);              // [rows, width]
  std::vector<float> held(rows * w.kv), incoming(rows * w.kv);  // K/V msgs
  std::vector<float> dkv(rows * w.kv, 0.0f);  // dK/dV message [rows, kv]
  PackKv(qkv, held.data(), rows, w);
  std::vector<float> kv_rows(rows * w.qkv, 0.0f);
  for (int step = 0; step < cp_size; ++step) {
    const int src = (rank - step + cp_size) % cp_size;
    const bool more = step + 1 < cp_size;
    if (more) cp->Send(held.data(), rows * w.kv, next);
    const float* keys = qkv;
    if (step > 0) {
      UnpackKv(held.data(), kv_rows.data(), rows, w);
      keys = kv_rows.data();
      // The partial dK/dV of these keys from the ranks before (sent after
      // the K/V by the same peer, so it arrives after them).
      cp->Recv(dkv.data(), rows * w.kv, prev);
      UnpackKv(dkv.data(), dkv_rows.data(), rows, w);
    }
    const SequenceChunks src_chunks(chunks.seq(), cp_size, src);
    for (int qi = 0; qi < 2; ++qi) {
      const int64_t q_pos0 = chunks.ChunkStart(qi);
      for (int ki = 0; ki < 2; ++ki) {
        const int64_t k_pos0 = src_chunks.ChunkStart(ki);
        if (!Visible(q_pos0, k_pos0, c)) continue;
        cpu::AttentionChunkBackward(
            dout + qi * chunk_rows * w.out, out + qi * chunk_rows * w.out,
            lse + qi * lse_chunk, qkv + qi * chunk_rows * w.qkv,
            keys + ki * chunk_rows * w.qkv, c, q_pos0, c, k_pos0, shape,
            dq_rows.data() + qi * chunk_rows * w.qkv,
            dkv_rows.data() + ki * chunk_rows * w.qkv, dropout, chunks.seq());
      }
    }
    // Pass the partial dK/dV on with its keys; after the last step the next
    // rank is their owner (src + cp ≡ src, i.e. next == src).
    PackKv(dkv_rows.data(), dkv.data(), rows, w);
    cp->Send(dkv.data(), rows * w.kv, next);
    if (more) {
      cp->Recv(incoming.data(), rows * w.kv, prev);
      held.swap(incoming);
    }
  }
  // This rank's own keys' dK/dV, complete after visiting every rank.
  cp->Recv(dkv.data(), rows * w.kv, prev);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(dq_rows.data() + r * w.qkv, w.q, dqkv + r * w.qkv);
    std::copy_n(dkv.data() + r * w.kv, w.kv, dqkv + r * w.qkv + w.q);
  }
}

}  // namespace meshtune::engine::context_parallel
