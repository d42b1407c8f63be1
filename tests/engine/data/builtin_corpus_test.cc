// The built-in corpus: Debian's license texts, one document per regular
// file in name order, byte tokens with <eod>; clear errors without them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "engine/data/builtin_corpus.h"
#include "tests/engine/data/test_util.h"

namespace meshtune::engine::data {
namespace {

using testing::ScopedTempDir;
using testing::WriteBytes;

std::vector<int32_t> Sequence(const IndexedDataset& ds, int64_t s) {
  std::vector<int32_t> out(ds.sequence_length(s));
  ds.ReadTokens(s, 0, out.size(), out.data());
  return out;
}

TEST(DataBuiltinCorpus, OpensTheLicenseTexts) {
  auto corpus = LoadBuiltinCorpus();
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  const IndexedDataset& ds = **corpus;
  EXPECT_EQ(ds.name(), "built-in corpus (/usr/share/common-licenses)");
  EXPECT_GT(ds.num_tokens(), 10000);
  EXPECT_GE(ds.num_documents(), 1);
  EXPECT_EQ(ds.MaxTokenId(), 256);  // <eod>; text bytes are below
  for (int64_t s = 0; s < ds.num_sequences(); ++s) {
    const std::vector<int32_t> doc = Sequence(ds, s);
    ASSERT_FALSE(doc.empty());
    EXPECT_EQ(doc.back(), 256) << "document " << s << " ends with <eod>";
  }
}

TEST(DataBuiltinCorpus, SortedRegularFilesOnly) {
  const ScopedTempDir dir;
  WriteBytes(dir.path() + "/b", "bb");
  WriteBytes(dir.path() + "/A", "a");
  WriteBytes(dir.path() + "/c", "");
  ASSERT_EQ(symlink("b", (dir.path() + "/alias").c_str()), 0);
  auto corpus = LoadBuiltinCorpus(dir.path());
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  ASSERT_EQ((*corpus)->num_sequences(), 3);
  EXPECT_EQ(Sequence(**corpus, 0), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(Sequence(**corpus, 1), (std::vector<int32_t>{'b', 'b', 256}));
  EXPECT_EQ(Sequence(**corpus, 2), (std::vector<int32_t>{256}));
}

TEST(DataBuiltinCorpus, MissingOrEmptyDirectoryIsAnError) {
  const ScopedTempDir dir;
  auto corpus = LoadBuiltinCorpus(dir.path());
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(corpus.status().message(),
            "built-in corpus: " + dir.path() + " holds no license files");
  EXPECT_EQ(corpus.status().hint(),
            "install Debian's base-files package, or give training data "
            "with --data (make it with 'tune data')");
  corpus = LoadBuiltinCorpus(dir.path() + "/none");
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(), "built-in corpus: cannot read " +
                                           dir.path() +
                                           "/none (No such file or directory)");
}

}  // namespace
}  // namespace meshtune::engine::data
