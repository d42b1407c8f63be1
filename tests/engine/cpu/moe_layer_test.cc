// The CPU MoE MLP against references: with every expert the same MLP and
// softmax weights over the top-k (which sum to 1), the routed part is that
// dense MLP exactly; the backward against finite differences of the forward
// (router, experts, shared expert, aux loss, a capacity drop); and the
// capacity rule's count.
#include "engine/cpu/moe_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"

namespace meshtune::engine::cpu {
namespace {

// Deterministic values in [-scale, scale) (a 64-bit LCG).
std::vector<float> Values(int64_t count, uint64_t seed, float scale) {
  std::vector<float> v(count);
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = scale * (static_cast<float>((s >> 40) % 2000000) / 1e6f - 1.0f);
  }
  return v;
}

struct Layer {
  MoeLayerShape shape;
  std::vector<float> router, fc1, fc2, shared_fc1, shared_fc2;
  MoeLayerParams Params() const {
    return {router.data(), fc1.data(), fc2.data(),
            shared_fc1.empty() ? nullptr : shared_fc1.data(),
            shared_fc2.empty() ? nullptr : shared_fc2.data()};
  }
};

Layer MakeLayer(int64_t h, int64_t f, int64_t sf, int64_t e, int64_t k,
                bool swiglu) {
  Layer l;
  l.shape.hidden = h;
  l.shape.expert_ffn = f;
  l.shape.shared_ffn = sf;
  l.shape.swiglu = swiglu;
  l.shape.router.num_experts = e;
  l.shape.router.topk = k;
  const int64_t g = swiglu ? 2 : 1;
  l.router = Values(e * h, 1, 0.8f);
  l.fc1 = Values(e * f * g * h, 2, 0.5f);
  l.fc2 = Values(e * h * f, 3, 0.5f);
  if (sf > 0) {
    l.shared_fc1 = Values(sf * g * h, 4, 0.5f);
    l.shared_fc2 = Values(h * sf, 5, 0.5f);
  }
  return l;
}

TEST(MoeLayer, IdenticalExpertsEqualTheDenseMlp) {
  const int64_t n = 6, h = 4, f = 3, e = 4, k = 2;
  Layer l = MakeLayer(h, f, 0, e, k, /*swiglu=*/true);
  // Every expert = expert 0.
  for (int64_t i = 1; i < e; ++i) {
    std::copy(l.fc1.begin(), l.fc1.begin() + 2 * f * h,
              l.fc1.begin() + i * 2 * f * h);
    std::copy(l.fc2.begin(), l.fc2.begin() + h * f, l.fc2.begin() + i * h * f);
  }
  const std::vector<float> x = Values(n * h, 7, 1.0f);
  std::vector<float> out(n * h);
  MoeLayerCache c;
  MoeLayerForward(x.data(), n, l.shape, l.Params(), out.data(), &c);
  std::vector<float> fc1(n * 2 * f), act(n * f), dense(n * h);
  LinearForward(x.data(), l.fc1.data(), nullptr, fc1.data(), n, h, 2 * f);
  SwigluForward(fc1.data(), act.data(), n, f);
  LinearForward(act.data(), l.fc2.data(), nullptr, dense.data(), n, f, h);
  for (int64_t i = 0; i < n * h; ++i) EXPECT_NEAR(out[i], dense[i], 1e-5) << i;
  EXPECT_EQ(c.dropped, 0);
  EXPECT_EQ(static_cast<int64_t>(c.permutation.source.size()), n * k);
}

// L = Σ w·out + aux_loss; every gradient against central differences.
void CheckGradients(Layer l, double capacity_factor) {
  const int64_t n = 5, h = l.shape.hidden;
  l.shape.aux_loss_coeff = 0.05;
  l.shape.capacity_factor = capacity_factor;
  const std::vector<float> x = Values(n * h, 11, 1.0f);
  const std::vector<float> w = Values(n * h, 12, 1.0f);
  MoeLayerCache c;
  std::vector<float> out(n * h);
  MoeLayerForward(x.data(), n, l.shape, l.Params(), out.data(), &c);
  if (capacity_factor > 0) {
    EXPECT_GT(c.dropped, 0);
  }
  const auto loss = [&](const Layer& layer, const std::vector<float>& in) {
    MoeLayerCache cc;
    std::vector<float> o(n * h);
    MoeLayerForward(in.data(), n, layer.shape, layer.Params(), o.data(), &cc);
    double sum = cc.aux_loss;
    for (int64_t i = 0; i < n * h; ++i) sum += w[i] * o[i];
    // The routing must not change under the perturbation.
    EXPECT_EQ(cc.experts, c.experts);
    return sum;
  };
  std::vector<float> dx(n * h);
  std::vector<float> drouter(l.router.size()), dfc1(l.fc1.size()),
      dfc2(l.fc2.size()), dsfc1(l.shared_fc1.size()),
      dsfc2(l.shared_fc2.size());
  MoeLayerGrads g{drouter.data(), dfc1.data(), dfc2.data(),
                  dsfc1.empty() ? nullptr : dsfc1.data(),
                  dsfc2.empty() ? nullptr : dsfc2.data()};
  MoeLayerBackward(w.data(), x.data(), n, l.shape, l.Params(), c, 1.0,
                   dx.data(), &g);
  const float step = 1e-2f;
  const auto check = [&](std::vector<float>* values,
                         const std::vector<float>& grad, const char* what,
                         bool input) {
    for (size_t i = 0; i < values->size(); i += 3) {
      const float keep = (*values)[i];
      (*values)[i] = keep + step;
      const double plus = input ? loss(l, *values) : loss(l, x);
      (*values)[i] = keep - step;
      const double minus = input ? loss(l, *values) : loss(l, x);
      (*values)[i] = keep;
      const double numeric = (plus - minus) / (2 * step);
      EXPECT_NEAR(grad[i], numeric, 2e-3 + 2e-3 * std::fabs(numeric))
          << what << "[" << i << "]";
    }
  };
  std::vector<float> xs = x;
  check(&xs, dx, "x", true);
  check(&l.router, drouter, "router", false);
  check(&l.fc1, dfc1, "fc1", false);
  check(&l.fc2, dfc2, "fc2", false);
  if (!l.shared_fc1.empty()) {
    check(&l.shared_fc1, dsfc1, "shared_fc1", false);
    check(&l.shared_fc2, dsfc2, "shared_fc2", false);
  }
}

TEST(MoeLayer, BackwardMatchesFiniteDifferences) {
  CheckGradients(MakeLayer(4, 3, 2, 4, 2, /*swiglu=*/true), 0.0);
  CheckGradients(MakeLayer(4, 3, 0, 4, 2, /*swiglu=*/false), 0.0);
  Layer sigmoid = MakeLayer(4, 3, 2, 4, 2, /*swiglu=*/true);
  sigmoid.shape.router.score = search_spaces::RouterScore::kSigmoid;
  CheckGradients(sigmoid, 0.0);
}

TEST(MoeLayer, CapacityDropAndItsGradients) {
  // 5 tokens x top-2 over 4 experts: capacity ceil(10 / 4 · 0.5) = 2 of
  // the 10 choices per expert; the busiest experts drop the rest.
  CheckGradients(MakeLayer(4, 3, 2, 4, 2, /*swiglu=*/true), 0.5);
}

}  // namespace
}  // namespace meshtune::engine::cpu
