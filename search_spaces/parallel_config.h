// ParallelConfig: one way to split a model over GPUs (Megatron semantics).
//
// world = tp · pp · cp · dp for the dense layers. The routed experts use a
// second grid over the same ranks, etp · ep · edp · pp (Megatron's "MoE
// parallel folding", parallel_state.py): ep may span dp, cp and tp ranks, and
// the expert data-parallel size edp = world / (etp · ep · pp) shards the
// expert optimizer state. vpp = 1 means the plain 1F1B schedule.
#ifndef MESHTUNE_SEARCH_SPACES_PARALLEL_CONFIG_H_
#define MESHTUNE_SEARCH_SPACES_PARALLEL_CONFIG_H_

#include <cstdint>
#include <string>

namespace meshtune::search_spaces {

// Megatron --recompute-granularity.
enum class RecomputeGranularity { kNone, kSelective, kFull };
// Megatron --recompute-method (meaningful only for kFull).
enum class RecomputeMethod { kUniform, kBlock };

// Megatron --recompute-modules (selective granularity), as bits. core_attn is
// Megatron's default; mla_up_proj and moe_act are output-discarding
// checkpoints (docs/sources.md §2.6).
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1u << 0,
  kRecomputeMlp = 1u << 1,
  kRecomputeMoe = 1u << 2,
  kRecomputeMoeAct = 1u << 3,
  kRecomputeLayernorm = 1u << 4,
  kRecomputeMlaUpProj = 1u << 5,
  kRecomputeSharedExperts = 1u << 6,
};

struct Recompute {
  RecomputeGranularity granularity = RecomputeGranularity::kNone;
  RecomputeMethod method = RecomputeMethod::kUniform;
  // Megatron --recompute-num-layers. uniform: layers per recompute chunk (1 =
  // every layer checkpointed individually); block: layers per pipeline stage
  // (per virtual chunk) that are recomputed, the rest keep activations.
  int64_t num_layers = 1;
  // Selective only: the modules recomputed (RecomputeModule bits). Last, so
  // {granularity, method, num_layers} initialisers keep their meaning.
  uint32_t modules = kRecomputeCoreAttn;

  bool operator==(const Recompute& o) const {
    return granularity == o.granularity &&
           (granularity != RecomputeGranularity::kFull ||
            (method == o.method && num_layers == o.num_layers)) &&
           (granularity != RecomputeGranularity::kSelective ||
            modules == o.modules);
  }
};

struct ParallelConfig {
  int64_t tp = 1;   // tensor_model_parallel_size
  int64_t pp = 1;   // pipeline_model_parallel_size
  int64_t vpp = 1;  // virtual_pipeline_model_parallel_size (1 = no interleave)
  int64_t cp = 1;   // context_parallel_size
  int64_t dp = 1;   // data-parallel size (derived: world / (tp·pp·cp))
  int64_t ep = 1;   // expert_model_parallel_size
  // expert_tensor_parallel_size; 0 = tp (Megatron's default).
  int64_t etp = 0;
  bool sp = false;  // sequence_parallel
  int64_t mbs = 1;  // micro_batch_size
  Recompute recompute;
  bool dist_opt = false;  // use_distributed_optimizer
  // Uneven pipeline layout (Megatron --pipeline-model-parallel-layout, e.g.
  // DeepSeek-V3's "Et|(tt|)*30mL"): the first virtual stage (rank 0, chunk
  // 0) holds layout_first_layers decoder layers besides the embedding, the
  // last one (last rank, last chunk) layout_last_layers besides the MTP
  // layers and the loss, and every other virtual stage an equal share of the
  // rest. -1 = Megatron's even split, with the embedding/loss accounting
  // where needed (search_spaces/pipeline_layout.h).
  int64_t layout_first_layers = -1;
  int64_t layout_last_layers = -1;

  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  bool uneven_layout() const { return layout_first_layers >= 0; }
  int64_t world() const { return tp * pp * cp * dp; }
  // Micro-batches per pipeline per step: gbs / (mbs · dp).
  int64_t num_microbatches(int64_t gbs) const { return gbs / (mbs * dp); }

  bool operator==(const ParallelConfig& o) const {
    return tp == o.tp && pp == o.pp && vpp == o.vpp && cp == o.cp &&
           dp == o.dp && ep == o.ep && expert_tp() == o.expert_tp() &&
           sp == o.sp && mbs == o.mbs && recompute == o.recompute &&
           dist_opt == o.dist_opt &&
           layout_first_layers == o.layout_first_layers &&
           layout_last_layers == o.layout_last_layers;
  }
};

const char* ToString(RecomputeGranularity g);
const char* ToString(RecomputeMethod m);
// "none", "selective", "full" (uniform, every layer), "full:block:4", ...
std::string ToString(const Recompute& r);
// "core_attn+mla_up_proj" (Megatron's names, joined by '+').
std::string RecomputeModulesToString(uint32_t modules);
// Compact one-line description: "tp8 pp8 vpp3 cp1 ep1 dp16 sp mbs1 selective
// dist_opt"; "etp1" follows ep when it differs from tp, "layout1/0" (first
// and last virtual stage layers) ends an uneven layout, and selective
// recompute names non-default modules ("selective:core_attn+mla_up_proj").
std::string ToString(const ParallelConfig& c);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_PARALLEL_CONFIG_H_
