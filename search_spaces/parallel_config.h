// ParallelConfig: one way to split a model over GPUs (Megatron semantics).
//
// world = tp · pp · cp · dp; ep carves expert layers out of dp · cp (expert
// tensor parallel size = tp). vpp = 1 means the plain 1F1B schedule.
#ifndef MESHTUNE_SEARCH_SPACES_PARALLEL_CONFIG_H_
#define MESHTUNE_SEARCH_SPACES_PARALLEL_CONFIG_H_

#include <cstdint>
#include <string>

namespace meshtune::search_spaces {

// Megatron --recompute-granularity.
enum class RecomputeGranularity { kNone, kSelective, kFull };
// Megatron --recompute-method (meaningful only for kFull).
enum class RecomputeMethod { kUniform, kBlock };

struct Recompute {
  RecomputeGranularity granularity = RecomputeGranularity::kNone;
  RecomputeMethod method = RecomputeMethod::kUniform;
  // Megatron --recompute-num-layers. uniform: layers per recompute chunk (1 =
  // every layer checkpointed individually); block: layers per pipeline stage
  // (per virtual chunk) that are recomputed, the rest keep activations.
  int64_t num_layers = 1;

  bool operator==(const Recompute& o) const {
    return granularity == o.granularity &&
           (granularity != RecomputeGranularity::kFull ||
            (method == o.method && num_layers == o.num_layers));
  }
};

struct ParallelConfig {
  int64_t tp = 1;   // tensor_model_parallel_size
  int64_t pp = 1;   // pipeline_model_parallel_size
  int64_t vpp = 1;  // virtual_pipeline_model_parallel_size (1 = no interleave)
  int64_t cp = 1;   // context_parallel_size
  int64_t dp = 1;   // data-parallel size (derived: world / (tp·pp·cp))
  int64_t ep = 1;   // expert_model_parallel_size
  bool sp = false;  // sequence_parallel
  int64_t mbs = 1;  // micro_batch_size
  Recompute recompute;
  bool dist_opt = false;  // use_distributed_optimizer

  int64_t world() const { return tp * pp * cp * dp; }
  // Micro-batches per pipeline per step: gbs / (mbs · dp).
  int64_t num_microbatches(int64_t gbs) const { return gbs / (mbs * dp); }

  bool operator==(const ParallelConfig& o) const {
    return tp == o.tp && pp == o.pp && vpp == o.vpp && cp == o.cp &&
           dp == o.dp && ep == o.ep && sp == o.sp && mbs == o.mbs &&
           recompute == o.recompute && dist_opt == o.dist_opt;
  }
};

const char* ToString(RecomputeGranularity g);
const char* ToString(RecomputeMethod m);
// "none", "selective", "full" (uniform, every layer), "full:block:4", ...
std::string ToString(const Recompute& r);
// Compact one-line description: "tp8 pp8 vpp3 cp1 ep1 dp16 sp mbs1 selective
// dist_opt".
std::string ToString(const ParallelConfig& c);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_PARALLEL_CONFIG_H_
