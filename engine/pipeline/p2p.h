// Pipeline point-to-point plan: which sends and receives each pipeline rank
// posts around the steps of PipelineSchedule::StepsForRank, grouped so that
// the whole pipeline cannot deadlock when a send blocks until its receive is
// posted (NCCL send/recv), and a simulator that proves it per configuration.
//
// Transfers. Chunk c of pipeline rank r is virtual stage v = c·pp + r
// (engine/gpt_model.h); V = pp·vpp stages in all. A forward of (micro-batch
// b, stage v < V−1) produces the activation that the forward of (b, v+1)
// consumes: kind kActivation, sent to rank (v+1) mod pp on the "pp"
// communicator. A backward of (b, v > 0) produces the gradient of its input
// that the backward of (b, v−1) consumes: kind kGradient, sent to rank
// (v−1) mod pp on the separate gradient communicator. Every transfer is named
// by (kind, micro-batch, virtual stage of the step that consumes it); each
// carries one [s·b/tp, h] tensor with sequence parallelism, else [s·b, h]
// (sizes do not matter here).
//
// Rendezvous semantics (SimulateP2p). A rank posts its groups in plan order;
// group g is posted right before step g.before_step (before_step = number of
// steps: after the last step). A rank sits in its current group until every
// op of the group has met its counterpart; the ops of one group progress
// together (ncclGroupStart/End), so their order inside the group does not
// matter. Counterparts are fixed by order on a channel (kind, sender,
// receiver): the k-th send on the channel meets the k-th recv on it, and they
// meet only while both ranks sit in the groups that hold them. A send to the
// rank itself therefore needs its recv in the same group. Because kinds are
// separate channels (two communicators), an activation and a gradient between
// the same two ranks never meet each other; that is what lets pp = 2 run the
// interleaved schedule, which Megatron (one communicator) refuses without
// p2p overlap.
//
// The plan (MakeP2pPlan) groups the calls as Megatron-Core does
// (schedules.py, p2p_communication.py), with the sends first in each group:
//  - 1F1B: the group right before step i holds the send of step i−1's
//    output and the recv of step i's input: send_forward_recv_backward
//    between a forward and a backward, send_backward_recv_forward between a
//    backward and a forward.
//  - Interleaved: in the steady state a forward and the backward after it
//    are one iteration with no group between them; the group before the
//    iteration holds the recvs of both steps and the group after it the
//    sends of both (send_forward_backward_recv_forward_backward). Warm-up
//    forwards and cool-down backwards group step by step as in 1F1B, and the
//    first backward's recv joins the last warm-up group.
// The step-by-step grouping is not enough when interleaving: the stages wrap
// around the ranks (rank 0 sends the gradient of its chunk c > 0 to rank
// pp−1), and in the steady state every rank would sit before a forward
// sending a gradient that its neighbour receives only before its next
// backward, one step later: a ring of pp waiting ranks (every interleaved
// configuration with m >= 2·pp). Posting the backward's recv one step
// early, before the forward, breaks the ring.
// SimulateP2p runs every rank's plan; tests/engine/pipeline/p2p_test.cc
// proves it deadlock-free, by simulation, for pp 1..8, vpp 1..4 and every
// micro-batch count 1..3·pp that the engine accepts (m % pp == 0 when
// interleaving). Interleaving with pp = 1 is no pipeline: the schedule has
// no warm-up then and runs a chunk's backward before its forward, which
// SimulateP2p reports (Megatron and the enumerator need pp >= 2).
//
// The naive plan (MakeNaiveP2pPlan: a recv in its own group before a step,
// a send in its own group after it, engine/trainer.cc's order over buffered
// host sends) deadlocks under rendezvous in every configuration the engine
// accepts with pp >= 2 and m >= 2 (tested up to pp 8): two neighbours both
// send before they receive (1F1B, pp 2, m 2: rank 0 sends micro-batch 1's
// activation while rank 1 sends micro-batch 0's gradient). It runs only with
// m = 1 or pp = 1.
#ifndef MESHTUNE_ENGINE_PIPELINE_P2P_H_
#define MESHTUNE_ENGINE_PIPELINE_P2P_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/pipeline_schedule.h"
#include "search_spaces/status.h"

namespace meshtune::engine {

enum class P2pDirection { kSend, kRecv };

// kActivation: stage v → v+1 on the "pp" communicator; kGradient: stage v →
// v−1 on the gradient communicator.
enum class P2pKind { kActivation, kGradient };

// One send or receive of one pipeline rank.
struct P2pOp {
  P2pDirection direction = P2pDirection::kSend;
  P2pKind kind = P2pKind::kActivation;
  int64_t peer = 0;           // pipeline rank at the other end [0, pp)
  int64_t microbatch = 0;     // [0, m)
  int64_t virtual_stage = 0;  // stage of the consuming step [0, pp·vpp)

  bool operator==(const P2pOp& o) const {
    return direction == o.direction && kind == o.kind && peer == o.peer &&
           microbatch == o.microbatch && virtual_stage == o.virtual_stage;
  }
  bool operator!=(const P2pOp& o) const { return !(*this == o); }
};

// Ops posted together, right before step `before_step` of the rank's
// StepsForRank (== the number of steps: after the last step).
struct P2pGroup {
  int64_t before_step = 0;
  std::vector<P2pOp> ops;

  bool operator==(const P2pGroup& o) const {
    return before_step == o.before_step && ops == o.ops;
  }
};

// One rank's groups in posting order (before_step non-decreasing).
using P2pPlan = std::vector<P2pGroup>;

// The deadlock-free plan of `pp_rank`: exactly StepsForRank(pp_rank).size() +
// 1 groups, group i posted right before step i (the last after the last
// step), sends first in each group, grouped as above (some groups are
// empty). REQUIRES: 0 <= pp_rank < schedule.pp().
P2pPlan MakeP2pPlan(const search_spaces::PipelineSchedule& schedule,
                    int64_t pp_rank);

// The naive plan: a group of one recv right before each step that needs an
// input and a group of one send right after each step that has an output
// (engine/trainer.cc's order). Deadlocks under rendezvous (see above); kept
// to document why the grouping matters.
P2pPlan MakeNaiveP2pPlan(const search_spaces::PipelineSchedule& schedule,
                         int64_t pp_rank);

// Runs MakeP2pPlan of every rank under the rendezvous semantics above.
Status SimulateP2p(const search_spaces::PipelineSchedule& schedule);

// Runs `plans` (one per pipeline rank) under the rendezvous semantics and
// returns OK or the first problem as InvalidArgument with a hint, checked in
// this order:
//  1. the plans' shape: one plan per rank, before_step in [0, steps] and
//     non-decreasing, peers in [0, pp);
//  2. each rank on its own, rank 0 first, ops in plan order: a step that
//     runs a chunk's backward before its forward; an extra transfer (one no
//     step of the rank consumes or produces, or a repeat); a wrong peer; a
//     recv after its consumer; a send before its producer; then a missing
//     transfer (a step's input never received, its output never sent);
//  3. each channel: the k-th send carries the (micro-batch, stage) that the
//     k-th recv expects (a mismatched message);
//  4. the run: a deadlock, naming every waiting rank and what it waits on.
Status SimulateP2p(const search_spaces::PipelineSchedule& schedule,
                   const std::vector<P2pPlan>& plans);

// "send activation (micro-batch 1, stage 2) to rank 0",
// "recv gradient (micro-batch 0, stage 0) from rank 1".
std::string DescribeP2pOp(const P2pOp& op);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_PIPELINE_P2P_H_
