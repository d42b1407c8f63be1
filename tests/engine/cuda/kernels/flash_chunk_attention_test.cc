// The flash kernels on (query chunk, key chunk) pairs (engine/cuda/kernels/
// flash_attention.h FlashChunkAttention: context parallelism's pieces)
// against the CPU chunk ops (engine/cpu/attention_chunk.h) on bf16-rounded
// inputs: the forward's out and lse, the log-sum-exp merge and the
// backward's accumulated dq, dk and dv, for diagonal, fully visible and
// partly visible pairs (rows that see no key: out 0, lse −inf), MHA and
// GQA, head_dim 32 and 64, partial tiles, with and without attention
// dropout (the whole sequence's masks at global positions). The query rows
// are read inside packed qkv rows and the keys from a separate
// [sk·b, 2·groups·d] K/V block, the ring's layouts.
//
// Tolerances (tests/engine/cuda/cuda_test_util.h): the fp32 out at the bf16
// bound (P enters P·V in bf16), twice with dropout; lse and the merge at
// the fp32 bound; the gradients at twice the bf16 bound (P and dS enter the
// MMAs in bf16), as the full-sequence kernel's test.
#include <cmath>
#include <limits>
#include <vector>

#include "engine/cpu/attention_chunk.h"
#include "engine/cuda/kernels/flash_attention.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using testing::Close;
using testing::CloseFp32;
using testing::kBf16Atol;
using testing::kBf16Rtol;
using testing::RandomBf16Values;

template <typename T>
DeviceBuffer Put(const std::vector<T>& host) {
  auto buffer = Upload(host);
  EXPECT_TRUE(buffer.ok()) << buffer.status().message();
  return std::move(buffer).value();
}

template <typename T>
std::vector<T> Get(const DeviceBuffer& buffer, size_t count) {
  auto host = Download<T>(buffer, count);
  EXPECT_TRUE(host.ok()) << host.status().message();
  return host.ok() ? std::move(host).value() : std::vector<T>(count);
}

// lse vectors: the same entries −inf, the finite ones at the fp32 bound.
::testing::AssertionResult CloseLse(const std::vector<float>& gpu,
                                    const std::vector<float>& ref) {
  if (gpu.size() != ref.size()) return ::testing::AssertionFailure() << "size";
  std::vector<float> g, r;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i]) || std::isinf(gpu[i])) {
      if (gpu[i] != ref[i]) {
        return ::testing::AssertionFailure()
               << "lse " << i << ": gpu " << gpu[i] << " cpu " << ref[i];
      }
      continue;
    }
    g.push_back(gpu[i]);
    r.push_back(ref[i]);
  }
  return CloseFp32(g, r);
}

struct PairCase {
  int64_t b, heads, groups, d;
  int64_t seq;         // whole sequence (dropout rows)
  int64_t sq, q_pos0;  // query chunk
  int64_t sk, k_pos0;  // key chunk
};

cpu::DropoutSpec TestDropout() {
  cpu::DropoutSpec drop;
  drop.p = 0.2f;
  drop.key = cpu::DropoutKey(7, 1, cpu::DropoutSite::kAttentionProbs);
  drop.first_sample = 5;
  drop.first_head = 2;
  return drop;
}

class CudaFlashChunkAttentionTest : public ::testing::TestWithParam<PairCase> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }

  void RunPair(const cpu::DropoutSpec* drop, float out_scale) {
    const PairCase p = GetParam();
    const cpu::AttentionChunkShape shape{p.b, p.heads, p.groups, p.d};
    const int64_t width = (p.heads + 2 * p.groups) * p.d;
    const int64_t kvw = 2 * p.groups * p.d, hd = p.heads * p.d;
    // The whole sequence's packed rows; the chunks are row blocks of it.
    const std::vector<float> qkv =
        RandomBf16Values(p.seq * p.b * width, 11, 2.0f);
    const float* q_rows = qkv.data() + p.q_pos0 * p.b * width;
    const float* kv_rows = qkv.data() + p.k_pos0 * p.b * width;
    // The K/V block the ring passes: k then v of each key row.
    std::vector<float> kv(p.sk * p.b * kvw);
    for (int64_t r = 0; r < p.sk * p.b; ++r) {
      for (int64_t c = 0; c < kvw; ++c) {
        kv[r * kvw + c] = kv_rows[r * width + hd + c];
      }
    }
    // CPU forward of the pair.
    std::vector<float> out(p.sq * p.b * hd), lse(p.b * p.heads * p.sq);
    cpu::AttentionChunkForward(q_rows, kv_rows, p.sq, p.q_pos0, p.sk, p.k_pos0,
                               shape, out.data(), lse.data(), drop, p.seq);

    auto flash = FlashChunkAttention::Create(p.seq, std::max(p.sq, p.sk), p.b,
                                             p.heads, p.groups, p.d);
    ASSERT_TRUE(flash.ok()) << flash.status().message();
    DeviceBuffer d_qkv = Put(ToBf16(qkv));
    DeviceBuffer d_kv = Put(ToBf16(kv));
    FlashChunkAttention::QueryChunk q;
    q.q = d_qkv.as<Bf16>() + p.q_pos0 * p.b * width;
    q.ld = width;
    q.len = p.sq;
    q.pos0 = p.q_pos0;
    FlashChunkAttention::KvChunk k;
    k.k = d_kv.as<Bf16>();
    k.v = d_kv.as<Bf16>() + p.groups * p.d;
    k.ld = kvw;
    k.len = p.sk;
    k.pos0 = p.k_pos0;
    DeviceBuffer d_out = Put(std::vector<float>(out.size(), 7.0f));
    DeviceBuffer d_lse = Put(std::vector<float>(lse.size(), 7.0f));
    Status st = (*flash)->Forward(q, k, d_out.as<float>(), d_lse.as<float>(),
                                  nullptr, drop);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(Close(Get<float>(d_out, out.size()), out, out_scale * kBf16Rtol,
                      out_scale * kBf16Atol));
    EXPECT_TRUE(CloseLse(Get<float>(d_lse, lse.size()), lse));

    // Backward given this pair's out (rounded to bf16, as the ring's final
    // out is) and lse, accumulating onto non-zero gradients.
    std::vector<float> out_b(out.size());
    for (size_t i = 0; i < out.size(); ++i) out_b[i] = RoundToBf16(out[i]);
    const std::vector<float> dout = RandomBf16Values(out.size(), 12, 1.0f);
    std::vector<float> dq_qkv(p.sq * p.b * width, 0.5f);
    std::vector<float> dkv_qkv(p.sk * p.b * width, -0.25f);
    cpu::AttentionChunkBackward(dout.data(), out_b.data(), lse.data(), q_rows,
                                kv_rows, p.sq, p.q_pos0, p.sk, p.k_pos0, shape,
                                dq_qkv.data(), dkv_qkv.data(), drop, p.seq);
    std::vector<float> dq_ref(p.sq * p.b * hd), dkv_ref(p.sk * p.b * kvw);
    for (int64_t r = 0; r < p.sq * p.b; ++r) {
      for (int64_t c = 0; c < hd; ++c)
        dq_ref[r * hd + c] = dq_qkv[r * width + c];
    }
    for (int64_t r = 0; r < p.sk * p.b; ++r) {
      for (int64_t c = 0; c < kvw; ++c) {
        dkv_ref[r * kvw + c] = dkv_qkv[r * width + hd + c];
      }
    }
    DeviceBuffer d_dout = Put(ToBf16(dout));
    DeviceBuffer d_outb = Put(ToBf16(out_b));
    DeviceBuffer d_lse_ref = Put(lse);
    DeviceBuffer d_dq = Put(std::vector<float>(dq_ref.size(), 0.5f));
    DeviceBuffer d_dkv = Put(std::vector<float>(dkv_ref.size(), -0.25f));
    st = (*flash)->Backward(
        d_dout.as<Bf16>(), d_outb.as<Bf16>(), d_lse_ref.as<float>(), q, k,
        d_dq.as<float>(), d_dkv.as<float>(), d_dkv.as<float>() + p.groups * p.d,
        kvw, nullptr, drop);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(Synchronize("flash chunk test").ok());
    EXPECT_TRUE(Close(Get<float>(d_dq, dq_ref.size()), dq_ref, 2 * kBf16Rtol,
                      2 * kBf16Atol));
    EXPECT_TRUE(Close(Get<float>(d_dkv, dkv_ref.size()), dkv_ref, 2 * kBf16Rtol,
                      2 * kBf16Atol));
  }
};

TEST_P(CudaFlashChunkAttentionTest, PairMatchesCpu) { RunPair(nullptr, 1.0f); }

TEST_P(CudaFlashChunkAttentionTest, PairWithDropoutMatchesCpu) {
  const cpu::DropoutSpec drop = TestDropout();
  RunPair(&drop, 2.0f);
}

INSTANTIATE_TEST_SUITE_P(
    Pairs, CudaFlashChunkAttentionTest,
    ::testing::Values(
        // b, heads, groups, d, seq, sq, q_pos0, sk, k_pos0
        PairCase{2, 2, 2, 32, 160, 40, 40, 40, 40},    // diagonal, MHA
        PairCase{1, 4, 2, 64, 160, 40, 120, 40, 0},    // all visible, GQA
        PairCase{2, 4, 1, 32, 200, 100, 100, 100, 0},  // MQA, > 1 tile
        PairCase{1, 2, 1, 64, 256, 70, 10, 50, 30},    // rows that see nothing
        PairCase{3, 2, 2, 32, 96, 24, 72, 24, 48}));   // cp 2 at s 96

// cpu::AttentionMerge's semantics on fp32 partial results, including rows
// where one side (or both) saw nothing (lse −inf).
TEST(CudaFlashChunkMergeTest, MatchesCpu) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t sq = 37, b = 2, heads = 3, d = 32;
  const cpu::AttentionChunkShape shape{b, heads, heads, d};
  const int64_t rows = sq * b, lse_n = b * heads * sq;
  std::vector<float> out = RandomBf16Values(rows * heads * d, 21, 1.0f);
  std::vector<float> out2 = RandomBf16Values(rows * heads * d, 22, 1.0f);
  std::vector<float> lse = RandomBf16Values(lse_n, 23, 4.0f);
  std::vector<float> lse2 = RandomBf16Values(lse_n, 24, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < lse_n; i += 5) lse[i] = -inf;
  for (int64_t i = 0; i < lse_n; i += 7) lse2[i] = -inf;
  DeviceBuffer d_out = Put(out), d_lse = Put(lse);
  DeviceBuffer d_out2 = Put(out2), d_lse2 = Put(lse2);
  // Rows with lse −inf on the left have out 0 (a chunk that saw nothing).
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t j = 0; j < heads; ++j) {
      for (int64_t t = 0; t < sq; ++t) {
        if (!std::isinf(lse[(bi * heads + j) * sq + t])) continue;
        for (int64_t c = 0; c < d; ++c)
          out[((t * b + bi) * heads + j) * d + c] = 0;
      }
    }
  }
  d_out = Put(out);
  cpu::AttentionMerge(out.data(), lse.data(), out2.data(), lse2.data(), sq,
                      shape);
  Status st = FlashChunkAttention::Merge(d_out.as<float>(), d_lse.as<float>(),
                                         d_out2.as<float>(), d_lse2.as<float>(),
                                         sq, b, heads, d, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(CloseFp32(Get<float>(d_out, out.size()), out));
  EXPECT_TRUE(CloseLse(Get<float>(d_lse, lse.size()), lse));
}

// The ring's row helpers: a column block copied and a fp32 block rounded
// into strided bf16 rows.
TEST(CudaFlashChunkHelpersTest, CopyRowsAndCastRows) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 5, ld = 24, cols = 8;
  const std::vector<float> src = RandomBf16Values(rows * ld, 31, 1.0f);
  DeviceBuffer d_src = Put(ToBf16(src));
  DeviceBuffer d_dst = Put(std::vector<Bf16>(rows * cols));
  ASSERT_TRUE(CopyRows(d_src.as<Bf16>() + 8, ld, d_dst.as<Bf16>(), cols, rows,
                       cols, nullptr)
                  .ok());
  const std::vector<float> got = ToFloat(Get<Bf16>(d_dst, rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_EQ(got[r * cols + c], src[r * ld + 8 + c]);
    }
  }
  DeviceBuffer d_f = Put(src);
  DeviceBuffer d_b = Put(ToBf16(std::vector<float>(rows * ld, 3.0f)));
  ASSERT_TRUE(CastRowsToBf16(d_f.as<float>(), ld, d_b.as<Bf16>() + 4, ld, rows,
                             cols, nullptr)
                  .ok());
  ASSERT_TRUE(ZeroFloats(d_f.as<float>(), rows * ld, nullptr).ok());
  const std::vector<float> cast = ToFloat(Get<Bf16>(d_b, rows * ld));
  const std::vector<float> zero = Get<float>(d_f, rows * ld);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < ld; ++c) {
      const bool in = c >= 4 && c < 4 + cols;
      EXPECT_EQ(cast[r * ld + c], in ? src[r * ld + c - 4] : 3.0f);
      EXPECT_EQ(zero[r * ld + c], 0.0f);
    }
  }
}

}  // namespace
}  // namespace meshtune::engine::cuda
