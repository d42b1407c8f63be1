// Tokenizers: byte-level round trips; GPT-2 BPE pre-tokenization, merges by
// rank and decoding on a tiny handwritten vocabulary; load errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/data/tokenizer.h"
#include "tests/engine/data/test_util.h"

namespace meshtune::engine::data {
namespace {

using testing::ScopedTempDir;
using testing::WriteBytes;

TEST(DataByteTokenizer, RoundTripsEveryByte) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 257);
  EXPECT_EQ(tok.eod_id(), 256);
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::vector<int32_t> ids = tok.Encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok.Decode(ids), all);
  EXPECT_EQ(tok.Encode("Hi\n"), (std::vector<int32_t>{72, 105, 10}));
  EXPECT_EQ(tok.Decode({72, 256, 105}), "Hi");  // <eod> decodes to nothing
}

TEST(DataGpt2Bpe, ByteSymbolsFollowGpt2) {
  const auto& s = Gpt2BpeTokenizer::ByteSymbols();
  ASSERT_EQ(s.size(), 256u);
  EXPECT_EQ(s['A'], "A");
  EXPECT_EQ(s['!'], "!");
  EXPECT_EQ(s[0], "\xC4\x80");     // U+0100: first non-printable byte
  EXPECT_EQ(s[' '], "\xC4\xA0");   // U+0120 'Ġ' (33rd non-printable)
  EXPECT_EQ(s[0xAD], "\xC5\x83");  // U+0143: soft hyphen is the last one
  EXPECT_EQ(s[0xE9], "\xC3\xA9");  // 'é' maps to itself
}

std::vector<std::string> Pieces(const std::string& text) {
  std::vector<std::string> out;
  for (auto p : Gpt2BpeTokenizer::PreTokenize(text)) out.emplace_back(p);
  return out;
}

TEST(DataGpt2Bpe, PreTokenizeFollowsTheGpt2Pattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces("Hello world's 123 foo!!  bar"),
            (V{"Hello", " world", "'s", " 123", " foo", "!!", " ", " bar"}));
  EXPECT_EQ(Pieces("don't\n\nbaz  "),
            (V{"don", "'t", "\n", "\n", "baz", "  "}));
  EXPECT_EQ(Pieces("a1b2"), (V{"a", "1", "b", "2"}));
  EXPECT_EQ(Pieces(" caf\xC3\xA9 x\xC3\x97y"),
            (V{" caf\xC3\xA9", " x", "\xC3\x97", "y"}));  // é letter, × not
  EXPECT_EQ(Pieces("x \t y"), (V{"x", " \t", " y"}));
  EXPECT_EQ(Pieces(""), V{});
  EXPECT_EQ(Pieces(" "), V{" "});
}

// A tiny GPT-2-style vocabulary: the 256 byte symbols (id = byte), the
// results of `merges` in order, then <|endoftext|>.
void WriteTinyBpe(const std::string& dir,
                  const std::vector<std::string>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  const auto& bytes = Gpt2BpeTokenizer::ByteSymbols();
  for (int b = 0; b < 256; ++b) vocab[bytes[b]] = b;
  std::string text = "#version: 0.2\n";
  int next = 256;
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    vocab[m.substr(0, space) + m.substr(space + 1)] = next++;
    text += m + "\n";
  }
  vocab["<|endoftext|>"] = next;
  WriteBytes(dir + "/vocab.json", vocab.dump());
  WriteBytes(dir + "/merges.txt", text);
}

std::unique_ptr<Gpt2BpeTokenizer> LoadTiny(const std::string& dir) {
  auto tok = Gpt2BpeTokenizer::Load(dir + "/vocab.json", dir + "/merges.txt");
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(DataGpt2Bpe, MergesApplyByRank) {
  const ScopedTempDir dir;
  // "Ġ" is the symbol of the space byte.
  WriteTinyBpe(dir.path(), {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w",
                            "o r", "\xC4\xA0w or"});
  const auto tok = LoadTiny(dir.path());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 264);
  EXPECT_EQ(tok->eod_id(), 263);
  // "hello" -> he l l o -> he ll o -> hell o -> hello (259);
  // " world" -> Ġw o r l d -> Ġw or l d -> Ġwor (262) l d.
  const std::vector<int32_t> ids = tok->Encode("hello world");
  EXPECT_EQ(ids, (std::vector<int32_t>{259, 262, 'l', 'd'}));
  EXPECT_EQ(tok->Decode(ids), "hello world");
  const std::string odd = "ok\xFF\x01 \xE2\x82\xAC!";  // any bytes round-trip
  EXPECT_EQ(tok->Decode(tok->Encode(odd)), odd);
  EXPECT_EQ(tok->Decode({259, 263}), "hello");

  // The lower rank wins: "b c" before "a b" gives a|bc, the reverse ab|c.
  WriteTinyBpe(dir.path(), {"b c", "a b"});
  EXPECT_EQ(LoadTiny(dir.path())->Encode("abc"),
            (std::vector<int32_t>{'a', 256}));
  WriteTinyBpe(dir.path(), {"a b", "b c"});
  EXPECT_EQ(LoadTiny(dir.path())->Encode("abc"),
            (std::vector<int32_t>{256, 'c'}));
}

TEST(DataGpt2Bpe, LoadErrorsNameFileAndLine) {
  const ScopedTempDir dir;
  const std::string vocab = dir.path() + "/vocab.json";
  const std::string merges = dir.path() + "/merges.txt";
  auto error = [&] {
    auto tok = Gpt2BpeTokenizer::Load(vocab, merges);
    EXPECT_FALSE(tok.ok());
    if (tok.ok()) return std::string();
    EXPECT_EQ(tok.status().code(), Status::Code::kInvalidArgument);
    return tok.status().message();
  };
  WriteTinyBpe(dir.path(), {"a b"});
  WriteBytes(merges, "#version: 0.2\na b\nc\n");
  EXPECT_EQ(error(), merges +
                         ":3: expected two symbols separated by one space, "
                         "got 'c'");
  WriteBytes(merges, "a b\nx y\n");
  EXPECT_EQ(error(), merges + ":2: symbol 'xy' is not in " + vocab +
                         " (the two files must come from the same tokenizer)");
  WriteBytes(vocab, "{\"a\": 0,");
  EXPECT_EQ(error().rfind(vocab + ": malformed JSON (", 0), 0u);
  WriteBytes(vocab, "{\"a\": -1}");
  EXPECT_EQ(error(), vocab + ": the id of 'a' is not a non-negative integer");
  WriteBytes(vocab, "{\"a\": 0}");
  EXPECT_EQ(error(), vocab +
                         ": no entry for the symbol '\xC4\x80' of byte 0x0 "
                         "(GPT-2 vocabularies hold all 256)");
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) v[Gpt2BpeTokenizer::ByteSymbols()[b]] = b;
  WriteBytes(vocab, v.dump());
  EXPECT_EQ(error(),
            vocab + ": no '<|endoftext|>' entry (GPT-2's end-of-document id)");
  auto missing = Gpt2BpeTokenizer::Load(dir.path() + "/nope.json", merges);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "--vocab-file: cannot open '" + dir.path() + "/nope.json'");
}

}  // namespace
}  // namespace meshtune::engine::data
