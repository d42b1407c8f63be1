// A stored search re-resolves to the inputs it was run with: the flags that
// change what fits (--memory-headroom) round-trip through the stored command
// line (tuner/store/results_db.cc DescribeFlags ->
// tuner/store/stored_search.cc).
#include "tuner/store/stored_search.h"

#include <gtest/gtest.h>

#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

results::SearchRecord RecordOf(const InputFlags& f) {
  results::SearchRecord s;
  s.model = f.model;
  s.gpu = f.gpu;
  s.gpus = 64;
  s.gbs = 512;
  s.seq_length = 4096;
  s.precision = "bf16";
  s.arguments = DescribeFlags(f);
  return s;
}

TEST(StoredSearch, KeepsTheMemoryHeadroomAndDescribesTheEtpPin) {
  InputFlags f;
  f.model = "deepseek-v2-lite";
  f.gpu = "h100";
  f.gpus = "64";
  f.memory_headroom = "5 %";
  f.etp = "1,2";
  const results::SearchRecord s = RecordOf(f);
  EXPECT_NE(s.arguments.find(" --memory-headroom 5%"), std::string::npos)
      << s.arguments;
  EXPECT_NE(s.arguments.find(" --etp 1,2"), std::string::npos) << s.arguments;
  EXPECT_EQ(FlagsOfStoredSearch(s).memory_headroom, "5%");
  auto in = InputsOfStoredSearch(s);
  ASSERT_TRUE(in.ok()) << in.status().message();
  // 5 % of H100's 79.65 GiB (docs/costmodel.md "Headroom").
  EXPECT_NEAR(in.value().cluster.memory_headroom_gib, 0.05 * 79.65, 1e-9);
}

TEST(StoredSearch, NoHeadroomWhenTheSearchHadNone) {
  InputFlags f;
  f.model = "gpt3-1.3b";
  f.gpu = "a100-80g";
  f.gpus = "8";
  const results::SearchRecord s = RecordOf(f);
  EXPECT_EQ(s.arguments.find("--memory-headroom"), std::string::npos);
  EXPECT_EQ(FlagsOfStoredSearch(s).memory_headroom, "");
}

}  // namespace
}  // namespace meshtune::tuner
