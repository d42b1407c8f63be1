// SearchSpace::Merge and the search-space YAML parser.
#include "search_spaces/space/search_space.h"

#include <gtest/gtest.h>

#include <vector>

#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

using I = std::vector<int64_t>;
using B = std::vector<bool>;

const Recompute kNone{RecomputeGranularity::kNone};
const Recompute kSelective{RecomputeGranularity::kSelective};
const Recompute kFullAny{RecomputeGranularity::kFull, RecomputeMethod::kUniform,
                         0};
const Recompute kFull1{RecomputeGranularity::kFull, RecomputeMethod::kUniform,
                       1};
const Recompute kBlock2{RecomputeGranularity::kFull, RecomputeMethod::kBlock,
                        2};

TEST(SearchSpaceMergeTest, EmptySideTakesTheOther) {
  SearchSpace file, flags;
  file.tp = {1, 2, 4, 8};
  flags.pp = {4};
  StatusOr<SearchSpace> m = SearchSpace::Merge(file, flags);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->tp, I({1, 2, 4, 8}));
  EXPECT_EQ(m->pp, I({4}));
  EXPECT_TRUE(m->vpp.empty());
  EXPECT_TRUE(m->recompute.empty());
  EXPECT_EQ(m->max_tp, 0);
  EXPECT_EQ(m->max_mbs, 16);
}

TEST(SearchSpaceMergeTest, BothPinnedIntersect) {
  SearchSpace file, flags;
  file.tp = {1, 2, 4, 8};
  flags.tp = {8, 16, 4};
  file.mbs = {1, 2};
  flags.mbs = {2};
  file.sp = {false, true};
  flags.sp = {true};
  file.dist_opt = {true};
  flags.dist_opt = {true, false};
  StatusOr<SearchSpace> m = SearchSpace::Merge(file, flags);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->tp, I({4, 8}));
  EXPECT_EQ(m->mbs, I({2}));
  EXPECT_EQ(m->sp, B({true}));
  EXPECT_EQ(m->dist_opt, B({true}));
}

TEST(SearchSpaceMergeTest, Contradictions) {
  SearchSpace file, flags;
  file.tp = {4};
  flags.tp = {8};
  StatusOr<SearchSpace> m = SearchSpace::Merge(file, flags);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            "contradictory pins: tensor_model_parallel_size 8 (command line) "
            "and 4 (search space file)");
  EXPECT_EQ(m.status().hint(),
            "drop the command-line pin or pick a value the search space file "
            "allows");

  SearchSpace f2, g2;
  f2.pp = {1, 2};
  g2.pp = {4, 8};
  EXPECT_EQ(SearchSpace::Merge(f2, g2).status().message(),
            "contradictory pins: pipeline_model_parallel_size 4,8 (command "
            "line) and 1,2 (search space file)");

  SearchSpace f3, g3;
  f3.sp = {false};
  g3.sp = {true};
  EXPECT_EQ(SearchSpace::Merge(f3, g3).status().message(),
            "contradictory pins: sequence_parallel true (command line) and "
            "false (search space file)");

  SearchSpace f4, g4;
  f4.recompute = {kNone, kSelective};
  g4.recompute = {kFullAny};
  EXPECT_EQ(SearchSpace::Merge(f4, g4).status().message(),
            "contradictory pins: recompute full:any (command line) and "
            "none,selective (search space file)");
}

TEST(SearchSpaceMergeTest, RecomputeWildcard) {
  SearchSpace file, flags;
  file.recompute = {kNone, kFullAny};
  flags.recompute = {kBlock2, kSelective};
  StatusOr<SearchSpace> m = SearchSpace::Merge(file, flags);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->recompute, std::vector<Recompute>({kBlock2}));

  file.recompute = {kFull1, kBlock2};
  flags.recompute = {kFullAny};
  m = SearchSpace::Merge(file, flags);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->recompute, std::vector<Recompute>({kFull1, kBlock2}));

  flags.recompute = {kFull1};
  m = SearchSpace::Merge(file, flags);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->recompute, std::vector<Recompute>({kFull1}));
}

TEST(SearchSpaceMergeTest, LimitsPreferFlags) {
  SearchSpace file, flags;
  file.max_tp = 4;
  file.max_mbs = 8;
  StatusOr<SearchSpace> m = SearchSpace::Merge(file, flags);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->max_tp, 4);
  EXPECT_EQ(m->max_mbs, 8);
  flags.max_tp = 16;
  flags.max_mbs = 2;
  m = SearchSpace::Merge(file, flags);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->max_tp, 16);
  EXPECT_EQ(m->max_mbs, 2);
}

Status ParseError(const std::string& text) {
  StatusOr<SearchSpace> s = ParseSearchSpaceYaml(text, "s.yaml");
  EXPECT_FALSE(s.ok()) << "expected an error for:\n" << text;
  return s.status();
}

TEST(SearchSpaceYamlTest, ScalarsAndLists) {
  StatusOr<SearchSpace> s = ParseSearchSpaceYaml(
      "tensor_model_parallel_size: [8, 2, 4, 2]\n"
      "pipeline_model_parallel_size: 4\n"
      "virtual_pipeline_model_parallel_size: [1, 3]\n"
      "context_parallel_size: 1\n"
      "expert_model_parallel_size: [1, 8]\n"
      "data_parallel_size: 16\n"
      "sequence_parallel: [true, false]\n"
      "micro_batch_size: [1, 2]\n"
      "use_distributed_optimizer: yes\n"
      "max_tensor_model_parallel_size: 8\n"
      "max_micro_batch_size: 4\n",
      "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->tp, I({2, 4, 8}));  // sorted, duplicates removed
  EXPECT_EQ(s->pp, I({4}));
  EXPECT_EQ(s->vpp, I({1, 3}));
  EXPECT_EQ(s->cp, I({1}));
  EXPECT_EQ(s->ep, I({1, 8}));
  EXPECT_EQ(s->dp, I({16}));
  EXPECT_EQ(s->sp, B({false, true}));
  EXPECT_EQ(s->mbs, I({1, 2}));
  EXPECT_EQ(s->dist_opt, B({true}));
  EXPECT_TRUE(s->recompute.empty());
  EXPECT_EQ(s->max_tp, 8);
  EXPECT_EQ(s->max_mbs, 4);
}

TEST(SearchSpaceYamlTest, RecomputeExpansion) {
  StatusOr<SearchSpace> s = ParseSearchSpaceYaml(
      "recompute_granularity: [selective, full]\n", "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->recompute, std::vector<Recompute>({kSelective, kFullAny}));

  s = ParseSearchSpaceYaml(
      "recompute_granularity: full\n"
      "recompute_method: block\n"
      "recompute_num_layers: [2, 1]\n",
      "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Recompute block1{RecomputeGranularity::kFull, RecomputeMethod::kBlock,
                         1};
  EXPECT_EQ(s->recompute, std::vector<Recompute>({block1, kBlock2}));

  // num_layers alone: both methods.
  s = ParseSearchSpaceYaml(
      "recompute_granularity: full\nrecompute_num_layers: 1\n", "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->recompute, std::vector<Recompute>({kFull1, block1}));
}

TEST(SearchSpaceYamlTest, Errors) {
  Status s = ParseError("tensor_parallel_size: 8\n");
  EXPECT_EQ(s.message(),
            "s.yaml:1: unknown key 'tensor_parallel_size' in search space");
  EXPECT_EQ(s.hint(), "did you mean 'tensor_model_parallel_size'?");
  s = ParseError("pipeline_model_parallel_size: [1, 0]\n");
  EXPECT_EQ(s.message(),
            "s.yaml:1: pipeline_model_parallel_size: expected a positive "
            "integer, got '0'");
  s = ParseError("micro_batch_size: []\n");
  EXPECT_EQ(s.message(),
            "s.yaml:1: micro_batch_size: expected an integer or a non-empty "
            "list, got a list");
  s = ParseError("sequence_parallel: sometimes\n");
  EXPECT_EQ(s.message(),
            "s.yaml:1: sequence_parallel: expected true or false, got "
            "'sometimes'");
  s = ParseError("recompute_granularity: [none, partial]\n");
  EXPECT_EQ(s.message(),
            "s.yaml:1: recompute_granularity: expected one of none, "
            "selective, full, got 'partial'");
  s = ParseError("recompute_granularity: selective\nrecompute_method: block\n");
  EXPECT_EQ(s.message(),
            "s.yaml:2: recompute_method applies only to full recompute, but "
            "recompute_granularity does not include full");
  s = ParseError("recompute_granularity: full\nrecompute_method: block\n");
  EXPECT_EQ(s.message(),
            "s.yaml:2: recompute_method is pinned without "
            "recompute_num_layers");
  s = ParseError("tensor_model_parallel_size: [1, 2\n");
  EXPECT_EQ(s.message().rfind("s.yaml:1: malformed YAML: ", 0), 0u)
      << s.message();
}

TEST(SearchSpaceYamlTest, ExpertTensorParallelSize) {
  StatusOr<SearchSpace> s =
      ParseSearchSpaceYaml("expert_tensor_parallel_size: [4, 1]\n", "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->etp, I({1, 4}));
  EXPECT_TRUE(s->ep.empty());
  s = ParseSearchSpaceYaml("expert_tensor_parallel_size: 2\n", "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->etp, I({2}));

  Status e = ParseError("expert_tensor_parallel_size: 0\n");
  EXPECT_EQ(e.message(),
            "s.yaml:1: expert_tensor_parallel_size: expected a positive "
            "integer, got '0'");
  // A flag pin that the file does not allow is a contradiction.
  SearchSpace file, flags;
  file.etp = {1};
  flags.etp = {2};
  StatusOr<SearchSpace> merged = SearchSpace::Merge(file, flags);
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().message(),
            "contradictory pins: expert_tensor_parallel_size 2 (command line) "
            "and 1 (search space file)");
}

TEST(SearchSpaceYamlTest, CommentsOnlyPinNothing) {
  StatusOr<SearchSpace> s = ParseSearchSpaceYaml("# nothing\n", "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->tp.empty());
  EXPECT_TRUE(s->recompute.empty());
}

}  // namespace
}  // namespace meshtune::search_spaces
