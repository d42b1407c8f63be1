#include "engine/data/gpt_dataset.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "engine/data/shuffle.h"

namespace meshtune::engine::data {

StatusOr<std::unique_ptr<GptDataset>> GptDataset::Build(
    std::shared_ptr<const IndexedDataset> tokens, int64_t seq_length,
    int64_t num_samples, uint64_t seed, int64_t vocab_size) {
  MESHTUNE_CHECK(tokens != nullptr);
  if (seq_length < 1) {
    return Status::InvalidArgument(
        "seq_length must be at least 1, got " + std::to_string(seq_length),
        "set the sequence length to a positive number of tokens");
  }
  if (num_samples < 1) {
    return Status::InvalidArgument(
        "the number of training samples must be at least 1, got " +
            std::to_string(num_samples),
        "train for at least one iteration");
  }
  const int64_t tokens_per_epoch = tokens->num_tokens();
  if (tokens_per_epoch == 0) {
    return Status::InvalidArgument(tokens->name() + ": holds no tokens",
                                   "give 'tune data' inputs with text in them");
  }
  // num_samples windows end at token num_samples*seq + 1 of the stream
  // (Megatron's _get_num_epochs, with its one extra token per sample).
  int64_t needed = 0;
  if (__builtin_mul_overflow(num_samples, seq_length, &needed) ||
      __builtin_add_overflow(needed, 1, &needed)) {
    return Status::InvalidArgument(
        std::to_string(num_samples) + " training samples of " +
            std::to_string(seq_length) +
            " tokens are more tokens than can be counted",
        "train fewer samples: lower --steps or --gbs (with --load, check the "
        "checkpoint's consumed_samples)");
  }
  const int64_t num_epochs = (needed + tokens_per_epoch - 1) / tokens_per_epoch;
  // The three indices: 8 bytes per document of every epoch, 16 per window
  // and 8 per shuffle entry (long double: the product may exceed int64).
  const long double epoch_tokens =
      static_cast<long double>(num_epochs) * tokens_per_epoch;
  MESHTUNE_RETURN_IF_ERROR(CheckSampleIndexFits(
      8.0L * num_epochs * static_cast<long double>(tokens->num_sequences()) +
          24.0L * (epoch_tokens / seq_length),
      num_samples));

  std::unique_ptr<GptDataset> ds(new GptDataset());
  ds->tokens_ = std::move(tokens);
  ds->seq_length_ = seq_length;
  ds->vocab_size_ = vocab_size;
  ds->num_epochs_ = num_epochs;

  // One engine for both shuffles, documents first, as Megatron draws both
  // from one numpy RandomState seeded with --seed.
  std::mt19937_64 rng(seed);
  const int64_t num_documents = ds->tokens_->num_sequences();
  std::vector<int64_t> epoch(static_cast<size_t>(num_documents));
  ds->document_index_.reserve(
      static_cast<size_t>(ds->num_epochs_ * num_documents));
  for (int64_t e = 0; e < ds->num_epochs_; ++e) {
    std::iota(epoch.begin(), epoch.end(), int64_t{0});
    Shuffle(rng, &epoch);
    ds->document_index_.insert(ds->document_index_.end(), epoch.begin(),
                               epoch.end());
  }

  // Window k starts at stream position k*seq; the last complete window
  // ends at the stream's end, so there are (total - 1) / seq of them.
  const int64_t stream_tokens = ds->num_epochs_ * tokens_per_epoch;
  const int64_t num_windows = (stream_tokens - 1) / seq_length;
  ds->windows_.reserve(static_cast<size_t>(num_windows));
  int64_t position = 0;        // index into document_index_
  int64_t document_start = 0;  // stream position of that document's start
  for (int64_t k = 0; k < num_windows; ++k) {
    const int64_t start = k * seq_length;
    // Skip documents that end at or before `start` (empty ones included).
    while (document_start +
               ds->tokens_->sequence_length(ds->document_index_[position]) <=
           start) {
      document_start +=
          ds->tokens_->sequence_length(ds->document_index_[position]);
      ++position;
    }
    ds->windows_.push_back({position, start - document_start});
  }

  ds->shuffle_index_.resize(static_cast<size_t>(num_windows));
  std::iota(ds->shuffle_index_.begin(), ds->shuffle_index_.end(), int64_t{0});
  Shuffle(rng, &ds->shuffle_index_);
  return ds;
}

void GptDataset::GetUnshuffledSample(int64_t k, int32_t* tokens) const {
  MESHTUNE_CHECK(k >= 0 && k < static_cast<int64_t>(windows_.size()));
  int64_t position = windows_[k].document_position;
  int64_t offset = windows_[k].offset;
  int64_t remaining = seq_length_ + 1;
  while (remaining > 0) {
    MESHTUNE_CHECK(position < static_cast<int64_t>(document_index_.size()));
    const int64_t document = document_index_[position];
    const int64_t take =
        std::min(tokens_->sequence_length(document) - offset, remaining);
    tokens_->ReadTokens(document, offset, take, tokens);
    tokens += take;
    remaining -= take;
    offset = 0;
    ++position;
  }
}

void GptDataset::GetSample(int64_t index, int32_t* tokens) const {
  MESHTUNE_CHECK(index >= 0 && index < num_samples());
  GetUnshuffledSample(shuffle_index_[index], tokens);
}

}  // namespace meshtune::engine::data
