// Ring attention on the GPU (engine/cuda/context_parallel/ring_attention.h)
// against the full causal attention of the CPU (engine/cpu/ops.h
// AttentionForward/Backward) for cp 2 and 4, MHA and GQA, without and with
// attention dropout: cp thread ranks over MakeLocalWorld(cp), each with a
// staged device communicator (they share the GPU), each holding its two
// chunks of a bf16-rounded qkv (Megatron's load-balanced split). Every
// rank's out, lse and dqkv rows are compared with the same rows of the
// single-rank result.
//
// Tolerances (tests/engine/cuda/cuda_test_util.h): out and dqkv at twice
// the bf16 bound (P and dS enter the MMAs in bf16; the partial outputs and
// gradients are merged and summed in fp32 and rounded once), lse at the
// fp32 bound against a double-precision log-sum-exp.
//
// Also without a device: the shape checks (DeviceRingAttention::CheckShape)
// and CudaGptModel::CheckSupported's cp rules.
#include "engine/cuda/context_parallel/ring_attention.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/comm/staged_communicator.h"
#include "engine/cuda/gpt_model.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "engine/train_config.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"
#include "tests/engine/cuda/trainer_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using context_parallel::SequenceChunks;
using testing::Close;
using testing::CloseFp32;
using testing::CpuAttentionCase;
using testing::kBf16Atol;
using testing::kBf16Rtol;
using testing::MakeCpuAttentionCase;

// lse[(bi·heads + j)·s + t] = log Σ_{u ≤ t} exp(scale·q_t·k_u), in double.
std::vector<float> ReferenceLse(const std::vector<float>& qkv, int64_t s,
                                int64_t b, int64_t heads, int64_t groups,
                                int64_t d) {
  const int64_t width = (heads + 2 * groups) * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<float> lse(b * heads * s);
  std::vector<double> x(s);
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t j = 0; j < heads; ++j) {
      const int64_t g = j / (heads / groups);
      for (int64_t t = 0; t < s; ++t) {
        const float* q = &qkv[(t * b + bi) * width + j * d];
        double m = -INFINITY;
        for (int64_t u = 0; u <= t; ++u) {
          const float* k = &qkv[(u * b + bi) * width + (heads + g) * d];
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += double{q[c]} * k[c];
          x[u] = scale * dot;
          m = std::max(m, x[u]);
        }
        double sum = 0.0;
        for (int64_t u = 0; u <= t; ++u) sum += std::exp(x[u] - m);
        lse[(bi * heads + j) * s + t] = static_cast<float>(m + std::log(sum));
      }
    }
  }
  return lse;
}

// (cp, s, b, heads, groups, head_dim)
using Shape = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t>;

class CudaRingAttentionTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }

  void Run(const cpu::DropoutSpec* drop) {
    const auto [cp, s, b, heads, groups, d] = GetParam();
    const CpuAttentionCase ref =
        MakeCpuAttentionCase(s, b, heads, groups, d, 41, drop);
    const std::vector<float> ref_lse =
        ReferenceLse(ref.qkv, s, b, heads, groups, d);
    auto world = MakeLocalWorld(cp);
    std::vector<std::string> errors(cp);
    std::vector<std::thread> threads;
    for (int r = 0; r < cp; ++r) {
      threads.emplace_back(
          [&, r] { errors[r] = RunRank(world[r].get(), ref, ref_lse, drop); });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < cp; ++r) {
      EXPECT_EQ(errors[r], "") << "cp rank " << r;
    }
  }

  // One cp rank: its rows of qkv and dout, the ring forward and backward,
  // and the comparison of its rows; "" or the first failure.
  std::string RunRank(Communicator* group, const CpuAttentionCase& ref,
                      const std::vector<float>& ref_lse,
                      const cpu::DropoutSpec* drop) {
    const auto [cp, s, b, heads, groups, d] = GetParam();
    const int64_t width = (heads + 2 * groups) * d, hd = heads * d;
    const SequenceChunks chunks(s, cp, group->rank());
    const int64_t rows = chunks.local_len() * b, c = chunks.chunk_len();
    auto select = [&](const std::vector<float>& full, int64_t w) {
      std::vector<float> local(rows * w);
      chunks.SelectRows(full.data(), local.data(), b, w);
      return local;
    };
    StagedCommunicator comm(group);
    auto ring = DeviceRingAttention::Create(chunks, b, heads, groups, d, &comm);
    if (!ring.ok()) return ring.status().message();
    if ((*ring)->lse_elements() != b * heads * chunks.local_len()) {
      return "lse_elements";
    }
    auto d_qkv = Upload(ToBf16(select(ref.qkv, width)));
    auto d_dout = Upload(ToBf16(select(ref.dout, hd)));
    auto d_out = Upload(std::vector<Bf16>(rows * hd));
    auto d_lse = Upload(std::vector<float>((*ring)->lse_elements(), 7.0f));
    auto d_dqkv = Upload(ToBf16(std::vector<float>(rows * width, 7.0f)));
    if (!d_qkv.ok() || !d_dout.ok() || !d_out.ok() || !d_lse.ok() ||
        !d_dqkv.ok()) {
      return "upload";
    }
    Status st = (*ring)->Forward(d_qkv->as<Bf16>(), d_out->as<Bf16>(),
                                 d_lse->as<float>(), drop);
    if (!st.ok()) return "forward: " + st.message();
    st = (*ring)->Backward(d_dout->as<Bf16>(), d_qkv->as<Bf16>(),
                           d_out->as<Bf16>(), d_lse->as<float>(),
                           d_dqkv->as<Bf16>(), drop);
    if (!st.ok()) return "backward: " + st.message();
    auto out = Download<Bf16>(*d_out, rows * hd);
    auto lse = Download<float>(*d_lse, (*ring)->lse_elements());
    auto dqkv = Download<Bf16>(*d_dqkv, rows * width);
    if (!out.ok() || !lse.ok() || !dqkv.ok()) return "download";
    // The reference lse rows of the local chunks: [2, b·heads, c].
    std::vector<float> lse_local;
    for (int qi = 0; qi < 2; ++qi) {
      for (int64_t bh = 0; bh < b * heads; ++bh) {
        for (int64_t t = 0; t < c; ++t) {
          lse_local.push_back(ref_lse[bh * s + chunks.ChunkStart(qi) + t]);
        }
      }
    }
    const auto out_ok =
        Close(ToFloat(*out), select(ref.out, hd), 2 * kBf16Rtol, 2 * kBf16Atol);
    if (!out_ok) return std::string("out: ") + out_ok.message();
    const auto lse_ok = CloseFp32(*lse, lse_local);
    if (!lse_ok) return std::string("lse: ") + lse_ok.message();
    const auto dqkv_ok = Close(ToFloat(*dqkv), select(ref.dqkv, width),
                               2 * kBf16Rtol, 2 * kBf16Atol);
    if (!dqkv_ok) return std::string("dqkv: ") + dqkv_ok.message();
    return "";
  }
};

TEST_P(CudaRingAttentionTest, MatchesFullAttention) { Run(nullptr); }

TEST_P(CudaRingAttentionTest, DropoutMatchesFullAttention) {
  cpu::DropoutSpec drop;
  drop.p = 0.2f;
  drop.key = cpu::DropoutKey(9, 2, cpu::DropoutSite::kAttentionProbs);
  drop.first_sample = 3;
  drop.first_head = 2;
  Run(&drop);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CudaRingAttentionTest,
    ::testing::Values(Shape{2, 96, 2, 2, 2, 32},     // cp 2, MHA, c = 24
                      Shape{2, 256, 1, 4, 2, 64},    // cp 2, GQA, c = 64
                      Shape{4, 160, 2, 4, 1, 32},    // cp 4, MQA, c = 20
                      Shape{4, 320, 1, 2, 2, 64}));  // cp 4, c = 40

TEST(CudaRingAttentionHostOnlyTest, CheckShape) {
  EXPECT_TRUE(
      DeviceRingAttention::CheckShape(SequenceChunks(64, 2, 0), 1, 4, 2, 32)
          .ok());
  const Status one =
      DeviceRingAttention::CheckShape(SequenceChunks(64, 1, 0), 1, 4, 2, 32);
  EXPECT_FALSE(one.ok());
  EXPECT_EQ(one.message(), "ring attention needs cp > 1, got cp = 1");
  const Status dim =
      DeviceRingAttention::CheckShape(SequenceChunks(64, 2, 1), 1, 4, 2, 40);
  EXPECT_FALSE(dim.ok());
  EXPECT_EQ(dim.message(),
            "flash attention: head_dim 40 is not a multiple of 16 up to 128");
}

// CheckSupported takes cp > 1 on the flash kernel and refuses it on the
// unfused one (which has no ring), before any device is touched.
TEST(CudaRingAttentionHostOnlyTest, CheckSupportedContextParallel) {
  TrainConfig config = SmallTrainConfig(true);  // seq 64, GQA, RoPE
  config.parallel.cp = 2;
  ASSERT_TRUE(config.Validate().ok()) << config.Validate().message();
  unsetenv("MESHTUNE_CUDA_ATTENTION");
  EXPECT_TRUE(CudaGptModel::CheckSupported(config).ok())
      << CudaGptModel::CheckSupported(config).message();
  setenv("MESHTUNE_CUDA_ATTENTION", "unfused", 1);
  const Status unfused = CudaGptModel::CheckSupported(config);
  unsetenv("MESHTUNE_CUDA_ATTENTION");
  ASSERT_FALSE(unfused.ok());
  EXPECT_EQ(unfused.message(),
            "the CUDA engine runs context parallelism (cp=2) on the flash "
            "kernel only, not MESHTUNE_CUDA_ATTENTION=unfused");
  EXPECT_EQ(unfused.hint(), "unset MESHTUNE_CUDA_ATTENTION, or use --cp 1");
}

}  // namespace
}  // namespace meshtune::engine::cuda
