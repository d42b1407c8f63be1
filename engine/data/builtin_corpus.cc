#include "engine/data/builtin_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "engine/data/tokenizer.h"

namespace meshtune::engine::data {

StatusOr<std::unique_ptr<IndexedDataset>> LoadBuiltinCorpus(
    const std::string& dir) {
  namespace fs = std::filesystem;
  const char* hint =
      "install Debian's base-files package, or give training data with "
      "--data (make it with 'tune data')";
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    // symlink_status: a link is an alias (GPL -> GPL-3), not a new text.
    const fs::file_status st = it->symlink_status(ec);
    if (!ec && fs::is_regular_file(st)) {
      names.push_back(it->path().filename().string());
    }
  }
  if (ec) {
    return Status::NotFound(
        "built-in corpus: cannot read " + dir + " (" + ec.message() + ")",
        hint);
  }
  if (names.empty()) {
    return Status::NotFound(
        "built-in corpus: " + dir + " holds no license files", hint);
  }
  std::sort(names.begin(), names.end());
  const ByteTokenizer tokenizer;
  std::vector<std::vector<int32_t>> documents;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    std::ifstream in(path, std::ios::binary);
    if (!in.is_open()) {
      return Status::IoError("built-in corpus: cannot read " + path, hint);
    }
    std::ostringstream text;
    text << in.rdbuf();
    std::vector<int32_t> ids = tokenizer.Encode(text.str());
    ids.push_back(ByteTokenizer::kEodId);
    documents.push_back(std::move(ids));
  }
  return IndexedDataset::FromDocuments("built-in corpus (" + dir + ")",
                                       TokenDtype::kUint16, documents);
}

}  // namespace meshtune::engine::data
