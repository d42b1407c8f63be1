// GptDataset: windows of seq_length + 1 tokens over the epoch stream (as
// Megatron's build_sample_idx cuts them), per-epoch document shuffles, the
// sample shuffle, determinism, and the seeded shuffle it rests on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/gpt_dataset.h"
#include "engine/data/indexed_dataset.h"
#include "engine/data/shuffle.h"

namespace meshtune::engine::data {
namespace {

// Document d holds tokens 100*d + j, so every token says where it is from.
std::shared_ptr<const IndexedDataset> Documents(
    const std::vector<int>& lengths) {
  std::vector<std::vector<int32_t>> docs;
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> doc(lengths[d]);
    for (int j = 0; j < lengths[d]; ++j) doc[j] = 100 * d + j;
    docs.push_back(doc);
  }
  return IndexedDataset::FromDocuments("test", TokenDtype::kUint16, docs);
}

std::vector<int32_t> Stream(const IndexedDataset& tokens,
                            const std::vector<int64_t>& document_index) {
  std::vector<int32_t> stream;
  for (int64_t d : document_index) {
    std::vector<int32_t> doc(tokens.sequence_length(d));
    tokens.ReadTokens(d, 0, doc.size(), doc.data());
    stream.insert(stream.end(), doc.begin(), doc.end());
  }
  return stream;
}

bool IsPermutation(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

std::unique_ptr<GptDataset> Build(std::shared_ptr<const IndexedDataset> t,
                                  int64_t seq, int64_t n, uint64_t seed) {
  auto ds = GptDataset::Build(std::move(t), seq, n, seed, 1000);
  EXPECT_TRUE(ds.ok()) << ds.status().message();
  return ds.ok() ? std::move(ds).value() : nullptr;
}

TEST(DataGptDataset, WindowsCutTheEpochStream) {
  const auto tokens = Documents({5, 3, 0, 7, 2});  // 17 tokens
  const int64_t seq = 4;
  const auto ds = Build(tokens, seq, 10, 1234);
  ASSERT_NE(ds, nullptr);
  // 10 windows need 41 tokens: 3 epochs of 17.
  EXPECT_EQ(ds->num_epochs(), 3);
  ASSERT_EQ(ds->document_index().size(), 15u);
  for (int e = 0; e < 3; ++e) {
    EXPECT_TRUE(IsPermutation(
        std::vector<int64_t>(ds->document_index().begin() + 5 * e,
                             ds->document_index().begin() + 5 * (e + 1))))
        << "epoch " << e << " must show every document once";
  }
  const std::vector<int32_t> stream = Stream(*tokens, ds->document_index());
  ASSERT_EQ(stream.size(), 51u);
  EXPECT_EQ(ds->num_samples(), (51 - 1) / seq);
  EXPECT_EQ(ds->seq_length(), seq);
  EXPECT_EQ(ds->vocab_size(), 1000);
  std::vector<int32_t> sample(seq + 1);
  for (int64_t k = 0; k < ds->num_samples(); ++k) {
    ds->GetUnshuffledSample(k, sample.data());
    EXPECT_EQ(sample, std::vector<int32_t>(stream.begin() + k * seq,
                                           stream.begin() + k * seq + seq + 1))
        << "window " << k;
  }
}

TEST(DataGptDataset, SamplesAreTheShuffledWindows) {
  const auto ds = Build(Documents({9, 4, 6}), 3, 12, 7);
  ASSERT_NE(ds, nullptr);
  ASSERT_EQ(ds->shuffle_index().size(), static_cast<size_t>(ds->num_samples()));
  EXPECT_TRUE(IsPermutation(ds->shuffle_index()));
  std::vector<int64_t> identity(ds->num_samples());
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_NE(ds->shuffle_index(), identity);
  std::vector<int32_t> a(4);
  std::vector<int32_t> b(4);
  for (int64_t i = 0; i < ds->num_samples(); ++i) {
    ds->GetSample(i, a.data());
    ds->GetUnshuffledSample(ds->shuffle_index()[i], b.data());
    EXPECT_EQ(a, b);
  }
}

TEST(DataGptDataset, SameSeedSameSamplesOtherSeedOtherSamples) {
  const auto tokens = Documents({11, 3, 8, 5, 13, 2});
  const auto a = Build(tokens, 5, 30, 1234);
  const auto b = Build(tokens, 5, 30, 1234);
  const auto c = Build(tokens, 5, 30, 1235);
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(a->num_samples(), b->num_samples());
  ASSERT_EQ(a->num_samples(), c->num_samples());
  EXPECT_EQ(a->document_index(), b->document_index());
  EXPECT_EQ(a->shuffle_index(), b->shuffle_index());
  std::vector<int32_t> x(6);
  std::vector<int32_t> y(6);
  int differ = 0;
  for (int64_t i = 0; i < a->num_samples(); ++i) {
    a->GetSample(i, x.data());
    b->GetSample(i, y.data());
    EXPECT_EQ(x, y);
    c->GetSample(i, y.data());
    differ += x != y;
  }
  EXPECT_GT(differ, a->num_samples() / 2) << "a new seed reorders samples";
}

TEST(DataGptDataset, ManyEpochsOfOneDocument) {
  // One 3-token document; 20 windows of 2 + 1 tokens need 41 tokens.
  const auto tokens = Documents({3});
  const auto ds = Build(tokens, 2, 20, 1);
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(ds->num_epochs(), 14);
  EXPECT_EQ(ds->num_samples(), (14 * 3 - 1) / 2);
  std::vector<int32_t> s(3);
  ds->GetUnshuffledSample(0, s.data());
  EXPECT_EQ(s, (std::vector<int32_t>{0, 1, 2}));
  ds->GetUnshuffledSample(1, s.data());
  EXPECT_EQ(s, (std::vector<int32_t>{2, 0, 1}));  // across the epoch border
  ds->GetUnshuffledSample(2, s.data());
  EXPECT_EQ(s, (std::vector<int32_t>{1, 2, 0}));
}

TEST(DataGptDataset, RefusesBadSizesAndEmptyData) {
  const auto tokens = Documents({4});
  auto ds = GptDataset::Build(tokens, 0, 1, 1, 10);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), "seq_length must be at least 1, got 0");
  ds = GptDataset::Build(tokens, 4, 0, 1, 10);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            "the number of training samples must be at least 1, got 0");
  ds = GptDataset::Build(Documents({0, 0}), 4, 1, 1, 10);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), "test: holds no tokens");
}

// A sample count from an edited checkpoint or a --steps typo used to end
// in std::bad_alloc (or undefined overflow) while the indices were built.
TEST(DataGptDataset, RefusesIndicesThatCannotBeCountedOrFitInMemory) {
  const auto tokens = Documents({4});
  auto ds = GptDataset::Build(tokens, 32, int64_t{1} << 60, 1, 10);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            std::to_string(int64_t{1} << 60) +
                " training samples of 32 tokens are more tokens than can be "
                "counted");
  EXPECT_EQ(ds.status().ExitCode(), 2);
  // 10^15 windows of 32 tokens over a 4-token corpus: petabytes of index.
  ds = GptDataset::Build(tokens, 32, 1000000000000000, 1, 10);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(
      ds.status().message().rfind(
          "the data index for 1000000000000000 training samples needs ", 0),
      0u)
      << ds.status().message();
  EXPECT_EQ(ds.status().hint(),
            "train fewer samples: lower --steps or --gbs (with --load, check "
            "the checkpoint's consumed_samples)");
  DataConfig config;
  config.seq_length = 32;
  config.num_samples = int64_t{1} << 60;
  const auto opened = OpenTrainingData(config, 300);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().message().rfind(
                "the data index for " + std::to_string(int64_t{1} << 60) +
                    " training samples needs ",
                0),
            0u)
      << opened.status().message();
}

TEST(DataShuffle, EngineAndPermutationArePinned) {
  // The standard fixes mt19937_64's 10000th output ([rand.predef]).
  std::mt19937_64 standard;
  standard.discard(9999);
  EXPECT_EQ(standard(), 9981545732273789042ull);
  // Our Fisher-Yates over it: this exact order on every platform.
  std::mt19937_64 rng(1234);
  std::vector<int64_t> v(10);
  std::iota(v.begin(), v.end(), int64_t{0});
  Shuffle(rng, &v);
  EXPECT_EQ(v, (std::vector<int64_t>{0, 3, 4, 7, 9, 8, 5, 6, 1, 2}));
}

TEST(DataShuffle, UniformBelowStaysInRangeAndCoversIt) {
  std::mt19937_64 rng(5);
  std::vector<int> seen(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const uint64_t x = UniformBelow(rng, 7);
    ASSERT_LT(x, 7u);
    ++seen[x];
  }
  for (int count : seen) {
    EXPECT_GT(count, 850);  // expected 1000 each
    EXPECT_LT(count, 1150);
  }
  EXPECT_EQ(UniformBelow(rng, 1), 0u);
}

}  // namespace
}  // namespace meshtune::engine::data
