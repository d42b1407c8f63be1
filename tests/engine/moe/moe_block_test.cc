// MoeBlock against the one-rank reference engine/cpu/moe_layer.h: on one
// rank (capacity dropping and the aux loss included) it is the reference;
// on two tensor-parallel ranks with sequence parallelism and the experts
// split over etp = 2 (and the sequence aux loss), each rank's rows, the
// summed aux loss and every
// gradient (shards and partial sums put together) are the reference's.
#include "engine/moe/moe_block.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cpu/moe_layer.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::moe {
namespace {

// count floats in [-scale, scale) from a fixed seed.
std::vector<float> Values(int64_t count, uint32_t seed, float scale) {
  return cpu::test_util::RandomFloats(static_cast<size_t>(count), seed, -scale,
                                      scale);
}

constexpr int64_t kN = 8, kH = 8, kF = 6, kS = 4, kE = 4, kK = 2;

// Full (unsplit) weights of the reference, [gate | up] per expert.
struct Full {
  std::vector<float> router = Values(kE * kH, 1, 0.8f);
  std::vector<float> fc1 = Values(kE * 2 * kF * kH, 2, 0.5f);
  std::vector<float> fc2 = Values(kE * kH * kF, 3, 0.5f);
  std::vector<float> shared_fc1 = Values(2 * kS * kH, 4, 0.5f);
  std::vector<float> shared_fc2 = Values(kH * kS, 5, 0.5f);
};

// aux_groups 2: the sequence aux loss over 2 sequences of 4 positions.
cpu::MoeLayerShape ReferenceShape(double capacity, int64_t aux_groups = 1) {
  cpu::MoeLayerShape s;
  s.hidden = kH;
  s.expert_ffn = kF;
  s.shared_ffn = kS;
  s.swiglu = true;
  s.router.num_experts = kE;
  s.router.topk = kK;
  s.capacity_factor = capacity;
  s.aux_loss_coeff = 0.05;
  s.aux_groups = aux_groups;
  return s;
}

// Rows [r·rows/parts, ...) of each of the `gates` stacked parts of a
// [gates·rows, cols] matrix: the column-parallel shard of rank r.
std::vector<float> RowShard(const float* w, int64_t gates, int64_t rows,
                            int64_t cols, int r, int parts) {
  std::vector<float> out;
  const int64_t per = rows / parts;
  for (int64_t g = 0; g < gates; ++g) {
    const float* base = w + (g * rows + r * per) * cols;
    out.insert(out.end(), base, base + per * cols);
  }
  return out;
}

// Columns [r·cols/parts, ...) of a [rows, cols] matrix (row-parallel shard).
std::vector<float> ColShard(const float* w, int64_t rows, int64_t cols, int r,
                            int parts) {
  std::vector<float> out;
  const int64_t per = cols / parts;
  for (int64_t i = 0; i < rows; ++i) {
    out.insert(out.end(), w + i * cols + r * per, w + i * cols + (r + 1) * per);
  }
  return out;
}

TEST(MoeBlock, OneRankIsTheReference) {
  const Full w;
  const std::vector<float> x = Values(kN * kH, 7, 1.0f);
  const std::vector<float> dy = Values(kN * kH, 8, 1.0f);
  const double scale = 0.5;
  // Reference.
  const cpu::MoeLayerShape rs = ReferenceShape(/*capacity=*/1.0);
  const cpu::MoeLayerParams rp{w.router.data(), w.fc1.data(), w.fc2.data(),
                               w.shared_fc1.data(), w.shared_fc2.data()};
  std::vector<float> ref_y(kN * kH), ref_dx(kN * kH);
  std::vector<float> g_router(w.router.size()), g_fc1(w.fc1.size()),
      g_fc2(w.fc2.size()), g_sfc1(w.shared_fc1.size()),
      g_sfc2(w.shared_fc2.size());
  cpu::MoeLayerCache rc;
  cpu::MoeLayerForward(x.data(), kN, rs, rp, ref_y.data(), &rc);
  ASSERT_GT(rc.dropped, 0);  // the capacity rule is exercised
  cpu::MoeLayerGrads rg{g_router.data(), g_fc1.data(), g_fc2.data(),
                        g_sfc1.data(), g_sfc2.data()};
  cpu::MoeLayerBackward(dy.data(), x.data(), kN, rs, rp, rc, scale,
                        ref_dx.data(), &rg);

  RunLocalRanks(1, [&](Communicator& world) {
    MoeShape sh;
    sh.n = sh.nl = kN;
    sh.hidden = kH;
    sh.expert_ffn = kF;
    sh.shared_ffn = kS;
    sh.router = rs.router;
    sh.capacity_factor = 1.0;
    sh.aux_loss_coeff = 0.05;
    sh.aux_grad_scale = scale;
    MoeBlock block(sh, {&world, &world, &world, &world});
    MoeWeights mw;
    mw.router = w.router.data();
    std::vector<float> gr(w.router.size()), g1(w.fc1.size()), g2(w.fc2.size()),
        gs1(w.shared_fc1.size()), gs2(w.shared_fc2.size());
    MoeGrads mg;
    mg.router = gr.data();
    for (int64_t e = 0; e < kE; ++e) {
      mw.fc1.push_back(w.fc1.data() + e * 2 * kF * kH);
      mw.fc2.push_back(w.fc2.data() + e * kH * kF);
      mg.fc1.push_back(g1.data() + e * 2 * kF * kH);
      mg.fc2.push_back(g2.data() + e * kH * kF);
    }
    mw.shared_fc1 = w.shared_fc1.data();
    mw.shared_fc2 = w.shared_fc2.data();
    mg.shared_fc1 = gs1.data();
    mg.shared_fc2 = gs2.data();
    std::vector<float> y(kN * kH), dx(kN * kH);
    MoeCache c;
    block.Forward(x.data(), mw, y.data(), &c);
    EXPECT_EQ(c.dropped, rc.dropped);
    EXPECT_NEAR(c.aux_loss, rc.aux_loss, 1e-12);
    block.Backward(dy.data(), x.data(), mw, mg, dx.data(), &c);
    auto near = [](const std::vector<float>& a, const std::vector<float>& b,
                   const char* what) {
      ASSERT_EQ(a.size(), b.size()) << what;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i])))
            << what << "[" << i << "]";
      }
    };
    near(y, ref_y, "y");
    near(dx, ref_dx, "dx");
    near(gr, g_router, "router grad");
    near(g1, g_fc1, "fc1 grad");
    near(g2, g_fc2, "fc2 grad");
    near(gs1, g_sfc1, "shared fc1 grad");
    near(gs2, g_sfc2, "shared fc2 grad");
  });
}

TEST(MoeBlock, TwoTensorParallelRanksWithExpertTensorParallelism) {
  const Full w;
  const std::vector<float> x = Values(kN * kH, 7, 1.0f);
  const std::vector<float> dy = Values(kN * kH, 8, 1.0f);
  const double scale = 1.0;
  // The sequence aux loss: each rank holds positions of both sequences,
  // whose per-sequence counts are summed over tp.
  const cpu::MoeLayerShape rs = ReferenceShape(/*capacity=*/0, 2);
  const cpu::MoeLayerParams rp{w.router.data(), w.fc1.data(), w.fc2.data(),
                               w.shared_fc1.data(), w.shared_fc2.data()};
  std::vector<float> ref_y(kN * kH), ref_dx(kN * kH);
  std::vector<float> g_router(w.router.size()), g_fc1(w.fc1.size()),
      g_fc2(w.fc2.size()), g_sfc1(w.shared_fc1.size()),
      g_sfc2(w.shared_fc2.size());
  cpu::MoeLayerCache rc;
  cpu::MoeLayerForward(x.data(), kN, rs, rp, ref_y.data(), &rc);
  cpu::MoeLayerGrads rg{g_router.data(), g_fc1.data(), g_fc2.data(),
                        g_sfc1.data(), g_sfc2.data()};
  cpu::MoeLayerBackward(dy.data(), x.data(), kN, rs, rp, rc, scale,
                        ref_dx.data(), &rg);

  const int64_t nl = kN / 2;
  std::mutex mu;
  double aux_sum = 0;
  std::vector<float> router_grad_sum(w.router.size(), 0.0f);
  RunLocalRanks(2, [&](Communicator& world) {
    const int r = world.rank();
    std::unique_ptr<Communicator> ep = world.Split(r, 0, "ep");
    MoeShape sh;
    sh.n = kN;
    sh.nl = nl;
    sh.sp = true;
    sh.hidden = kH;
    sh.expert_ffn = kF / 2;
    sh.shared_ffn = kS / 2;
    sh.router = rs.router;
    sh.aux_loss_coeff = 0.05;
    sh.aux_grad_scale = scale;
    sh.aux_groups = 2;
    MoeBlock block(sh, {&world, &world, ep.get(), &world});
    // This rank's shards.
    std::vector<std::vector<float>> fc1(kE), fc2(kE);
    std::vector<std::vector<float>> g1(kE), g2(kE);
    MoeWeights mw;
    MoeGrads mg;
    std::vector<float> gr(w.router.size());
    mw.router = w.router.data();
    mg.router = gr.data();
    for (int64_t e = 0; e < kE; ++e) {
      fc1[e] = RowShard(w.fc1.data() + e * 2 * kF * kH, 2, kF, kH, r, 2);
      fc2[e] = ColShard(w.fc2.data() + e * kH * kF, kH, kF, r, 2);
      g1[e].assign(fc1[e].size(), 0.0f);
      g2[e].assign(fc2[e].size(), 0.0f);
      mw.fc1.push_back(fc1[e].data());
      mw.fc2.push_back(fc2[e].data());
      mg.fc1.push_back(g1[e].data());
      mg.fc2.push_back(g2[e].data());
    }
    const std::vector<float> sfc1 =
        RowShard(w.shared_fc1.data(), 2, kS, kH, r, 2);
    const std::vector<float> sfc2 = ColShard(w.shared_fc2.data(), kH, kS, r, 2);
    std::vector<float> gs1(sfc1.size()), gs2(sfc2.size());
    mw.shared_fc1 = sfc1.data();
    mw.shared_fc2 = sfc2.data();
    mg.shared_fc1 = gs1.data();
    mg.shared_fc2 = gs2.data();
    // This rank's sequence shard.
    const float* xr = x.data() + r * nl * kH;
    std::vector<float> y(nl * kH), dx(nl * kH);
    MoeCache c;
    block.Forward(xr, mw, y.data(), &c);
    block.Backward(dy.data() + r * nl * kH, xr, mw, mg, dx.data(), &c);
    for (int64_t i = 0; i < nl * kH; ++i) {
      EXPECT_NEAR(y[i], ref_y[r * nl * kH + i], 1e-5) << "y " << i;
      EXPECT_NEAR(dx[i], ref_dx[r * nl * kH + i], 1e-5) << "dx " << i;
    }
    for (int64_t e = 0; e < kE; ++e) {
      const std::vector<float> want1 =
          RowShard(g_fc1.data() + e * 2 * kF * kH, 2, kF, kH, r, 2);
      const std::vector<float> want2 =
          ColShard(g_fc2.data() + e * kH * kF, kH, kF, r, 2);
      for (size_t i = 0; i < want1.size(); ++i) {
        EXPECT_NEAR(g1[e][i], want1[i], 1e-5) << "fc1 grad " << e;
      }
      for (size_t i = 0; i < want2.size(); ++i) {
        EXPECT_NEAR(g2[e][i], want2[i], 1e-5) << "fc2 grad " << e;
      }
    }
    const std::vector<float> want_s1 = RowShard(g_sfc1.data(), 2, kS, kH, r, 2);
    for (size_t i = 0; i < want_s1.size(); ++i) {
      EXPECT_NEAR(gs1[i], want_s1[i], 1e-5) << "shared fc1 grad";
    }
    std::lock_guard<std::mutex> lock(mu);
    aux_sum += c.aux_loss;
    for (size_t i = 0; i < gr.size(); ++i) router_grad_sum[i] += gr[i];
  });
  // The ranks' partial aux losses and router gradients add up.
  EXPECT_NEAR(aux_sum, rc.aux_loss, 1e-9);
  for (size_t i = 0; i < g_router.size(); ++i) {
    EXPECT_NEAR(router_grad_sum[i], g_router[i], 1e-5) << "router grad " << i;
  }
}

}  // namespace
}  // namespace meshtune::engine::moe
