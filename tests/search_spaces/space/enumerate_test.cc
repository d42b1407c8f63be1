// Tests for EnumerateConfigs and CheckConfig: each Megatron rule on its own,
// pins, a hand-counted space, and properties over many (model, GPU count)
// pairs. Specs are built in code (no presets).
#include "search_spaces/space/enumerate.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "search_spaces/pipeline_layout.h"

namespace meshtune::search_spaces {
namespace {

ModelSpec Dense(int64_t layers, int64_t heads, int64_t groups = 0) {
  ModelSpec m;
  m.name = "test";
  m.num_layers = layers;
  m.num_attention_heads = heads;
  m.num_query_groups = groups > 0 ? groups : heads;
  m.hidden_size = 128 * heads;
  m.kv_channels = 128;
  m.ffn_hidden_size = 4 * m.hidden_size;
  m.vocab_size = 32000;
  m.seq_length = 2048;
  return m;
}

ModelSpec Moe(int64_t layers, int64_t heads, int64_t experts) {
  ModelSpec m = Dense(layers, heads);
  m.num_experts = experts;
  m.moe_router_topk = 2;
  return m;
}

TrainingSpec Training(int64_t gpus, int64_t gbs, int64_t seq = 2048) {
  TrainingSpec t;
  t.num_gpus = gpus;
  t.global_batch_size = gbs;
  t.seq_length = seq;
  return t;
}

ClusterSpec Cluster(int64_t gpus_per_node = 8, int64_t nvlink = 8) {
  ClusterSpec c;
  c.name = "test";
  c.gpus_per_node = static_cast<int>(gpus_per_node);
  c.nvlink_domain_gpus = static_cast<int>(nvlink);
  return c;
}

ParallelConfig Config(int64_t tp, int64_t pp, int64_t cp, int64_t dp,
                      int64_t vpp = 1, int64_t ep = 1, int64_t mbs = 1) {
  ParallelConfig c;
  c.tp = tp;
  c.pp = pp;
  c.cp = cp;
  c.dp = dp;
  c.vpp = vpp;
  c.ep = ep;
  c.mbs = mbs;
  return c;
}

Recompute Full(RecomputeMethod method, int64_t layers) {
  Recompute r;
  r.granularity = RecomputeGranularity::kFull;
  r.method = method;
  r.num_layers = layers;
  return r;
}

std::string Describe(const ParallelConfig& c) {
  return "tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp) + " vpp" +
         std::to_string(c.vpp) + " cp" + std::to_string(c.cp) + " dp" +
         std::to_string(c.dp) + " ep" + std::to_string(c.ep) + " etp" +
         std::to_string(c.expert_tp()) + (c.sp ? " sp" : "") + " mbs" +
         std::to_string(c.mbs) + " rc" +
         std::to_string(static_cast<int>(c.recompute.granularity)) + "/" +
         std::to_string(static_cast<int>(c.recompute.method)) + "/" +
         std::to_string(c.recompute.num_layers) +
         (c.dist_opt ? " dist_opt" : "") + " layout" +
         std::to_string(c.layout_first_layers) + "/" +
         std::to_string(c.layout_last_layers);
}

// A search space with every axis pinned to one configuration.
SearchSpace PinAll(const ParallelConfig& c) {
  SearchSpace s;
  s.tp = {c.tp};
  s.pp = {c.pp};
  s.vpp = {c.vpp};
  s.cp = {c.cp};
  s.dp = {c.dp};
  s.ep = {c.ep};
  s.etp = {c.expert_tp()};
  s.mbs = {c.mbs};
  s.sp = {c.sp};
  s.dist_opt = {c.dist_opt};
  s.recompute = {c.recompute};
  return s;
}

int64_t SumPruned(const Enumeration& e) {
  int64_t sum = 0;
  for (const auto& [reason, count] : e.pruned) sum += count;
  return sum;
}

// One minimal case per reason code, through CheckConfig, and the same
// configuration pinned in EnumerateConfigs is pruned under the same code.
TEST(EnumerateTest, EachRuleHasItsReasonCode) {
  struct Case {
    std::string want;
    ModelSpec model;
    TrainingSpec training;
    ParallelConfig config;
    std::string detail_part;
  };
  ParallelConfig sp_tp1 = Config(1, 1, 1, 8);
  sp_tp1.sp = true;
  ParallelConfig rc_range = Config(1, 2, 1, 4);
  rc_range.recompute = Full(RecomputeMethod::kBlock, 5);  // 8 layers / pp 2
  const std::vector<Case> cases = {
      {"", Dense(8, 8), Training(8, 16), Config(2, 2, 1, 2), ""},
      {"nonpositive_size", Dense(8, 8), Training(8, 16), Config(0, 1, 1, 8),
       "at least 1"},
      {"world_not_divisible", Dense(8, 24), Training(8, 16), Config(3, 1, 1, 2),
       "tp 3 does not divide the 8 GPUs"},
      {"world_not_divisible", Dense(8, 8), Training(8, 16), Config(2, 1, 1, 2),
       "= 4 but there are 8 GPUs"},
      {"tp_not_dividing_heads", Dense(8, 12), Training(8, 16),
       Config(8, 1, 1, 1), "tp 8 does not divide num_attention_heads 12"},
      {"tp_not_dividing_query_groups", Dense(8, 24, 6), Training(8, 16),
       Config(4, 1, 1, 2), "num_query_groups 6"},
      {"layers_not_divisible_by_pp", Dense(3, 8), Training(8, 16),
       Config(1, 8, 1, 1), "num_layers 3 has no pipeline layout over pp 8"},
      {"seq_not_divisible_by_cp", Dense(8, 8), Training(8, 16, 2052),
       Config(1, 1, 4, 2), "2·cp = 8"},
      {"gbs_not_divisible_by_mbs_dp", Dense(8, 8), Training(8, 12),
       Config(1, 1, 1, 8), "dp 8"},
      {"gbs_not_divisible_by_mbs_dp", Dense(8, 8), Training(8, 16),
       Config(1, 1, 1, 8, 1, 1, 4), "mbs·dp = 32"},
      {"ep_not_dividing_experts", Dense(8, 8), Training(8, 16),
       Config(1, 1, 1, 8, 1, 2), "num_experts 0"},
      {"ep_not_dividing_experts", Moe(8, 8, 6), Training(8, 16),
       Config(1, 1, 1, 8, 1, 4), "num_experts 6"},
      {"ep_not_dividing_dp_cp", Moe(8, 8, 8), Training(8, 16),
       Config(2, 1, 1, 4, 1, 8), "dp·cp = 4"},
      {"vpp_requires_pp", Dense(8, 8), Training(8, 16), Config(1, 1, 1, 8, 2),
       "pp >= 2"},
      {"layers_not_divisible_by_pp_vpp", Dense(8, 8), Training(8, 16),
       Config(1, 2, 1, 4, 9), "pp·vpp = 18"},
      {"microbatches_vs_pp", Dense(8, 8), Training(8, 20),
       Config(1, 4, 1, 2, 2), "10 micro-batches"},
      {"microbatches_vs_pp", Dense(8, 8), Training(8, 16),
       Config(1, 4, 1, 2, 2, 1, 4), "2 micro-batches"},
      {"sp_requires_tp", Dense(8, 8), Training(8, 16), sp_tp1, "tp > 1"},
      {"moe_tp_requires_sp", Moe(8, 8, 8), Training(8, 16), Config(2, 1, 1, 4),
       "needs sequence parallelism"},
      {"recompute_num_layers_out_of_range", Dense(8, 8), Training(8, 16),
       rc_range, "outside [1, 4]"},
  };
  const ClusterSpec cluster = Cluster();
  std::set<std::string> codes_seen;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want + ": " + Describe(c.config));
    std::string detail = "stale";
    EXPECT_EQ(CheckConfig(c.model, c.training, cluster, c.config, &detail),
              c.want);
    EXPECT_NE(detail.find(c.detail_part), std::string::npos) << detail;
    if (c.want.empty()) {
      EXPECT_TRUE(detail.empty());
    }
    codes_seen.insert(c.want);
    if (c.config.dp < 1) continue;
    const Enumeration e =
        EnumerateConfigs(c.model, c.training, cluster, PinAll(c.config));
    if (c.want.empty()) {
      ASSERT_EQ(e.configs.size(), 1u);
      EXPECT_TRUE(e.configs[0] == c.config);
      EXPECT_TRUE(e.pruned.empty());
    } else if (c.want != "world_not_divisible") {
      EXPECT_TRUE(e.configs.empty());
      EXPECT_EQ(e.pruned, (std::map<std::string, int64_t>{{c.want, 1}}));
    }
  }
  EXPECT_EQ(codes_seen.size(), 16u);  // "" + 15 codes reachable here
}

// A query-group count that divides tp is fine (KV heads are replicated,
// transformer_config.py accepts a multiple or a divisor).
TEST(EnumerateTest, QueryGroupsMayDivideTp) {
  const ModelSpec gqa = Dense(8, 64, 8);
  EXPECT_EQ(CheckConfig(gqa, Training(16, 16), Cluster(), Config(16, 1, 1, 1)),
            "");
  EXPECT_EQ(CheckConfig(Dense(8, 64, 12), Training(8, 16), Cluster(),
                        Config(8, 1, 1, 1)),
            "tp_not_dividing_query_groups");
}

// Unpinned tp stops at the NVLink domain (or max_tp); the rest is counted.
TEST(EnumerateTest, TpLimitedToNvlinkDomainUnlessPinned) {
  const ModelSpec model = Dense(8, 32);
  const TrainingSpec training = Training(64, 64);
  SearchSpace space;
  Enumeration e = EnumerateConfigs(model, training, Cluster(8, 8), space);
  int64_t max_tp = 0;
  for (const auto& c : e.configs) max_tp = std::max(max_tp, c.tp);
  EXPECT_EQ(max_tp, 8);
  EXPECT_EQ(e.pruned.at("tp_exceeds_nvlink_domain"), 3);  // 16, 32, 64
  space.max_tp = 4;
  e = EnumerateConfigs(model, training, Cluster(8, 8), space);
  EXPECT_EQ(e.pruned.at("tp_exceeds_nvlink_domain"), 4);
  space.tp = {16};
  e = EnumerateConfigs(model, training, Cluster(8, 8), space);
  ASSERT_FALSE(e.configs.empty());
  for (const auto& c : e.configs) EXPECT_EQ(c.tp, 16);
  EXPECT_EQ(e.pruned.count("tp_exceeds_nvlink_domain"), 0u);
  EXPECT_EQ(CheckConfig(model, training, Cluster(8, 8), Config(16, 1, 1, 4)),
            "");
}

// `--tp 3` for 1024 GPUs gives one clear count and nothing else.
TEST(EnumerateTest, ImpossibleTpPinGivesOneCount) {
  SearchSpace space;
  space.tp = {3};
  const Enumeration e =
      EnumerateConfigs(Dense(96, 96), Training(1024, 1536), Cluster(), space);
  EXPECT_TRUE(e.configs.empty());
  EXPECT_EQ(e.pruned,
            (std::map<std::string, int64_t>{{"world_not_divisible", 1}}));
  EXPECT_EQ(e.considered, 1);
  space.tp = {5};
  const Enumeration heads =
      EnumerateConfigs(Dense(96, 96), Training(1000, 1000), Cluster(), space);
  EXPECT_EQ(heads.pruned,
            (std::map<std::string, int64_t>{{"tp_not_dividing_heads", 1}}));
}

// Counted by hand: 4 layers, 4 heads, 4 GPUs, gbs 8, seq 1024, mbs {1, 2}.
//   Recompute variants by layers per virtual stage Lc: none, selective, full
//   uniform 1, full block 1, 2, 4, ... < Lc  ->  Lc 4: 5, Lc 2: 4, Lc 1: 3.
//   tp 1 (sp off):  pp 1: cp 1/2/4, each 2 mbs × 5 rc × 2 dist_opt = 60
//                   pp 2: cp 1/2, each 2 mbs × (vpp 1: 4 + vpp 2: 3) × 2 = 56
//                   pp 4: cp 1 dp 1, 2 mbs × 3 rc × 1 dist_opt = 6   -> 122
//   tp 2 (sp off/on): pp 1: cp 1/2, each 2 mbs × 5 × 2 dist × 2 sp = 80
//                     pp 2: dp 1, 2 mbs × 7 × 1 × 2 sp = 28        -> 108
//   tp 4 (sp off/on): pp 1 dp 1: 2 mbs × 5 × 1 × 2 sp = 20
//   Even splits: 250. pp 2 x vpp 3 has no even split of 4 layers, but the
//   uneven family (PipelineLayout::UnevenFamily) has first 0, four middle
//   chunks of 1, last 0, with Lc 1 (3 rc): tp 1: cp 1/2 × 2 mbs × 3 × 2
//   dist_opt = 24, tp 2 dp 1: 2 mbs × 3 × 2 sp = 12 -> 36.
//   Total 286, nothing pruned. With 2-GPU NVLink domains tp 4 is pruned:
//   266 valid + 1 tp_exceeds_nvlink_domain.
TEST(EnumerateTest, SmallSpaceMatchesHandCount) {
  const ModelSpec model = Dense(4, 4);
  const TrainingSpec training = Training(4, 8, 1024);
  SearchSpace space;
  space.max_mbs = 2;
  Enumeration e = EnumerateConfigs(model, training, Cluster(4, 4), space);
  EXPECT_EQ(e.configs.size(), 286u);
  EXPECT_TRUE(e.pruned.empty());
  EXPECT_EQ(e.considered, 286);
  e = EnumerateConfigs(model, training, Cluster(2, 2), space);
  EXPECT_EQ(e.configs.size(), 266u);
  EXPECT_EQ(e.pruned,
            (std::map<std::string, int64_t>{{"tp_exceeds_nvlink_domain", 1}}));
  EXPECT_EQ(e.considered, 267);
}

TEST(EnumerateTest, PinsAreHonoured) {
  const ModelSpec model = Moe(16, 16, 8);
  const TrainingSpec training = Training(32, 64);
  SearchSpace space;
  space.tp = {2, 4};
  space.pp = {2};
  space.vpp = {1, 2};
  space.ep = {2};
  space.mbs = {1};
  space.sp = {true};
  space.dist_opt = {true};
  space.recompute = {Full(RecomputeMethod::kUniform, 0)};  // any full variant
  const Enumeration e = EnumerateConfigs(model, training, Cluster(), space);
  ASSERT_FALSE(e.configs.empty());
  std::set<int64_t> tps, vpps;
  for (const auto& c : e.configs) {
    SCOPED_TRACE(Describe(c));
    tps.insert(c.tp);
    vpps.insert(c.vpp);
    EXPECT_EQ(c.pp, 2);
    EXPECT_EQ(c.ep, 2);
    EXPECT_EQ(c.mbs, 1);
    EXPECT_TRUE(c.sp);
    EXPECT_TRUE(c.dist_opt);
    EXPECT_EQ(c.recompute.granularity, RecomputeGranularity::kFull);
    EXPECT_EQ(CheckConfig(model, training, Cluster(), c), "");
  }
  EXPECT_EQ(tps, (std::set<int64_t>{2, 4}));
  EXPECT_EQ(vpps, (std::set<int64_t>{1, 2}));
  // A pinned dp keeps only the splits with that dp.
  SearchSpace dp_space;
  dp_space.dp = {4};
  for (const auto& c :
       EnumerateConfigs(model, training, Cluster(), dp_space).configs) {
    EXPECT_EQ(c.dp, 4);
  }
  // Pinned selective only, pinned block size too large for the stage.
  SearchSpace rc;
  rc.pp = {4};
  rc.vpp = {1};
  Recompute selective;
  selective.granularity = RecomputeGranularity::kSelective;
  rc.recompute = {selective, Full(RecomputeMethod::kBlock, 8)};
  const Enumeration r = EnumerateConfigs(model, training, Cluster(), rc);
  ASSERT_FALSE(r.configs.empty());
  for (const auto& c : r.configs) {
    EXPECT_EQ(c.recompute.granularity, RecomputeGranularity::kSelective);
  }
  EXPECT_GT(r.pruned.at("recompute_num_layers_out_of_range"), 0);
}

// Every emitted config is valid, uses all GPUs and is unique; the counts add
// up; the order is the same on a second run.
TEST(EnumerateTest, PropertiesOverManyModelsAndGpuCounts) {
  struct M {
    ModelSpec model;
    int64_t gbs;
  };
  const std::vector<M> models = {
      {Dense(12, 12), 64},   {Dense(24, 16, 4), 96}, {Dense(32, 32, 8), 128},
      {Dense(10, 20), 60},   {Moe(16, 16, 8), 64},   {Moe(12, 12, 6), 48},
      {Dense(96, 96), 1536},
  };
  int64_t total = 0;
  for (const M& m : models) {
    for (int64_t n : {1, 2, 6, 8, 12, 16, 32, 48, 64}) {
      const TrainingSpec training = Training(n, m.gbs);
      SCOPED_TRACE("layers " + std::to_string(m.model.num_layers) + " gpus " +
                   std::to_string(n));
      SearchSpace space;
      space.max_mbs = 4;
      const Enumeration e =
          EnumerateConfigs(m.model, training, Cluster(), space);
      std::set<std::string> seen;
      for (const auto& c : e.configs) {
        std::string detail;
        ASSERT_EQ(CheckConfig(m.model, training, Cluster(), c, &detail), "")
            << Describe(c) << ": " << detail;
        ASSERT_EQ(c.world(), n);
        ASSERT_TRUE(seen.insert(Describe(c)).second) << Describe(c);
        ASSERT_LE(c.tp, 8);
        ASSERT_TRUE(c.tp > 1 || !c.sp);
        ASSERT_TRUE(c.dp * c.cp > 1 || !c.dist_opt);
      }
      EXPECT_EQ(e.considered,
                static_cast<int64_t>(e.configs.size()) + SumPruned(e));
      const Enumeration again =
          EnumerateConfigs(m.model, training, Cluster(), space);
      ASSERT_EQ(again.configs.size(), e.configs.size());
      for (size_t i = 0; i < e.configs.size(); ++i) {
        ASSERT_TRUE(again.configs[i] == e.configs[i]);
      }
      total += static_cast<int64_t>(e.configs.size());
    }
  }
  EXPECT_GT(total, 10000);
}

// Random fully pinned configurations: the enumeration keeps exactly the
// valid ones and prunes the others once, under CheckConfig's code.
TEST(EnumerateTest, PinnedPointAgreesWithCheckConfig) {
  std::mt19937 rng(12345);
  auto pick = [&](std::vector<int64_t> v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  const std::vector<ModelSpec> models = {Dense(12, 12), Dense(16, 8, 2),
                                         Moe(12, 8, 4), Dense(9, 6)};
  std::map<std::string, int> codes;
  for (int i = 0; i < 4000; ++i) {
    const ModelSpec& model = models[i % models.size()];
    const int64_t n = pick({4, 8, 12, 16, 24});
    const TrainingSpec training =
        Training(n, pick({12, 16, 24, 48}), pick({1024, 1020}));
    ParallelConfig c;
    c.tp = pick({1, 2, 3, 4, 8});
    c.pp = pick({1, 2, 3, 4});
    c.cp = pick({1, 2, 4});
    c.dp = (n % (c.tp * c.pp * c.cp) == 0) ? n / (c.tp * c.pp * c.cp) : 1;
    c.vpp = pick({1, 2, 3});
    c.ep = pick({1, 2, 4});
    c.mbs = pick({1, 2, 4});
    c.sp = pick({0, 1}) == 1;
    c.dist_opt = pick({0, 1}) == 1;
    switch (pick({0, 1, 2, 3})) {
      case 0:
        break;
      case 1:
        c.recompute.granularity = RecomputeGranularity::kSelective;
        break;
      case 2:
        c.recompute = Full(RecomputeMethod::kUniform, pick({1, 2, 7}));
        break;
      default:
        c.recompute = Full(RecomputeMethod::kBlock, pick({1, 3, 6}));
    }
    SCOPED_TRACE(Describe(c) + " gpus " + std::to_string(n));
    const std::string code = CheckConfig(model, training, Cluster(), c);
    ++codes[code];
    const Enumeration e =
        EnumerateConfigs(model, training, Cluster(), PinAll(c));
    if (code.empty() && !PipelineLayout::Valid(model.num_layers, c.pp, c.vpp)) {
      // No even split: the pin enumerates the uneven family, and the
      // config without layout fields means its first member.
      const auto family =
          PipelineLayout::UnevenFamily(model.num_layers, c.pp, c.vpp);
      ASSERT_EQ(e.configs.size(), family.size());
      EXPECT_EQ(e.configs[0].layout_first_layers, family[0].first);
      EXPECT_EQ(e.configs[0].layout_last_layers, family[0].second);
      EXPECT_TRUE(e.pruned.empty());
    } else if (code.empty()) {
      ASSERT_EQ(e.configs.size(), 1u);
      EXPECT_TRUE(e.configs[0] == c);
      EXPECT_TRUE(e.pruned.empty());
    } else {
      // A rule decided after the layout counts once per layout member.
      const int64_t members = std::max<size_t>(
          1, PipelineLayout::Valid(model.num_layers, c.pp, c.vpp)
                 ? 1
                 : PipelineLayout::UnevenFamily(model.num_layers, c.pp, c.vpp)
                       .size());
      EXPECT_TRUE(e.configs.empty());
      const int64_t want = code == "sp_requires_tp" ||
                                   code == "moe_tp_requires_sp" ||
                                   code == "recompute_num_layers_out_of_range"
                               ? members
                               : 1;
      EXPECT_EQ(e.pruned, (std::map<std::string, int64_t>{{code, want}}));
    }
  }
  // The sample reaches valid configs and most rules.
  EXPECT_GT(codes[""], 50);
  EXPECT_GE(codes.size(), 12u);
}

// GPT-3 175B on 1024 GPUs: the numbers the design quotes (tp 8, pp 16,
// vpp 3 interleaving in the published recipe) are in the space.
TEST(EnumerateTest, Gpt3SpaceContainsPublishedRecipe) {
  const ModelSpec model = Dense(96, 96);
  const TrainingSpec training = Training(1024, 1536);
  const Enumeration e =
      EnumerateConfigs(model, training, Cluster(), SearchSpace());
  ParallelConfig recipe = Config(8, 16, 1, 8, 3, 1, 1);
  recipe.sp = true;
  recipe.dist_opt = true;
  recipe.recompute.granularity = RecomputeGranularity::kSelective;
  bool found = false;
  for (const auto& c : e.configs) found = found || c == recipe;
  EXPECT_TRUE(found);
  EXPECT_GT(e.configs.size(), 1000u);
  EXPECT_EQ(e.pruned.at("tp_exceeds_nvlink_domain"), 7);  // 16 ... 1024
}

}  // namespace
}  // namespace meshtune::search_spaces

namespace meshtune::search_spaces {
namespace {

TEST(EnumerateTest, UnevenLayerCountsUseEmbeddingAndLossAccounting) {
  // LLaMA-3 405B has 126 layers: pp 16 only exists with the embedding and
  // the loss counted as layers (128 units), as NeMo's recipe runs it.
  const ModelSpec m = Dense(126, 16);
  const TrainingSpec t = Training(256, 256);
  SearchSpace space;
  space.tp = {8};
  space.pp = {16};
  const Enumeration e = EnumerateConfigs(m, t, Cluster(), space);
  ASSERT_FALSE(e.configs.empty());
  std::set<int64_t> vpps;
  for (const ParallelConfig& c : e.configs) {
    EXPECT_EQ(c.pp, 16);
    EXPECT_EQ(CheckConfig(m, t, Cluster(), c), "");
    vpps.insert(c.vpp);
  }
  // 128 units over 16 stages: 8 per stage, so vpp 1, 2, 4 with the
  // accounting; vpp 8 (128 chunks of 1 unit) only in the uneven family:
  // empty first and last chunks, 126 chunks of one layer.
  EXPECT_EQ(vpps, (std::set<int64_t>{1, 2, 4, 8}));
  // pp 5 has neither split; the uneven family puts 26 layers on the first
  // stage, 26 on the middle ones and 22 on the last.
  EXPECT_EQ(CheckConfig(m, Training(40, 8), Cluster(), Config(8, 5, 1, 1)), "");
  const PipelineLayout five(126, Config(8, 5, 1, 1));
  EXPECT_EQ(five.LayersOnStage(0), 26);
  EXPECT_EQ(five.LayersOnStage(2), 26);
  EXPECT_EQ(five.LayersOnStage(4), 22);
}

}  // namespace
}  // namespace meshtune::search_spaces
