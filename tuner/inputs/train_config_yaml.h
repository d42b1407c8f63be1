// The config file of `tune train --config FILE`: the YAML that
// `tune search --out FILE` writes (tuner/render/report_yaml.cc), read back into
// an engine::TrainConfig.
//
// Sections and keys follow Megatron-LM argument names (docs/design.md §2):
//   model:        the model (a mapping as in search_spaces/models/*.yaml,
//                 or a preset name such as `model: gpt-tiny`)
//   parallelism:  tensor_model_parallel_size, pipeline_model_parallel_size,
//                 virtual_pipeline_model_parallel_size (null = 1),
//                 context_parallel_size, expert_model_parallel_size,
//                 data_parallel_size, sequence_parallel,
//                 use_distributed_optimizer, recompute_granularity,
//                 recompute_method, recompute_num_layers (null when not
//                 full), account_for_{embedding,loss}_in_pipeline_split
//                 (derived from the sizes; checked for type only)
//   training:     micro_batch_size, global_batch_size, seq_length, and the
//                 planning keys precision, grad_reduce_in_bf16,
//                 fp8_param_gather, tp_comm_overlap,
//                 overlap_moe_expert_parallel_comm, train_tokens (checked
//                 for type only: the CPU engine trains in fp32). Optional
//                 engine keys, also Megatron's names: train_iters, lr,
//                 min_lr, lr_warmup_iters, lr_decay_iters, lr_decay_style,
//                 weight_decay, clip_grad, adam_beta1, adam_beta2, adam_eps,
//                 init_method_std, hidden_dropout, attention_dropout,
//                 seed, data_path, save, load,
//                 save_interval, log_interval.
//   cluster:      preset, num_gpus, gpus_per_node (planning only: training
//                 runs on this machine; checked for type only)
//   search:       db (string), id, rank, candidate_id (positive integers),
//                 predicted_step_time_s (a number >= 0): the recorded
//                 search candidate this config is (tuner/inputs/search_link.h);
//                 all five keys are required when the section is present
// Every section is optional, so a hand-written file may hold just a few
// keys; absent keys keep TrainConfig's defaults. Errors are one line
// `file:line: message` with a hint (search_spaces/yaml_util.h), exit 2.
#ifndef MESHTUNE_TUNER_INPUTS_TRAIN_CONFIG_YAML_H_
#define MESHTUNE_TUNER_INPUTS_TRAIN_CONFIG_YAML_H_

#include <optional>
#include <string>
#include <vector>

#include "engine/train_config.h"
#include "search_spaces/status.h"
#include "tuner/inputs/search_link.h"

namespace meshtune::tuner {

// What a config file sets.
struct TrainFileConfig {
  // model, parallel, global_batch_size, seq_length, optimizer, checkpoint
  // and log settings. Keys the file does not have keep TrainConfig's
  // defaults; global_batch_size, seq_length and train_iters stay 0 when
  // absent (the caller fills them from flags or the model).
  engine::TrainConfig config;
  bool has_model = false;              // the file has a model: section
  std::vector<std::string> data_path;  // training.data_path (may be empty)
  std::optional<SearchLink> search;    // the search: section, when present
};

// Parses YAML text; `source` names the file in error locations.
StatusOr<TrainFileConfig> ParseTrainConfigYaml(const std::string& text,
                                               const std::string& source);

// Reads and parses `path` (NotFound naming --config when it is missing).
StatusOr<TrainFileConfig> ReadTrainConfigYaml(const std::string& path);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INPUTS_TRAIN_CONFIG_YAML_H_
