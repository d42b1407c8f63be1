// Checkpoints: resharding loads (tp·pp·dp and the distributed optimizer
// changed between save and load), bit-exact round trips, the atomic save
// (killed or failed saves leave the previous checkpoint loadable) and the
// errors for corrupt, foreign and missing checkpoints.
//
// Ranks are threads (RunLocalRanks). The model is a hand-built ParamStore
// shaped like a tiny GPT: a padded vocab-parallel embedding, per layer a
// replicated norm, a column-parallel fused qkv (3 parts, weight and bias)
// and a row-parallel projection, a final norm and the tied output layer on
// the last stage. Every element holds a value that encodes its tensor and
// global (row, col), so a wrong slice cannot go unnoticed.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "engine/comm/local_communicator.h"

namespace meshtune::engine {
namespace {

namespace fs = std::filesystem;

struct TinyModel {
  int64_t layers = 4, hidden = 8, vocab = 50;
  bool final_norm = true;
};

struct Layout {
  int tp = 1, pp = 1, dp = 1;
  bool dist_opt = false;
};

std::string LayoutName(const Layout& l) {
  return "tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp) + "dp" +
         std::to_string(l.dp) + (l.dist_opt ? "dist" : "");
}

std::string LayerName(int64_t layer, const std::string& rest) {
  return "decoder.layers." + std::to_string(layer) + "." + rest;
}

// Every tensor name of the model in a fixed order; the index makes the
// tensor's part of the fill value. The tied output layer shares the word
// embedding's values (it is a copy of it in a real run).
std::vector<std::string> AllNames(const TinyModel& m) {
  std::vector<std::string> names = {"embedding.word_embeddings.weight"};
  for (int64_t l = 0; l < m.layers; ++l) {
    for (const char* rest :
         {"input_layernorm.weight", "self_attention.linear_qkv.weight",
          "self_attention.linear_qkv.bias",
          "self_attention.linear_proj.weight"}) {
      names.push_back(LayerName(l, rest));
    }
  }
  names.push_back("decoder.final_layernorm.weight");
  return names;
}

float Value(const TinyModel& m, const std::string& name, int64_t row,
            int64_t col) {
  const std::string key =
      name == "output_layer.weight" ? "embedding.word_embeddings.weight" : name;
  const std::vector<std::string> names = AllNames(m);
  const int64_t id = std::find(names.begin(), names.end(), key) - names.begin();
  // Rows < 64 and cols < 64 here; all values are exact in float32, and
  // none is 0, the value of padding rows.
  return static_cast<float>(id * 8192 + row * 64 + col + 1);
}

ParamStore BuildStore(const TinyModel& m, int tp_rank, int tp, int pp_rank,
                      int pp) {
  ParamStore store;
  auto add = [&](ParamInfo info) {
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    store.Add(std::move(info));
  };
  const int64_t pad_multiple = 4 * tp;  // leaves padding rows at tp 1, 2, 4
  const int64_t padded =
      (m.vocab + pad_multiple - 1) / pad_multiple * pad_multiple;
  ParamInfo vocab;
  vocab.global_shape = {m.vocab, m.hidden};
  vocab.split = TpSplit::kVocab;
  vocab.padded_rows = padded;
  vocab.tied_embedding = true;
  if (pp_rank == 0) {
    vocab.name = "embedding.word_embeddings.weight";
    add(vocab);
  }
  const int64_t per_stage = m.layers / pp;
  for (int64_t l = pp_rank * per_stage; l < (pp_rank + 1) * per_stage; ++l) {
    ParamInfo norm;
    norm.name = LayerName(l, "input_layernorm.weight");
    norm.global_shape = {m.hidden};
    norm.weight_decay = false;
    add(norm);
    ParamInfo qkv;  // GQA: q 8 rows, k 4, v 4
    qkv.name = LayerName(l, "self_attention.linear_qkv.weight");
    qkv.global_shape = {16, m.hidden};
    qkv.split = TpSplit::kColumn;
    qkv.parts = {8, 4, 4};
    add(qkv);
    ParamInfo bias = qkv;
    bias.name = LayerName(l, "self_attention.linear_qkv.bias");
    bias.global_shape = {16};
    bias.weight_decay = false;
    add(bias);
    ParamInfo proj;
    proj.name = LayerName(l, "self_attention.linear_proj.weight");
    proj.global_shape = {m.hidden, 8};
    proj.split = TpSplit::kRow;
    add(proj);
  }
  if (pp_rank == pp - 1) {
    if (m.final_norm) {
      ParamInfo norm;
      norm.name = "decoder.final_layernorm.weight";
      norm.global_shape = {m.hidden};
      norm.weight_decay = false;
      add(norm);
    }
    if (pp > 1) {
      vocab.name = "output_layer.weight";
      add(vocab);
    }
  }
  store.Finalize();
  return store;
}

// Expected flat contents of a store: params, m, v per element (0 in the
// vocab padding rows).
struct Expected {
  std::vector<float> p, m, v;
};

// Maps an encoded value to an arbitrary float of any magnitude and sign.
float Scramble(float x) {
  return std::ldexp(std::sin(1.7f * x), static_cast<int>(x) % 40 - 20);
}

// `fn` maps the encoded value of an element to what it holds (identity by
// default).
Expected ExpectedFlat(const TinyModel& model, const ParamStore& store,
                      float (*fn)(float) = nullptr) {
  auto f = [fn](float x) { return fn ? fn(x) : x; };
  Expected e;
  e.p.assign(store.numel(), 0.0f);
  e.m = e.v = e.p;
  for (const ParamInfo& info : store.infos()) {
    const int64_t stride =
        info.local_shape.size() > 1 ? info.local_shape[1] : 1;
    for (const ParamInfo::Block& b : info.Blocks()) {
      for (int64_t r = 0; r < b.rows; ++r) {
        for (int64_t c = 0; c < b.cols; ++c) {
          const int64_t o =
              info.offset + (b.local_row0 + r) * stride + b.local_col0 + c;
          const float x =
              Value(model, info.name, b.global_row0 + r, b.global_col0 + c);
          e.p[o] = f(x);
          e.m[o] = f(x + 0.5f);
          e.v[o] = f(x + 0.25f);
        }
      }
    }
  }
  return e;
}

// One rank's objects, built the way the trainer builds them.
struct Rank {
  TrainConfig config;
  ProcessGroups groups;
  ParamStore store;
  std::unique_ptr<Optimizer> opt;
};

void RunLayout(const Layout& l, const TinyModel& model,
               const std::function<void(int, Rank&)>& fn) {
  RunLocalRanks(l.tp * l.pp * l.dp, [&](Communicator& world) {
    Rank r;
    r.config.model.name = "ckpt-tiny";
    r.config.model.num_layers = model.layers;
    r.config.model.hidden_size = model.hidden;
    r.config.model.vocab_size = model.vocab;
    r.config.parallel.tp = l.tp;
    r.config.parallel.pp = l.pp;
    r.config.parallel.dp = l.dp;
    r.config.parallel.dist_opt = l.dist_opt;
    r.groups = MakeProcessGroups(&world, r.config.parallel);
    r.store =
        BuildStore(model, r.groups.tp_rank(), l.tp, r.groups.pp_rank(), l.pp);
    r.opt = std::make_unique<Optimizer>(r.config.optimizer, l.dist_opt, 10,
                                        r.store, &r.groups);
    fn(world.rank(), r);
  });
}

// Copies e (indexed by flat parameter offset) into the rank's m/v range.
void SetState(const Expected& e, Optimizer& opt) {
  for (size_t k = 0; k < opt.exp_avg().size(); ++k) {
    const int64_t o = opt.shard_begin() + static_cast<int64_t>(k);
    const bool real = o < static_cast<int64_t>(e.m.size());
    opt.exp_avg()[k] = real ? e.m[o] : 0.0f;
    opt.exp_avg_sq()[k] = real ? e.v[o] : 0.0f;
  }
}

// The pid of a process that has exited (a child, reaped): what a save
// killed part-way leaves its temporary entries under.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "meshtune_ckpt_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }

  // Saves the encoded values at `iteration` from layout `l`; returns each
  // rank's status.
  std::vector<Status> Save(const Layout& l, int64_t iteration,
                           const TinyModel& model = {}, float offset = 0) {
    std::vector<Status> out(l.tp * l.pp * l.dp);
    RunLayout(l, model, [&](int rank, Rank& r) {
      Expected e = ExpectedFlat(model, r.store);
      for (float* x : {e.p.data(), e.m.data(), e.v.data()}) {
        for (int64_t i = 0; i < r.store.numel(); ++i) x[i] += offset;
      }
      r.store.flat_params() = e.p;
      SetState(e, *r.opt);
      r.opt->set_steps_taken(iteration);
      out[rank] = SaveCheckpoint(dir_, r.config, {iteration, 8 * iteration},
                                 r.store, *r.opt, r.groups);
    });
    return out;
  }

  struct Loaded {
    Status status;
    CheckpointState state;
    int64_t steps = 0;
    int64_t mismatches = 0;  // elements of params, m, v off the expected
    std::string first_mismatch;
  };

  // Loads into layout `l` (buffers start as garbage) and compares with the
  // encoded values (+offset).
  std::vector<Loaded> Load(const Layout& l, const TinyModel& model = {},
                           float offset = 0) {
    std::vector<Loaded> out(l.tp * l.pp * l.dp);
    RunLayout(l, model, [&](int rank, Rank& r) {
      Loaded& res = out[rank];
      std::fill(r.store.flat_params().begin(), r.store.flat_params().end(),
                -7.0f);
      std::fill(r.opt->exp_avg().begin(), r.opt->exp_avg().end(), -7.0f);
      std::fill(r.opt->exp_avg_sq().begin(), r.opt->exp_avg_sq().end(), -7.0f);
      res.status =
          LoadCheckpoint(dir_, r.config, &res.state, r.store, *r.opt, r.groups);
      if (!res.status.ok()) return;
      res.steps = r.opt->steps_taken();
      const Expected e = ExpectedFlat(model, r.store);
      auto check = [&](const char* what, int64_t i, float got, float want) {
        if (got == want) return;
        if (res.mismatches++ == 0) {
          res.first_mismatch = std::string(what) + "[" + std::to_string(i) +
                               "] = " + std::to_string(got) + ", want " +
                               std::to_string(want);
        }
      };
      for (int64_t i = 0; i < r.store.numel(); ++i) {
        // Padding rows are 0 whatever was saved.
        const float shift = e.p[i] == 0.0f ? 0.0f : offset;
        check("param", i, r.store.flat_params()[i], e.p[i] + shift);
      }
      for (size_t k = 0; k < r.opt->exp_avg().size(); ++k) {
        const int64_t o = r.opt->shard_begin() + static_cast<int64_t>(k);
        const bool real = o < r.store.numel() && e.p[o] != 0.0f;
        check("m", o, r.opt->exp_avg()[k], real ? e.m[o] + offset : 0.0f);
        check("v", o, r.opt->exp_avg_sq()[k], real ? e.v[o] + offset : 0.0f);
      }
    });
    return out;
  }

  static void ExpectAllOk(const std::vector<Status>& st) {
    for (size_t r = 0; r < st.size(); ++r) {
      EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
    }
  }
  // Every rank fails with the same message, which contains `part`.
  static void ExpectAllFail(const std::vector<Loaded>& out,
                            const std::string& part) {
    for (size_t r = 0; r < out.size(); ++r) {
      ASSERT_FALSE(out[r].status.ok()) << "rank " << r;
      EXPECT_NE(out[r].status.message().find(part), std::string::npos)
          << "rank " << r << ": " << out[r].status.message();
      EXPECT_EQ(out[r].status.message(), out[0].status.message());
      EXPECT_FALSE(out[r].status.hint().empty());
    }
  }
  static void ExpectLoaded(const std::vector<Loaded>& out, int64_t iteration) {
    for (size_t r = 0; r < out.size(); ++r) {
      ASSERT_TRUE(out[r].status.ok())
          << "rank " << r << ": " << out[r].status.message();
      EXPECT_EQ(out[r].mismatches, 0)
          << "rank " << r << ": " << out[r].first_mismatch;
      EXPECT_EQ(out[r].state.iteration, iteration);
      EXPECT_EQ(out[r].state.consumed_samples, 8 * iteration);
      EXPECT_EQ(out[r].steps, iteration);
    }
  }

  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string root_, dir_;
};

// ------------------------------------------------------------- resharding

struct ReshardCase {
  Layout save, load;
};
void PrintTo(const ReshardCase& c, std::ostream* os) {
  *os << LayoutName(c.save) << " -> " << LayoutName(c.load);
}

class CheckpointReshardTest
    : public CheckpointTest,
      public ::testing::WithParamInterface<ReshardCase> {};

TEST_P(CheckpointReshardTest, EveryElementLandsInItsGlobalPlace) {
  ExpectAllOk(Save(GetParam().save, 30));
  ExpectLoaded(Load(GetParam().load), 30);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CheckpointReshardTest,
    ::testing::Values(ReshardCase{{2, 2, 1, false}, {1, 4, 1, false}},
                      ReshardCase{{2, 2, 1, false}, {4, 1, 1, false}},
                      ReshardCase{{2, 2, 1, false}, {1, 1, 1, false}},
                      ReshardCase{{2, 2, 1, false}, {1, 2, 2, true}},
                      ReshardCase{{2, 1, 2, true}, {1, 1, 1, false}},
                      ReshardCase{{2, 1, 2, true}, {2, 2, 1, false}},
                      ReshardCase{{1, 2, 2, true}, {2, 1, 2, true}},
                      // Saved without a separate output layer (pp 1): the last
                      // stage's tied copy is filled from the word embedding.
                      ReshardCase{{1, 1, 1, false}, {2, 2, 1, false}}),
    [](const ::testing::TestParamInfo<ReshardCase>& info) {
      return LayoutName(info.param.save) + "_to_" + LayoutName(info.param.load);
    });

// --------------------------------------------------------------- round trip

TEST_F(CheckpointTest, RoundTripIsBitExact) {
  for (const Layout l : {Layout{2, 2, 1, false}, Layout{1, 2, 2, true}}) {
    SCOPED_TRACE(LayoutName(l));
    fs::remove_all(dir_);
    const int world = l.tp * l.pp * l.dp;
    std::vector<std::vector<float>> params(world), m(world), v(world);
    // Arbitrary bit patterns (negative, tiny, large), not just integers;
    // equal on replicas as in a real run.
    RunLayout(l, {}, [&](int rank, Rank& r) {
      const Expected e = ExpectedFlat({}, r.store, &Scramble);
      r.store.flat_params() = e.p;
      SetState(e, *r.opt);
      r.opt->set_steps_taken(17);
      params[rank] = r.store.flat_params();
      m[rank] = r.opt->exp_avg();
      v[rank] = r.opt->exp_avg_sq();
      const Status st =
          SaveCheckpoint(dir_, r.config, {17, 4242}, r.store, *r.opt, r.groups);
      EXPECT_TRUE(st.ok()) << st.message();
    });
    RunLayout(l, {}, [&](int rank, Rank& r) {
      CheckpointState state;
      const Status st =
          LoadCheckpoint(dir_, r.config, &state, r.store, *r.opt, r.groups);
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(state.iteration, 17);
      EXPECT_EQ(state.consumed_samples, 4242);
      EXPECT_EQ(r.opt->steps_taken(), 17);
      auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() &&
               std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      };
      EXPECT_TRUE(same(r.store.flat_params(), params[rank])) << "rank " << rank;
      EXPECT_TRUE(same(r.opt->exp_avg(), m[rank])) << "rank " << rank;
      EXPECT_TRUE(same(r.opt->exp_avg_sq(), v[rank])) << "rank " << rank;
    });
  }
}

TEST_F(CheckpointTest, WritesMegatronLayoutAndMetadata) {
  ExpectAllOk(Save({2, 2, 1, false}, 5));
  EXPECT_EQ(Entries(),
            (std::vector<std::string>{"iter_0000005",
                                      "latest_checkpointed_iteration.txt"}));
  std::ifstream tracker(dir_ + "/latest_checkpointed_iteration.txt");
  std::string text((std::istreambuf_iterator<char>(tracker)), {});
  EXPECT_EQ(text, "5\n");
  std::ifstream meta_file(dir_ + "/iter_0000005/metadata.json");
  const nlohmann::json meta = nlohmann::json::parse(meta_file);
  EXPECT_EQ(meta["iteration"], 5);
  EXPECT_EQ(meta["consumed_samples"], 40);
  EXPECT_EQ(meta["parallel"]["tp"], 2);
  EXPECT_EQ(meta["parallel"]["pp"], 2);
  EXPECT_EQ(meta["optimizer"]["steps_taken"], 5);
  ASSERT_EQ(meta["shards"].size(), 4u);
  for (const auto& shard : meta["shards"]) {
    EXPECT_TRUE(
        fs::exists(dir_ + "/iter_0000005/" + shard["file"].get<std::string>()));
  }
  // Padding rows are not stored: tp rank 1 of the 50-row vocabulary padded
  // to 56 holds global rows 28..49 only.
  for (const auto& t : meta["shards"][1]["tensors"]) {
    if (t["name"] == "embedding.word_embeddings.weight") {
      EXPECT_EQ(t["blocks"], nlohmann::json::parse("[[28, 22, 0, 8]]"));
    }
  }
}

// ------------------------------------------------------- interrupted saves

TEST_F(CheckpointTest, KilledSaveLeavesPreviousCheckpoint) {
  ExpectAllOk(Save({2, 1, 1, false}, 10));
  // What a process killed while writing iteration 20 leaves behind.
  const std::string pid = std::to_string(DeadPid());
  fs::create_directories(dir_ + "/iter_0000020.tmp-" + pid);
  std::ofstream(dir_ + "/iter_0000020.tmp-" + pid + "/shard_tp0_pp0.bin")
      << "garbage";
  std::ofstream(dir_ + "/iter_0000020.tmp-" + pid + "/metadata.json")
      << "{\"trunc";
  std::ofstream(dir_ + "/latest_checkpointed_iteration.txt.tmp-" + pid) << "2";
  ExpectLoaded(Load({1, 2, 1, false}), 10);
  // The next successful save removes the leftovers.
  ExpectAllOk(Save({2, 1, 1, false}, 20, {}, 1.0f));
  EXPECT_EQ(Entries(),
            (std::vector<std::string>{"iter_0000010", "iter_0000020",
                                      "latest_checkpointed_iteration.txt"}));
  ExpectLoaded(Load({1, 1, 1, false}, {}, 1.0f), 20);
}

TEST_F(CheckpointTest, FailedSaveLeavesPreviousCheckpoint) {
  ExpectAllOk(Save({2, 1, 1, false}, 10));
  // A file where iteration 20's directory must go: the shards are written,
  // then moving them into place fails.
  std::ofstream(dir_ + "/iter_0000020") << "in the way";
  const std::vector<Status> st = Save({2, 1, 1, false}, 20, {}, 1.0f);
  for (const Status& s : st) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message(),
              dir_ + "/iter_0000020 exists and is not a directory");
  }
  EXPECT_EQ(Entries(),
            (std::vector<std::string>{"iter_0000010", "iter_0000020",
                                      "latest_checkpointed_iteration.txt"}));
  ExpectLoaded(Load({2, 1, 1, false}), 10);
}

TEST_F(CheckpointTest, UnwritableDirectoryFailsOnEveryRank) {
  std::ofstream(root_ + "/file") << "not a directory";
  dir_ = root_ + "/file/ckpt";
  for (const Status& s : Save({1, 2, 1, false}, 10)) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Status::Code::kIoError);
    EXPECT_NE(s.message().find("cannot create checkpoint directory"),
              std::string::npos)
        << s.message();
  }
}

TEST_F(CheckpointTest, ResavingAnIterationReplacesIt) {
  ExpectAllOk(Save({1, 2, 1, false}, 10));
  ExpectAllOk(Save({2, 1, 1, false}, 10, {}, 3.0f));
  EXPECT_EQ(Entries(),
            (std::vector<std::string>{"iter_0000010",
                                      "latest_checkpointed_iteration.txt"}));
  ExpectLoaded(Load({1, 1, 1, false}, {}, 3.0f), 10);
}

// ------------------------------------------------------------------ errors

TEST_F(CheckpointTest, FlippedByteIsAChecksumErrorOnEveryRank) {
  ExpectAllOk(Save({2, 1, 1, false}, 10));
  const std::string name = "decoder.layers.2.self_attention.linear_proj.weight";
  const std::string shard = dir_ + "/iter_0000010/shard_tp1_pp0.bin";
  std::ifstream meta_file(dir_ + "/iter_0000010/metadata.json");
  const nlohmann::json meta = nlohmann::json::parse(meta_file);
  int64_t at = -1;
  for (const auto& t : meta["shards"][1]["tensors"]) {
    if (t["name"] == name) {
      at = t["offset"].get<int64_t>() + t["bytes"].get<int64_t>() - 20;
    }
  }
  ASSERT_GT(at, 0);
  std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char byte = 0;
  f.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x10);
  f.seekp(at);
  f.write(&byte, 1);
  f.close();
  // Only tp rank 1 reads that slice; rank 0 must fail with its message.
  ExpectAllFail(Load({2, 1, 1, false}),
                shard + ": checksum mismatch in tensor " + name +
                    "; the checkpoint is corrupt");
}

TEST_F(CheckpointTest, TruncatedShardAndMalformedMetadataAreErrors) {
  ExpectAllOk(Save({1, 2, 1, false}, 10));
  const std::string iter_dir = dir_ + "/iter_0000010";
  const std::string shard = iter_dir + "/shard_tp0_pp1.bin";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  ExpectAllFail(Load({1, 1, 1, false}), "lies past the end of the file");
  std::ofstream(iter_dir + "/metadata.json") << "{\"format\": \"meshtune";
  const std::vector<Loaded> out = Load({1, 1, 1, false});
  ExpectAllFail(out, iter_dir + "/metadata.json: malformed metadata");
  EXPECT_EQ(out[0].status.code(), Status::Code::kIoError);
}

TEST_F(CheckpointTest, MissingTensorIsAnError) {
  TinyModel without_norm;
  without_norm.final_norm = false;
  ExpectAllOk(Save({1, 2, 1, false}, 10, without_norm));
  ExpectAllFail(Load({1, 2, 1, false}),
                "tensor decoder.final_layernorm.weight is missing from "
                "checkpoint " +
                    dir_ + "/iter_0000010");
}

TEST_F(CheckpointTest, WrongShapeIsAnError) {
  TinyModel bigger_vocab;
  bigger_vocab.vocab = 60;
  ExpectAllOk(Save({2, 1, 1, false}, 10, bigger_vocab));
  ExpectAllFail(Load({1, 2, 1, false}),
                "tensor embedding.word_embeddings.weight has shape [60, 8] in "
                "checkpoint " +
                    dir_ + "/iter_0000010 but [50, 8] in the model");
}

TEST_F(CheckpointTest, NoCheckpointIsNotFound) {
  for (const std::string& dir : {dir_, root_}) {
    dir_ = dir;
    const std::vector<Loaded> out = Load({1, 2, 1, false});
    ExpectAllFail(out, "no checkpoint in " + dir);
    for (const Loaded& l : out) {
      EXPECT_EQ(l.status.code(), Status::Code::kNotFound);
    }
  }
}

TEST_F(CheckpointTest, TrackerNamingAMissingIterationIsNotFound) {
  ExpectAllOk(Save({1, 1, 1, false}, 10));
  std::ofstream(dir_ + "/latest_checkpointed_iteration.txt") << "30\n";
  const std::vector<Loaded> out = Load({1, 1, 1, false});
  ExpectAllFail(out, "iter_0000030/metadata.json is missing");
  EXPECT_EQ(out[0].status.code(), Status::Code::kNotFound);
}

// ------------------------------------------------- special and stale files

TEST_F(CheckpointTest, FifoInPlaceOfAnyCheckpointFileIsAnErrorNotAHang) {
  ExpectAllOk(Save({1, 1, 1, false}, 10));
  const std::string iter_dir = dir_ + "/iter_0000010";
  struct Case {
    std::string path, what;
  };
  for (const Case& c :
       {Case{iter_dir + "/shard_tp0_pp0.bin", "checkpoint shard"},
        Case{iter_dir + "/metadata.json", "checkpoint metadata"},
        Case{dir_ + "/latest_checkpointed_iteration.txt",
             "checkpoint tracker file"}}) {
    SCOPED_TRACE(c.path);
    const std::string saved = c.path + ".saved";
    fs::rename(c.path, saved);
    ASSERT_EQ(::mkfifo(c.path.c_str(), 0600), 0);
    // A reader blocked on the FIFO (the bug) is released by opening its
    // write end, so a regression fails the test instead of hanging it.
    auto load = std::async(std::launch::async, [&] {
      return Load({1, 1, 1, false});
    });
    const bool hung =
        load.wait_for(std::chrono::seconds(10)) != std::future_status::ready;
    while (hung && load.wait_for(std::chrono::milliseconds(50)) !=
                       std::future_status::ready) {
      const int fd = ::open(c.path.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
    const std::vector<Loaded> out = load.get();
    EXPECT_FALSE(hung) << "loading blocked on the FIFO";
    const std::string want =
        c.what + " '" + c.path +
        "' is not a regular file (a FIFO, socket or device)";
    ExpectAllFail(out, want);
    EXPECT_EQ(out[0].status.message(), want);
    EXPECT_EQ(out[0].status.hint(),
              "the checkpoint is corrupt; load an older checkpoint or save "
              "again");
    EXPECT_EQ(out[0].status.ExitCode(), 2);
    fs::remove(c.path);
    fs::rename(saved, c.path);
  }
  ExpectLoaded(Load({1, 1, 1, false}), 10);
}

TEST_F(CheckpointTest, StaleTempsOfDeadSavesGoLiveOnesStay) {
  ExpectAllOk(Save({1, 1, 1, false}, 10));
  const std::string dead = std::to_string(DeadPid());
  // A process that is certainly alive and not this one: our parent.
  const std::string live = std::to_string(::getppid());
  const std::vector<std::string> dead_entries = {
      "iter_0000020.tmp-" + dead, "iter_0000020.tmp-" + dead + "-old",
      "latest_checkpointed_iteration.txt.tmp-" + dead};
  const std::vector<std::string> live_entries = {
      "iter_0000030.tmp-" + live,
      "latest_checkpointed_iteration.txt.tmp-" + live};
  auto make = [&] {
    for (const std::string& e : dead_entries) {
      if (e.rfind("iter_", 0) == 0) {
        fs::create_directories(dir_ + "/" + e);
        std::ofstream(dir_ + "/" + e + "/shard_tp0_pp0.bin") << "partial";
      } else {
        std::ofstream(dir_ + "/" + e) << "20";
      }
    }
  };
  fs::create_directories(dir_ + "/" + live_entries[0]);
  std::ofstream(dir_ + "/" + live_entries[1]) << "30";
  // A load removes the dead saves' leftovers (a run that only loads would
  // otherwise keep them for ever) and keeps the live save's files.
  make();
  ExpectLoaded(Load({1, 1, 1, false}), 10);
  std::vector<std::string> expected = {
      "iter_0000010", "iter_0000030.tmp-" + live,
      "latest_checkpointed_iteration.txt",
      "latest_checkpointed_iteration.txt.tmp-" + live};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Entries(), expected);
  // So does a save.
  make();
  ExpectAllOk(Save({1, 1, 1, false}, 10));
  EXPECT_EQ(Entries(), expected);
}

// ----------------------------------------------- what metadata.json says

// Rewrites the saved metadata.json of iteration 10 through `edit`.
void EditMetadata(const std::string& dir,
                  const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = dir + "/iter_0000010/metadata.json";
  std::ifstream in(path);
  nlohmann::json meta = nlohmann::json::parse(in);
  in.close();
  edit(meta);
  std::ofstream(path) << meta.dump(1);
}

TEST_F(CheckpointTest, EditedConsumedSamplesIsAnInputError) {
  ExpectAllOk(Save({1, 1, 1, false}, 10));
  const std::string path = dir_ + "/iter_0000010/metadata.json";
  for (int64_t consumed : {int64_t{-5}, int64_t{9}}) {
    EditMetadata(dir_,
                 [&](nlohmann::json& m) { m["consumed_samples"] = consumed; });
    const std::string want =
        path + ": consumed_samples " + std::to_string(consumed) +
        " is below iteration 10 (every iteration consumes at least one "
        "sample)";
    const std::vector<Loaded> out = Load({1, 1, 1, false});
    ExpectAllFail(out, want);
    EXPECT_EQ(out[0].status.message(), want);
    EXPECT_EQ(out[0].status.hint(),
              "the metadata was edited or is corrupt; restore it, or load an "
              "older checkpoint");
    EXPECT_EQ(out[0].status.ExitCode(), 2);
    const StatusOr<CheckpointState> state = ReadCheckpointState(dir_);
    ASSERT_FALSE(state.ok());
    EXPECT_EQ(state.status().message(), want);
  }
  // 10 iterations of one sample each is possible, and loads.
  EditMetadata(dir_, [](nlohmann::json& m) { m["consumed_samples"] = 10; });
  const StatusOr<CheckpointState> state = ReadCheckpointState(dir_);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->iteration, 10);
  EXPECT_EQ(state->consumed_samples, 10);
}

TEST_F(CheckpointTest, MetadataCannotPointOutsideItsShards) {
  ExpectAllOk(Save({1, 1, 1, false}, 10));
  const std::string path = dir_ + "/iter_0000010/metadata.json";
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string message;
  };
  const std::string proj = "decoder.layers.0.self_attention.linear_proj.weight";
  auto tensor = [&](nlohmann::json& m) -> nlohmann::json& {
    for (auto& t : m["shards"][0]["tensors"]) {
      if (t["name"] == proj) return t;
    }
    return m["shards"][0]["tensors"][0];
  };
  const std::vector<Case> cases = {
      // Another file named as a shard (a device, another directory).
      {[](nlohmann::json& m) { m["shards"][0]["file"] = "../../dev/zero"; },
       "shard (tp 0, pp 0) is not named shard_tp0_pp0.bin"},
      // A size that would make the loader allocate petabytes.
      {[&](nlohmann::json& m) { tensor(m)["bytes"] = int64_t{1} << 50; },
       "tensor " + proj + " in shard_tp0_pp0.bin has offset " +
           std::to_string(0) + " and size " + std::to_string(int64_t{1} << 50) +
           ", which do not fit its record"},
      {[&](nlohmann::json& m) {
         tensor(m)["blocks"] = nlohmann::json::parse("[[0, 9, 0, 8]]");
       },
       "tensor " + proj +
           " in shard_tp0_pp0.bin has a block outside its "
           "shape"},
      {[](nlohmann::json& m) { m["parallel"]["tp"] = 2; },
       "it lists 1 shards but tp·pp = 2"},
      {[](nlohmann::json& m) { m["iteration"] = -1; },
       "iteration -1 is negative"},
  };
  for (const Case& c : cases) {
    ExpectAllOk(Save({1, 1, 1, false}, 10));
    // The offset in the expected message is the saved one.
    std::string want = c.message;
    {
      std::ifstream in(path);
      const nlohmann::json meta = nlohmann::json::parse(in);
      for (const auto& t : meta["shards"][0]["tensors"]) {
        if (t["name"] == proj) {
          const std::string at = "has offset 0 ";
          const size_t pos = want.find(at);
          if (pos != std::string::npos) {
            want.replace(pos, at.size(),
                         "has offset " +
                             std::to_string(t["offset"].get<int64_t>()) + " ");
          }
        }
      }
    }
    EditMetadata(dir_, c.edit);
    SCOPED_TRACE(want);
    const std::vector<Loaded> out = Load({1, 1, 1, false});
    ExpectAllFail(out, path + ": " + want);
    EXPECT_EQ(out[0].status.ExitCode(), 2);
  }
}

TEST_F(CheckpointTest, ReadCheckpointStateReadsNoShard) {
  ExpectAllOk(Save({2, 1, 1, false}, 10));
  fs::remove(dir_ + "/iter_0000010/shard_tp1_pp0.bin");
  const StatusOr<CheckpointState> state = ReadCheckpointState(dir_);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->iteration, 10);
  EXPECT_EQ(state->consumed_samples, 80);
  const StatusOr<CheckpointState> none = ReadCheckpointState(root_);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
}

TEST(ResumeSamplesTest, CoversTheCheckpointAndTheRemainingSteps) {
  TrainConfig c;
  c.global_batch_size = 2;
  c.train_iters = 4;
  // Saved at gbs 8 after 3 steps: reads samples 24 and 25 next.
  StatusOr<int64_t> n = ResumeSamples("ck", {3, 24}, c);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 26);
  // The same gbs throughout: what a straight run reads (same data order).
  c.global_batch_size = 8;
  c.train_iters = 10;
  n = ResumeSamples("ck", {3, 24}, c);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 80);
  // A smaller gbs before: the straight run's count still holds.
  n = ResumeSamples("ck", {3, 6}, c);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 80);
  EXPECT_TRUE(CheckResume("ck", {3, 6}, c, 80).ok());
  const Status short_data = CheckResume("ck", {3, 60}, c, 80);
  EXPECT_EQ(short_data.message(),
            "resuming from the checkpoint in ck at iteration 3 (60 samples "
            "consumed) needs 116 training samples, but the data holds 80");
  EXPECT_EQ(short_data.ExitCode(), 2);
}

TEST(ResumeSamplesTest, NothingToTrainAndOverflowAreInputErrors) {
  TrainConfig c;
  c.global_batch_size = 8;
  c.train_iters = 3;
  for (int64_t at : {3, 7}) {
    const StatusOr<int64_t> n = ResumeSamples("ck", {at, 8 * at}, c);
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.status().message(), "the checkpoint in ck is at iteration " +
                                        std::to_string(at) +
                                        " >= --steps 3: nothing to train");
    EXPECT_EQ(n.status().hint(),
              "pass --steps greater than " + std::to_string(at) +
                  " (--steps counts the checkpoint's iterations), or leave "
                  "out --load");
    EXPECT_EQ(n.status().ExitCode(), 2);
  }
  const StatusOr<int64_t> n =
      ResumeSamples("ck", {1, std::numeric_limits<int64_t>::max() - 4}, c);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().ExitCode(), 2);
  EXPECT_NE(n.status().message().find("more samples than can be counted"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtune::engine
