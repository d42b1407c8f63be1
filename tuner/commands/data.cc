// `tune data`: text or JSONL files -> a Megatron indexed dataset
// (PREFIX.bin + PREFIX.idx, engine/data/indexed_dataset.h) for `tune train
// --data PREFIX`. Flag names follow Megatron-LM's tools/preprocess_data.py.
//   .json / .jsonl inputs  one JSON object per line; the document is the
//                          string under --json-key (default "text")
//   any other input        the whole file is one document
// Tokens come from the byte-level tokenizer (vocab 257), or GPT-2 BPE with
// --vocab-file and --merge-file. Documents with no tokens are skipped.
// The files appear only when complete (written as .tmp, then renamed).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset.h"
#include "engine/data/tokenizer.h"
#include "tuner/commands/command.h"

namespace meshtune::tuner {
namespace {

using engine::data::ByteTokenizer;
using engine::data::DtypeForVocab;
using engine::data::DtypeName;
using engine::data::Gpt2BpeTokenizer;
using engine::data::IndexedDatasetBuilder;
using engine::data::TokenDtype;
using engine::data::Tokenizer;

constexpr const char* kDataExamples = R"(Examples:
  tune data --input notes.txt --output-prefix data/notes --append-eod
  tune data --input a.jsonl --input b.jsonl --output-prefix data/web --append-eod
  tune data --input docs.jsonl --json-key content --output-prefix data/docs
  tune data --input corpus.jsonl --vocab-file gpt2-vocab.json \
            --merge-file gpt2-merges.txt --output-prefix data/corpus --append-eod
  tune train --model gpt-tiny --data data/web ...   train on the result)";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "1 document", "3 documents".
std::string Count(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

bool IsJsonLines(const std::string& path) {
  return EndsWith(path, ".jsonl") || EndsWith(path, ".json");
}

class DataCommand : public Command {
 public:
  explicit DataCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "data",
        "tokenize text or JSONL files into a Megatron indexed dataset "
        "(PREFIX.bin + PREFIX.idx) for 'tune train --data'");
    sub->add_option("--input", inputs_,
                    "a .json/.jsonl file (one JSON object per line) or any "
                    "other text file (one document); repeat for more")
        ->required()
        ->type_name("FILE");
    sub->add_option("--output-prefix", output_prefix_,
                    "write PREFIX.bin and PREFIX.idx")
        ->required()
        ->type_name("PREFIX");
    sub->add_option("--json-key", json_key_,
                    "the field of each JSON object that holds the document")
        ->capture_default_str()
        ->type_name("KEY");
    sub->add_option("--vocab-file", vocab_file_,
                    "GPT-2 vocab.json: use GPT-2 BPE (with --merge-file) "
                    "instead of the byte-level tokenizer")
        ->type_name("FILE");
    sub->add_option("--merge-file", merge_file_, "GPT-2 merges.txt")
        ->type_name("FILE");
    sub->add_flag("--append-eod", append_eod_,
                  "end every document with the end-of-document token");
    sub->footer(kDataExamples);
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    MESHTUNE_RETURN_IF_ERROR(CheckFlags());
    std::unique_ptr<Tokenizer> tokenizer;
    if (vocab_file_.empty()) {
      tokenizer = std::make_unique<ByteTokenizer>();
    } else {
      auto bpe = Gpt2BpeTokenizer::Load(vocab_file_, merge_file_);
      if (!bpe.ok()) return bpe.status();
      tokenizer = std::move(bpe).value();
    }
    const TokenDtype dtype = DtypeForVocab(tokenizer->vocab_size());
    auto builder = IndexedDatasetBuilder::Create(output_prefix_, dtype);
    if (!builder.ok()) return builder.status();
    for (const std::string& input : inputs_) {
      MESHTUNE_RETURN_IF_ERROR(AddInput(input, *tokenizer, builder->get()));
    }
    if ((*builder)->num_documents() == 0) {
      return Status::InvalidArgument(
          "the inputs hold no text: no document to write",
          "give --input files with text in them");
    }
    MESHTUNE_RETURN_IF_ERROR((*builder)->Finalize());
    out << "wrote " << output_prefix_ << ".bin and " << output_prefix_
        << ".idx: " << Count((*builder)->num_documents(), "document") << ", "
        << Count((*builder)->num_tokens(), "token") << ", " << tokenizer->name()
        << " tokenizer (vocab " << tokenizer->vocab_size() << "), dtype "
        << DtypeName(dtype);
    if (skipped_ > 0) {
      out << ", " << Count(skipped_, "empty document") << " skipped";
    }
    out << "\n";
    return Status::Ok();
  }

 private:
  // Flag combinations and input files, before anything is written.
  Status CheckFlags() const {
    if (vocab_file_.empty() != merge_file_.empty()) {
      return Status::InvalidArgument(
          vocab_file_.empty() ? "--merge-file needs --vocab-file"
                              : "--vocab-file needs --merge-file",
          "give both for GPT-2 BPE, or neither for byte-level tokens");
    }
    if (EndsWith(output_prefix_, ".bin") || EndsWith(output_prefix_, ".idx")) {
      return Status::InvalidArgument(
          "--output-prefix: '" + output_prefix_ +
              "' ends in .bin or .idx, but names the pair",
          "give the prefix alone, e.g. --output-prefix data/web for "
          "data/web.bin and data/web.idx");
    }
    if (json_key_.empty()) {
      return Status::InvalidArgument("--json-key: empty key",
                                     "name the field that holds the text, "
                                     "e.g. --json-key text");
    }
    for (const std::string& input : inputs_) {
      std::error_code ec;
      if (std::filesystem::is_directory(input, ec)) {
        return Status::InvalidArgument(
            "--input: '" + input + "' is a directory",
            "give the files in it, e.g. --input " + input + "/part1.jsonl");
      }
      std::ifstream in(input, std::ios::binary);
      if (!in.is_open()) {
        return Status::NotFound("--input: cannot open '" + input + "'",
                                "check the path and its permissions");
      }
    }
    return Status::Ok();
  }

  Status AddDocument(const std::string& text, const Tokenizer& tokenizer,
                     IndexedDatasetBuilder* builder) {
    std::vector<int32_t> ids = tokenizer.Encode(text);
    if (ids.empty()) {
      ++skipped_;
      return Status::Ok();
    }
    if (append_eod_) ids.push_back(tokenizer.eod_id());
    return builder->AddDocument(ids.data(), static_cast<int64_t>(ids.size()));
  }

  Status AddInput(const std::string& path, const Tokenizer& tokenizer,
                  IndexedDatasetBuilder* builder) {
    std::ifstream in(path, std::ios::binary);
    if (!in.is_open()) {
      return Status::NotFound("--input: cannot open '" + path + "'",
                              "check the path and its permissions");
    }
    if (!IsJsonLines(path)) {
      std::ostringstream text;
      text << in.rdbuf();
      return AddDocument(text.str(), tokenizer, builder);
    }
    const char* json_hint =
        "every line of a .json/.jsonl input must be one JSON object, e.g. "
        "{\"text\": \"...\"}";
    std::string line;
    int64_t line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      const std::string where = path + ":" + std::to_string(line_number);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json doc;
      try {
        doc = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        return Status::InvalidArgument(
            where + ": malformed JSON at column " + std::to_string(e.byte),
            json_hint);
      }
      const std::string key_hint =
          "--json-key names the field that holds the document text (now '" +
          json_key_ + "')";
      if (!doc.is_object()) {
        return Status::InvalidArgument(where +
                                           ": expected a JSON object, got " +
                                           std::string(doc.type_name()),
                                       json_hint);
      }
      if (!doc.contains(json_key_)) {
        return Status::InvalidArgument(
            where + ": no key '" + json_key_ + "' in the JSON object",
            key_hint);
      }
      const nlohmann::json& value = doc[json_key_];
      if (!value.is_string()) {
        return Status::InvalidArgument(
            where + ": '" + json_key_ + "' is not a string", key_hint);
      }
      MESHTUNE_RETURN_IF_ERROR(
          AddDocument(value.get<std::string>(), tokenizer, builder));
    }
    if (in.bad()) {
      return Status::IoError("--input: read error in '" + path + "'");
    }
    return Status::Ok();
  }

  std::vector<std::string> inputs_;
  std::string output_prefix_;
  std::string json_key_ = "text";
  std::string vocab_file_;
  std::string merge_file_;
  bool append_eod_ = false;
  int64_t skipped_ = 0;
};

}  // namespace

std::unique_ptr<Command> AddDataCommand(CLI::App* app) {
  return std::make_unique<DataCommand>(app);
}

}  // namespace meshtune::tuner
