// Seeded-mutation fuzzing of what a checkpoint says in text (issue 16):
// metadata.json and the tracker file latest_checkpointed_iteration.txt.
//
// A real checkpoint of a tiny GPT is saved once; then a fixed number of
// inputs, each the saved text with a few seeded mutations (flipped bytes,
// cut or repeated spans, numbers and strings swapped for extreme values,
// truncation), go through the whole loader (LoadCheckpoint into the
// model's ParamStore and optimizer, which uses every offset, size and block
// the metadata names) and through ReadCheckpointState (the check tune train
// makes before ranks start). Each input must either
// load or be rejected with a one-line, non-empty message and hint: no
// crash, no abort, no allocation the file does not justify, no hang. The
// seed and count are fixed (and printed), so a failure reproduces.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/checkpoint_format.h"
#include "engine/comm/local_communicator.h"
#include "engine/gpt_model.h"
#include "engine/optimizer.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 20261201;
constexpr int kInputs = 2000;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Values that break naive readers: signs, int64 and uint64 limits, floats
// where integers belong, other JSON types.
const std::vector<std::string>& ExtremeNumbers() {
  static const std::vector<std::string> v = {
      "-1",
      "0",
      "1",
      "2",
      "7",
      "-9223372036854775808",
      "9223372036854775807",
      "9223372036854775808",
      "18446744073709551615",
      "99999999999999999999999999",
      "1e308",
      "-1e308",
      "2.5",
      "1125899906842624",
      "4611686018427387904",
      "\"12\"",
      "null",
      "true",
      "[]",
      "{}",
  };
  return v;
}

// Strings that must never reach a path, an allocation or a message as is.
const std::vector<std::string>& ExtremeStrings() {
  static const std::vector<std::string> v = {
      "",
      "../../../dev/zero",
      "/dev/stdin",
      "shard_tp1_pp0.bin",
      "a\\nb",
      "\\u0000",
      "x\\u001b[31m",
      "ffffffffffffffff",
      "0x12",
      "decoder.layers.0.self_attention.linear_proj.weight",
      std::string(5000, 'n'),
  };
  return v;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string Mutate(std::string s) {
    const int n = 1 + Below(3);
    for (int k = 0; k < n; ++k) s = MutateOnce(std::move(s));
    return s;
  }

 private:
  int Below(size_t n) { return n == 0 ? 0 : static_cast<int>(rng_() % n); }

  std::string MutateOnce(std::string s) {
    if (s.empty()) return "{";
    const size_t pos = static_cast<size_t>(Below(s.size()));
    switch (Below(8)) {
      case 0:  // one byte, any value
        s[pos] = static_cast<char>(Below(256));
        return s;
      case 1:  // cut a span
        return s.erase(pos, 1 + Below(24));
      case 2:  // repeat a span
        return s.insert(pos, s.substr(pos, 1 + Below(64)));
      case 3:
      case 4: {  // a number swapped for an extreme value
        const size_t at = s.find_first_of("0123456789", pos);
        if (at == std::string::npos) return s;
        size_t end = s.find_first_not_of("0123456789.eE+-", at);
        if (end == std::string::npos) end = s.size();
        const auto& v = ExtremeNumbers();
        return s.replace(at, end - at, v[Below(v.size())]);
      }
      case 5: {  // a string's contents swapped
        const size_t open = s.find('"', pos);
        if (open == std::string::npos) return s;
        const size_t close = s.find('"', open + 1);
        if (close == std::string::npos) return s;
        const auto& v = ExtremeStrings();
        return s.replace(open + 1, close - open - 1, v[Below(v.size())]);
      }
      case 6:  // truncated
        return s.substr(0, pos);
      default: {  // a structural character or a value dropped in
        static const char* kBits[] = {"{",  "}",  "[", "]", ",",  ":",
                                      "\"", "\\", "-", "e", "\n", " "};
        return s.insert(pos, kBits[Below(std::size(kBits))]);
      }
    }
  }

  std::mt19937_64 rng_;
};

// One line, with something in it.
void ExpectOneLineError(const Status& s, int input, const std::string& text) {
  const std::string where = "input " + std::to_string(input) + " (seed " +
                            std::to_string(kSeed) + "): " + text.substr(0, 200);
  EXPECT_FALSE(s.message().empty()) << where;
  EXPECT_FALSE(s.hint().empty()) << where << "\n  " << s.message();
  for (const std::string& part : {s.message(), s.hint()}) {
    EXPECT_EQ(part.find_first_of("\n\r"), std::string::npos)
        << where << "\n  " << part;
  }
}

TEST(CheckpointFuzzTest, MutatedMetadataAndTrackerLoadOrFailOnOneLine) {
  char tmpl[] = "/tmp/meshtune_ckpt_fuzz_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const std::string dir = root + "/ck";

  // One layer: every kind of tensor record, and few enough of them that
  // the 2000 loads take seconds.
  TrainConfig config = testing::TinyConfig(false);
  config.model.num_layers = 1;
  config.train_iters = 1;
  config.save_dir = dir;
  testing::TrainLocally(config);
  config.save_dir.clear();
  config.train_iters = 2;
  const std::string meta_path = dir + "/iter_0000001/" + kMetadataFileName;
  const std::string tracker_path = dir + "/" + kTrackerFileName;
  const std::string meta = ReadText(meta_path);
  const std::string tracker = ReadText(tracker_path);
  ASSERT_FALSE(meta.empty());
  ASSERT_EQ(tracker, "1\n");

  int accepted = 0, rejected = 0;
  double slowest_s = 0;
  RunLocalRanks(1, [&](Communicator& world) {
    // The loader's targets, built as the trainer builds them, once.
    ProcessGroups groups = MakeProcessGroups(&world, config.parallel);
    ParamStore store;
    GptModel model(config, &groups, &store);
    store.Finalize();
    model.Init();
    Optimizer optimizer(config.optimizer, false, config.train_iters, store,
                        &groups);

    Mutator mutator(kSeed);
    for (int i = 0; i < kInputs; ++i) {
      // One input in eight mutates the tracker, the rest the metadata.
      const bool tracker_input = i % 8 == 7;
      const std::string text = mutator.Mutate(tracker_input ? tracker : meta);
      WriteText(tracker_input ? tracker_path : meta_path, text);
      const auto t0 = std::chrono::steady_clock::now();
      CheckpointState state;
      const Status loaded =
          LoadCheckpoint(dir, config, &state, store, optimizer, groups);
      const StatusOr<CheckpointState> peeked = ReadCheckpointState(dir);
      slowest_s = std::max(slowest_s, std::chrono::duration<double>(
                                          std::chrono::steady_clock::now() - t0)
                                          .count());
      if (loaded.ok()) {
        ++accepted;
        // What the loader accepted, the pre-start check accepts too.
        EXPECT_TRUE(peeked.ok())
            << "input " << i << ": " << peeked.status().message();
        EXPECT_GE(state.consumed_samples, state.iteration);
      } else {
        ++rejected;
        ExpectOneLineError(loaded, i, text);
      }
      if (!peeked.ok()) ExpectOneLineError(peeked.status(), i, text);
      WriteText(tracker_input ? tracker_path : meta_path,
                tracker_input ? tracker : meta);
      if (::testing::Test::HasFailure()) break;  // the first input that fails
    }
  });
  std::cout << "checkpoint metadata fuzz: seed " << kSeed << ", " << kInputs
            << " inputs: " << accepted << " loaded, " << rejected
            << " rejected with a one-line error; slowest " << slowest_s
            << " s\n";
  EXPECT_EQ(accepted + rejected, kInputs);
  // Both outcomes occur, or the mutations are too weak (or too strong) to
  // test anything.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, kInputs / 2);
  // No input made the loader wait (a FIFO, a read past the end) or build
  // something huge.
  EXPECT_LT(slowest_s, 5.0);
  fs::remove_all(root);
}

}  // namespace
}  // namespace meshtune::engine
