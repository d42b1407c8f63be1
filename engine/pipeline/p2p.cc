#include "engine/pipeline/p2p.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace meshtune::engine {
namespace {

using search_spaces::PipelineSchedule;
using Step = PipelineSchedule::Step;

// A transfer's identity: what it carries, independent of who posts it.
using Payload = std::tuple<P2pKind, int64_t, int64_t>;  // kind, mb, stage

Payload PayloadOf(const P2pOp& op) {
  return {op.kind, op.microbatch, op.virtual_stage};
}

std::string KindName(P2pKind kind) {
  return kind == P2pKind::kActivation ? "activation" : "gradient";
}

std::string DescribePayload(P2pKind kind, int64_t mb, int64_t stage) {
  return KindName(kind) + " (micro-batch " + std::to_string(mb) + ", stage " +
         std::to_string(stage) + ")";
}

std::string DescribeStep(const std::vector<Step>& steps, int64_t i) {
  const Step& s = steps[i];
  return "step " + std::to_string(i) + " (" +
         (s.kind == Step::Kind::kForward ? "forward" : "backward") +
         " micro-batch " + std::to_string(s.microbatch) + " chunk " +
         std::to_string(s.chunk) + ")";
}

// "before step 2 (forward micro-batch 1 chunk 0)" or "after its last step".
std::string DescribePosition(const std::vector<Step>& steps, int64_t before) {
  if (before == static_cast<int64_t>(steps.size())) {
    return "after its last step";
  }
  return "before " + DescribeStep(steps, before);
}

// What one step receives before it runs and sends after it, if anything.
struct StepTransfers {
  std::optional<P2pOp> input;   // a kRecv op
  std::optional<P2pOp> output;  // a kSend op
};

StepTransfers TransfersOf(const PipelineSchedule& schedule, int64_t rank,
                          const Step& step) {
  const int64_t pp = schedule.pp();
  const int64_t last = pp * schedule.vpp() - 1;
  const int64_t v = step.chunk * pp + rank;
  const int64_t mb = step.microbatch;
  StepTransfers t;
  if (step.kind == Step::Kind::kForward) {
    if (v > 0) {
      t.input =
          P2pOp{P2pDirection::kRecv, P2pKind::kActivation, (v - 1) % pp, mb, v};
    }
    if (v < last) {
      t.output = P2pOp{P2pDirection::kSend, P2pKind::kActivation, (v + 1) % pp,
                       mb, v + 1};
    }
  } else {
    if (v < last) {
      t.input =
          P2pOp{P2pDirection::kRecv, P2pKind::kGradient, (v + 1) % pp, mb, v};
    }
    if (v > 0) {
      t.output = P2pOp{P2pDirection::kSend, P2pKind::kGradient, (v - 1) % pp,
                       mb, v - 1};
    }
  }
  return t;
}

Status Problem(const std::string& what, const std::string& hint) {
  return Status::InvalidArgument(what, hint);
}

// Checks 2 of SimulateP2p for one rank.
Status CheckRankPlan(const PipelineSchedule& schedule, int64_t rank,
                     const std::vector<Step>& steps, const P2pPlan& plan) {
  const std::string who = "rank " + std::to_string(rank);
  // The schedule itself: a chunk's backward needs its forward's state.
  std::set<std::pair<int64_t, int64_t>> forward_done;  // (mb, chunk)
  for (int64_t i = 0; i < static_cast<int64_t>(steps.size()); ++i) {
    const auto key = std::make_pair(steps[i].microbatch, steps[i].chunk);
    if (steps[i].kind == Step::Kind::kForward) {
      forward_done.insert(key);
    } else if (forward_done.count(key) == 0) {
      // With a pipeline the warm-up puts every forward before its backward
      // (tests/search_spaces/pipeline_schedule_test.cc); only interleaving
      // on one rank, where the schedule has no warm-up, gets here.
      MESHTUNE_CHECK(schedule.pp() == 1);
      return Problem("schedule problem: " + who + " " + DescribeStep(steps, i) +
                         " runs before the forward of that micro-batch and "
                         "chunk",
                     "interleaving needs pp >= 2 (Megatron's rule); use vpp "
                     "1 with pp 1");
    }
  }

  // Which step consumes (recv) or produces (send) each payload, and the op
  // the plan should post for it.
  struct Need {
    int64_t step;
    P2pOp op;
    bool posted = false;
  };
  std::map<Payload, Need> recvs, sends;
  for (int64_t i = 0; i < static_cast<int64_t>(steps.size()); ++i) {
    const StepTransfers t = TransfersOf(schedule, rank, steps[i]);
    if (t.input) recvs.emplace(PayloadOf(*t.input), Need{i, *t.input});
    if (t.output) sends.emplace(PayloadOf(*t.output), Need{i, *t.output});
  }

  for (const P2pGroup& group : plan) {
    const std::string where =
        who + " " + DescribePosition(steps, group.before_step);
    for (const P2pOp& op : group.ops) {
      const bool is_recv = op.direction == P2pDirection::kRecv;
      auto& needs = is_recv ? recvs : sends;
      auto it = needs.find(PayloadOf(op));
      if (it == needs.end() || it->second.posted) {
        return Problem(
            "extra transfer: " + where + " posts " + DescribeP2pOp(op) +
                (it == needs.end() ? std::string(", which none of its steps ") +
                                         (is_recv ? "consumes" : "produces")
                                   : std::string(" a second time")),
            "post each transfer once, for a step of this rank");
      }
      Need& need = it->second;
      need.posted = true;
      if (op.peer != need.op.peer) {
        return Problem("wrong peer: " + where + " posts " + DescribeP2pOp(op) +
                           ", but its peer is rank " +
                           std::to_string(need.op.peer),
                       "stage v runs on pipeline rank v mod pp");
      }
      if (is_recv && group.before_step > need.step) {
        return Problem("recv after its consumer: " + where + " posts " +
                           DescribeP2pOp(op) + ", which its " +
                           DescribeStep(steps, need.step) + " consumes",
                       "post each recv in a group before its consumer step");
      }
      if (!is_recv && group.before_step <= need.step) {
        return Problem("send before its producer: " + where + " posts " +
                           DescribeP2pOp(op) + ", which its " +
                           DescribeStep(steps, need.step) + " produces",
                       "post each send in a group after its producer step");
      }
    }
  }
  // Missing transfers, earliest step first.
  for (int64_t i = 0; i < static_cast<int64_t>(steps.size()); ++i) {
    const StepTransfers t = TransfersOf(schedule, rank, steps[i]);
    for (const std::optional<P2pOp>& op : {t.input, t.output}) {
      if (!op) continue;
      const bool is_recv = op->direction == P2pDirection::kRecv;
      if ((is_recv ? recvs : sends).at(PayloadOf(*op)).posted) continue;
      return Problem(
          "missing transfer: " + who + " " + DescribeStep(steps, i) +
              (is_recv ? " consumes " : " produces ") +
              DescribePayload(op->kind, op->microbatch, op->virtual_stage) +
              (is_recv ? " from" : " for") + " rank " +
              std::to_string(op->peer) + ", but its plan never " +
              (is_recv ? "receives" : "sends") + " it",
          std::string("post one ") + (is_recv ? "recv" : "send") +
              " for every transfer of the rank's steps");
    }
  }
  return Status::Ok();
}

// Where an op sits: rank, group index, op index.
struct OpRef {
  int64_t rank, group, op;
};
// (kind, sender, receiver).
using Channel = std::tuple<P2pKind, int64_t, int64_t>;

}  // namespace

std::string DescribeP2pOp(const P2pOp& op) {
  const bool send = op.direction == P2pDirection::kSend;
  return std::string(send ? "send " : "recv ") +
         DescribePayload(op.kind, op.microbatch, op.virtual_stage) +
         (send ? " to rank " : " from rank ") + std::to_string(op.peer);
}

P2pPlan MakeP2pPlan(const PipelineSchedule& schedule, int64_t pp_rank) {
  MESHTUNE_CHECK(pp_rank >= 0 && pp_rank < schedule.pp());
  const std::vector<Step> steps = schedule.StepsForRank(pp_rank);
  const int64_t n = static_cast<int64_t>(steps.size());
  P2pPlan plan(n + 1);
  for (int64_t i = 0; i <= n; ++i) plan[i].before_step = i;
  // Interleaved steady state: a forward after the warm-up starts an
  // iteration with the backward right after it; the iteration's sends go
  // after the backward and its recvs before the forward.
  const int64_t warmup = schedule.WarmupSteps(pp_rank);
  auto starts_iteration = [&](int64_t i) {
    return schedule.interleaved() && i >= warmup &&
           steps[i].kind == Step::Kind::kForward;
  };
  // Two passes so that every group lists its sends first.
  for (int64_t i = 0; i < n; ++i) {
    const StepTransfers t = TransfersOf(schedule, pp_rank, steps[i]);
    if (t.output) {
      plan[i + (starts_iteration(i) ? 2 : 1)].ops.push_back(*t.output);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const StepTransfers t = TransfersOf(schedule, pp_rank, steps[i]);
    if (t.input) {
      const bool second_of_iteration = i > 0 && starts_iteration(i - 1);
      plan[i - (second_of_iteration ? 1 : 0)].ops.push_back(*t.input);
    }
  }
  return plan;
}

P2pPlan MakeNaiveP2pPlan(const PipelineSchedule& schedule, int64_t pp_rank) {
  MESHTUNE_CHECK(pp_rank >= 0 && pp_rank < schedule.pp());
  const std::vector<Step> steps = schedule.StepsForRank(pp_rank);
  P2pPlan plan;
  for (int64_t i = 0; i < static_cast<int64_t>(steps.size()); ++i) {
    const StepTransfers t = TransfersOf(schedule, pp_rank, steps[i]);
    if (t.input) plan.push_back(P2pGroup{i, {*t.input}});
    if (t.output) plan.push_back(P2pGroup{i + 1, {*t.output}});
  }
  return plan;
}

Status SimulateP2p(const PipelineSchedule& schedule) {
  std::vector<P2pPlan> plans;
  for (int64_t r = 0; r < schedule.pp(); ++r) {
    plans.push_back(MakeP2pPlan(schedule, r));
  }
  return SimulateP2p(schedule, plans);
}

Status SimulateP2p(const PipelineSchedule& schedule,
                   const std::vector<P2pPlan>& plans) {
  const int64_t pp = schedule.pp();
  if (static_cast<int64_t>(plans.size()) != pp) {
    return Problem("got " + std::to_string(plans.size()) +
                       " plans for pp=" + std::to_string(pp),
                   "pass one plan per pipeline rank");
  }
  std::vector<std::vector<Step>> steps(pp);
  for (int64_t r = 0; r < pp; ++r) steps[r] = schedule.StepsForRank(r);

  // 1. Shape.
  for (int64_t r = 0; r < pp; ++r) {
    const int64_t n = static_cast<int64_t>(steps[r].size());
    int64_t previous = 0;
    for (size_t g = 0; g < plans[r].size(); ++g) {
      const P2pGroup& group = plans[r][g];
      if (group.before_step < previous || group.before_step > n) {
        return Problem("rank " + std::to_string(r) + " group " +
                           std::to_string(g) + " is posted before step " +
                           std::to_string(group.before_step) + ", outside [" +
                           std::to_string(previous) + ", " + std::to_string(n) +
                           "]",
                       "post groups in step order, the last one at most "
                       "after the last step");
      }
      previous = group.before_step;
      for (const P2pOp& op : group.ops) {
        if (op.peer < 0 || op.peer >= pp) {
          return Problem("rank " + std::to_string(r) + " group " +
                             std::to_string(g) + " names peer rank " +
                             std::to_string(op.peer) + " outside [0, " +
                             std::to_string(pp) + ")",
                         "peers are pipeline ranks");
        }
      }
    }
  }

  // 2. Each rank on its own.
  for (int64_t r = 0; r < pp; ++r) {
    MESHTUNE_RETURN_IF_ERROR(CheckRankPlan(schedule, r, steps[r], plans[r]));
  }

  // 3. Channels: the k-th send meets the k-th recv.
  std::map<Channel, std::vector<OpRef>> channel_sends, channel_recvs;
  // counterpart[r][g][o]: where op o of group g of rank r meets its peer.
  std::vector<std::vector<std::vector<OpRef>>> counterpart(pp);
  for (int64_t r = 0; r < pp; ++r) {
    for (size_t g = 0; g < plans[r].size(); ++g) {
      for (size_t o = 0; o < plans[r][g].ops.size(); ++o) {
        const P2pOp& op = plans[r][g].ops[o];
        const OpRef ref{r, static_cast<int64_t>(g), static_cast<int64_t>(o)};
        if (op.direction == P2pDirection::kSend) {
          channel_sends[{op.kind, r, op.peer}].push_back(ref);
        } else {
          channel_recvs[{op.kind, op.peer, r}].push_back(ref);
        }
      }
    }
  }
  auto op_at = [&](const OpRef& ref) -> const P2pOp& {
    return plans[ref.rank][ref.group].ops[ref.op];
  };
  for (int64_t r = 0; r < pp; ++r) {
    counterpart[r].resize(plans[r].size());
    for (size_t g = 0; g < plans[r].size(); ++g) {
      counterpart[r][g].resize(plans[r][g].ops.size());
    }
  }
  for (const auto& [channel, sends] : channel_sends) {
    const std::vector<OpRef>& recvs = channel_recvs[channel];
    // Step 2 matched every send and recv to a step, and every rank runs
    // every (micro-batch, chunk), so the counts agree.
    MESHTUNE_CHECK(sends.size() == recvs.size());
    for (size_t k = 0; k < sends.size(); ++k) {
      const P2pOp& send = op_at(sends[k]);
      const P2pOp& recv = op_at(recvs[k]);
      if (PayloadOf(send) != PayloadOf(recv)) {
        return Problem(
            "mismatched message: " + KindName(send.kind) + " send " +
                std::to_string(k) + " from rank " +
                std::to_string(sends[k].rank) + " to rank " +
                std::to_string(recvs[k].rank) + " carries (micro-batch " +
                std::to_string(send.microbatch) + ", stage " +
                std::to_string(send.virtual_stage) +
                ") but the matching recv expects (micro-batch " +
                std::to_string(recv.microbatch) + ", stage " +
                std::to_string(recv.virtual_stage) + ")",
            "post the sends and the recvs of one channel in the same order");
      }
      counterpart[sends[k].rank][sends[k].group][sends[k].op] = recvs[k];
      counterpart[recvs[k].rank][recvs[k].group][recvs[k].op] = sends[k];
    }
  }

  // 4. The run. Each rank alternates between its groups and its steps;
  // steps never wait (check 2 put every recv in a group before its
  // consumer).
  std::vector<int64_t> next_group(pp, 0), next_step(pp, 0);
  std::vector<std::vector<std::vector<bool>>> met(pp);
  for (int64_t r = 0; r < pp; ++r) {
    met[r].resize(plans[r].size());
    for (size_t g = 0; g < plans[r].size(); ++g) {
      met[r][g].assign(plans[r][g].ops.size(), false);
    }
  }
  // True when rank r sits in group g (posted and not yet complete).
  auto in_group = [&](int64_t r, int64_t g) {
    return next_group[r] == g && g < static_cast<int64_t>(plans[r].size()) &&
           plans[r][g].before_step == next_step[r];
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < pp; ++r) {
      const int64_t n = static_cast<int64_t>(steps[r].size());
      while (true) {
        const int64_t g = next_group[r];
        if (in_group(r, g)) {
          bool complete = true;
          for (size_t o = 0; o < plans[r][g].ops.size(); ++o) {
            if (met[r][g][o]) continue;
            const OpRef& peer = counterpart[r][g][o];
            if (in_group(peer.rank, peer.group)) {
              met[r][g][o] = true;
              met[peer.rank][peer.group][peer.op] = true;
            } else {
              complete = false;
            }
          }
          if (!complete) break;
          ++next_group[r];
        } else if (next_step[r] < n) {
          ++next_step[r];
        } else {
          break;
        }
        progress = true;
      }
    }
  }

  std::string waits;
  for (int64_t r = 0; r < pp; ++r) {
    const int64_t g = next_group[r];
    if (g == static_cast<int64_t>(plans[r].size())) continue;
    for (size_t o = 0; o < plans[r][g].ops.size(); ++o) {
      if (met[r][g][o]) continue;
      const OpRef& peer = counterpart[r][g][o];
      const P2pOp& op = plans[r][g].ops[o];
      // The peer left every earlier group complete and does not sit in
      // this one, so the counterpart is in one of its later groups.
      MESHTUNE_CHECK(peer.group > next_group[peer.rank]);
      waits += std::string(waits.empty() ? "" : "; ") + "rank " +
               std::to_string(r) + " waits " +
               DescribePosition(steps[r], plans[r][g].before_step) + " to " +
               DescribeP2pOp(op) + ", but rank " + std::to_string(peer.rank) +
               " posts the matching " +
               (op.direction == P2pDirection::kSend ? "recv" : "send") +
               " in a later group, " +
               DescribePosition(steps[peer.rank],
                                plans[peer.rank][peer.group].before_step);
    }
  }
  if (!waits.empty()) {
    return Problem("deadlock: " + waits,
                   "post each send in one group with the recv its peer waits "
                   "in (Megatron's send_forward_recv_backward and "
                   "send_backward_recv_forward)");
  }
  return Status::Ok();
}

}  // namespace meshtune::engine
