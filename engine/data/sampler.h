// Megatron's pretraining sampler (megatron/legacy/data/data_samplers.py,
// MegatronPretrainingSampler): which samples each data-parallel rank reads
// for each micro-batch of the global batch that starts at `consumed`
// samples. Both trainers (engine/trainer.cc, engine/cuda/trainer.cc) read
// their data through it, so a CPU and a GPU run of one config see the same
// tokens in the same order, in every layout.
#ifndef MESHTUNE_ENGINE_DATA_SAMPLER_H_
#define MESHTUNE_ENGINE_DATA_SAMPLER_H_

#include <cstdint>

#include "engine/data/dataset.h"

namespace meshtune::engine::data {

class PretrainingSampler {
 public:
  // `dataset` is not owned and must outlive the sampler. mbs >= 1,
  // dp >= 1, 0 <= dp_rank < dp.
  PretrainingSampler(const TokenDataset* dataset, int64_t mbs, int64_t dp,
                     int64_t dp_rank);

  // The first of the mbs samples of micro-batch `microbatch` (0-based, in
  // the current global batch): consumed + microbatch·mbs·dp + dp_rank·mbs.
  int64_t FirstSample(int64_t consumed, int64_t microbatch) const;

  // That micro-batch's tokens and next-token targets, [seq · mbs] each,
  // sequence-major: sample bi's token si at row si·mbs + bi (the layout of
  // Megatron's [s, b] activations).
  void Load(int64_t consumed, int64_t microbatch, int32_t* tokens,
            int32_t* targets) const;

 private:
  const TokenDataset* dataset_;
  int64_t mbs_, dp_, dp_rank_;
};

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_SAMPLER_H_
