// Ring attention on in-process ranks against the full causal attention of
// one rank (cpu::AttentionForward/Backward): every cp rank's out and dqkv
// are the full results' rows of its chunks, for cp = 2 and 4, GQA (4 heads,
// 2 groups), b = 2, without and with attention dropout (the same masks as
// the full attention's); and the ring's messages are what ring_attention.h
// says.
#include "engine/context_parallel/ring_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cpu/ops.h"

namespace meshtune::engine::context_parallel {
namespace {

std::vector<float> Values(int64_t count, uint64_t seed) {
  std::vector<float> v(count);
  uint64_t s = seed * 2862933555777941757ULL + 3037000493ULL;
  for (auto& x : v) {
    s = s * 2862933555777941757ULL + 3037000493ULL;
    x = static_cast<float>((s >> 33) % 2000001) / 1e6f - 1.0f;
  }
  return v;
}

constexpr int64_t kS = 16, kB = 2, kHeads = 4, kGroups = 2, kD = 8;
constexpr int64_t kWidth = (kHeads + 2 * kGroups) * kD;
constexpr int64_t kOutWidth = kHeads * kD;

void ExpectNearRows(const std::vector<float>& actual,
                    const std::vector<float>& expected,
                    const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 2e-6 + 1e-5 * std::fabs(expected[i]))
        << what << " element " << i;
  }
}

void CheckRing(int cp, bool dropout) {
  SCOPED_TRACE("cp " + std::to_string(cp) + (dropout ? " dropout" : ""));
  const std::vector<float> qkv = Values(kS * kB * kWidth, 1);
  const std::vector<float> dout = Values(kS * kB * kOutWidth, 2);
  std::vector<float> out(kS * kB * kOutWidth), dqkv(qkv.size());
  std::vector<float> probs(kB * kHeads * kS * kS);
  // As a layer would set it: tp rank 1 of 2 (global heads 4..7), samples
  // 5 and 6 of the dataset.
  cpu::DropoutSpec spec;
  spec.p = dropout ? 0.3f : 0.0f;
  spec.key = cpu::DropoutKey(1234, 3, cpu::DropoutSite::kAttentionProbs);
  spec.first_sample = 5;
  spec.first_head = kHeads;
  cpu::AttentionForward(qkv.data(), out.data(), probs.data(), kS, kB, kHeads,
                        kGroups, kD, &spec);
  cpu::AttentionBackward(dout.data(), qkv.data(), probs.data(), dqkv.data(), kS,
                         kB, kHeads, kGroups, kD, &spec);

  const cpu::AttentionChunkShape shape{kB, kHeads, kGroups, kD};
  CommLog log;
  std::vector<std::vector<float>> ring_out(cp), ring_dqkv(cp);
  RunLocalRanks(
      cp,
      [&](Communicator& world) {
        const int r = world.rank();
        std::unique_ptr<Communicator> group = world.Split(0, r, "cp");
        const SequenceChunks chunks(kS, cp, r);
        const int64_t rows = chunks.local_len() * kB;
        std::vector<float> local_qkv(rows * kWidth),
            local_dout(rows * kOutWidth);
        chunks.SelectRows(qkv.data(), local_qkv.data(), kB, kWidth);
        chunks.SelectRows(dout.data(), local_dout.data(), kB, kOutWidth);
        std::vector<float> o(rows * kOutWidth),
            lse(RingLseCount(chunks, shape));
        std::vector<float> d(rows * kWidth);
        log.set_label("fwd");  // per rank thread (CommLog)
        RingAttentionForward(local_qkv.data(), chunks, shape, group.get(),
                             o.data(), lse.data(), &spec);
        log.set_label("bwd");
        RingAttentionBackward(local_dout.data(), local_qkv.data(), o.data(),
                              lse.data(), chunks, shape, group.get(), d.data(),
                              &spec);
        ring_out[r] = o;
        ring_dqkv[r] = d;
      },
      &log);

  for (int r = 0; r < cp; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const SequenceChunks chunks(kS, cp, r);
    const int64_t rows = chunks.local_len() * kB;
    std::vector<float> want_out(rows * kOutWidth), want_dqkv(rows * kWidth);
    chunks.SelectRows(out.data(), want_out.data(), kB, kOutWidth);
    chunks.SelectRows(dqkv.data(), want_dqkv.data(), kB, kWidth);
    ExpectNearRows(ring_out[r], want_out, "out");
    ExpectNearRows(ring_dqkv[r], want_dqkv, "dqkv");
  }

  // Messages per rank: K/V of s/cp·b rows × 2·groups·d floats; forward
  // cp−1 hops, backward cp−1 K/V hops and cp dK/dV hops.
  const int64_t message_bytes = 4 * (kS / cp) * kB * 2 * kGroups * kD;
  int64_t fwd_sends = 0, fwd_recvs = 0, bwd_sends = 0, bwd_recvs = 0;
  for (const CommRecord& rec : log.records()) {
    if (rec.kind != CommKind::kSend && rec.kind != CommKind::kRecv) continue;
    EXPECT_EQ(rec.group, "cp");
    EXPECT_EQ(rec.group_size, cp);
    EXPECT_EQ(rec.bytes, message_bytes);
    const bool send = rec.kind == CommKind::kSend;
    if (rec.label == "fwd") (send ? fwd_sends : fwd_recvs) += 1;
    if (rec.label == "bwd") (send ? bwd_sends : bwd_recvs) += 1;
  }
  EXPECT_EQ(fwd_sends, cp * (cp - 1));
  EXPECT_EQ(fwd_recvs, cp * (cp - 1));
  EXPECT_EQ(bwd_sends, cp * (2 * cp - 1));
  EXPECT_EQ(bwd_recvs, cp * (2 * cp - 1));
}

TEST(RingAttention, TwoRanksEqualFullCausalAttention) { CheckRing(2, false); }

TEST(RingAttention, FourRanksEqualFullCausalAttention) { CheckRing(4, false); }

TEST(RingAttention, AttentionDropoutDrawsTheFullAttentionsMasks) {
  CheckRing(2, true);
  CheckRing(4, true);
}

}  // namespace
}  // namespace meshtune::engine::context_parallel
