// Tokenizers for `tune data`: text (bytes, UTF-8 expected for BPE) to token
// ids and back.
//
//   ByteTokenizer     ids 0..255 are the bytes, 256 is <eod>; vocab 257.
//   Gpt2BpeTokenizer  GPT-2's byte-level BPE (Radford et al. 2019; the
//                     reference is openai/gpt-2 src/encoder.py, which
//                     Megatron-LM's GPT2BPETokenizer wraps) loaded from a
//                     vocab.json and a merges.txt.
#ifndef MESHTUNE_ENGINE_DATA_TOKENIZER_H_
#define MESHTUNE_ENGINE_DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::engine::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text`; never fails (every byte has an id).
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // The bytes of `ids` (<eod> decodes to nothing); ids must be < vocab.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // Largest id + 1.
  virtual int64_t vocab_size() const = 0;
  // The end-of-document id appended by `tune data --append-eod`.
  virtual int32_t eod_id() const = 0;
  virtual std::string name() const = 0;  // "byte" or "gpt2-bpe"
};

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEodId = 256;
  static constexpr int64_t kVocabSize = 257;

  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return kVocabSize; }
  int32_t eod_id() const override { return kEodId; }
  std::string name() const override { return "byte"; }
};

// GPT-2 BPE. Encoding, per openai/gpt-2 encoder.py:
//  1. Pre-tokenize with GPT-2's pattern
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
//       \s+(?!\S)|\s+
//     std::regex has no \p{L}/\p{N}, so a hand-written splitter applies the
//     same alternatives in the same order over UTF-8 code points, with this
//     approximation of the Unicode classes: letters are ASCII letters and
//     every code point from U+00C0 up except U+00D7, U+00F7, the Unicode
//     whitespace listed below and General Punctuation (U+2010..U+205E);
//     numbers are ASCII digits only; whitespace is Python's \s (ASCII
//     \t\n\v\f\r, space, U+001C..U+001F, U+0085, U+00A0, U+1680,
//     U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). So non-ASCII
//     digits and symbols outside those ranges count as letters; English
//     and most Latin/Cyrillic/CJK text splits exactly as GPT-2 splits it.
//  2. Map each piece's bytes to printable code points (bytes_to_unicode:
//     '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF map to themselves, the
//     other 68 bytes to U+0100 upward in byte order).
//  3. Repeatedly merge the adjacent symbol pair with the lowest rank in
//     merges.txt (all its occurrences, left to right) until no pair has a
//     rank; look each symbol up in vocab.json.
// "<|endoftext|>" in the text is ordinary text, as in encoder.py.
class Gpt2BpeTokenizer : public Tokenizer {
 public:
  // Loads and validates both files: vocab.json must be a JSON object of
  // string -> non-negative integer holding all 256 byte symbols and
  // "<|endoftext|>" (the <eod> id); merges.txt lines are "A B" pairs (an
  // optional leading "#version" line is skipped) whose parts and merged
  // result are all in the vocabulary, so Encode cannot meet an unknown
  // symbol. Errors name the file (and line) and what is wrong.
  static StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Load(
      const std::string& vocab_path, const std::string& merges_path);

  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod_id() const override { return eod_id_; }
  std::string name() const override { return "gpt2-bpe"; }

  // The pre-tokenization of step 1, for tests: pieces of `text` in order;
  // concatenated they give `text` back.
  static std::vector<std::string_view> PreTokenize(std::string_view text);
  // GPT-2's bytes_to_unicode: byte -> UTF-8 of its printable code point.
  static const std::vector<std::string>& ByteSymbols();

 private:
  Gpt2BpeTokenizer() = default;
  // BPE of one pre-token's symbols (step 3), appending ids to `out`.
  void EncodePiece(std::string_view piece, std::vector<int32_t>* out) const;

  std::unordered_map<std::string, int32_t> encoder_;
  std::vector<std::string> decoder_;  // id -> symbol string ("" = unused)
  // "A B" -> rank (line order in merges.txt); symbols never hold a space
  // because byte 0x20 maps to U+0120.
  std::unordered_map<std::string, int64_t> merge_ranks_;
  std::unordered_map<uint32_t, uint8_t> byte_of_code_point_;
  int64_t vocab_size_ = 0;
  int32_t eod_id_ = 0;
};

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_TOKENIZER_H_
