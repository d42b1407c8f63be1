// Inputs shared by `tune search` and `tune estimate`: the flags as typed, and
// their resolution into the problem vocabulary (model, cluster, training,
// search space).
//
// Flags are kept as strings until resolution so that every malformed value
// ("--gpus -8", "--tokens 3X", "--tp 8,a") produces one Status with a message
// naming the flag and a hint naming the fix, instead of a CLI11 type error.
#ifndef MESHTUNE_TUNER_INPUTS_INPUTS_H_
#define MESHTUNE_TUNER_INPUTS_INPUTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/limits.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/space/search_space.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"

namespace CLI {
class App;
}  // namespace CLI

namespace meshtune::tuner {

// The GPU preset used when --gpu is absent (the report says so).
inline constexpr const char* kDefaultGpu = "a100-80g";
// Token budget used when --tokens is absent: GPT-3's 300B tokens.
inline constexpr const char* kDefaultTokens = "300B";

// Flags exactly as given on the command line. Empty string = not given.
struct InputFlags {
  std::string model;
  std::string gpu;
  std::string gpus;
  std::string gpus_per_node;
  std::string gbs;
  std::string seq_len;
  std::string precision = "bf16";
  std::string tokens = kDefaultTokens;
  std::string space_file;  // search only
  // --memory-headroom: GiB per GPU ("4", "4GiB") or a percent of the GPU's
  // memory ("5%"); replaces the cluster file's memory_headroom_gib when
  // given (ParseMemoryHeadroom).
  std::string memory_headroom;

  // Pins: comma lists for search, single values for estimate. etp is
  // Megatron's expert_tensor_parallel_size (MoE models only).
  std::string tp, pp, vpp, cp, ep, etp, dp, mbs, recompute;
  std::optional<bool> sp;        // --sp / --no-sp
  std::optional<bool> dist_opt;  // --dist-opt / --no-dist-opt

  // Megatron --grad-reduce-in-bf16 and --fp8-param-gather (fp8 only).
  bool grad_reduce_in_bf16 = false;
  bool fp8_param_gather = false;
  // Megatron --tp-comm-overlap (Transformer Engine userbuffers; applies to
  // configurations with sequence parallelism and tp > 1).
  bool tp_comm_overlap = false;
  // Megatron --overlap-moe-expert-parallel-comm (exported with
  // --delay-wgrad-compute): MoE all-to-alls overlap the partner
  // micro-batch's compute; plans must meet its preconditions.
  bool moe_ep_overlap = false;
  // Megatron --fp8-dot-product-attention (fp8 --precision only): core
  // attention in FP8.
  bool fp8_dot_product_attention = false;
  // Megatron --cuda-graph-impl and --cuda-graph-scope (the scope's values
  // joined by commas): which modules launch from CUDA graphs
  // (search_spaces/cuda_graphs.h; the cost model's host-launch term).
  std::string cuda_graph_impl;
  std::string cuda_graph_scope;

  // Results database (tuner/store/results_db.h): --db PATH, --no-db. Registered
  // by the commands that use a database, not by AddInputFlags.
  std::string db;
  bool no_db = false;
};

// Registers the flags above on `app` (a CLI11 subcommand). `pins_are_lists`
// selects the help wording (search: comma lists; estimate: one value).
// `flags` must outlive the parse.
void AddInputFlags(CLI::App* app, InputFlags* flags, bool pins_are_lists);

// Everything a search or an estimate needs, resolved and validated.
struct Inputs {
  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;
  bool gpu_defaulted = false;  // true when --gpu was absent
  search_spaces::TrainingSpec training;
  search_spaces::SearchSpace space;  // flags merged with --space (search)
  int64_t num_nodes() const;
};

// Resolves presets/files and validates numbers, each size bounded by
// search_spaces/limits.h so that products such as gbs x seq_len cannot
// overflow. Errors are InvalidArgument or NotFound (exit 2) with a one-line
// message and a hint; IoError (exit 1) only when a regular file cannot be
// read.
StatusOr<Inputs> ResolveInputs(const InputFlags& flags);

// For `tune estimate`: the single configuration the pins describe. Missing
// axes default to tp=pp=cp=ep=vpp=mbs=1, etp = tp, sp off, recompute none,
// dist_opt off; dp is derived as gpus / (tp·pp·cp) and must divide evenly.
StatusOr<search_spaces::ParallelConfig> SingleConfigFromFlags(
    const InputFlags& flags, int64_t num_gpus);

// Value parsers (exposed for tests). `flag` names the flag in messages.
// A positive integer ("1024").
StatusOr<int64_t> ParsePositiveInt(const std::string& text,
                                   const std::string& flag);
// A positive integer at most limit.max (search_spaces/limits.h). Above it,
// or too large for int64_t: "<flag>: <text> is above the limit of <max>
// <unit>" (the number as typed), with a hint naming real values.
StatusOr<int64_t> ParseSize(const std::string& text, const std::string& flag,
                            const search_spaces::SizeLimit& limit);
// A comma list of positive integers ("4,8,16").
StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text,
                                            const std::string& flag);
// The same, each item at most limit.max (the ParseSize message above).
StatusOr<std::vector<int64_t>> ParseIntList(
    const std::string& text, const std::string& flag,
    const search_spaces::SizeLimit& limit);
// A token count: "300e9", "300B", "1.4T", "500M", "2e12", "300000000000";
// at most limits::kMaxTrainTokens.
StatusOr<double> ParseTokenCount(const std::string& text);
// One recompute mode: none | selective | full | full:N | full:uniform:N |
// full:block:N. With `any_full`, a bare "full" means every full variant
// (num_layers 0, the SearchSpace convention); otherwise uniform with 1 layer.
StatusOr<search_spaces::Recompute> ParseRecompute(const std::string& text,
                                                  bool any_full);
StatusOr<search_spaces::Precision> ParsePrecision(const std::string& text);
// --cuda-graph-impl and --cuda-graph-scope of `flags`, parsed and checked
// (search_spaces::ValidateCudaGraphs); "" = Megatron's defaults (none).
StatusOr<search_spaces::CudaGraphs> CudaGraphsFromFlags(
    const InputFlags& flags);
// --memory-headroom: GiB per GPU ("4", "4.5", "4GiB", "4 GiB") or a percent
// of `capacity_gib`, the memory the GPU exposes (ClusterSpec::CapacityGib;
// "5%" of 79.65 GiB is 3.98 GiB). Returns GiB. Errors (InvalidArgument, the
// value as typed in the message): not a number with one of those units,
// negative, or not below capacity_gib.
StatusOr<double> ParseMemoryHeadroom(const std::string& text,
                                     double capacity_gib);

// The inverse of ParseRecompute for a concrete mode: "none", "selective",
// "full" (uniform, 1 layer), "full:N" (uniform), "full:block:N".
std::string FormatRecompute(const search_spaces::Recompute& r);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INPUTS_INPUTS_H_
