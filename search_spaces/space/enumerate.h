// Enumeration of every structurally valid ParallelConfig under Megatron-Core's
// rules (docs/design.md §2) and the user's pins. Memory feasibility is not
// decided here: the cost model does that.
//
// Candidates that break a rule are not errors: they are counted per reason
// code (stable snake_case strings used in reports and JSON "pruned"). Rules
// and their Megatron-LM sources are listed in enumerate.cc. Codes:
//   nonpositive_size                  a size (tp, pp, vpp, cp, dp, ep, mbs),
//                                     num_gpus or gbs is < 1
//   world_not_divisible               tp, pp or cp (or a pinned dp) does not
//                                     divide what is left of the GPU count,
//                                     or tp·pp·cp·dp != num_gpus
//   tp_exceeds_nvlink_domain          unpinned tp above SearchSpace::max_tp
//                                     (default the NVLink domain); search
//                                     only, CheckConfig accepts such a tp
//   tp_not_dividing_heads             num_attention_heads % tp != 0
//   tp_not_dividing_query_groups      num_query_groups neither a multiple
//                                     nor a divisor of tp
//   layers_not_divisible_by_pp        neither num_layers nor num_layers + 2
//                                     (embedding and loss as layers) divide by
//                                     pp
//   seq_not_divisible_by_cp           cp > 1 and seq_length % (2·cp) != 0
//   gbs_not_divisible_by_mbs_dp       gbs % (mbs·dp) != 0 (or gbs % dp != 0,
//                                     when no mbs can work)
//   ep_not_dividing_experts           ep > 1 and num_experts % ep != 0
//                                     (always for a dense model)
//   ep_not_dividing_dp_cp             (dp·cp) % ep != 0 (expert grid with
//                                     etp = tp)
//   vpp_requires_pp                   vpp > 1 with pp < 2
//   layers_not_divisible_by_pp_vpp    the same for pp·vpp (PipelineLayout)
//   microbatches_vs_pp                vpp > 1 and micro-batches % pp != 0
//   sp_requires_tp                    sequence parallel with tp == 1
//   moe_tp_requires_sp                an MoE model with tp > 1 and no
//                                     sequence parallelism
//   recompute_num_layers_out_of_range full recompute with num_layers outside
//                                     [1, num_layers/(pp·vpp)]
//   mamba_heads_not_divisible_by_tp   Mamba-2 heads or groups % tp != 0
//   mamba_heads_not_divisible_by_cp   Mamba-2 heads per tp rank % cp != 0
//   mtp_with_cp                       MTP layers with cp > 1 (Megatron has
//                                     no MTP with context parallelism)
//   etp_not_dividing_expert_ffn       expert FFN % etp != 0
//   expert_bias_requires_etp_1        etp > 1 with add_bias_linear set
//   expert_grid_not_dividing_world    etp·ep does not divide tp·cp·dp (etp
//                                     != tp; with etp == tp the rule is
//                                     ep_not_dividing_dp_cp)
//   ep_overlap_preconditions          --overlap-moe-expert-parallel-comm
//                                     without ep > 1, the alltoall/flex
//                                     dispatcher, vpp when pp > 1, or with
//                                     full recompute or > 1 MTP layer
//
// Layouts: (pp, vpp) uses Megatron's even split where it exists, otherwise
// each member of PipelineLayout::UnevenFamily (first/last virtual stage
// lighter or heavier than the equal middle ones, vpp <= 8). MoE models also
// search expert TP over 1, 2, 4, 8 (up to max_tp) and tp.
//
// Rules are applied axis by axis in the order tp, pp, cp, dp, ep, mbs, vpp,
// sp, recompute, dist_opt; a candidate is pruned under the first rule it
// breaks, and CheckConfig checks in the same order. A rejected partial
// choice counts once (a tp that breaks a rule counts 1, not once for every
// completion of it), so `pruned` says which rules cut the space and
// `--tp 3` on a 96-head model gives {"world_not_divisible": 1} or
// {"tp_not_dividing_heads": 1}, not a count of phantom configurations.
//
// Axis domains without pins: tp over divisors of num_gpus up to max_tp; pp
// over divisors of num_gpus/tp; cp over divisors of num_gpus/(tp·pp); dp
// derived; ep over divisors of num_experts (1 for dense); mbs over powers of
// two up to max_mbs; vpp over divisors of num_layers/pp (1 when pp == 1); sp
// {false, true} when tp > 1 else {false}; recompute none, selective, full
// uniform 1, full block k for k = 1, 2, 4, ... below the layers per virtual
// stage (block with all layers equals uniform 1 and is not repeated);
// dist_opt {false, true} when dp·cp > 1 else {false}. Pins replace a domain
// (sorted, duplicates dropped) and are checked by the same rules.
#ifndef MESHTUNE_SEARCH_SPACES_SPACE_ENUMERATE_H_
#define MESHTUNE_SEARCH_SPACES_SPACE_ENUMERATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/space/search_space.h"
#include "search_spaces/training_spec.h"

namespace meshtune::search_spaces {

struct Enumeration {
  // Valid configurations, in the nested order tp, pp, cp, ep, mbs, vpp, sp,
  // recompute, dist_opt (each ascending; false before true).
  std::vector<ParallelConfig> configs;
  std::map<std::string, int64_t> pruned;  // reason code -> count
  int64_t considered = 0;                 // configs.size() + sum(pruned)
};

// Checks one fully given configuration against the rules. Returns "" when
// valid, otherwise the reason code; `detail` (optional) gets a one-line
// human explanation ("tp 3 does not divide num_attention_heads 96").
std::string CheckConfig(const ModelSpec& model, const TrainingSpec& training,
                        const ClusterSpec& cluster, const ParallelConfig& c,
                        std::string* detail = nullptr);

// Why Megatron refuses --overlap-moe-expert-parallel-comm for `c` on
// `model` ("needs ep > 1", ...; the rule ep_overlap_preconditions), or ""
// when its preconditions hold.
std::string EpOverlapRefusal(const ModelSpec& model, const ParallelConfig& c);

// Every valid configuration of `training.num_gpus` GPUs within `space`.
Enumeration EnumerateConfigs(const ModelSpec& model,
                             const TrainingSpec& training,
                             const ClusterSpec& cluster,
                             const SearchSpace& space);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_SPACE_ENUMERATE_H_
