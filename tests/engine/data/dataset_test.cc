// OpenTrainingData: --data forms (one prefix, weighted blends, the built-in
// corpus) and the exact messages for what can go wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/data/blended_dataset.h"
#include "engine/data/dataset.h"
#include "engine/data/gpt_dataset.h"
#include "engine/data/indexed_dataset.h"
#include "tests/engine/data/test_util.h"

namespace meshtune::engine::data {
namespace {

using testing::ScopedTempDir;

// PREFIX.bin/.idx with `docs` documents of `length` tokens, every token
// `token`.
void WriteData(const std::string& prefix, int docs, int length, int32_t token) {
  auto b = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUint16);
  ASSERT_TRUE(b.ok());
  const std::vector<int32_t> doc(length, token);
  for (int d = 0; d < docs; ++d) {
    ASSERT_TRUE((*b)->AddDocument(doc.data(), length).ok());
  }
  ASSERT_TRUE((*b)->Finalize().ok());
}

DataConfig Config(std::vector<std::string> data_path) {
  DataConfig c;
  c.data_path = std::move(data_path);
  c.seq_length = 8;
  c.num_samples = 40;
  c.seed = 3;
  return c;
}

Status OpenError(const DataConfig& c, int64_t vocab = 1000) {
  auto ds = OpenTrainingData(c, vocab);
  EXPECT_FALSE(ds.ok());
  return ds.ok() ? Status::Ok() : ds.status();
}

TEST(DataOpenTrainingData, OnePrefix) {
  const ScopedTempDir dir;
  WriteData(dir.path() + "/a", 5, 13, 42);
  auto ds = OpenTrainingData(Config({dir.path() + "/a"}), 50);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_NE(dynamic_cast<const GptDataset*>(ds->get()), nullptr);
  EXPECT_GE((*ds)->num_samples(), 40);
  EXPECT_EQ((*ds)->seq_length(), 8);
  EXPECT_EQ((*ds)->vocab_size(), 43);  // max token id + 1
  std::vector<int32_t> tokens(9);
  (*ds)->GetSample(39, tokens.data());
  EXPECT_EQ(tokens, std::vector<int32_t>(9, 42));
}

TEST(DataOpenTrainingData, WeightedBlend) {
  const ScopedTempDir dir;
  WriteData(dir.path() + "/a", 3, 10, 1);
  WriteData(dir.path() + "/b", 2, 7, 2);
  // One quoted value and separate values read the same.
  for (const auto& path :
       {std::vector<std::string>{"3 " + dir.path() + "/a 1 " + dir.path() +
                                 "/b"},
        std::vector<std::string>{"0.75", dir.path() + "/a", "0.25",
                                 dir.path() + "/b"}}) {
    auto ds = OpenTrainingData(Config(path), 50);
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    const auto* blend = dynamic_cast<const BlendedDataset*>(ds->get());
    ASSERT_NE(blend, nullptr);
    EXPECT_EQ(blend->num_samples(), 40);
    EXPECT_EQ(blend->vocab_size(), 3);
    int from_a = 0;
    std::vector<int32_t> tokens(9);
    for (int64_t i = 0; i < 40; ++i) {
      blend->GetSample(i, tokens.data());
      EXPECT_EQ(tokens[0], blend->dataset_of(i) + 1);
      from_a += tokens[0] == 1;
    }
    EXPECT_EQ(from_a, 30);
  }
}

TEST(DataOpenTrainingData, BuiltinCorpusWhenNoPath) {
  auto ds = OpenTrainingData(Config({}), 512);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ((*ds)->vocab_size(), 257);
  EXPECT_GE((*ds)->num_samples(), 40);
  const Status st = OpenError(Config({}), 256);
  EXPECT_EQ(st.message(),
            "built-in corpus (/usr/share/common-licenses): token id 256 >= "
            "the model's vocab_size 256");
}

TEST(DataOpenTrainingData, MissingFilesComeFirst) {
  const ScopedTempDir dir;
  const std::string a = dir.path() + "/a";
  WriteData(a, 1, 4, 1);
  // b is missing: nothing is opened, even a (which is fine).
  const Status st = OpenError(Config({"1", a, "1", dir.path() + "/b"}));
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_EQ(st.message(), dir.path() + "/b.bin: no such file");
  EXPECT_EQ(st.hint(), "make " + dir.path() + "/b.bin and " + dir.path() +
                           "/b.idx with 'tune data --input FILE "
                           "--output-prefix " +
                           dir.path() + "/b'");
  std::remove((a + ".idx").c_str());
  EXPECT_EQ(OpenError(Config({a})).message(), a + ".idx: no such file");
}

TEST(DataOpenTrainingData, TokensAboveTheModelVocab) {
  const ScopedTempDir dir;
  const std::string x = dir.path() + "/x";
  WriteData(x, 2, 5, 50256);
  const Status st = OpenError(Config({x}), 4096);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            x + ": token id 50256 >= the model's vocab_size 4096");
  EXPECT_EQ(st.hint(),
            "use a model whose vocab_size is above 50256, or tokenize the "
            "data to fit (the byte-level default of 'tune data' needs "
            "vocab_size >= 257)");
}

TEST(DataOpenTrainingData, MalformedPathsAndSizes) {
  const ScopedTempDir dir;
  const std::string a = dir.path() + "/a";
  WriteData(a, 1, 4, 1);
  EXPECT_EQ(OpenError(Config({"0.5", a, "0.5"})).message(),
            "--data: expected PREFIX or weight/prefix pairs, got 3 values");
  EXPECT_EQ(OpenError(Config({"x", a})).message(),
            "--data: weight 'x' of '" + a + "' is not a positive number");
  EXPECT_EQ(OpenError(Config({"-1", a})).message(),
            "--data: weight '-1' of '" + a + "' is not a positive number");
  EXPECT_EQ(OpenError(Config({"0", a})).message(),
            "--data: weight '0' of '" + a + "' is not a positive number");
  EXPECT_EQ(OpenError(Config({"1e999", a})).message(),
            "--data: weight '1e999' of '" + a + "' is not a positive number");
  DataConfig zero = Config({a});
  zero.num_samples = 0;
  EXPECT_EQ(OpenError(zero).message(),
            "the number of training samples must be at least 1, got 0");
  DataConfig no_seq = Config({a});
  no_seq.seq_length = 0;
  EXPECT_EQ(OpenError(no_seq).message(),
            "seq_length must be at least 1, got 0");
}

}  // namespace
}  // namespace meshtune::engine::data
