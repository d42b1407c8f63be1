// GptDataset: Megatron's GPT training samples over one indexed dataset
// (Megatron-LM megatron/core/datasets/gpt_dataset.py, GPTDataset and its
// _build_document_sample_shuffle_indices; sample windows as in
// megatron/core/datasets/helpers.cpp build_sample_idx).
//
// Every sequence of the indexed dataset is a document. Three indices:
//   document_index  the documents of `num_epochs` epochs back to back, each
//                   epoch a seeded permutation of all documents; reading
//                   them in this order gives the token stream S.
//   sample windows  sample k (before shuffling) is S[k*seq, k*seq + seq + 1):
//                   seq_length + 1 tokens that run across document
//                   boundaries, and consecutive samples share one token (the
//                   last target of k is the first input of k + 1).
//   shuffle_index   a seeded permutation of all samples; GetSample(i)
//                   returns window shuffle_index[i].
// num_epochs is the smallest count whose stream holds num_samples windows.
// Differences from Megatron, on purpose: documents are shuffled within each
// epoch (Megatron shuffles the concatenation of all epochs but the last), so
// every epoch shows every document once; and shuffles use shuffle.h, not
// numpy, so the exact orders differ from Megatron's for the same seed.
#ifndef MESHTUNE_ENGINE_DATA_GPT_DATASET_H_
#define MESHTUNE_ENGINE_DATA_GPT_DATASET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/indexed_dataset.h"
#include "search_spaces/status.h"

namespace meshtune::engine::data {

class GptDataset : public TokenDataset {
 public:
  // Builds the three indices in memory (Megatron caches them in .npy
  // files; ours are cheap to rebuild). `vocab_size` is reported by
  // vocab_size() (the data's max token id + 1, or the tokenizer's).
  // Errors: seq_length or num_samples below 1, a dataset without tokens,
  // indices that would not fit in memory (CheckSampleIndexFits).
  static StatusOr<std::unique_ptr<GptDataset>> Build(
      std::shared_ptr<const IndexedDataset> tokens, int64_t seq_length,
      int64_t num_samples, uint64_t seed, int64_t vocab_size);

  // Every complete window of the epochs built (>= the num_samples asked).
  int64_t num_samples() const override {
    return static_cast<int64_t>(shuffle_index_.size());
  }
  int64_t seq_length() const override { return seq_length_; }
  void GetSample(int64_t index, int32_t* tokens) const override;
  int64_t vocab_size() const override { return vocab_size_; }

  int64_t num_epochs() const { return num_epochs_; }
  // Document (sequence) ids in stream order, num_epochs * documents long.
  const std::vector<int64_t>& document_index() const { return document_index_; }
  const std::vector<int64_t>& shuffle_index() const { return shuffle_index_; }
  // tokens[seq_length + 1] = S[k*seq, k*seq + seq + 1), before shuffling.
  void GetUnshuffledSample(int64_t k, int32_t* tokens) const;

 private:
  // Where a window starts: document_index_ position and token offset.
  struct WindowStart {
    int64_t document_position;
    int64_t offset;
  };

  GptDataset() = default;

  std::shared_ptr<const IndexedDataset> tokens_;
  int64_t seq_length_ = 0;
  int64_t vocab_size_ = 0;
  int64_t num_epochs_ = 0;
  std::vector<int64_t> document_index_;
  std::vector<WindowStart> windows_;
  std::vector<int64_t> shuffle_index_;
};

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_GPT_DATASET_H_
