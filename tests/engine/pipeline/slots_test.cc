// Activation slots (engine/pipeline/slots.h): the table's rules, and the
// slot counts the CUDA trainer allocates, against Megatron's in-flight
// micro-batches (search_spaces::PipelineSchedule::WarmupSteps + 1).
#include "engine/pipeline/slots.h"

#include <algorithm>
#include <numeric>

#include "gtest/gtest.h"

namespace meshtune::engine {
namespace {

using search_spaces::PipelineSchedule;

TEST(PipelineSlots, TakeReusesTheHeldAndTheFreedSlots) {
  PipelineSlots slots(2);
  EXPECT_EQ(slots.Take(0, 0), 0);
  EXPECT_EQ(slots.Take(1, 0), 1);
  EXPECT_EQ(slots.Take(0, 0), 0);  // held: the same slot
  EXPECT_EQ(slots.Take(0, 1), 0);  // chunks count apart
  EXPECT_TRUE(slots.Holds(1, 0));
  slots.Release(0, 0);
  EXPECT_FALSE(slots.Holds(0, 0));
  EXPECT_EQ(slots.Take(2, 0), 0);  // the freed slot
  EXPECT_EQ(slots.Take(3, 0), 2);
  EXPECT_EQ(slots.handed_out(), (std::vector<int>{3, 1}));
}

TEST(PipelineSlots, TransfersNameTheProducerOrConsumerChunk) {
  // pp = 2: stage v runs on rank v mod 2 as chunk v / 2.
  P2pOp op;
  op.kind = P2pKind::kActivation;
  op.direction = P2pDirection::kSend;
  op.virtual_stage = 2;  // consumer stage 2; producer stage 1 = chunk 0
  EXPECT_EQ(TransferChunk(op, 2), 0);
  op.direction = P2pDirection::kRecv;
  EXPECT_EQ(TransferChunk(op, 2), 1);
  EXPECT_FALSE(ReleasesSlot(op));
  op.kind = P2pKind::kGradient;
  op.direction = P2pDirection::kSend;
  op.virtual_stage = 1;  // consumer stage 1; producer stage 2 = chunk 1
  EXPECT_EQ(TransferChunk(op, 2), 1);
  EXPECT_TRUE(ReleasesSlot(op));
}

// 1F1B: rank r holds min(pp − r, m) micro-batches at the peak (its warm-up
// forwards plus the steady state's one), Megatron's count; the send of a
// gradient frees its slot for the receive posted with it.
TEST(PipelineSlots, OneFOneBNeedsMegatronsInFlightCount) {
  for (int64_t pp = 1; pp <= 8; ++pp) {
    for (int64_t m = 1; m <= 3 * pp; ++m) {
      const PipelineSchedule schedule(pp, 1, m);
      for (int64_t r = 0; r < pp; ++r) {
        EXPECT_EQ(CountPipelineSlots(schedule, r),
                  (std::vector<int>{static_cast<int>(std::min(pp - r, m))}))
            << "pp " << pp << " m " << m << " rank " << r;
      }
    }
  }
}

// Interleaved: a chunk's slots never exceed m, and its peak is at least
// one (each chunk runs every micro-batch).
TEST(PipelineSlots, InterleavedSlotsPerChunkAreBounded) {
  for (int64_t pp = 2; pp <= 8; ++pp) {
    for (int64_t vpp = 2; vpp <= 4; ++vpp) {
      for (int64_t m = pp; m <= 3 * pp; m += pp) {
        const PipelineSchedule schedule(pp, vpp, m);
        for (int64_t r = 0; r < pp; ++r) {
          const std::vector<int> slots = CountPipelineSlots(schedule, r);
          ASSERT_EQ(static_cast<int64_t>(slots.size()), vpp);
          for (int s : slots) {
            EXPECT_GE(s, 1);
            EXPECT_LE(s, m);
          }
        }
      }
    }
  }
}

// The pooled activation sets: Megatron's in-flight micro-batches (the cost
// model's InFlightMicrobatches, in chunk-forwards) times the layers per
// chunk, for 1F1B and interleaved; uneven chunks weigh their own layers.
TEST(PipelineSlots, PeakInFlightLayersIsMegatronsInFlightCount) {
  for (int64_t pp = 1; pp <= 8; ++pp) {
    for (int64_t vpp = 1; vpp <= (pp > 1 ? 4 : 1); ++vpp) {
      for (int64_t m = 1; m <= 3 * pp; ++m) {
        if (vpp > 1 && m % pp != 0) continue;
        const PipelineSchedule schedule(pp, vpp, m);
        for (int64_t r = 0; r < pp; ++r) {
          const int64_t chunk_forwards =
              std::min(schedule.WarmupSteps(r) + 1, m * vpp);
          EXPECT_EQ(
              PeakInFlightLayers(schedule, r, std::vector<int64_t>(vpp, 3)),
              3 * chunk_forwards)
              << "pp " << pp << " vpp " << vpp << " m " << m << " rank " << r;
          EXPECT_DOUBLE_EQ(
              static_cast<double>(chunk_forwards) / static_cast<double>(vpp),
              schedule.InFlightMicrobatches(r));
        }
      }
    }
  }
  // pp 2, m 2, 1F1B on rank 0 with 5 layers: two micro-batches in flight.
  EXPECT_EQ(PeakInFlightLayers(PipelineSchedule(2, 1, 2), 0, {5}), 10);
  // Uneven chunks (pp 2, vpp 2, m 2; rank 0 runs F(0,c0) F(1,c0) F(0,c1)
  // F(1,c1) before its first backward): 2·1 + 2·4.
  EXPECT_EQ(PeakInFlightLayers(PipelineSchedule(2, 2, 2), 0, {1, 4}), 10);
}

}  // namespace
}  // namespace meshtune::engine
