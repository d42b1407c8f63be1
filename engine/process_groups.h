// ProcessGroups: the communicators of one rank, split from the world in
// Megatron's rank order tp-cp-ep-dp-pp (search_spaces::RankGrid is the
// source of truth for membership).
#ifndef MESHTUNE_ENGINE_PROCESS_GROUPS_H_
#define MESHTUNE_ENGINE_PROCESS_GROUPS_H_

#include <memory>

#include "engine/comm/communicator.h"
#include "search_spaces/parallel_config.h"

namespace meshtune::engine {

struct ProcessGroups {
  Communicator* world = nullptr;     // not owned
  std::unique_ptr<Communicator> tp;  // "tp"
  std::unique_ptr<Communicator> pp;  // "pp"
  std::unique_ptr<Communicator> dp;  // "dp" (dp·cp when cp > 1: "dp_cp")
  // "cp": the context-parallel ring, ranks that share (tp, dp, pp)
  // coordinates (Megatron's context_parallel_group); size 1 when cp == 1.
  std::unique_ptr<Communicator> cp;
  std::unique_ptr<Communicator> mp;  // "mp": tp × pp (grad-norm reduction)
  // "tp_cp": the ranks that split one micro-batch's sequences (tp shards
  // under sequence parallelism, cp chunks): the MoE aux loss counts over it.
  std::unique_ptr<Communicator> tp_cp;
  // Expert layers (Megatron's expert grid etp-ep-edp-pp over the same
  // ranks; search_spaces::RankGrid): "etp" splits one expert's FFN, "ep"
  // owns disjoint experts and exchanges tokens (all-to-all), "edp" holds
  // replicas of the same expert shards (their gradients are averaged and
  // the distributed optimizer shards their state over it), "emp" (etp × ep
  // × pp, the ranks of one edp position) sums the expert gradients' squared
  // norm. Built for every config; size 1 groups when ep = etp = 1.
  std::unique_ptr<Communicator> etp;
  std::unique_ptr<Communicator> ep;
  std::unique_ptr<Communicator> edp;
  std::unique_ptr<Communicator> emp;
  // "embd": first and last pipeline stage of this rank's (tp, dp) position
  // (tied word-embedding gradient); null on middle stages and when pp == 1.
  std::unique_ptr<Communicator> embd;

  int tp_rank() const { return tp->rank(); }
  int pp_rank() const { return pp->rank(); }
  int dp_rank() const { return dp->rank(); }
  int cp_rank() const { return cp->rank(); }
  bool first_stage() const { return pp->rank() == 0; }
  bool last_stage() const { return pp->rank() == pp->size() - 1; }
};

// Splits `world` (size == config.world()) into the groups above.
// Collective over `world`. REQUIRES: world->size() == config.world().
ProcessGroups MakeProcessGroups(Communicator* world,
                                const search_spaces::ParallelConfig& config);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_PROCESS_GROUPS_H_
