#include "costmodel/ep_overlap.h"

#include <gtest/gtest.h>

namespace meshtune::costmodel {
namespace {

// Hand-computed (ms): a layer with fwd 6 (MoE block 2, so attention 4) and
// bwd 12 (dgrad 2, attention backward and the delayed wgrads 10);
// all-to-alls of 3 forward and 3 backward. Stages: combine bwd 3 | attn
// fwd 4 (idle 1); dispatch fwd 3 | dgrad 2 (exposed 1); dispatch bwd 3 |
// experts fwd 2 (exposed 1); combine fwd 3 | attn bwd 10 (idle 7).
// Exposed 2 ms, although 12 ms of all-to-all hide behind 18 of compute as
// a whole.
TEST(PairedEpExposed, EachAllToAllHidesOnlyBehindItsPartner) {
  EXPECT_NEAR(PairedEpExposed_s(3e-3, 3e-3, 6e-3, 12e-3, 2e-3, 0), 2e-3, 1e-15);
}

// The recompute's replayed all-to-alls (outside the four stages) hide in
// the stages' idle compute, 8 ms here: 5 ms hide, 9 ms expose 1.
TEST(PairedEpExposed, ReplaysFillTheIdleCompute) {
  EXPECT_NEAR(PairedEpExposed_s(3e-3, 3e-3, 6e-3, 12e-3, 2e-3, 5e-3), 2e-3,
              1e-15);
  EXPECT_NEAR(PairedEpExposed_s(3e-3, 3e-3, 6e-3, 12e-3, 2e-3, 9e-3), 3e-3,
              1e-15);
}

// Short all-to-alls hide completely; with no compute they all show.
TEST(PairedEpExposed, ShortAllToAllsHideAndLoneOnesShow) {
  EXPECT_EQ(PairedEpExposed_s(1e-3, 1e-3, 6e-3, 12e-3, 2e-3, 0), 0.0);
  EXPECT_NEAR(PairedEpExposed_s(1e-3, 2e-3, 0, 0, 0, 0), 6e-3, 1e-15);
}

}  // namespace
}  // namespace meshtune::costmodel
