#include "search_spaces/comm_ops.h"

#include <gtest/gtest.h>

namespace meshtune::search_spaces {
namespace {

int Count(const std::vector<TpCommOp>& ops, Collective kind,
          TpCommOp::Phase phase) {
  int n = 0;
  for (const TpCommOp& op : ops) n += op.kind == kind && op.phase == phase;
  return n;
}

TEST(CommOpsTest, NoTensorParallelismNoCollectives) {
  ParallelConfig c;
  EXPECT_TRUE(TransformerLayerTpCommOps(c, 1024, 4096, true).empty());
}

TEST(CommOpsTest, TensorParallelAllReduces) {
  // Megatron without SP: 2 AR forward (row-parallel outputs), 2 AR backward
  // (column-parallel input grads), each of s·b·h elements.
  ParallelConfig c;
  c.tp = 4;
  c.mbs = 2;
  const auto ops = TransformerLayerTpCommOps(c, 8, 16, false);
  ASSERT_EQ(ops.size(), 4u);
  using P = TpCommOp::Phase;
  EXPECT_EQ(Count(ops, Collective::kAllReduce, P::kForward), 2);
  EXPECT_EQ(Count(ops, Collective::kAllReduce, P::kBackward), 2);
  for (const auto& op : ops) EXPECT_EQ(op.elements, 2 * 8 * 16);
}

TEST(CommOpsTest, SequenceParallelGathersAndScatters) {
  // SP forward: AG + RS per sub-block; backward adds the input re-gathers:
  // 4 AG + 2 RS (Korthikanti et al. 2022 §4.2.2 plus Megatron's re-gather).
  ParallelConfig c;
  c.tp = 2;
  c.sp = true;
  using P = TpCommOp::Phase;
  const auto ops = TransformerLayerTpCommOps(c, 8, 16, true);
  EXPECT_EQ(Count(ops, Collective::kAllGather, P::kForward), 2);
  EXPECT_EQ(Count(ops, Collective::kReduceScatter, P::kForward), 2);
  EXPECT_EQ(Count(ops, Collective::kAllGather, P::kRecomputeForward), 2);
  EXPECT_EQ(Count(ops, Collective::kReduceScatter, P::kRecomputeForward), 2);
  EXPECT_EQ(Count(ops, Collective::kAllGather, P::kBackward), 4);
  EXPECT_EQ(Count(ops, Collective::kReduceScatter, P::kBackward), 2);
  EXPECT_EQ(ops.size(), 14u);
}

}  // namespace
}  // namespace meshtune::search_spaces
