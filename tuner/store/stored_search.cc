#include "tuner/store/stored_search.h"

#include <sstream>

namespace meshtune::tuner {
namespace {

// The words of the stored command line; DescribeFlags writes values without
// spaces except for a --model/--space path, which only WordAfter reads.
std::vector<std::string> Words(const std::string& arguments) {
  std::istringstream in(arguments);
  std::vector<std::string> words;
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

bool HasSwitch(const std::vector<std::string>& words, const std::string& flag) {
  for (const std::string& w : words) {
    if (w == flag) return true;
  }
  return false;
}

std::string WordAfter(const std::vector<std::string>& words,
                      const std::string& flag) {
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == flag) return words[i + 1];
  }
  return "";
}

}  // namespace

InputFlags FlagsOfStoredSearch(const results::SearchRecord& s) {
  const std::vector<std::string> words = Words(s.arguments);
  InputFlags f;
  f.model = s.model;
  f.gpu = s.gpu;
  f.gpus = std::to_string(s.gpus);
  if (s.gpus_per_node > 0) f.gpus_per_node = std::to_string(s.gpus_per_node);
  f.gbs = std::to_string(s.gbs);
  f.seq_len = std::to_string(s.seq_length);
  f.precision = s.precision;
  const std::string tokens = WordAfter(words, "--tokens");
  if (!tokens.empty()) f.tokens = tokens;
  // The headroom decided which plans fit, so a re-run keeps it.
  f.memory_headroom = WordAfter(words, "--memory-headroom");
  f.grad_reduce_in_bf16 = HasSwitch(words, "--grad-reduce-in-bf16");
  f.fp8_param_gather = HasSwitch(words, "--fp8-param-gather");
  f.tp_comm_overlap = HasSwitch(words, "--tp-comm-overlap");
  f.moe_ep_overlap = HasSwitch(words, "--overlap-moe-expert-parallel-comm");
  f.fp8_dot_product_attention = HasSwitch(words, "--fp8-dot-product-attention");
  f.cuda_graph_impl = WordAfter(words, "--cuda-graph-impl");
  f.cuda_graph_scope = WordAfter(words, "--cuda-graph-scope");
  return f;
}

StatusOr<Inputs> InputsOfStoredSearch(const results::SearchRecord& s) {
  InputFlags f = FlagsOfStoredSearch(s);
  auto inputs = ResolveInputs(f);
  if (inputs.ok()) return inputs;
  // A model read from a YAML file is stored under its `name:`; the path the
  // search was typed with may still resolve.
  const std::string typed = WordAfter(Words(s.arguments), "--model");
  if (!typed.empty() && typed != s.model) {
    f.model = typed;
    auto retried = ResolveInputs(f);
    if (retried.ok()) return retried;
  }
  return Status::InvalidArgument(
      "search " + std::to_string(s.id) +
          " no longer resolves: " + inputs.status().message(),
      "restore its model file or preset, or search again");
}

}  // namespace meshtune::tuner
