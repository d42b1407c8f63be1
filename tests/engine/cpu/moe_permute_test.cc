// Token permutation and the weighted combine of an MoE layer against a
// hand-computed case: 3 tokens, top-2, 3 experts, one dropped choice.
#include "engine/cpu/moe_permute.h"

#include <gtest/gtest.h>

#include <vector>

namespace meshtune::engine::cpu {
namespace {

// Token 0 -> experts 2, 0; token 1 -> 1, 2; token 2 -> 0 (its second
// choice dropped by the capacity rule).
const std::vector<int32_t> kExperts = {2, 0, 1, 2, 0, -1};
constexpr int64_t kN = 3, kK = 2, kE = 3, kH = 2;

TEST(MoePermute, RowsGroupedByExpertInTokenOrder) {
  const Permutation p = PermutationOf(kExperts.data(), kN, kK, kE);
  EXPECT_EQ(p.tokens_per_expert, (std::vector<int64_t>{2, 1, 2}));
  // Expert 0: choices 1 (token 0), 4 (token 2); expert 1: 2; expert 2: 0, 3.
  EXPECT_EQ(p.source, (std::vector<int64_t>{1, 4, 2, 0, 3}));

  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<float> permuted(5 * kH);
  PermuteForward(x.data(), p, kK, kH, permuted.data());
  EXPECT_EQ(permuted, (std::vector<float>{1, 2, 5, 6, 3, 4, 1, 2, 3, 4}));

  const std::vector<float> dpermuted = {1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
  std::vector<float> dx(kN * kH);
  PermuteBackward(dpermuted.data(), p, kN, kK, kH, dx.data());
  // Token 0: rows 0 and 3; token 1: rows 2 and 4; token 2: row 1.
  EXPECT_EQ(dx, (std::vector<float>{5, 5, 8, 8, 2, 2}));
}

TEST(MoePermute, CombineWeightsTheExpertsOutputs) {
  const Permutation p = PermutationOf(kExperts.data(), kN, kK, kE);
  const std::vector<float> probs = {0.6f, 0.4f, 0.7f, 0.3f, 1.0f, 0.0f};
  const std::vector<float> y = {1, 0, 0, 1, 2, 2, 3, -1, 1, 1};
  std::vector<float> out(kN * kH);
  UnpermuteForward(y.data(), probs.data(), p, kN, kK, kH, out.data());
  // t0 = 0.4·[1, 0] + 0.6·[3, -1]; t1 = 0.7·[2, 2] + 0.3·[1, 1]; t2 = [0, 1].
  const std::vector<float> want = {2.2f, -0.6f, 1.7f, 1.7f, 0.0f, 1.0f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out[i], want[i], 1e-6) << i;

  const std::vector<float> dout = {1, 2, 3, 4, 5, 6};
  std::vector<float> dy(5 * kH), dprobs(kN * kK);
  UnpermuteBackward(dout.data(), y.data(), probs.data(), p, kN, kK, kH,
                    dy.data(), dprobs.data());
  const std::vector<float> want_dy = {0.4f, 0.8f, 5.0f, 6.0f, 2.1f,
                                      2.8f, 0.6f, 1.2f, 0.9f, 1.2f};
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(dy[i], want_dy[i], 1e-6) << i;
  // dprobs[t, j] = dout[t] · y[row of (t, j)]; the dropped choice gets 0.
  EXPECT_EQ(dprobs, (std::vector<float>{1, 1, 14, 7, 6, 0}));
}

}  // namespace
}  // namespace meshtune::engine::cpu
