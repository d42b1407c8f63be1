// Tests for PipelineSchedule: Megatron-Core warm-up counts, step order, the
// bubble and the in-flight micro-batches.
//
// Besides per-rank properties, the schedules of all ranks are executed
// together in a small simulator (forward of virtual stage s needs the forward
// of stage s−1; backward of stage s needs the backward of stage s+1; chunk c
// of rank r is virtual stage c·pp + r). It checks that the order cannot
// deadlock and that, with unit forward and double backward times and no
// communication, the step takes exactly (m·vpp + pp − 1) chunk-slots: the
// bubble is (pp − 1)/vpp micro-batches, as BubbleMicrobatches says.
#include "search_spaces/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace meshtune::search_spaces {
namespace {

using Kind = PipelineSchedule::Step::Kind;

std::string Name(int64_t pp, int64_t vpp, int64_t m) {
  return "pp" + std::to_string(pp) + " vpp" + std::to_string(vpp) + " m" +
         std::to_string(m);
}

// Simulates all ranks; returns the makespan in time units (forward 1,
// backward 2 per chunk), or -1 if the ranks' orders deadlock.
int64_t SimulateMakespan(const PipelineSchedule& s) {
  const int64_t pp = s.pp(), vpp = s.vpp(), m = s.num_microbatches();
  const int64_t stages = pp * vpp;
  std::vector<std::vector<PipelineSchedule::Step>> steps(pp);
  for (int64_t r = 0; r < pp; ++r) steps[r] = s.StepsForRank(r);
  // finish[kind][stage][mb], -1 = not done.
  std::vector<std::vector<int64_t>> fwd(stages, std::vector<int64_t>(m, -1));
  std::vector<std::vector<int64_t>> bwd = fwd;
  std::vector<size_t> next(pp, 0);
  std::vector<int64_t> clock(pp, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < pp; ++r) {
      while (next[r] < steps[r].size()) {
        const auto& st = steps[r][next[r]];
        const int64_t stage = st.chunk * pp + r;
        int64_t ready;
        if (st.kind == Kind::kForward) {
          ready = stage == 0 ? 0 : fwd[stage - 1][st.microbatch];
        } else {
          ready = stage == stages - 1 ? fwd[stage][st.microbatch]
                                      : bwd[stage + 1][st.microbatch];
        }
        if (ready < 0) break;
        const int64_t start = std::max(clock[r], ready);
        const int64_t end = start + (st.kind == Kind::kForward ? 1 : 2);
        (st.kind == Kind::kForward ? fwd : bwd)[stage][st.microbatch] = end;
        clock[r] = end;
        ++next[r];
        progress = true;
      }
    }
  }
  for (int64_t r = 0; r < pp; ++r) {
    if (next[r] != steps[r].size()) return -1;
  }
  return *std::max_element(clock.begin(), clock.end());
}

TEST(PipelineScheduleTest, BubbleFormulas) {
  PipelineSchedule plain(8, 1, 64);
  EXPECT_DOUBLE_EQ(plain.BubbleMicrobatches(), 7.0);
  EXPECT_DOUBLE_EQ(plain.BubbleFraction(), 7.0 / 64.0);
  EXPECT_FALSE(plain.interleaved());
  PipelineSchedule interleaved(8, 4, 64);
  EXPECT_DOUBLE_EQ(interleaved.BubbleMicrobatches(), 7.0 / 4.0);
  EXPECT_DOUBLE_EQ(interleaved.BubbleFraction(), 7.0 / 256.0);
  EXPECT_TRUE(interleaved.interleaved());
  EXPECT_DOUBLE_EQ(PipelineSchedule(1, 1, 8).BubbleFraction(), 0.0);
}

// schedules.py, get_pp_rank_microbatches.
TEST(PipelineScheduleTest, WarmupCountsMatchMegatron) {
  PipelineSchedule plain(4, 1, 8);
  EXPECT_EQ(plain.WarmupSteps(0), 3);
  EXPECT_EQ(plain.WarmupSteps(1), 2);
  EXPECT_EQ(plain.WarmupSteps(3), 0);
  // Fewer micro-batches than stages: capped at m.
  EXPECT_EQ(PipelineSchedule(8, 1, 2).WarmupSteps(0), 2);
  // Interleaved: (pp − r − 1)·2 + (vpp − 1)·pp.
  PipelineSchedule inter(4, 2, 8);
  EXPECT_EQ(inter.WarmupSteps(0), 3 * 2 + 1 * 4);
  EXPECT_EQ(inter.WarmupSteps(3), 4);
  // Capped at m·vpp (all-forward warm-up).
  EXPECT_EQ(PipelineSchedule(4, 4, 4).WarmupSteps(0), 16);
  EXPECT_EQ(PipelineSchedule(1, 1, 8).WarmupSteps(0), 0);
}

// get_schedule_table with microbatch_group_size_per_vp_stage = pp = 2,
// 4 micro-batches, 2 chunks: (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1);
// backward mirrors the chunk.
TEST(PipelineScheduleTest, InterleavedOrderFollowsScheduleTable) {
  PipelineSchedule s(2, 2, 4);
  std::vector<std::pair<int64_t, int64_t>> fwd, bwd;
  for (const auto& st : s.StepsForRank(0)) {
    (st.kind == Kind::kForward ? fwd : bwd)
        .push_back({st.microbatch, st.chunk});
  }
  const std::vector<std::pair<int64_t, int64_t>> want_fwd = {
      {0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  const std::vector<std::pair<int64_t, int64_t>> want_bwd = {
      {0, 1}, {1, 1}, {0, 0}, {1, 0}, {2, 1}, {3, 1}, {2, 0}, {3, 0}};
  EXPECT_EQ(fwd, want_fwd);
  EXPECT_EQ(bwd, want_bwd);
  // Rank 0 warms up with (2 − 0 − 1)·2 + (2 − 1)·2 = 4 forwards.
  const auto steps = s.StepsForRank(0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(steps[i].kind, Kind::kForward);
  EXPECT_EQ(steps[4].kind, Kind::kForward);
  EXPECT_EQ(steps[5].kind, Kind::kBackward);
}

TEST(PipelineScheduleTest, OneFOneBOrderOnLastAndFirstRank) {
  PipelineSchedule s(3, 1, 4);
  // Last rank: no warm-up, strict F B F B ...
  const auto last = s.StepsForRank(2);
  ASSERT_EQ(last.size(), 8u);
  for (size_t i = 0; i < last.size(); ++i) {
    EXPECT_EQ(last[i].kind, i % 2 == 0 ? Kind::kForward : Kind::kBackward);
    EXPECT_EQ(last[i].microbatch, static_cast<int64_t>(i / 2));
  }
  // First rank: F0 F1 | F2 B0 F3 B1 | B2 B3.
  const auto first = s.StepsForRank(0);
  const std::vector<std::pair<Kind, int64_t>> want = {
      {Kind::kForward, 0},  {Kind::kForward, 1}, {Kind::kForward, 2},
      {Kind::kBackward, 0}, {Kind::kForward, 3}, {Kind::kBackward, 1},
      {Kind::kBackward, 2}, {Kind::kBackward, 3}};
  ASSERT_EQ(first.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(first[i].kind, want[i].first);
    EXPECT_EQ(first[i].microbatch, want[i].second);
  }
}

// Rank 0 holds min(m, pp) micro-batches for 1F1B and pp·(1 + (pp−1)/(pp·vpp))
// interleaved once m·vpp exceeds the warm-up (Korthikanti et al. 2022).
TEST(PipelineScheduleTest, InFlightOnRankZeroMatchesPublishedFormula) {
  EXPECT_DOUBLE_EQ(PipelineSchedule(8, 1, 64).InFlightMicrobatches(0), 8.0);
  EXPECT_DOUBLE_EQ(PipelineSchedule(8, 1, 3).InFlightMicrobatches(0), 3.0);
  EXPECT_DOUBLE_EQ(PipelineSchedule(8, 1, 64).InFlightMicrobatches(7), 1.0);
  for (int64_t pp : {2, 4, 8, 16}) {
    for (int64_t vpp : {2, 3, 4, 6}) {
      const int64_t m = 4 * pp;
      PipelineSchedule s(pp, vpp, m);
      const double formula = pp * (1.0 + (pp - 1.0) / (pp * vpp));
      EXPECT_NEAR(s.InFlightMicrobatches(0), formula, 1e-12)
          << Name(pp, vpp, m);
    }
  }
}

// Properties of every rank's steps over many shapes.
TEST(PipelineScheduleTest, StepPropertiesOverManyShapes) {
  int checked = 0;
  for (int64_t pp : {1, 2, 3, 4, 5, 8}) {
    for (int64_t vpp : {1, 2, 3, 4}) {
      if (vpp > 1 && pp < 2) continue;
      for (int64_t m = 1; m <= 24; ++m) {
        // Megatron interleaves only when m is a multiple of pp.
        if (vpp > 1 && m % pp != 0) continue;
        PipelineSchedule s(pp, vpp, m);
        SCOPED_TRACE(Name(pp, vpp, m));
        for (int64_t r = 0; r < pp; ++r) {
          const auto steps = s.StepsForRank(r);
          ASSERT_EQ(static_cast<int64_t>(steps.size()), 2 * m * vpp);
          std::map<std::pair<int64_t, int64_t>, int> fwd_at, bwd_at;
          int64_t outstanding = 0, peak = 0;
          for (size_t i = 0; i < steps.size(); ++i) {
            const auto& st = steps[i];
            ASSERT_GE(st.microbatch, 0);
            ASSERT_LT(st.microbatch, m);
            ASSERT_GE(st.chunk, 0);
            ASSERT_LT(st.chunk, vpp);
            const auto key = std::make_pair(st.microbatch, st.chunk);
            if (st.kind == Kind::kForward) {
              ASSERT_EQ(fwd_at.count(key), 0u) << "forward twice";
              fwd_at[key] = static_cast<int>(i);
              peak = std::max(peak, ++outstanding);
            } else {
              ASSERT_EQ(bwd_at.count(key), 0u) << "backward twice";
              ASSERT_EQ(fwd_at.count(key), 1u) << "backward before forward";
              bwd_at[key] = static_cast<int>(i);
              --outstanding;
            }
          }
          EXPECT_EQ(static_cast<int64_t>(fwd_at.size()), m * vpp);
          EXPECT_EQ(static_cast<int64_t>(bwd_at.size()), m * vpp);
          EXPECT_EQ(outstanding, 0);
          // The first WarmupSteps are forwards; the next step is a forward
          // too when anything is left (1F1B steady state starts with F).
          const int64_t w = s.WarmupSteps(r);
          for (int64_t i = 0; i < w; ++i) {
            EXPECT_EQ(steps[i].kind, Kind::kForward);
          }
          if (w < m * vpp) {
            EXPECT_EQ(steps[w].kind, Kind::kForward);
            EXPECT_EQ(steps[w + 1].kind, Kind::kBackward);
          }
          EXPECT_DOUBLE_EQ(s.InFlightMicrobatches(r),
                           static_cast<double>(peak) / vpp);
          if (r > 0) {
            EXPECT_LE(s.InFlightMicrobatches(r), s.InFlightMicrobatches(0));
          }
        }
        const int64_t makespan = SimulateMakespan(s);
        ASSERT_GE(makespan, 0) << "deadlock";
        // Ideal: m·vpp chunk-slots of 3 units; bubble (pp−1) chunk-slots,
        // i.e. (pp−1)/vpp whole-stage micro-batches.
        EXPECT_EQ(makespan, 3 * (m * vpp + pp - 1));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace meshtune::search_spaces
