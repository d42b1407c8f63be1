// Megatron indexed dataset (MMIDIDX) writer and reader: byte layout, round
// trips in uint16 and int32, and the exact messages for broken files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset.h"
#include "tests/engine/data/test_util.h"

namespace meshtune::engine::data {
namespace {

using testing::ReadBytes;
using testing::ScopedTempDir;
using testing::WriteBytes;

template <typename T>
T At(const std::string& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

template <typename T>
void Put(std::string* bytes, size_t offset, T v) {
  std::memcpy(bytes->data() + offset, &v, sizeof(T));
}

const std::vector<std::vector<int32_t>> kDocs = {
    {5, 6, 7}, {}, {65535, 0}, {1, 2, 3, 4, 5}};

void Write(const std::string& prefix, TokenDtype dtype,
           const std::vector<std::vector<int32_t>>& docs) {
  auto b = IndexedDatasetBuilder::Create(prefix, dtype);
  ASSERT_TRUE(b.ok()) << b.status().message();
  for (const auto& d : docs) {
    ASSERT_TRUE(
        (*b)->AddDocument(d.data(), static_cast<int64_t>(d.size())).ok());
  }
  ASSERT_TRUE((*b)->Finalize().ok());
}

std::vector<int32_t> ReadSequence(const IndexedDataset& ds, int64_t s) {
  std::vector<int32_t> out(ds.sequence_length(s));
  ds.ReadTokens(s, 0, ds.sequence_length(s), out.data());
  return out;
}

TEST(DataIndexedDataset, WritesMegatronLayout) {
  const ScopedTempDir dir;
  const std::string prefix = dir.path() + "/x";
  Write(prefix, TokenDtype::kUint16, kDocs);
  const std::string idx = ReadBytes(prefix + ".idx");
  ASSERT_EQ(idx.size(), 34u + 4 * 12 + 5 * 8);
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(At<uint64_t>(idx, 9), 1u);   // version
  EXPECT_EQ(At<uint8_t>(idx, 17), 8u);   // uint16 code
  EXPECT_EQ(At<uint64_t>(idx, 18), 4u);  // sequences
  EXPECT_EQ(At<uint64_t>(idx, 26), 5u);  // doc_idx entries
  const std::vector<int32_t> lengths = {3, 0, 2, 5};
  const std::vector<int64_t> pointers = {0, 6, 6, 10};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(At<int32_t>(idx, 34 + 4 * i), lengths[i]);
    EXPECT_EQ(At<int64_t>(idx, 34 + 16 + 8 * i), pointers[i]);
  }
  for (int64_t d = 0; d <= 4; ++d) {
    EXPECT_EQ(At<int64_t>(idx, 34 + 48 + 8 * d), d);
  }
  const std::string bin = ReadBytes(prefix + ".bin");
  ASSERT_EQ(bin.size(), 20u);
  EXPECT_EQ(At<uint16_t>(bin, 6), 65535);
  EXPECT_EQ(access((prefix + ".bin.tmp").c_str(), F_OK), -1);
  EXPECT_EQ(access((prefix + ".idx.tmp").c_str(), F_OK), -1);
}

TEST(DataIndexedDataset, RoundTripUint16AndInt32) {
  const ScopedTempDir tmp;
  const std::string dir = tmp.path();
  std::vector<std::vector<int32_t>> big = kDocs;
  big.push_back({100000, 2147483647, 0});
  for (TokenDtype dtype : {TokenDtype::kUint16, TokenDtype::kInt32}) {
    const auto& docs = dtype == TokenDtype::kUint16 ? kDocs : big;
    const std::string prefix = dir + "/" + DtypeName(dtype);
    Write(prefix, dtype, docs);
    auto ds = IndexedDataset::Open(prefix);
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    EXPECT_EQ((*ds)->dtype(), dtype);
    ASSERT_EQ((*ds)->num_sequences(), static_cast<int64_t>(docs.size()));
    EXPECT_EQ((*ds)->num_documents(), static_cast<int64_t>(docs.size()));
    int64_t total = 0;
    for (size_t s = 0; s < docs.size(); ++s) {
      EXPECT_EQ(ReadSequence(**ds, s), docs[s]) << DtypeName(dtype) << s;
      total += static_cast<int64_t>(docs[s].size());
    }
    EXPECT_EQ((*ds)->num_tokens(), total);
    EXPECT_EQ((*ds)->MaxTokenId(),
              dtype == TokenDtype::kUint16 ? 65535 : 2147483647);
    // A window inside a sequence.
    std::vector<int32_t> mid(3);
    (*ds)->ReadTokens(3, 1, 3, mid.data());
    EXPECT_EQ(mid, (std::vector<int32_t>{2, 3, 4}));
  }
}

TEST(DataIndexedDataset, FromDocumentsMatchesFiles) {
  auto ds = IndexedDataset::FromDocuments("mem", TokenDtype::kUint16, kDocs);
  EXPECT_EQ(ds->name(), "mem");
  ASSERT_EQ(ds->num_sequences(), 4);
  for (size_t s = 0; s < kDocs.size(); ++s) {
    EXPECT_EQ(ReadSequence(*ds, s), kDocs[s]);
  }
  EXPECT_EQ(ds->document_indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ds->MaxTokenId(), 65535);
}

TEST(DataIndexedDataset, DtypeChoiceAndOverflow) {
  EXPECT_EQ(DtypeForVocab(257), TokenDtype::kUint16);
  EXPECT_EQ(DtypeForVocab(50257), TokenDtype::kUint16);
  EXPECT_EQ(DtypeForVocab(65500), TokenDtype::kInt32);
  EXPECT_EQ(DtypeSizeBytes(TokenDtype::kUint16), 2);
  EXPECT_EQ(DtypeSizeBytes(TokenDtype::kInt32), 4);
  const ScopedTempDir dir;
  const std::string prefix = dir.path() + "/o";
  {
    auto b = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUint16);
    ASSERT_TRUE(b.ok());
    const int32_t too_big[] = {1, 65536};
    const Status st = (*b)->AddDocument(too_big, 2);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(st.message(), "token id 65536 does not fit dtype uint16");
    EXPECT_EQ(access((prefix + ".bin.tmp").c_str(), F_OK), 0);
  }
  // Destroying an unfinished builder removed its temporary file.
  EXPECT_EQ(access((prefix + ".bin.tmp").c_str(), F_OK), -1);
  EXPECT_EQ(access((prefix + ".bin").c_str(), F_OK), -1);
}

TEST(DataIndexedDataset, UnwritableOutputIsIoError) {
  auto b =
      IndexedDatasetBuilder::Create("/nonexistent-dir/x", TokenDtype::kUint16);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Status::Code::kIoError);
  EXPECT_EQ(b.status().message(),
            "/nonexistent-dir/x.bin.tmp: cannot create (No such file or "
            "directory)");
}

class DataCorruptIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = dir_.path() + "/c";
    Write(prefix_, TokenDtype::kUint16, kDocs);
    idx_ = ReadBytes(prefix_ + ".idx");
  }
  // Opens the dataset after writing `idx` and returns the error message.
  std::string OpenWith(const std::string& idx) {
    WriteBytes(prefix_ + ".idx", idx);
    auto ds = IndexedDataset::Open(prefix_);
    EXPECT_FALSE(ds.ok());
    if (!ds.ok()) {
      EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
      EXPECT_FALSE(ds.status().hint().empty());
    }
    return ds.ok() ? "" : ds.status().message();
  }
  ScopedTempDir dir_;
  std::string prefix_;
  std::string idx_;
};

TEST_F(DataCorruptIndex, ForeignFileHasBadMagic) {
  EXPECT_EQ(OpenWith("{\"not\": \"an index\"}\n"),
            prefix_ + ".idx: not a Megatron indexed dataset (bad magic)");
  EXPECT_EQ(OpenWith(""),
            prefix_ + ".idx: not a Megatron indexed dataset (bad magic)");
  // Megatron's older "TNTIDX" format is foreign too.
  std::string old = idx_;
  old.replace(0, 9, std::string("TNTIDX\0\0\0", 9));
  EXPECT_EQ(OpenWith(old),
            prefix_ + ".idx: not a Megatron indexed dataset (bad magic)");
}

TEST_F(DataCorruptIndex, TruncatedHeaderAndBody) {
  EXPECT_EQ(
      OpenWith(idx_.substr(0, 20)),
      prefix_ + ".idx: truncated header (20 bytes, the header alone takes 34)");
  EXPECT_EQ(OpenWith(idx_.substr(0, idx_.size() - 8)),
            prefix_ +
                ".idx: truncated index (114 bytes cannot hold 4 sequences "
                "and 5 document entries)");
  std::string huge = idx_;
  Put<uint64_t>(&huge, 18, uint64_t{1} << 62);
  EXPECT_EQ(OpenWith(huge),
            prefix_ + ".idx: truncated index (122 bytes cannot hold " +
                std::to_string(uint64_t{1} << 62) +
                " sequences and 5 document entries)");
  EXPECT_EQ(OpenWith(idx_ + std::string(3, 'x')),
            prefix_ +
                ".idx: 3 unexpected bytes after the index of 4 sequences and "
                "5 document entries");
}

TEST_F(DataCorruptIndex, VersionAndDtype) {
  std::string v2 = idx_;
  Put<uint64_t>(&v2, 9, 2);
  EXPECT_EQ(OpenWith(v2),
            prefix_ + ".idx: unsupported index version 2 (expected 1)");
  std::string bad = idx_;
  Put<uint8_t>(&bad, 17, 9);
  EXPECT_EQ(OpenWith(bad), prefix_ +
                               ".idx: unknown dtype code 9 (Megatron's codes "
                               "are 1 to 8)");
  Put<uint8_t>(&bad, 17, 7);
  EXPECT_EQ(OpenWith(bad),
            prefix_ + ".idx: dtype float32 cannot hold token ids");
}

TEST_F(DataCorruptIndex, DocumentIndexAndLengths) {
  const size_t doc_at = 34 + 48;
  std::string bad = idx_;
  Put<int64_t>(&bad, doc_at, 1);
  EXPECT_EQ(OpenWith(bad), prefix_ + ".idx: doc_idx starts at 1, expected 0");
  bad = idx_;
  Put<int64_t>(&bad, doc_at + 16, 0);
  EXPECT_EQ(OpenWith(bad),
            prefix_ + ".idx: doc_idx decreases at entry 2 (0 after 1)");
  bad = idx_;
  Put<int64_t>(&bad, doc_at + 32, 3);
  EXPECT_EQ(OpenWith(bad),
            prefix_ + ".idx: doc_idx ends at 3, expected the sequence count 4");
  bad = idx_;
  Put<int32_t>(&bad, 34, -1);
  EXPECT_EQ(OpenWith(bad), prefix_ + ".idx: sequence 0 has negative length -1");
}

TEST_F(DataCorruptIndex, BinMismatch) {
  WriteBytes(prefix_ + ".bin", ReadBytes(prefix_ + ".bin").substr(0, 18));
  EXPECT_EQ(OpenWith(idx_),
            prefix_ + ".bin: holds 18 bytes but " + prefix_ +
                ".idx describes 20 (10 uint16 tokens); the two files do not "
                "belong together");
  WriteBytes(prefix_ + ".bin", std::string(20, '\0'));
  std::string bad = idx_;
  Put<int64_t>(&bad, 34 + 16 + 24, 14);  // sequence 3 at bytes [14, 24)
  EXPECT_EQ(OpenWith(bad), prefix_ +
                               ".idx: sequence 3 (bytes [14, 24)) does not "
                               "lie inside " +
                               prefix_ + ".bin (20 bytes)");
}

TEST(DataIndexedDataset, MissingFileIsNotFound) {
  const ScopedTempDir dir;
  const std::string prefix = dir.path() + "/none";
  auto ds = IndexedDataset::Open(prefix);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(ds.status().message(), prefix + ".idx: no such file");
}

}  // namespace
}  // namespace meshtune::engine::data
