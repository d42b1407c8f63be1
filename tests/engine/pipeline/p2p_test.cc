// Tests for the pipeline point-to-point plan: hand-written plans derived from
// the schedules by hand, the rendezvous simulation over every (pp, vpp, m)
// the engine accepts up to pp = 8, and the simulator's own failure reports.
#include "engine/pipeline/p2p.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace meshtune::engine {
namespace {

using search_spaces::PipelineSchedule;
constexpr P2pKind kAct = P2pKind::kActivation;
constexpr P2pKind kGrad = P2pKind::kGradient;

P2pOp Send(P2pKind kind, int64_t peer, int64_t mb, int64_t stage) {
  return P2pOp{P2pDirection::kSend, kind, peer, mb, stage};
}
P2pOp Recv(P2pKind kind, int64_t peer, int64_t mb, int64_t stage) {
  return P2pOp{P2pDirection::kRecv, kind, peer, mb, stage};
}

// Plan with group i posted before step i.
P2pPlan Stepwise(const std::vector<std::vector<P2pOp>>& groups) {
  P2pPlan plan;
  for (size_t i = 0; i < groups.size(); ++i) {
    plan.push_back(P2pGroup{static_cast<int64_t>(i), groups[i]});
  }
  return plan;
}

std::string Describe(const P2pPlan& plan) {
  std::string s;
  for (const P2pGroup& g : plan) {
    s += "before " + std::to_string(g.before_step) + ": {";
    for (const P2pOp& op : g.ops) s += DescribeP2pOp(op) + "; ";
    s += "}\n";
  }
  return s;
}

void ExpectPlan(const PipelineSchedule& s, int64_t rank,
                const P2pPlan& expected) {
  const P2pPlan plan = MakeP2pPlan(s, rank);
  EXPECT_EQ(plan, expected) << "rank " << rank << " got\n"
                            << Describe(plan) << "expected\n"
                            << Describe(expected);
}

TEST(PipelineP2pTest, DescribesOps) {
  EXPECT_EQ(DescribeP2pOp(Send(kAct, 0, 1, 2)),
            "send activation (micro-batch 1, stage 2) to rank 0");
  EXPECT_EQ(DescribeP2pOp(Recv(kGrad, 1, 0, 0)),
            "recv gradient (micro-batch 0, stage 0) from rank 1");
}

// 1F1B, pp 2, m 3. Rank 0 (stage 0, one warm-up forward): F0 F1 B0 F2 B1 B2.
// Rank 1 (stage 1, the last): F0 B0 F1 B1 F2 B2.
TEST(PipelineP2pTest, OneFOneBPp2M3PlanByHand) {
  const PipelineSchedule s(2, 1, 3);
  ExpectPlan(s, 0,
             Stepwise({
                 {},                                           // F0
                 {Send(kAct, 1, 0, 1)},                        // F1
                 {Send(kAct, 1, 1, 1), Recv(kGrad, 1, 0, 0)},  // B0
                 {},                                           // F2
                 {Send(kAct, 1, 2, 1), Recv(kGrad, 1, 1, 0)},  // B1
                 {Recv(kGrad, 1, 2, 0)},                       // B2
                 {},                                           // end
             }));
  ExpectPlan(s, 1,
             Stepwise({
                 {Recv(kAct, 0, 0, 1)},                        // F0
                 {},                                           // B0
                 {Send(kGrad, 0, 0, 0), Recv(kAct, 0, 1, 1)},  // F1
                 {},                                           // B1
                 {Send(kGrad, 0, 1, 0), Recv(kAct, 0, 2, 1)},  // F2
                 {},                                           // B2
                 {Send(kGrad, 0, 2, 0)},                       // end
             }));
  EXPECT_TRUE(SimulateP2p(s).ok());
}

// Interleaved, pp 2, vpp 2, m 2: stages 0 and 2 on rank 0, 1 and 3 on rank 1.
// Rank 0 warms up with all 4 forwards: F(0,c0) F(1,c0) F(0,c1) F(1,c1)
// B(0,c1) B(1,c1) B(0,c0) B(1,c0). Rank 1 warms up with 2: F(0,c0) F(1,c0)
// F(0,c1) B(0,c1) F(1,c1) B(1,c1) B(0,c0) B(1,c0). Activations and gradients
// between the two ranks flow both ways (rank 1's stage 1 feeds rank 0's
// stage 2).
TEST(PipelineP2pTest, InterleavedPp2Vpp2M2PlanByHand) {
  const PipelineSchedule s(2, 2, 2);
  ExpectPlan(s, 0,
             Stepwise({
                 {},                                            // F(0,c0)
                 {Send(kAct, 1, 0, 1)},                         // F(1,c0)
                 {Send(kAct, 1, 1, 1), Recv(kAct, 1, 0, 2)},    // F(0,c1)
                 {Send(kAct, 1, 0, 3), Recv(kAct, 1, 1, 2)},    // F(1,c1)
                 {Send(kAct, 1, 1, 3), Recv(kGrad, 1, 0, 2)},   // B(0,c1)
                 {Send(kGrad, 1, 0, 1), Recv(kGrad, 1, 1, 2)},  // B(1,c1)
                 {Send(kGrad, 1, 1, 1), Recv(kGrad, 1, 0, 0)},  // B(0,c0)
                 {Recv(kGrad, 1, 1, 0)},                        // B(1,c0)
                 {},                                            // end
             }));
  ExpectPlan(s, 1,
             Stepwise({
                 {Recv(kAct, 0, 0, 1)},                         // F(0,c0)
                 {Send(kAct, 0, 0, 2), Recv(kAct, 0, 1, 1)},    // F(1,c0)
                 {Send(kAct, 0, 1, 2), Recv(kAct, 0, 0, 3)},    // F(0,c1)
                 {},                                            // B(0,c1)
                 {Send(kGrad, 0, 0, 2), Recv(kAct, 0, 1, 3)},   // F(1,c1)
                 {},                                            // B(1,c1)
                 {Send(kGrad, 0, 1, 2), Recv(kGrad, 0, 0, 1)},  // B(0,c0)
                 {Send(kGrad, 0, 0, 0), Recv(kGrad, 0, 1, 1)},  // B(1,c0)
                 {Send(kGrad, 0, 1, 0)},                        // end
             }));
  EXPECT_TRUE(SimulateP2p(s).ok());
}

// Every (pp, vpp, m) the engine accepts (TrainConfig::Validate: interleaving
// only with m % pp == 0) runs without deadlock or mismatch, and every plan
// has one group per step plus one, posted in step order, sends first.
TEST(PipelineP2pTest, EveryAcceptedScheduleRunsUnderRendezvous) {
  int checked = 0;
  for (int64_t pp = 1; pp <= 8; ++pp) {
    for (int64_t vpp = 1; vpp <= 4; ++vpp) {
      // Interleaving needs pp >= 2: InterleavingWithOnePpIsASchedulingProblem.
      if (pp == 1 && vpp > 1) continue;
      for (int64_t m = 1; m <= 3 * pp; ++m) {
        if (vpp > 1 && m % pp != 0) continue;
        const PipelineSchedule s(pp, vpp, m);
        const std::string name = "pp" + std::to_string(pp) + " vpp" +
                                 std::to_string(vpp) + " m" + std::to_string(m);
        const Status st = SimulateP2p(s);
        EXPECT_TRUE(st.ok()) << name << ": " << st.message();
        for (int64_t r = 0; r < pp; ++r) {
          const P2pPlan plan = MakeP2pPlan(s, r);
          ASSERT_EQ(plan.size(), s.StepsForRank(r).size() + 1) << name;
          for (size_t i = 0; i < plan.size(); ++i) {
            EXPECT_EQ(plan[i].before_step, static_cast<int64_t>(i)) << name;
            bool seen_recv = false;
            for (const P2pOp& op : plan[i].ops) {
              if (op.direction == P2pDirection::kRecv) seen_recv = true;
              EXPECT_FALSE(seen_recv && op.direction == P2pDirection::kSend)
                  << name << " rank " << r << " group " << i;
            }
          }
        }
        ++checked;
      }
    }
  }
  // 8 pp values · 3·pp 1F1B counts, plus 3 interleaved counts for each
  // vpp in 2..4 and pp in 2..8.
  EXPECT_EQ(checked, 3 * 36 + 3 * 3 * 7);
}

// With pp 1 the schedule has no warm-up, so an interleaved "pipeline" would
// run chunk 1's backward before its forward; the simulator reports it.
TEST(PipelineP2pTest, InterleavingWithOnePpIsASchedulingProblem) {
  const Status st = SimulateP2p(PipelineSchedule(1, 2, 1));
  EXPECT_EQ(st.message(),
            "schedule problem: rank 0 step 1 (backward micro-batch 0 chunk 1) "
            "runs before the forward of that micro-batch and chunk");
  EXPECT_EQ(st.hint(),
            "interleaving needs pp >= 2 (Megatron's rule); use vpp 1 with pp "
            "1");
  for (int64_t vpp = 2; vpp <= 4; ++vpp) {
    for (int64_t m = 1; m <= 3; ++m) {
      EXPECT_FALSE(SimulateP2p(PipelineSchedule(1, vpp, m)).ok());
    }
  }
}

// pp 2, m 2 (1F1B). Rank 0: F0 F1 B0 B1; rank 1: F0 B0 F1 B1. Both ranks
// reach a group holding only a send to the other, with no recv posted.
TEST(PipelineP2pTest, ReportsDeadlockOfCrossingSends) {
  const PipelineSchedule s(2, 1, 2);
  const std::vector<P2pPlan> plans = {
      {{1, {Send(kAct, 1, 0, 1)}},
       {2, {Send(kAct, 1, 1, 1)}},
       {2, {Recv(kGrad, 1, 0, 0)}},
       {3, {Recv(kGrad, 1, 1, 0)}}},
      {{0, {Recv(kAct, 0, 0, 1)}},
       {2, {Send(kGrad, 0, 0, 0)}},
       {2, {Recv(kAct, 0, 1, 1)}},
       {4, {Send(kGrad, 0, 1, 0)}}},
  };
  const Status st = SimulateP2p(s, plans);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "deadlock: rank 0 waits before step 2 (backward micro-batch 0 "
            "chunk 0) to send activation (micro-batch 1, stage 1) to rank 1, "
            "but rank 1 posts the matching recv in a later group, before step "
            "2 (forward micro-batch 1 chunk 0); rank 1 waits before step 2 "
            "(forward micro-batch 1 chunk 0) to send gradient (micro-batch 0, "
            "stage 0) to rank 0, but rank 0 posts the matching recv in a later "
            "group, before step 2 (backward micro-batch 0 chunk 0)");
  EXPECT_EQ(st.hint(),
            "post each send in one group with the recv its peer waits in "
            "(Megatron's send_forward_recv_backward and "
            "send_backward_recv_forward)");
}

// pp 2, m 3: rank 1 posts its first two activation recvs together but in
// the wrong order, so the first send meets a recv expecting micro-batch 1.
TEST(PipelineP2pTest, ReportsSwappedMessages) {
  const PipelineSchedule s(2, 1, 3);
  std::vector<P2pPlan> plans = {MakeP2pPlan(s, 0), MakeP2pPlan(s, 1)};
  plans[1][0].ops = {Recv(kAct, 0, 1, 1), Recv(kAct, 0, 0, 1)};
  plans[1][2].ops = {Send(kGrad, 0, 0, 0)};
  const Status st = SimulateP2p(s, plans);
  EXPECT_EQ(st.message(),
            "mismatched message: activation send 0 from rank 0 to rank 1 "
            "carries (micro-batch 0, stage 1) but the matching recv expects "
            "(micro-batch 1, stage 1)");
  EXPECT_EQ(st.hint(),
            "post the sends and the recvs of one channel in the same order");
}

// Interleaved pp 2, vpp 2, m 4: the steady state (rank 0 from step 4, rank 1
// from step 2) pairs a forward with a backward. Checks the pairing rule on
// the steady-state steps by hand: rank 1's iteration F(0,c1) B(0,c1) at
// steps 2-3 receives before step 2 and sends after step 3, and the group
// between the two steps is empty.
TEST(PipelineP2pTest, InterleavedSteadyStateGroupsWholeIterations) {
  const PipelineSchedule s(2, 2, 4);
  // Rank 1: F(0,c0) F(1,c0) | F(0,c1) B(0,c1) | F(1,c1) B(1,c1) |
  // F(2,c0) B(0,c0) | F(3,c0) B(1,c0) | F(2,c1) B(2,c1) | F(3,c1) B(3,c1) |
  // B(2,c0) B(3,c0). Stages: c0 = 1, c1 = 3 (the last).
  const P2pPlan plan = MakeP2pPlan(s, 1);
  ASSERT_EQ(plan.size(), 17u);
  // Last warm-up group: send F(1,c0)'s output, recv F(0,c1)'s input and
  // (nothing: stage 3 is the head) B(0,c1)'s.
  EXPECT_EQ(plan[2].ops,
            (std::vector<P2pOp>{Send(kAct, 0, 1, 2), Recv(kAct, 0, 0, 3)}));
  EXPECT_TRUE(plan[3].ops.empty());
  // After B(0,c1): its gradient; before F(1,c1): its activation.
  EXPECT_EQ(plan[4].ops,
            (std::vector<P2pOp>{Send(kGrad, 0, 0, 2), Recv(kAct, 0, 1, 3)}));
  EXPECT_TRUE(plan[5].ops.empty());
  // Before the iteration F(2,c0) B(0,c0): both recvs, the gradient early.
  EXPECT_EQ(plan[6].ops,
            (std::vector<P2pOp>{Send(kGrad, 0, 1, 2), Recv(kAct, 0, 2, 1),
                                Recv(kGrad, 0, 0, 1)}));
  EXPECT_TRUE(plan[7].ops.empty());
  // After it: F(2,c0)'s activation and B(0,c0)'s gradient; then the next
  // iteration's recvs.
  EXPECT_EQ(plan[8].ops,
            (std::vector<P2pOp>{Send(kAct, 0, 2, 2), Send(kGrad, 0, 0, 0),
                                Recv(kAct, 0, 3, 1), Recv(kGrad, 0, 1, 1)}));
  // Cool-down: step by step.
  EXPECT_EQ(plan[15].ops,
            (std::vector<P2pOp>{Send(kGrad, 0, 2, 0), Recv(kGrad, 0, 3, 1)}));
  EXPECT_EQ(plan[16].ops, (std::vector<P2pOp>{Send(kGrad, 0, 3, 0)}));
  EXPECT_TRUE(SimulateP2p(s).ok());
}

// The same calls grouped step by step (each group: the previous step's send
// and the next step's recv) deadlock in the interleaved steady state: each
// rank sends a gradient that its neighbour receives only one step later.
TEST(PipelineP2pTest, StepByStepGroupingDeadlocksWhenInterleaving) {
  auto step_by_step = [](const PipelineSchedule& s) {
    std::vector<P2pPlan> plans;
    for (int64_t r = 0; r < s.pp(); ++r) {
      P2pPlan merged;
      for (const P2pGroup& g : MakeNaiveP2pPlan(s, r)) {
        if (!merged.empty() && merged.back().before_step == g.before_step) {
          merged.back().ops.insert(merged.back().ops.end(), g.ops.begin(),
                                   g.ops.end());
        } else {
          merged.push_back(g);
        }
      }
      plans.push_back(merged);
    }
    return plans;
  };
  const PipelineSchedule s(2, 2, 4);
  EXPECT_EQ(SimulateP2p(s, step_by_step(s)).message(),
            "deadlock: rank 0 waits before step 6 (forward micro-batch 3 "
            "chunk 0) to send gradient (micro-batch 0, stage 1) to rank 1, "
            "but rank 1 posts the matching recv in a later group, before step "
            "7 (backward micro-batch 0 chunk 0); rank 1 waits before step 6 "
            "(forward micro-batch 2 chunk 0) to send gradient (micro-batch 1, "
            "stage 2) to rank 0, but rank 0 posts the matching recv in a "
            "later group, before step 7 (backward micro-batch 1 chunk 1)");
  // 1F1B has no ring: step by step is Megatron's own grouping there.
  const PipelineSchedule plain(4, 1, 8);
  EXPECT_TRUE(SimulateP2p(plain, step_by_step(plain)).ok());
}

// The naive plan deadlocks in every accepted configuration with pp >= 2 and
// m >= 2 and runs otherwise. Interleaved pp 2: both ranks start by sending
// an activation to each other (stage 1 on rank 1 feeds stage 2 on rank 0).
TEST(PipelineP2pTest, NaivePlanDeadlocks) {
  auto naive = [](const PipelineSchedule& s) {
    std::vector<P2pPlan> plans;
    for (int64_t r = 0; r < s.pp(); ++r) {
      plans.push_back(MakeNaiveP2pPlan(s, r));
    }
    return SimulateP2p(s, plans);
  };
  EXPECT_EQ(naive(PipelineSchedule(2, 2, 2)).message(),
            "deadlock: rank 0 waits before step 2 (forward micro-batch 0 "
            "chunk 1) to send activation (micro-batch 1, stage 1) to rank 1, "
            "but rank 1 posts the matching recv in a later group, before step "
            "1 (forward micro-batch 1 chunk 0); rank 1 waits before step 1 "
            "(forward micro-batch 1 chunk 0) to send activation (micro-batch "
            "0, stage 2) to rank 0, but rank 0 posts the matching recv in a "
            "later group, before step 2 (forward micro-batch 0 chunk 1)");
  for (int64_t pp = 1; pp <= 8; ++pp) {
    for (int64_t vpp = 1; vpp <= 4; ++vpp) {
      if (pp == 1 && vpp > 1) continue;
      for (int64_t m = 1; m <= 3 * pp; ++m) {
        if (vpp > 1 && m % pp != 0) continue;
        const Status st = naive(PipelineSchedule(pp, vpp, m));
        const std::string name = "pp" + std::to_string(pp) + " vpp" +
                                 std::to_string(vpp) + " m" + std::to_string(m);
        if (pp >= 2 && m >= 2) {
          EXPECT_EQ(st.message().rfind("deadlock: ", 0), 0u) << name;
        } else {
          EXPECT_TRUE(st.ok()) << name << ": " << st.message();
        }
      }
    }
  }
}

// ---- Error paths of the simulator, on 1F1B pp 2, m 3 (plans by hand in
// OneFOneBPp2M3PlanByHand). ----

std::vector<P2pPlan> GoodPlans(const PipelineSchedule& s) {
  return {MakeP2pPlan(s, 0), MakeP2pPlan(s, 1)};
}

void ExpectProblem(const std::vector<P2pPlan>& plans,
                   const std::string& message, const std::string& hint) {
  const Status st = SimulateP2p(PipelineSchedule(2, 1, 3), plans);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), message);
  EXPECT_EQ(st.hint(), hint);
}

TEST(PipelineP2pTest, RejectsMalformedPlans) {
  const PipelineSchedule s(2, 1, 3);
  ExpectProblem({MakeP2pPlan(s, 0)}, "got 1 plans for pp=2",
                "pass one plan per pipeline rank");
  std::vector<P2pPlan> plans = GoodPlans(s);
  plans[0][1].before_step = 7;
  ExpectProblem(plans, "rank 0 group 1 is posted before step 7, outside [0, 6]",
                "post groups in step order, the last one at most after the "
                "last step");
  plans = GoodPlans(s);
  plans[1][3].before_step = 1;
  ExpectProblem(plans, "rank 1 group 3 is posted before step 1, outside [2, 6]",
                "post groups in step order, the last one at most after the "
                "last step");
  plans = GoodPlans(s);
  plans[0][1].ops[0].peer = 5;
  ExpectProblem(plans, "rank 0 group 1 names peer rank 5 outside [0, 2)",
                "peers are pipeline ranks");
}

TEST(PipelineP2pTest, ReportsExtraTransfers) {
  const PipelineSchedule s(2, 1, 3);
  std::vector<P2pPlan> plans = GoodPlans(s);
  plans[0][3].ops.push_back(Recv(kAct, 1, 0, 0));
  ExpectProblem(plans,
                "extra transfer: rank 0 before step 3 (forward micro-batch 2 "
                "chunk 0) posts recv activation (micro-batch 0, stage 0) from "
                "rank 1, which none of its steps consumes",
                "post each transfer once, for a step of this rank");
  plans = GoodPlans(s);
  plans[1][6].ops.push_back(Send(kGrad, 0, 1, 0));
  ExpectProblem(plans,
                "extra transfer: rank 1 after its last step posts send "
                "gradient (micro-batch 1, stage 0) to rank 0 a second time",
                "post each transfer once, for a step of this rank");
}

TEST(PipelineP2pTest, ReportsWrongPeer) {
  std::vector<P2pPlan> plans = GoodPlans(PipelineSchedule(2, 1, 3));
  plans[1][0].ops[0].peer = 1;
  ExpectProblem(plans,
                "wrong peer: rank 1 before step 0 (forward micro-batch 0 "
                "chunk 0) posts recv activation (micro-batch 0, stage 1) from "
                "rank 1, but its peer is rank 0",
                "stage v runs on pipeline rank v mod pp");
}

TEST(PipelineP2pTest, ReportsRecvAfterItsConsumer) {
  std::vector<P2pPlan> plans = GoodPlans(PipelineSchedule(2, 1, 3));
  plans[1][1].ops = plans[1][0].ops;
  plans[1][0].ops.clear();
  ExpectProblem(plans,
                "recv after its consumer: rank 1 before step 1 (backward "
                "micro-batch 0 chunk 0) posts recv activation (micro-batch 0, "
                "stage 1) from rank 0, which its step 0 (forward micro-batch 0 "
                "chunk 0) consumes",
                "post each recv in a group before its consumer step");
}

TEST(PipelineP2pTest, ReportsSendBeforeItsProducer) {
  std::vector<P2pPlan> plans = GoodPlans(PipelineSchedule(2, 1, 3));
  plans[0][0].ops = plans[0][1].ops;
  plans[0][1].ops.clear();
  ExpectProblem(plans,
                "send before its producer: rank 0 before step 0 (forward "
                "micro-batch 0 chunk 0) posts send activation (micro-batch 0, "
                "stage 1) to rank 1, which its step 0 (forward micro-batch 0 "
                "chunk 0) produces",
                "post each send in a group after its producer step");
}

TEST(PipelineP2pTest, ReportsMissingTransfers) {
  const PipelineSchedule s(2, 1, 3);
  std::vector<P2pPlan> plans = GoodPlans(s);
  plans[1][6].ops.clear();
  ExpectProblem(plans,
                "missing transfer: rank 1 step 5 (backward micro-batch 2 chunk "
                "0) produces gradient (micro-batch 2, stage 0) for rank 0, but "
                "its plan never sends it",
                "post one send for every transfer of the rank's steps");
  plans = GoodPlans(s);
  plans[0][5].ops.clear();
  ExpectProblem(plans,
                "missing transfer: rank 0 step 5 (backward micro-batch 2 chunk "
                "0) consumes gradient (micro-batch 2, stage 0) from rank 1, "
                "but its plan never receives it",
                "post one recv for every transfer of the rank's steps");
}

}  // namespace
}  // namespace meshtune::engine
