// The built-in training corpus, used when `tune train` gets no --data: the
// license texts Debian's base-files package installs under
// /usr/share/common-licenses/ (GPL-3, Apache-2.0, ...), which every Debian
// and Ubuntu system has. About 250 KB of English prose: enough for a small
// model's loss to fall visibly, with nothing to download.
#ifndef MESHTUNE_ENGINE_DATA_BUILTIN_CORPUS_H_
#define MESHTUNE_ENGINE_DATA_BUILTIN_CORPUS_H_

#include <memory>
#include <string>

#include "engine/data/indexed_dataset.h"
#include "search_spaces/status.h"

namespace meshtune::engine::data {

inline constexpr const char* kBuiltinCorpusDir = "/usr/share/common-licenses";

// Reads every regular file directly in `dir` (symbolic links such as
// GPL -> GPL-3 are aliases of files already read, so they are skipped) in
// byte-wise sorted name order, one document per file, byte-tokenized
// (ByteTokenizer) with <eod> (256) after each, into an in-memory uint16
// indexed dataset named "built-in corpus (DIR)". A missing, unreadable or
// empty directory is an error: there is no silent fallback.
StatusOr<std::unique_ptr<IndexedDataset>> LoadBuiltinCorpus(
    const std::string& dir = kBuiltinCorpusDir);

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_BUILTIN_CORPUS_H_
