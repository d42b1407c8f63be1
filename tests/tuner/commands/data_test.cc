// `tune data` end to end through the binary: the files it writes read back
// with the engine's reader, the summary line, and the exact errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset.h"
#include "engine/data/tokenizer.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using engine::data::ByteTokenizer;
using engine::data::Gpt2BpeTokenizer;
using engine::data::IndexedDataset;
using engine::data::TokenDtype;
using testing::MakeTempDir;
using testing::RunTuneInProcess;
using testing::TuneRun;
using testing::WriteFile;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// MakeTempDir(), removed with its files when the test ends.
class TempDir {
 public:
  TempDir() : path_(MakeTempDir()) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::vector<int32_t>> ReadBack(const std::string& prefix) {
  auto ds = IndexedDataset::Open(prefix);
  EXPECT_TRUE(ds.ok()) << ds.status().message();
  std::vector<std::vector<int32_t>> docs;
  if (!ds.ok()) return docs;
  EXPECT_EQ((*ds)->dtype(), TokenDtype::kUint16);
  for (int64_t s = 0; s < (*ds)->num_sequences(); ++s) {
    std::vector<int32_t> doc((*ds)->sequence_length(s));
    (*ds)->ReadTokens(s, 0, doc.size(), doc.data());
    docs.push_back(doc);
  }
  return docs;
}

void ExpectError(const TuneRun& run, int exit_code, const std::string& error,
                 const std::string& hint) {
  EXPECT_EQ(run.exit_code, exit_code);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "tune: error: " + error + "\ntune: hint: " + hint + "\n");
}

std::vector<int32_t> Bytes(const std::string& text, bool eod) {
  std::vector<int32_t> ids = ByteTokenizer().Encode(text);
  if (eod) ids.push_back(ByteTokenizer::kEodId);
  return ids;
}

TEST(DataCommand, TextAndJsonlToIndexedDataset) {
  const TempDir tmp;
  const std::string& dir = tmp.path();
  WriteFile(dir + "/a.txt", "Hello, world.\nSecond line.\n");
  WriteFile(dir + "/b.jsonl",
            "{\"text\": \"first doc\", \"id\": 1}\n\n"
            "{\"text\": \"\"}\n"
            "{\"text\": \"caf\\u00e9\"}\n");
  const TuneRun run = RunTuneInProcess(
      "data --input a.txt --input b.jsonl --output-prefix out --append-eod",
      dir);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out,
            "wrote out.bin and out.idx: 3 documents, 44 tokens, byte "
            "tokenizer (vocab 257), dtype uint16, 1 empty document "
            "skipped\n");
  EXPECT_EQ(ReadBack(dir + "/out"),
            (std::vector<std::vector<int32_t>>{
                Bytes("Hello, world.\nSecond line.\n", true),
                Bytes("first doc", true), Bytes("caf\xC3\xA9", true)}));
  EXPECT_FALSE(Exists(dir + "/out.bin.tmp"));
  EXPECT_FALSE(Exists(dir + "/out.idx.tmp"));

  // --json-key picks another field; without --append-eod no <eod>.
  WriteFile(dir + "/c.json", "{\"body\": \"xy\"}\n");
  const TuneRun keyed = RunTuneInProcess(
      "data --input c.json --json-key body --output-prefix c", dir);
  EXPECT_EQ(keyed.exit_code, 0) << keyed.err;
  EXPECT_EQ(ReadBack(dir + "/c"),
            (std::vector<std::vector<int32_t>>{Bytes("xy", false)}));
}

TEST(DataCommand, Gpt2BpeWithVocabAndMerges) {
  const TempDir tmp;
  const std::string& dir = tmp.path();
  nlohmann::json vocab = nlohmann::json::object();
  const auto& bytes = Gpt2BpeTokenizer::ByteSymbols();
  for (int b = 0; b < 256; ++b) vocab[bytes[b]] = b;
  vocab
      ["h"
       "i"] = 256;
  vocab["<|endoftext|>"] = 257;
  WriteFile(dir + "/vocab.json", vocab.dump());
  WriteFile(dir + "/merges.txt", "#version: 0.2\nh i\n");
  WriteFile(dir + "/t.txt", "hi hi");
  const TuneRun run = RunTuneInProcess(
      "data --input t.txt --vocab-file vocab.json --merge-file merges.txt "
      "--output-prefix bpe --append-eod",
      dir);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "wrote bpe.bin and bpe.idx: 1 document, 4 tokens, gpt2-bpe "
            "tokenizer (vocab 258), dtype uint16\n");
  // "hi" -> 256, " hi" -> Ġ h i -> Ġ (32) hi (256), then <|endoftext|>.
  EXPECT_EQ(ReadBack(dir + "/bpe"),
            (std::vector<std::vector<int32_t>>{{256, 32, 256, 257}}));
}

TEST(DataCommand, InputErrors) {
  const TempDir tmp;
  const std::string& dir = tmp.path();
  ExpectError(RunTuneInProcess("data --input nope.txt --output-prefix o", dir),
              2, "--input: cannot open 'nope.txt'",
              "check the path and its permissions");
  WriteFile(dir + "/bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": oops}\n");
  ExpectError(RunTuneInProcess("data --input bad.jsonl --output-prefix o", dir),
              2, "bad.jsonl:2: malformed JSON at column 10",
              "every line of a .json/.jsonl input must be one JSON object, "
              "e.g. {\"text\": \"...\"}");
  WriteFile(dir + "/key.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n");
  ExpectError(RunTuneInProcess("data --input key.jsonl --output-prefix o", dir),
              2, "key.jsonl:2: no key 'text' in the JSON object",
              "--json-key names the field that holds the document text (now "
              "'text')");
  WriteFile(dir + "/arr.jsonl", "[1, 2]\n");
  ExpectError(RunTuneInProcess("data --input arr.jsonl --output-prefix o", dir),
              2, "arr.jsonl:1: expected a JSON object, got array",
              "every line of a .json/.jsonl input must be one JSON object, "
              "e.g. {\"text\": \"...\"}");
  WriteFile(dir + "/a.txt", "text");
  ExpectError(RunTuneInProcess(
                  "data --input a.txt --output-prefix o --vocab-file v", dir),
              2, "--vocab-file needs --merge-file",
              "give both for GPT-2 BPE, or neither for byte-level tokens");
  ExpectError(RunTuneInProcess("data --input a.txt --output-prefix o.bin", dir),
              2,
              "--output-prefix: 'o.bin' ends in .bin or .idx, but names the "
              "pair",
              "give the prefix alone, e.g. --output-prefix data/web for "
              "data/web.bin and data/web.idx");
  WriteFile(dir + "/empty.txt", "");
  ExpectError(RunTuneInProcess("data --input empty.txt --output-prefix o", dir),
              2, "the inputs hold no text: no document to write",
              "give --input files with text in them");
  // Nothing was left behind by any failed run.
  for (const char* f : {"o.bin", "o.idx", "o.bin.tmp", "o.idx.tmp"}) {
    EXPECT_FALSE(Exists(dir + "/" + f)) << f;
  }
  const TuneRun missing = RunTuneInProcess("data --input a.txt", dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--output-prefix is required"), std::string::npos)
      << missing.err;
}

TEST(DataCommand, UnwritableOutputIsRuntimeError) {
  const TempDir tmp;
  const std::string& dir = tmp.path();
  WriteFile(dir + "/a.txt", "text");
  ExpectError(
      RunTuneInProcess("data --input a.txt --output-prefix no/such/dir/o", dir),
      1,
      "no/such/dir/o.bin.tmp: cannot create (No such file or "
      "directory)",
      "check that the directory of the output prefix exists and is "
      "writable");
}

TEST(DataCommand, HelpShowsExamples) {
  const TuneRun run = RunTuneInProcess("data --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("--output-prefix"), std::string::npos);
  EXPECT_NE(run.out.find("Examples:\n  tune data --input notes.txt"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
