// The CUDA backend's ops against the CPU reference ops (engine/cpu/ops.h):
// same inputs (random, rounded to bf16 so both sides see identical values),
// forward and backward, compared within the bf16 tolerance below. Label
// `gpu`; every test that needs a device skips without one, and the
// no-device behaviour is tested where there is none.
//
// Tolerances: tests/engine/cuda/cuda_test_util.h.
#include "engine/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/moe_permute.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using testing::Close;
using testing::CloseBf16;
using testing::CloseFp32;
using testing::RandomBf16Values;

// Device copies of host data; each accessor aborts the test on a CUDA error.
class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }

  template <typename T>
  T* Dev(const std::vector<T>& host) {
    auto buffer = Upload(host);
    EXPECT_TRUE(buffer.ok()) << buffer.status().message();
    buffers_.push_back(std::move(buffer).value());
    return buffers_.back().as<T>();
  }
  Bf16* DevBf16(const std::vector<float>& host) { return Dev(ToBf16(host)); }
  template <typename T>
  T* Zeros(size_t count) {
    return Dev(std::vector<T>(count));
  }

  template <typename T>
  std::vector<T> Host(const T* device, size_t count) {
    EXPECT_TRUE(Synchronize("test").ok());
    for (const DeviceBuffer& b : buffers_) {
      if (b.data() == device) {
        auto host = Download<T>(b, count);
        EXPECT_TRUE(host.ok()) << host.status().message();
        return std::move(host).value();
      }
    }
    ADD_FAILURE() << "not a test buffer";
    return {};
  }
  std::vector<float> HostBf16(const Bf16* device, size_t count) {
    return ToFloat(Host(device, count));
  }

  std::vector<DeviceBuffer> buffers_;
};

TEST(CudaDeviceTest, NoDeviceIsAStatusNotACrash) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a device is present";
  auto buffer = DeviceBuffer::Allocate(1024);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().message(),
            "no CUDA device: cudaGetDeviceCount found none");
  EXPECT_NE(buffer.status().hint().find("--backend cpu"), std::string::npos);
}

TEST_F(CudaOpsTest, DeviceNameAndRoundTrip) {
  auto name = DeviceName(0);
  ASSERT_TRUE(name.ok()) << name.status().message();
  EXPECT_NE(name->find("sm_"), std::string::npos) << *name;
  const std::vector<float> x = RandomBf16Values(1000, 1);
  EXPECT_EQ(HostBf16(DevBf16(x), x.size()), x);  // bf16 values survive exactly
}

TEST_F(CudaOpsTest, OutOfMemoryIsAStatus) {
  auto buffer = DeviceBuffer::Allocate(size_t{1} << 50);  // 1 PiB
  ASSERT_FALSE(buffer.ok());
  EXPECT_NE(buffer.status().message().find("cudaMalloc of"), std::string::npos)
      << buffer.status().message();
  EXPECT_EQ(buffer.status().ExitCode(), 2);
}

TEST_F(CudaOpsTest, EmbeddingMatchesCpu) {
  const int64_t n = 96, h = 200, vocab_start = 50, vocab_local = 100;
  std::vector<int32_t> tokens(n);
  std::mt19937 gen(7);
  for (auto& t : tokens)
    t = static_cast<int32_t>(gen() % 200);  // some off-shard
  tokens[1] = tokens[0];  // a repeated token accumulates twice
  const auto table = RandomBf16Values(vocab_local * h, 2);
  const auto dout = RandomBf16Values(n * h, 3);

  std::vector<float> ref_out(n * h), ref_dtable(vocab_local * h, 0.5f);
  cpu::EmbeddingForward(tokens.data(), table.data(), ref_out.data(), n, h,
                        vocab_start, vocab_local);
  cpu::EmbeddingBackward(tokens.data(), dout.data(), ref_dtable.data(), n, h,
                         vocab_start, vocab_local);

  int32_t* d_tokens = Dev(tokens);
  Bf16* out = Zeros<Bf16>(n * h);
  float* dtable = Dev(std::vector<float>(vocab_local * h, 0.5f));
  ASSERT_TRUE(EmbeddingForward(d_tokens, DevBf16(table), out, n, h, vocab_start,
                               vocab_local, nullptr)
                  .ok());
  ASSERT_TRUE(EmbeddingBackward(d_tokens, DevBf16(dout), dtable, n, h,
                                vocab_start, vocab_local, nullptr)
                  .ok());
  EXPECT_EQ(HostBf16(out, n * h), ref_out);  // a copy: exact
  EXPECT_TRUE(CloseFp32(Host(dtable, vocab_local * h), ref_dtable));
}

TEST_F(CudaOpsTest, PositionEmbeddingMatchesCpu) {
  const int64_t s = 24, b = 3, h = 64, offset = 5, positions = 40;
  const auto pos = RandomBf16Values(positions * h, 4);
  const auto x = RandomBf16Values(s * b * h, 5);
  const auto dout = RandomBf16Values(s * b * h, 6);
  std::vector<float> ref_x = x, ref_dpos(positions * h, 0.25f);
  cpu::PositionEmbeddingForward(pos.data(), ref_x.data(), s, b, h, offset);
  cpu::PositionEmbeddingBackward(dout.data(), ref_dpos.data(), s, b, h, offset);

  Bf16* d_x = DevBf16(x);
  float* dpos = Dev(std::vector<float>(positions * h, 0.25f));
  ASSERT_TRUE(
      PositionEmbeddingForward(DevBf16(pos), d_x, s, b, h, offset, nullptr)
          .ok());
  ASSERT_TRUE(
      PositionEmbeddingBackward(DevBf16(dout), dpos, s, b, h, offset, nullptr)
          .ok());
  EXPECT_TRUE(CloseBf16(HostBf16(d_x, s * b * h), ref_x));
  EXPECT_TRUE(CloseFp32(Host(dpos, positions * h), ref_dpos));
}

// LayerNorm and RMSNorm, with and without the fused residual, against the
// CPU op applied to the bf16-rounded sum.
class CudaNormTest
    : public CudaOpsTest,
      public ::testing::WithParamInterface<std::tuple<bool, bool>> {};

TEST_P(CudaNormTest, ForwardAndBackwardMatchCpu) {
  const auto [layernorm, fused_residual] = GetParam();
  const int64_t n = 70, h = 384;
  const float eps = 1e-5f;
  const auto x = RandomBf16Values(n * h, 10, 2.0f);
  const auto residual = RandomBf16Values(n * h, 11);
  const auto weight = RandomBf16Values(h, 12);
  const auto bias = RandomBf16Values(h, 13);
  const auto dout = RandomBf16Values(n * h, 14);
  const auto dresidual = RandomBf16Values(n * h, 15);

  std::vector<float> y = x;
  if (fused_residual) {
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = RoundToBf16(x[i] + residual[i]);
  }
  std::vector<float> ref_out(n * h), mean(n), rstd(n), ref_dx(n * h);
  std::vector<float> ref_dw(h, 0.125f), ref_db(h, -0.125f);
  if (layernorm) {
    cpu::LayerNormForward(y.data(), weight.data(), bias.data(), ref_out.data(),
                          mean.data(), rstd.data(), n, h, eps);
    cpu::LayerNormBackward(dout.data(), y.data(), weight.data(), mean.data(),
                           rstd.data(), ref_dx.data(), ref_dw.data(),
                           ref_db.data(), n, h);
  } else {
    cpu::RmsNormForward(y.data(), weight.data(), ref_out.data(), rstd.data(), n,
                        h, eps);
    cpu::RmsNormBackward(dout.data(), y.data(), weight.data(), rstd.data(),
                         ref_dx.data(), ref_dw.data(), n, h);
  }
  if (fused_residual) {
    for (size_t i = 0; i < ref_dx.size(); ++i) ref_dx[i] += dresidual[i];
  }

  Bf16* d_x = DevBf16(x);
  Bf16* d_res = fused_residual ? DevBf16(residual) : nullptr;
  Bf16* sum = Zeros<Bf16>(n * h);
  Bf16* out = Zeros<Bf16>(n * h);
  Bf16* dx = Zeros<Bf16>(n * h);
  float* d_mean = Zeros<float>(n);
  float* d_rstd = Zeros<float>(n);
  float* dw = Dev(std::vector<float>(h, 0.125f));
  float* db = Dev(std::vector<float>(h, -0.125f));
  Bf16* d_w = DevBf16(weight);
  Bf16* d_dout = DevBf16(dout);
  Bf16* d_dres = fused_residual ? DevBf16(dresidual) : nullptr;
  const Bf16* normalized = fused_residual ? sum : d_x;
  if (layernorm) {
    ASSERT_TRUE(LayerNormForward(d_x, d_res, sum, d_w, DevBf16(bias), out,
                                 d_mean, d_rstd, n, h, eps, nullptr)
                    .ok());
    ASSERT_TRUE(LayerNormBackward(d_dout, normalized, d_w, d_mean, d_rstd,
                                  d_dres, dx, dw, db, n, h, nullptr)
                    .ok());
    EXPECT_TRUE(CloseFp32(Host(d_mean, n), mean));
    EXPECT_TRUE(CloseFp32(Host(db, h), ref_db));
  } else {
    ASSERT_TRUE(
        RmsNormForward(d_x, d_res, sum, d_w, out, d_rstd, n, h, eps, nullptr)
            .ok());
    ASSERT_TRUE(RmsNormBackward(d_dout, normalized, d_w, d_rstd, d_dres, dx, dw,
                                n, h, nullptr)
                    .ok());
  }
  if (fused_residual) {
    EXPECT_EQ(HostBf16(sum, n * h), y);  // exact
  }
  EXPECT_TRUE(CloseFp32(Host(d_rstd, n), rstd));
  EXPECT_TRUE(CloseBf16(HostBf16(out, n * h), ref_out));
  EXPECT_TRUE(CloseBf16(HostBf16(dx, n * h), ref_dx));
  EXPECT_TRUE(CloseFp32(Host(dw, h), ref_dw));
}

// The weight and bias gradients are column sums whose y-blocks cover 128
// rows each; past 65535 · 128 rows (grid.y's limit) the blocks stride. With
// ones everywhere each column sums to n, exactly (n < 2^24 in fp32).
TEST_F(CudaOpsTest, NormColumnSumsCoverRowsBeyondTheGridLimit) {
  const int64_t n = 65535 * 128 + 1000, h = 4;
  const std::vector<float> ones(n * h, 1.0f);
  Bf16* d_ones = DevBf16(ones);
  Bf16* d_w = DevBf16(std::vector<float>(h, 1.0f));
  float* d_rstd = Dev(std::vector<float>(n, 1.0f));
  float* d_mean = Zeros<float>(n);
  Bf16* dx = Zeros<Bf16>(n * h);
  float* dw = Zeros<float>(h);
  float* db = Zeros<float>(h);
  ASSERT_TRUE(LayerNormBackward(d_ones, d_ones, d_w, d_mean, d_rstd, nullptr,
                                dx, dw, db, n, h, nullptr)
                  .ok());
  const std::vector<float> expected(h, static_cast<float>(n));
  EXPECT_EQ(Host(dw, h), expected);
  EXPECT_EQ(Host(db, h), expected);
  float* rms_dw = Zeros<float>(h);
  ASSERT_TRUE(RmsNormBackward(d_ones, d_ones, d_w, d_rstd, nullptr, dx, rms_dw,
                              n, h, nullptr)
                  .ok());
  EXPECT_EQ(Host(rms_dw, h), expected);
}

INSTANTIATE_TEST_SUITE_P(LayerNormAndRmsNorm, CudaNormTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool()));

TEST_F(CudaOpsTest, GeluMatchesCpu) {
  const int64_t count = 5000;
  const auto x = RandomBf16Values(count, 20, 4.0f);
  const auto dout = RandomBf16Values(count, 21);
  std::vector<float> ref_out(count), ref_dx(count);
  cpu::GeluForward(x.data(), ref_out.data(), count);
  cpu::GeluBackward(dout.data(), x.data(), ref_dx.data(), count);
  Bf16* d_x = DevBf16(x);
  Bf16* out = Zeros<Bf16>(count);
  Bf16* dx = Zeros<Bf16>(count);
  ASSERT_TRUE(GeluForward(d_x, out, count, nullptr).ok());
  ASSERT_TRUE(GeluBackward(DevBf16(dout), d_x, dx, count, nullptr).ok());
  EXPECT_TRUE(CloseBf16(HostBf16(out, count), ref_out));
  EXPECT_TRUE(CloseBf16(HostBf16(dx, count), ref_dx));
}

TEST_F(CudaOpsTest, SwigluMatchesCpu) {
  const int64_t n = 33, f = 96;
  const auto in = RandomBf16Values(n * 2 * f, 22, 3.0f);
  const auto dout = RandomBf16Values(n * f, 23);
  std::vector<float> ref_out(n * f), ref_din(n * 2 * f);
  cpu::SwigluForward(in.data(), ref_out.data(), n, f);
  cpu::SwigluBackward(dout.data(), in.data(), ref_din.data(), n, f);
  Bf16* d_in = DevBf16(in);
  Bf16* out = Zeros<Bf16>(n * f);
  Bf16* din = Zeros<Bf16>(n * 2 * f);
  ASSERT_TRUE(SwigluForward(d_in, out, n, f, nullptr).ok());
  ASSERT_TRUE(SwigluBackward(DevBf16(dout), d_in, din, n, f, nullptr).ok());
  EXPECT_TRUE(CloseBf16(HostBf16(out, n * f), ref_out));
  EXPECT_TRUE(CloseBf16(HostBf16(din, n * 2 * f), ref_din));
}

TEST_F(CudaOpsTest, RopeMatchesCpuAndInverts) {
  const int64_t s = 40, b = 2, heads = 8, groups = 2, d = 32, offset = 1000;
  const int64_t width = (heads + 2 * groups) * d;
  const auto qkv = RandomBf16Values(s * b * width, 30);
  std::vector<float> ref = qkv;
  cpu::RopeForward(ref.data(), s, b, heads, groups, d, 10000.0f, offset);
  Bf16* d_qkv = DevBf16(qkv);
  ASSERT_TRUE(
      RopeForward(d_qkv, s, b, heads, groups, d, 10000.0f, offset, nullptr)
          .ok());
  EXPECT_TRUE(CloseBf16(HostBf16(d_qkv, qkv.size()), ref));
  ASSERT_TRUE(
      RopeBackward(d_qkv, s, b, heads, groups, d, 10000.0f, offset, nullptr)
          .ok());
  EXPECT_TRUE(CloseBf16(HostBf16(d_qkv, qkv.size()), qkv));  // back again
  EXPECT_FALSE(RopeForward(d_qkv, s, b, 6, 4, d, 1e4f, 0, nullptr).ok());
}

TEST_F(CudaOpsTest, CrossEntropyMatchesCpuWithPaddingAndOffShardTargets) {
  // Shard 2 of a 2-way split of a 1000-token vocabulary padded to 1024:
  // columns [512, 1024), the last 24 are padding.
  const int64_t n = 50, vocab_local = 512, vocab_start = 512, vocab = 1000;
  const auto logits = RandomBf16Values(n * vocab_local, 40, 8.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i)
    targets[i] = static_cast<int32_t>((i * 37) % vocab);
  std::vector<float> scale(n, 1.0f / n);
  std::vector<float> max(n), sum(n), tl(n), loss(n), ref_d(n * vocab_local);
  cpu::CrossEntropyLocalMax(logits.data(), max.data(), n, vocab_local,
                            vocab_start, vocab);
  cpu::CrossEntropyLocalSums(logits.data(), targets.data(), max.data(),
                             sum.data(), tl.data(), n, vocab_local, vocab_start,
                             vocab);
  for (int64_t i = 0; i < n; ++i) loss[i] = std::log(sum[i]) + max[i] - tl[i];
  cpu::CrossEntropyBackward(logits.data(), targets.data(), max.data(),
                            sum.data(), scale.data(), ref_d.data(), n,
                            vocab_local, vocab_start, vocab);

  Bf16* d_logits = DevBf16(logits);
  int32_t* d_targets = Dev(targets);
  float* d_max = Zeros<float>(n);
  float* d_sum = Zeros<float>(n);
  float* d_tl = Zeros<float>(n);
  float* d_loss = Zeros<float>(n);
  ASSERT_TRUE(CrossEntropyLocalMax(d_logits, d_max, n, vocab_local, vocab_start,
                                   vocab, nullptr)
                  .ok());
  ASSERT_TRUE(CrossEntropyLocalSums(d_logits, d_targets, d_max, d_sum, d_tl, n,
                                    vocab_local, vocab_start, vocab, nullptr)
                  .ok());
  ASSERT_TRUE(CrossEntropyLoss(d_max, d_sum, d_tl, d_loss, n, nullptr).ok());
  EXPECT_EQ(Host(d_max, n), max);  // a max of identical values: exact
  EXPECT_TRUE(CloseFp32(Host(d_sum, n), sum));
  EXPECT_EQ(Host(d_tl, n), tl);
  EXPECT_TRUE(CloseFp32(Host(d_loss, n), loss));
  // The device loss sum accumulates (twice here) in fp64.
  double want_sum = 0;
  for (float l : Host(d_loss, n)) want_sum += l;
  double* d_total = Zeros<double>(1);
  ASSERT_TRUE(CrossEntropyLossSum(d_loss, n, d_total, nullptr).ok());
  ASSERT_TRUE(CrossEntropyLossSum(d_loss, n, d_total, nullptr).ok());
  EXPECT_NEAR(Host(d_total, 1)[0], 2 * want_sum, 1e-5 * std::fabs(want_sum));
  // In place over the logits, as the model uses it.
  ASSERT_TRUE(CrossEntropyBackward(d_logits, d_targets, d_max, d_sum,
                                   Dev(scale), d_logits, n, vocab_local,
                                   vocab_start, vocab, nullptr)
                  .ok());
  EXPECT_TRUE(CloseBf16(HostBf16(d_logits, n * vocab_local), ref_d));
}

TEST_F(CudaOpsTest, AdamWMultiTensorMatchesCpu) {
  // 40 tensors: more than one launch group; sizes from 1 to ~300k.
  constexpr int kTensors = 40;
  std::vector<std::vector<float>> p(kTensors), g(kTensors), m(kTensors),
      v(kTensors);
  std::vector<AdamWSegment> segments;
  std::vector<Bf16*> copies;
  for (int t = 0; t < kTensors; ++t) {
    const size_t count = 1 + (static_cast<size_t>(t) * 7919) % 300000;
    p[t] = RandomBf16Values(count, 100 + t);
    g[t] = RandomBf16Values(count, 200 + t, 0.1f);
    m[t] = RandomBf16Values(count, 300 + t, 0.01f);
    v[t] = RandomBf16Values(count, 400 + t, 0.001f);
    for (float& x : v[t]) x = std::fabs(x);
    AdamWSegment seg;
    seg.param = Dev(p[t]);
    seg.grad = Dev(g[t]);
    seg.m = Dev(m[t]);
    seg.v = Dev(v[t]);
    seg.param_bf16 = Zeros<Bf16>(count);
    seg.count = static_cast<int64_t>(count);
    seg.weight_decay = t % 3 == 0 ? 0.0f : 0.1f;
    copies.push_back(seg.param_bf16);
    segments.push_back(seg);
  }
  ASSERT_TRUE(
      AdamWUpdate(segments, 3e-4f, 0.9f, 0.95f, 1e-8f, 7, nullptr).ok());
  for (int t = 0; t < kTensors; ++t) {
    std::vector<float> rp = p[t], rm = m[t], rv = v[t];
    cpu::AdamWUpdate(rp.data(), g[t].data(), rm.data(), rv.data(), nullptr,
                     segments[t].count, 3e-4f, 0.9f, 0.95f, 1e-8f,
                     segments[t].weight_decay, 7);
    const size_t count = rp.size();
    EXPECT_TRUE(CloseFp32(Host(segments[t].param, count), rp))
        << "tensor " << t;
    EXPECT_TRUE(CloseFp32(Host(segments[t].m, count), rm)) << "tensor " << t;
    EXPECT_TRUE(CloseFp32(Host(segments[t].v, count), rv)) << "tensor " << t;
    std::vector<float> rounded(count);
    for (size_t i = 0; i < count; ++i) rounded[i] = RoundToBf16(rp[i]);
    EXPECT_TRUE(CloseBf16(HostBf16(copies[t], count), rounded))
        << "tensor " << t;
  }
  EXPECT_FALSE(
      AdamWUpdate(segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0, nullptr).ok());
}

TEST_F(CudaOpsTest, SumSquaresMatchesCpuOverManyTensors) {
  std::vector<GradSegment> segments;
  double ref = 0.0;
  for (int t = 0; t < 50; ++t) {
    const auto g = RandomBf16Values(
        1 + (static_cast<size_t>(t) * 104729) % 2000000, 500 + t);
    ref += cpu::SumSquares(g.data(), static_cast<int64_t>(g.size()));
    segments.push_back({Dev(g), static_cast<int64_t>(g.size())});
  }
  double* total = Dev(std::vector<double>{0.0});
  ASSERT_TRUE(SumSquares(segments, total, nullptr).ok());
  const double got = Host(total, 1)[0];
  EXPECT_NEAR(got, ref, 1e-6 * ref);
}

TEST_F(CudaOpsTest, HiddenDropoutDrawsTheCpuMask) {
  const int64_t rows = 96, h = 200, b = 3;
  const auto x = RandomBf16Values(rows * h, 70);
  cpu::DropoutSpec d;
  d.p = 0.25f;
  d.key = cpu::DropoutKey(1234, 2, cpu::DropoutSite::kMlpOut);
  d.first_sample = 40;
  d.first_row = 17;
  std::vector<float> ref = x;
  cpu::HiddenDropout(ref.data(), rows, h, b, d);
  Bf16* d_x = DevBf16(x);
  ASSERT_TRUE(HiddenDropout(d_x, rows, h, b, d, nullptr).ok());
  const std::vector<float> got = HostBf16(d_x, rows * h);
  // Same elements dropped; kept ones scaled by 4/3 and rounded to bf16.
  int64_t dropped = 0;
  for (int64_t i = 0; i < rows * h; ++i) {
    ASSERT_EQ(got[i] == 0.0f, ref[i] == 0.0f || x[i] == 0.0f) << i;
    dropped += ref[i] == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / (rows * h), 0.25, 0.02);
  EXPECT_TRUE(CloseBf16(got, ref));
}

TEST_F(CudaOpsTest, ElementwiseMatchCpu) {
  const int64_t count = 70000;
  const auto x = RandomBf16Values(count, 60);
  const auto y = RandomBf16Values(count, 61);
  std::vector<float> ref = y;
  cpu::Add(x.data(), ref.data(), count);
  Bf16* d_y = DevBf16(y);
  ASSERT_TRUE(Add(DevBf16(x), d_y, count, nullptr).ok());
  EXPECT_TRUE(CloseBf16(HostBf16(d_y, count), ref));

  std::vector<float> f = RandomBf16Values(count, 62);
  float* d_f = Dev(f);
  Bf16* cast = Zeros<Bf16>(count);
  ASSERT_TRUE(Scale(d_f, count, 0.5f, nullptr).ok());
  ASSERT_TRUE(CastToBf16(d_f, cast, count, nullptr).ok());
  cpu::Scale(f.data(), count, 0.5f);
  EXPECT_EQ(Host(d_f, count), f);       // exact: multiplying by 0.5
  EXPECT_EQ(HostBf16(cast, count), f);  // bf16 values scaled by 0.5 stay bf16
}

// The MoE row kernels against engine/cpu/moe_permute.h: 7 tokens, top-3
// over 4 experts with two choices dropped (-1), h = 67 (not a multiple of
// anything the kernels assume).
TEST_F(CudaOpsTest, MoeRowsMatchTheCpuPermutation) {
  const int64_t n = 7, k = 3, e = 4, h = 67;
  std::vector<int32_t> experts(n * k);
  for (int64_t c = 0; c < n * k; ++c)
    experts[c] = static_cast<int32_t>((c * 5 + c / k) % e);
  experts[4] = -1;
  experts[17] = -1;
  const cpu::Permutation perm = cpu::PermutationOf(experts.data(), n, k, e);
  const int64_t m = static_cast<int64_t>(perm.source.size());
  ASSERT_EQ(m, n * k - 2);
  std::vector<int32_t> token(m), choice(m), row_of(n * k, -1);
  for (int64_t r = 0; r < m; ++r) {
    choice[r] = static_cast<int32_t>(perm.source[r]);
    token[r] = static_cast<int32_t>(perm.source[r] / k);
    row_of[perm.source[r]] = static_cast<int32_t>(r);
  }
  const std::vector<float> x = RandomBf16Values(n * h, 11, 1.0f);
  std::vector<float> probs = RandomBf16Values(n * k, 12, 1.0f);
  probs[4] = probs[17] = 0;  // dropped choices carry no weight
  const std::vector<float> rows = RandomBf16Values(m * h, 13, 1.0f);
  const std::vector<float> dout = RandomBf16Values(n * h, 14, 1.0f);

  // Permute: exact (a copy).
  std::vector<float> want_permuted(m * h);
  cpu::PermuteForward(x.data(), perm, k, h, want_permuted.data());
  Bf16* permuted = Zeros<Bf16>(m * h);
  ASSERT_TRUE(GatherRows(DevBf16(x), Dev(token), permuted, m, h, nullptr).ok());
  EXPECT_EQ(HostBf16(permuted, m * h), want_permuted);
  // Unpermute (weighted by the probs) and the permutation's backward (sum).
  std::vector<float> want_out(n * h), want_sum(n * h);
  cpu::UnpermuteForward(rows.data(), probs.data(), perm, n, k, h,
                        want_out.data());
  cpu::PermuteBackward(rows.data(), perm, n, k, h, want_sum.data());
  Bf16* d_rows = DevBf16(rows);
  int32_t* d_row_of = Dev(row_of);
  float* d_probs = Dev(probs);
  Bf16* out = Zeros<Bf16>(n * h);
  Bf16* sum = Zeros<Bf16>(n * h);
  ASSERT_TRUE(
      CombineRows(d_rows, d_row_of, d_probs, out, n, k, h, nullptr).ok());
  ASSERT_TRUE(
      CombineRows(d_rows, d_row_of, nullptr, sum, n, k, h, nullptr).ok());
  EXPECT_TRUE(CloseBf16(HostBf16(out, n * h), want_out));
  EXPECT_TRUE(CloseBf16(HostBf16(sum, n * h), want_sum));
  // Unpermute's backward: the rows' gradient and the probs' gradient.
  std::vector<float> want_drows(m * h), want_dprobs(n * k);
  cpu::UnpermuteBackward(dout.data(), rows.data(), probs.data(), perm, n, k, h,
                         want_drows.data(), want_dprobs.data());
  Bf16* drows = Zeros<Bf16>(m * h);
  float* dprobs = Zeros<float>(n * k);
  ASSERT_TRUE(CombineRowsBackward(DevBf16(dout), d_rows, Dev(choice), d_probs,
                                  drows, dprobs, m, k, h, nullptr)
                  .ok());
  EXPECT_TRUE(CloseBf16(HostBf16(drows, m * h), want_drows));
  EXPECT_TRUE(CloseFp32(Host(dprobs, n * k), want_dprobs));
}

}  // namespace
}  // namespace meshtune::engine::cuda
