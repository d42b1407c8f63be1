#include "tuner/render/report_yaml.h"

#include <cstdio>
#include <sstream>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/yaml_util.h"
#include "tuner/io/output_file.h"
#include "tuner/io/version.h"

namespace meshtune::tuner {
namespace {

using search_spaces::RecomputeGranularity;

// Strings go out double-quoted: YAML would retype names like "1.3b" or
// "yes" (search_spaces/yaml_util.h).
using search_spaces::yaml_util::DoubleQuoted;

const char* Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string ConfigToYaml(const Inputs& in, const costmodel::Estimate& e,
                         const SearchLink* search) {
  const auto& m = in.model;
  const auto& c = e.config;
  const auto& t = in.training;
  std::ostringstream y;
  y.precision(12);
  y << "# Written by tune " << MESHTUNE_VERSION << " (" << MESHTUNE_GIT_REVISION
    << ").\n";
  char line[256];
  std::snprintf(
      line, sizeof(line),
      "# Predicted: step time %.3f s, %.1f tokens/s/GPU, MFU %.1f %%, "
      "%.2f GiB per GPU, %.1f days for %.4g tokens (calibration: %s).\n",
      e.step_time_s, e.tokens_per_s_per_gpu, 100 * e.mfu,
      e.memory.total_bytes() / (1024.0 * 1024.0 * 1024.0), e.days_to_train,
      t.train_tokens, e.calibration.c_str());
  y << line;
  if (in.cluster.memory_headroom_gib > 0) {
    std::snprintf(line, sizeof(line),
                  "# Memory headroom: %.2f GiB per GPU kept free "
                  "(--memory-headroom); usable %.2f GiB.\n",
                  in.cluster.memory_headroom_gib, in.cluster.UsableMemoryGib());
    y << line;
  }
  if (search_spaces::IsNearMemoryCapacity(e.memory.total_bytes(),
                                          e.memory_capacity_bytes)) {
    // A comment, not a key: `tune train --config` and `tune launch
    // --config` read this file and accept only their own keys.
    std::snprintf(
        line, sizeof(line),
        "# near_capacity: true -- %.1f %% of the usable memory; allocator "
        "fragmentation varies from run to run, consider --memory-headroom.\n",
        100 * e.memory.total_bytes() / e.memory_capacity_bytes);
    y << line;
  }
  y << "# Keys follow Megatron-LM argument names.\n";

  // The whole model (search_spaces/presets ModelToYaml), so that `tune
  // launch --config` and `tune train --config` read back the model that was
  // costed: MLA, MoE routing, hybrid layers, tokenizer and recipe included.
  y << "model:\n";
  y << search_spaces::ModelToYaml(m, "  ");

  const bool full = c.recompute.granularity == RecomputeGranularity::kFull;
  y << "parallelism:\n";
  y << "  tensor_model_parallel_size: " << c.tp << "\n";
  y << "  pipeline_model_parallel_size: " << c.pp << "\n";
  y << "  virtual_pipeline_model_parallel_size: ";
  if (c.vpp > 1) {
    y << c.vpp << "\n";
  } else {
    y << "null\n";
  }
  // Uneven layer counts: the embedding and the loss count as pipeline
  // layers (Megatron --account-for-{embedding,loss}-in-pipeline-split).
  const bool accounts = search_spaces::PipelineLayout::AccountsEmbeddingAndLoss(
      m.num_layers, c.pp, c.vpp);
  y << "  account_for_embedding_in_pipeline_split: " << Bool(accounts) << "\n";
  y << "  account_for_loss_in_pipeline_split: " << Bool(accounts) << "\n";
  y << "  context_parallel_size: " << c.cp << "\n";
  y << "  expert_model_parallel_size: " << c.ep << "\n";
  y << "  data_parallel_size: " << c.dp << "\n";
  y << "  sequence_parallel: " << Bool(c.sp) << "\n";
  y << "  use_distributed_optimizer: " << Bool(c.dist_opt) << "\n";
  y << "  recompute_granularity: "
    << (c.recompute.granularity == RecomputeGranularity::kNone
            ? "null"
            : search_spaces::ToString(c.recompute.granularity))
    << "\n";
  y << "  recompute_method: "
    << (full ? search_spaces::ToString(c.recompute.method) : "null") << "\n";
  y << "  recompute_num_layers: ";
  if (full) {
    y << c.recompute.num_layers << "\n";
  } else {
    y << "null\n";
  }

  y << "training:\n";
  y << "  micro_batch_size: " << c.mbs << "\n";
  y << "  global_batch_size: " << t.global_batch_size << "\n";
  y << "  seq_length: " << t.seq_length << "\n";
  y << "  precision: " << search_spaces::ToString(t.precision) << "\n";
  y << "  grad_reduce_in_bf16: " << (t.grad_reduce_in_bf16 ? "true" : "false")
    << "\n";
  y << "  fp8_param_gather: " << (t.fp8_param_gather ? "true" : "false")
    << "\n";
  y << "  tp_comm_overlap: " << Bool(t.tp_comm_overlap && c.sp && c.tp > 1)
    << "\n";
  y << "  overlap_moe_expert_parallel_comm: " << Bool(t.moe_ep_overlap) << "\n";
  y << "  fp8_dot_product_attention: " << Bool(t.fp8_dot_product_attention)
    << "\n";
  y << "  cuda_graph_impl: " << search_spaces::ToString(t.cuda_graphs.impl)
    << "\n";
  // Comma-joined, the form --cuda-graph-scope and the config file read.
  y << "  cuda_graph_scope: "
    << DoubleQuoted(
           search_spaces::CudaGraphScopeString(t.cuda_graphs.scope, ','))
    << "\n";
  y << "  train_tokens: " << t.train_tokens << "\n";

  y << "cluster:\n";
  y << "  preset: " << DoubleQuoted(in.cluster.name) << "\n";
  y << "  num_gpus: " << t.num_gpus << "\n";
  y << "  gpus_per_node: " << in.cluster.gpus_per_node << "\n";

  if (search != nullptr) {
    // Where the prediction lives: `tune train --config` stores its run
    // against this candidate when it records into the same database.
    y << "search:\n";
    y << "  db: " << DoubleQuoted(search->db) << "\n";
    y << "  id: " << search->search_id << "\n";
    y << "  rank: " << search->rank << "\n";
    y << "  candidate_id: " << search->candidate_id << "\n";
    y << "  predicted_step_time_s: " << search->predicted_step_time_s << "\n";
  }
  return y.str();
}

Status WriteConfigYaml(const std::string& path, const Inputs& in,
                       const costmodel::Estimate& e, const SearchLink* search) {
  return WriteOutputFile(path, ConfigToYaml(in, e, search), "--out");
}

}  // namespace meshtune::tuner
