// Megatron-LM's indexed dataset ("MMIDIDX" format) on disk and in memory.
//
// Format (Megatron-LM megatron/core/datasets/indexed_dataset.py, the
// _IndexWriter / _IndexReader pair), all integers little-endian:
//   PREFIX.idx  magic        9 bytes  "MMIDIDX\0\0"
//               version      u64      1
//               dtype code   u8       1 uint8, 2 int8, 3 int16, 4 int32,
//                                     5 int64, 6 float64, 7 float32, 8 uint16
//               seq_count    u64      number of sequences
//               doc_count    u64      entries of doc_idx (documents + 1)
//               lengths      int32[seq_count]   tokens per sequence
//               pointers     int64[seq_count]   byte offset of each sequence
//                                               in PREFIX.bin
//               doc_idx      int64[doc_count]   first sequence of each
//                                               document; starts with 0,
//                                               ends with seq_count
//   PREFIX.bin  the tokens of all sequences back to back, in `dtype`.
// This engine writes one sequence per document (what Megatron's
// tools/preprocess_data.py writes without --split-sentences) and, like
// Megatron's GPTDataset, treats every sequence as a document when reading.
#ifndef MESHTUNE_ENGINE_DATA_INDEXED_DATASET_H_
#define MESHTUNE_ENGINE_DATA_INDEXED_DATASET_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::engine::data {

// Megatron's dtype codes (indexed_dataset.py DType).
enum class TokenDtype : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

// Bytes per token of `dtype`.
int64_t DtypeSizeBytes(TokenDtype dtype);
// "uint16", "int32", ...
const char* DtypeName(TokenDtype dtype);
// Megatron's choice (DType.optimal_dtype): uint16 when the vocabulary has
// fewer than 65500 ids, else int32.
TokenDtype DtypeForVocab(int64_t vocab_size);

// Streams documents into PREFIX.bin.tmp and, on Finalize, writes
// PREFIX.idx.tmp and renames both into place, so a reader never sees a
// half-written dataset. The index (12 bytes per document) stays in memory.
// Destroying a builder that was not finalized removes its temporary files.
class IndexedDatasetBuilder {
 public:
  // Opens PREFIX.bin.tmp for writing; `dtype` must be an integer type.
  static StatusOr<std::unique_ptr<IndexedDatasetBuilder>> Create(
      const std::string& prefix, TokenDtype dtype);
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // Appends one document of `count` tokens (one sequence). A token that
  // does not fit the dtype is an InvalidArgument naming it.
  Status AddDocument(const int32_t* tokens, int64_t count);
  // Writes the index and renames PREFIX.bin.tmp/.idx.tmp to PREFIX.bin/.idx.
  Status Finalize();

  int64_t num_documents() const {
    return static_cast<int64_t>(lengths_.size());
  }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  IndexedDatasetBuilder(std::string prefix, TokenDtype dtype, FILE* bin);
  void RemoveTemporaries();

  std::string prefix_;
  TokenDtype dtype_;
  FILE* bin_ = nullptr;  // owned; PREFIX.bin.tmp until Finalize
  bool finalized_ = false;
  int64_t num_tokens_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> pointers_bytes_;
  std::vector<uint8_t> scratch_;  // one document in `dtype`
};

// A read-only indexed dataset: either PREFIX.bin/.idx mapped with mmap(2),
// or token bytes held in memory (the built-in corpus). Every integer dtype
// can be read; tokens come out as int32.
class IndexedDataset {
 public:
  // Maps PREFIX.idx and PREFIX.bin and validates magic, version, dtype and
  // every size and offset against the file lengths; any inconsistency is an
  // InvalidArgument naming the file and what is wrong.
  static StatusOr<std::unique_ptr<IndexedDataset>> Open(
      const std::string& prefix);
  // An in-memory dataset of `documents` (one sequence each) stored as
  // `dtype`; `name` stands in for the prefix in messages. Tokens must fit
  // the dtype (checked).
  static std::unique_ptr<IndexedDataset> FromDocuments(
      const std::string& name, TokenDtype dtype,
      const std::vector<std::vector<int32_t>>& documents);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& name() const { return name_; }  // prefix or name
  TokenDtype dtype() const { return dtype_; }
  int64_t num_sequences() const {
    return static_cast<int64_t>(lengths_.size());
  }
  // Documents as Megatron's doc_idx counts them (doc_idx entries - 1).
  int64_t num_documents() const {
    return static_cast<int64_t>(document_indices_.size()) - 1;
  }
  int64_t sequence_length(int64_t sequence) const { return lengths_[sequence]; }
  const std::vector<int64_t>& document_indices() const {
    return document_indices_;
  }
  int64_t num_tokens() const { return num_tokens_; }

  // Copies tokens [offset, offset + count) of `sequence` into out[count].
  void ReadTokens(int64_t sequence, int64_t offset, int64_t count,
                  int32_t* out) const;
  // The largest token id in the whole dataset (-1 when it has no tokens);
  // scans every token (a sequential pass over the .bin).
  int64_t MaxTokenId() const;

 private:
  IndexedDataset() = default;

  std::string name_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> pointers_bytes_;
  std::vector<int64_t> document_indices_;
  int64_t num_tokens_ = 0;
  const uint8_t* bin_ = nullptr;  // token bytes: mapping or memory_
  size_t bin_size_bytes_ = 0;
  void* mapping_ = nullptr;  // owned mmap of PREFIX.bin, or null
  std::vector<uint8_t> memory_;
};

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_INDEXED_DATASET_H_
