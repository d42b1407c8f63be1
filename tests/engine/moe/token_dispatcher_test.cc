// TokenDispatcher on in-process ranks: every routed row reaches the rank
// that owns its expert, grouped by local expert in [etp rank][source]
// order, and Combine brings each row back to where it came from, summed
// over etp.
#include "engine/moe/token_dispatcher.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/comm/local_communicator.h"

namespace meshtune::engine::moe {
namespace {

// World rank w = etp_rank + etp·ep_rank (etp fastest, as the expert grid).
// Rank w routes (w + e) % 3 rows to global expert e; row i of that block
// holds 1000·w + 10·e + i in every column.
int64_t Rows(int w, int64_t e) { return (w + e) % 3; }
float Value(int w, int64_t e, int64_t i) {
  return 1000.0f * w + 10.0f * static_cast<float>(e) + static_cast<float>(i);
}

struct Case {
  int ep, etp;
  int64_t experts;
};

class TokenDispatcherTest : public ::testing::TestWithParam<Case> {};

TEST_P(TokenDispatcherTest, DispatchGroupsByLocalExpertAndCombineReturns) {
  const Case c = GetParam();
  const int world_size = c.ep * c.etp;
  const int64_t h = 2, local = c.experts / c.ep;
  std::vector<std::vector<float>> expert_in(world_size), back(world_size);
  std::vector<std::vector<float>> sent(world_size);
  RunLocalRanks(world_size, [&](Communicator& world) {
    const int w = world.rank();
    const int etp_rank = w % c.etp, ep_rank = w / c.etp;
    std::unique_ptr<Communicator> ep = world.Split(etp_rank, ep_rank, "ep");
    std::unique_ptr<Communicator> etp = world.Split(ep_rank, etp_rank, "etp");
    TokenDispatcher d(ep.get(), etp.get(), c.experts, h);
    EXPECT_EQ(d.num_local_experts(), local);
    EXPECT_EQ(d.first_local_expert(), ep_rank * local);
    std::vector<int64_t> tokens(c.experts);
    std::vector<float> permuted;
    for (int64_t e = 0; e < c.experts; ++e) {
      tokens[e] = Rows(w, e);
      for (int64_t i = 0; i < tokens[e]; ++i) {
        for (int64_t j = 0; j < h; ++j) permuted.push_back(Value(w, e, i));
      }
    }
    DispatchPlan plan;
    d.Plan(tokens.data(), &plan);
    EXPECT_EQ(plan.routed_rows() * h, static_cast<int64_t>(permuted.size()));
    d.Dispatch(permuted.data(), plan, &expert_in[w]);
    EXPECT_EQ(plan.expert_rows() * h,
              static_cast<int64_t>(expert_in[w].size()));
    d.Combine(expert_in[w].data(), plan, &back[w]);
    sent[w] = permuted;
  });
  for (int w = 0; w < world_size; ++w) {
    SCOPED_TRACE("rank " + std::to_string(w));
    const int ep_rank = w / c.etp;
    // Local expert le's rows: from every etp rank q, every source ep rank
    // src (world rank q + etp·src), in that order.
    std::vector<float> want;
    for (int64_t le = 0; le < local; ++le) {
      const int64_t e = ep_rank * local + le;
      for (int q = 0; q < c.etp; ++q) {
        for (int src = 0; src < c.ep; ++src) {
          const int from = q + c.etp * src;
          for (int64_t i = 0; i < Rows(from, e); ++i) {
            for (int64_t j = 0; j < h; ++j) want.push_back(Value(from, e, i));
          }
        }
      }
    }
    EXPECT_EQ(expert_in[w], want);
    // Every etp rank held the same rows, so the combine sums etp copies.
    std::vector<float> twice = sent[w];
    for (float& x : twice) x *= static_cast<float>(c.etp);
    EXPECT_EQ(back[w], twice);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, TokenDispatcherTest,
                         ::testing::Values(Case{1, 1, 4}, Case{2, 1, 4},
                                           Case{4, 1, 8}, Case{2, 2, 4},
                                           Case{1, 2, 2}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return "ep" + std::to_string(i.param.ep) + "_etp" +
                                  std::to_string(i.param.etp) + "_e" +
                                  std::to_string(i.param.experts);
                         });

}  // namespace
}  // namespace meshtune::engine::moe
