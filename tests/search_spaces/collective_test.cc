#include "search_spaces/collective.h"

#include <gtest/gtest.h>

namespace meshtune::search_spaces {
namespace {

// The names results::Measurement::op stores: each parses back to its
// collective, in the sweeps' order.
TEST(Collective, NamesRoundTripInSweepOrder) {
  const std::vector<std::string> want = {
      "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};
  ASSERT_EQ(AllCollectives().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Collective c = AllCollectives()[i];
    EXPECT_EQ(CollectiveName(c), want[i]);
    const StatusOr<Collective> parsed = ParseCollective(want[i]);
    ASSERT_TRUE(parsed.ok()) << want[i];
    EXPECT_EQ(parsed.value(), c);
  }
}

TEST(Collective, UnknownNameListsTheKnownOnes) {
  const StatusOr<Collective> bad = ParseCollective("allreduce");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown collective 'allreduce'");
  EXPECT_EQ(bad.status().hint(),
            "use one of: all_reduce, all_gather, reduce_scatter, all_to_all, "
            "send_recv");
}

}  // namespace
}  // namespace meshtune::search_spaces
