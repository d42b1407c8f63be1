// OpenTrainingData: from a Megatron-style --data value (Megatron --data-path)
// to one TokenDataset (Megatron-LM megatron/training/utils.py
// get_blend_from_list parses the same "PREFIX" / "W1 P1 W2 P2 ..." forms).
#include "engine/data/dataset.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "engine/data/blended_dataset.h"
#include "engine/data/builtin_corpus.h"
#include "engine/data/gpt_dataset.h"
#include "engine/data/indexed_dataset.h"
#include "engine/data/tokenizer.h"

namespace meshtune::engine::data {
namespace {

constexpr const char* kPairsHint =
    "give --data as PREFIX or as weight/prefix pairs, e.g. "
    "--data '0.7 data/web 0.3 data/books'";

struct WeightedPrefix {
  double weight;
  std::string prefix;
};

// Splits every entry on whitespace, so that one quoted "0.7 a 0.3 b" and
// the four separate values read the same.
std::vector<std::string> SplitWords(const std::vector<std::string>& values) {
  std::vector<std::string> words;
  for (const std::string& v : values) {
    std::istringstream in(v);
    std::string w;
    while (in >> w) words.push_back(w);
  }
  return words;
}

StatusOr<std::vector<WeightedPrefix>> ParseDataPath(
    const std::vector<std::string>& values) {
  const std::vector<std::string> words = SplitWords(values);
  if (words.size() == 1) return std::vector<WeightedPrefix>{{1.0, words[0]}};
  if (words.size() % 2 != 0) {
    return Status::InvalidArgument(
        "--data: expected PREFIX or weight/prefix pairs, got " +
            std::to_string(words.size()) + " values",
        kPairsHint);
  }
  std::vector<WeightedPrefix> blend;
  for (size_t i = 0; i < words.size(); i += 2) {
    const std::string& text = words[i];
    char* end = nullptr;
    const double w = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(w) || w <= 0) {
      return Status::InvalidArgument("--data: weight '" + text + "' of '" +
                                         words[i + 1] +
                                         "' is not a positive number",
                                     kPairsHint);
    }
    blend.push_back({w, words[i + 1]});
  }
  return blend;
}

bool FileExists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

Status CheckVocab(const std::string& name, int64_t max_token_id,
                  int64_t model_vocab_size) {
  if (max_token_id < model_vocab_size) return Status::Ok();
  return Status::InvalidArgument(
      name + ": token id " + std::to_string(max_token_id) +
          " >= the model's vocab_size " + std::to_string(model_vocab_size),
      "use a model whose vocab_size is above " + std::to_string(max_token_id) +
          ", or tokenize the data to fit (the byte-level default of 'tune "
          "data' needs vocab_size >= 257)");
}

std::string GiB(long double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1Lf GiB", bytes / (1024.0L * 1024 * 1024));
  return buf;
}

}  // namespace

Status CheckSampleIndexFits(long double bytes, int64_t num_samples) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGE_SIZE);
  // Unknown memory: nothing to compare with.
  if (pages <= 0 || page_bytes <= 0) return Status::Ok();
  const long double memory =
      static_cast<long double>(pages) * static_cast<long double>(page_bytes);
  if (bytes <= memory) return Status::Ok();
  return Status::InvalidArgument(
      "the data index for " + std::to_string(num_samples) +
          " training samples needs " + GiB(bytes) +
          " of memory, more than this machine's " + GiB(memory),
      "train fewer samples: lower --steps or --gbs (with --load, check the "
      "checkpoint's consumed_samples)");
}

StatusOr<std::unique_ptr<TokenDataset>> OpenTrainingData(
    const DataConfig& config, int64_t model_vocab_size) {
  // Checked here as well as in GptDataset::Build because a blend sizes its
  // parts with a margin (BlendedSubDatasetSamples(w, 0) is 1).
  if (config.num_samples < 1) {
    return Status::InvalidArgument(
        "the number of training samples must be at least 1, got " +
            std::to_string(config.num_samples),
        "train for at least one iteration");
  }
  // Every sample costs at least its window and shuffle entry (24 bytes) and,
  // in a blend, two blend entries (16): checked before a blend sizes its
  // parts in floating point.
  MESHTUNE_RETURN_IF_ERROR(
      CheckSampleIndexFits(40.0L * static_cast<long double>(config.num_samples),
                           config.num_samples));
  if (config.data_path.empty() || SplitWords(config.data_path).empty()) {
    auto corpus = LoadBuiltinCorpus();
    if (!corpus.ok()) return corpus.status();
    std::shared_ptr<const IndexedDataset> tokens = std::move(corpus).value();
    MESHTUNE_RETURN_IF_ERROR(
        CheckVocab(tokens->name(), tokens->MaxTokenId(), model_vocab_size));
    auto ds = GptDataset::Build(tokens, config.seq_length, config.num_samples,
                                config.seed, ByteTokenizer::kVocabSize);
    if (!ds.ok()) return ds.status();
    return std::unique_ptr<TokenDataset>(std::move(ds).value());
  }

  auto blend = ParseDataPath(config.data_path);
  if (!blend.ok()) return blend.status();
  // Every file must be there before any is read.
  for (const WeightedPrefix& wp : *blend) {
    for (const char* ext : {".bin", ".idx"}) {
      const std::string path = wp.prefix + ext;
      if (!FileExists(path)) {
        return Status::NotFound(path + ": no such file",
                                "make " + wp.prefix + ".bin and " + wp.prefix +
                                    ".idx with 'tune data --input FILE "
                                    "--output-prefix " +
                                    wp.prefix + "'");
      }
    }
  }
  std::vector<std::shared_ptr<const IndexedDataset>> opened;
  std::vector<int64_t> max_ids;
  double weight_sum = 0;
  for (const WeightedPrefix& wp : *blend) {
    auto ds = IndexedDataset::Open(wp.prefix);
    if (!ds.ok()) return ds.status();
    opened.push_back(std::move(ds).value());
    max_ids.push_back(opened.back()->MaxTokenId());
    MESHTUNE_RETURN_IF_ERROR(
        CheckVocab(wp.prefix, max_ids.back(), model_vocab_size));
    weight_sum += wp.weight;
  }

  if (opened.size() == 1) {
    auto ds =
        GptDataset::Build(opened[0], config.seq_length, config.num_samples,
                          config.seed, max_ids[0] + 1);
    if (!ds.ok()) return ds.status();
    return std::unique_ptr<TokenDataset>(std::move(ds).value());
  }
  std::vector<std::unique_ptr<TokenDataset>> parts;
  std::vector<double> weights;
  for (size_t i = 0; i < opened.size(); ++i) {
    const double w = (*blend)[i].weight / weight_sum;
    auto ds = GptDataset::Build(opened[i], config.seq_length,
                                BlendedSubDatasetSamples(w, config.num_samples),
                                config.seed, max_ids[i] + 1);
    if (!ds.ok()) return ds.status();
    parts.push_back(std::move(ds).value());
    weights.push_back(w);
  }
  return std::unique_ptr<TokenDataset>(std::make_unique<BlendedDataset>(
      std::move(parts), weights, config.num_samples));
}

}  // namespace meshtune::engine::data
