// The chunk assignment of context parallelism (Megatron's
// get_batch_on_this_cp_rank load balancing), checked against hand-computed
// cases: seq 16 over cp = 2 is 4 chunks of 4 positions, rank 0 holds chunks
// 0 and 3, rank 1 chunks 1 and 2.
#include "engine/context_parallel/sequence_chunks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace meshtune::engine::context_parallel {
namespace {

TEST(SequenceChunks, RankHoldsChunksRAndTwoCpMinusOneMinusR) {
  const SequenceChunks r0(16, 2, 0), r1(16, 2, 1);
  EXPECT_EQ(r0.chunk_len(), 4);
  EXPECT_EQ(r0.local_len(), 8);
  EXPECT_EQ(r0.GlobalChunk(0), 0);
  EXPECT_EQ(r0.GlobalChunk(1), 3);
  EXPECT_EQ(r1.GlobalChunk(0), 1);
  EXPECT_EQ(r1.GlobalChunk(1), 2);
  EXPECT_EQ(r0.ChunkStart(0), 0);
  EXPECT_EQ(r0.ChunkStart(1), 12);
  EXPECT_EQ(r1.ChunkStart(0), 4);
  EXPECT_EQ(r1.ChunkStart(1), 8);

  // Local position -> global position, by hand.
  const std::vector<int64_t> rank0 = {0, 1, 2, 3, 12, 13, 14, 15};
  const std::vector<int64_t> rank1 = {4, 5, 6, 7, 8, 9, 10, 11};
  for (int64_t l = 0; l < 8; ++l) {
    EXPECT_EQ(r0.GlobalPosition(l), rank0[l]) << l;
    EXPECT_EQ(r1.GlobalPosition(l), rank1[l]) << l;
  }
}

TEST(SequenceChunks, FourRanksOfSixteen) {
  // 8 chunks of 2: rank r holds chunks r and 7 − r.
  const int64_t expected[4][4] = {
      {0, 1, 14, 15}, {2, 3, 12, 13}, {4, 5, 10, 11}, {6, 7, 8, 9}};
  for (int r = 0; r < 4; ++r) {
    const SequenceChunks ch(16, 4, r);
    for (int64_t l = 0; l < 4; ++l) {
      EXPECT_EQ(ch.GlobalPosition(l), expected[r][l]) << r << " " << l;
    }
  }
}

TEST(SequenceChunks, RunsSplitAtTheChunkBoundaryUnlessAdjacent) {
  // Rank 0 of cp 2: [0, 4) and [12, 16) are two runs.
  EXPECT_EQ(SequenceChunks(16, 2, 0).Runs(0, 8),
            (std::vector<PositionRun>{{0, 0, 4}, {4, 12, 4}}));
  // Rank 1: chunks 1 and 2 are adjacent, one run [4, 12).
  EXPECT_EQ(SequenceChunks(16, 2, 1).Runs(0, 8),
            (std::vector<PositionRun>{{0, 4, 8}}));
  // A sub-range straddling the boundary (an SP shard with tp = 4 of
  // rank 0's 8 positions is 2 positions; tp = 3 would straddle).
  EXPECT_EQ(SequenceChunks(16, 2, 0).Runs(3, 3),
            (std::vector<PositionRun>{{3, 3, 1}, {4, 12, 2}}));
  EXPECT_EQ(SequenceChunks(16, 2, 0).Runs(6, 2),
            (std::vector<PositionRun>{{6, 14, 2}}));
  // cp = 1: the whole sequence in order, in one run.
  EXPECT_EQ(SequenceChunks(15, 1, 0).Runs(0, 15),
            (std::vector<PositionRun>{{0, 0, 15}}));
  EXPECT_EQ(SequenceChunks(16, 1, 0).Runs(4, 8),
            (std::vector<PositionRun>{{4, 4, 8}}));
}

TEST(SequenceChunks, SelectRowsTakesTheChunksRowsSequenceMajor) {
  // seq 8, b 2, width 1: row = pos·2 + sample holds 10·pos + sample.
  std::vector<int> full(16);
  for (int pos = 0; pos < 8; ++pos) {
    for (int bi = 0; bi < 2; ++bi) full[pos * 2 + bi] = 10 * pos + bi;
  }
  std::vector<int> local(8);
  SequenceChunks(8, 2, 0).SelectRows(full.data(), local.data(), 2, 1);
  EXPECT_EQ(local, (std::vector<int>{0, 1, 10, 11, 60, 61, 70, 71}));
  SequenceChunks(8, 2, 1).SelectRows(full.data(), local.data(), 2, 1);
  EXPECT_EQ(local, (std::vector<int>{20, 21, 30, 31, 40, 41, 50, 51}));
}

}  // namespace
}  // namespace meshtune::engine::context_parallel
