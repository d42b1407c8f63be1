// Test helper: the configurations the export round-trip tests run for every
// model preset (search_spaces::ModelPresets()): plain data parallelism,
// tp + sp + selective recompute + distributed optimizer, full uniform
// recompute in fp16, full block recompute in fp8 with cp and every fp8 and
// overlap switch, MoE expert parallelism (cp for dense models), interleaving
// (vpp) where the layer count allows it, and an embedding/loss-accounting
// pipeline split where one exists.
#ifndef MESHTUNE_TESTS_TUNER_EXPORT_ROUND_TRIP_H_
#define MESHTUNE_TESTS_TUNER_EXPORT_ROUND_TRIP_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner::testing {

struct RoundTripCase {
  std::string name;  // "<preset>/<variant>", for failure messages
  search_spaces::ModelSpec model;
  search_spaces::TrainingSpec training;
  search_spaces::ParallelConfig config;  // dp set; world = training.num_gpus
  int64_t gpus_per_node = 8;
};

inline std::vector<RoundTripCase> RoundTripCases() {
  using search_spaces::PipelineLayout;
  using search_spaces::Precision;
  using search_spaces::RecomputeGranularity;
  using search_spaces::RecomputeMethod;
  std::vector<RoundTripCase> cases;
  for (const search_spaces::ModelSpec& m : search_spaces::ModelPresets()) {
    const int64_t layers = m.num_layers;
    auto add = [&](const std::string& variant, search_spaces::ParallelConfig c,
                   Precision precision = Precision::kBf16) {
      RoundTripCase rc;
      rc.name = m.name + "/" + variant;
      rc.model = m;
      rc.training.precision = precision;
      rc.training.seq_length = m.seq_length;
      rc.training.global_batch_size =
          m.global_batch_size > 0 ? m.global_batch_size : 256;
      rc.training.num_gpus = c.world();
      rc.config = c;
      return &(cases.emplace_back(std::move(rc)));
    };

    search_spaces::ParallelConfig plain;
    plain.dp = 8;
    add("plain", plain);

    search_spaces::ParallelConfig selective;
    selective.tp = 2;
    selective.dp = 4;
    selective.sp = true;
    selective.mbs = 2;
    selective.dist_opt = true;
    selective.recompute.granularity = RecomputeGranularity::kSelective;
    add("tp-sp-selective-distopt", selective);

    search_spaces::ParallelConfig uniform;
    uniform.tp = 2;
    uniform.pp = PipelineLayout::Valid(layers, 2, 1) ? 2 : 1;
    uniform.dp = 4;
    uniform.recompute.granularity = RecomputeGranularity::kFull;
    uniform.recompute.method = RecomputeMethod::kUniform;
    uniform.recompute.num_layers = 1;
    add("full-uniform-fp16", uniform, Precision::kFp16)
        ->training.grad_reduce_in_bf16 = true;

    search_spaces::ParallelConfig block;
    block.tp = 4;
    block.cp = 2;
    block.dp = 2;
    block.sp = true;
    block.dist_opt = true;
    block.recompute.granularity = RecomputeGranularity::kFull;
    block.recompute.method = RecomputeMethod::kBlock;
    block.recompute.num_layers = 2;
    RoundTripCase* fp8 = add("full-block-fp8-cp", block, Precision::kFp8);
    fp8->training.fp8_param_gather = true;
    fp8->training.fp8_dot_product_attention = true;
    fp8->training.grad_reduce_in_bf16 = true;
    fp8->training.tp_comm_overlap = true;

    search_spaces::ParallelConfig experts;
    experts.tp = 2;
    experts.dp = 8;
    experts.dist_opt = true;
    if (m.is_moe()) {
      experts.ep = std::min<int64_t>(m.num_experts, 4);
      add("moe-ep", experts);
      // NVIDIA's MoE recipes: TE graphs of attention and the router, or
      // one graph of the whole step.
      add("moe-ep-te-graphs", experts)->training.cuda_graphs = {
          search_spaces::CudaGraphImpl::kTransformerEngine,
          search_spaces::kGraphAttn | search_spaces::kGraphMoeRouter |
              search_spaces::kGraphMoePreprocess};
      add("moe-ep-full-iteration", experts)->training.cuda_graphs = {
          search_spaces::CudaGraphImpl::kLocal,
          search_spaces::kGraphFullIteration};
      // The fused grouped MLP (--use-transformer-engine-op-fuser).
      add("moe-ep-op-fuser", experts)->model.use_transformer_engine_op_fuser =
          true;
    } else {
      // tp_comm_overlap without sp: not emitted (Megatron needs sp for it).
      experts.cp = 2;
      experts.dp = 4;
      add("cp-no-sp", experts)->training.tp_comm_overlap = true;
      // Whole layers in TE graphs (an impl with Megatron's default scope).
      add("layer-graphs", plain)->training.cuda_graphs.impl =
          search_spaces::CudaGraphImpl::kTransformerEngine;
    }

    // Interleaving: the first (pp, vpp) with a valid layout, which either
    // divides evenly (--num-layers-per-virtual-pipeline-stage) or needs the
    // embedding/loss accounting (--virtual-pipeline-model-parallel-size).
    bool even_done = false, accounted_done = false;
    for (int64_t pp : {2, 4, 8, 16}) {
      for (int64_t vpp : {2, 3, 4, 6}) {
        if (!PipelineLayout::Valid(layers, pp, vpp)) continue;
        const bool accounts =
            PipelineLayout::AccountsEmbeddingAndLoss(layers, pp, vpp);
        if (accounts ? accounted_done : even_done) continue;
        search_spaces::ParallelConfig c;
        c.tp = 8;
        c.pp = pp;
        c.vpp = vpp;
        c.dp = 2;
        c.sp = true;
        c.mbs = 1;
        c.dist_opt = true;
        c.recompute.granularity = RecomputeGranularity::kSelective;
        add(accounts ? "vpp-accounted" : "vpp-even", c);
        (accounts ? accounted_done : even_done) = true;
      }
    }
    // A plain pipeline split that needs the accounting flags.
    for (int64_t pp = 2; pp <= 32; ++pp) {
      if (PipelineLayout::Valid(layers, pp, 1) &&
          PipelineLayout::AccountsEmbeddingAndLoss(layers, pp, 1)) {
        search_spaces::ParallelConfig c;
        c.pp = pp;
        c.tp = 8;
        c.sp = true;
        add("pp-accounted", c);
        break;
      }
    }
  }
  return cases;
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_EXPORT_ROUND_TRIP_H_
