// ToString of recompute modes and parallel configurations.
#include "search_spaces/parallel_config.h"

#include <gtest/gtest.h>

namespace meshtune::search_spaces {
namespace {

TEST(ParallelConfigTest, EnumNames) {
  EXPECT_STREQ(ToString(RecomputeGranularity::kNone), "none");
  EXPECT_STREQ(ToString(RecomputeGranularity::kSelective), "selective");
  EXPECT_STREQ(ToString(RecomputeGranularity::kFull), "full");
  EXPECT_STREQ(ToString(RecomputeMethod::kUniform), "uniform");
  EXPECT_STREQ(ToString(RecomputeMethod::kBlock), "block");
}

TEST(ParallelConfigTest, RecomputeToString) {
  EXPECT_EQ(ToString(Recompute{}), "none");
  EXPECT_EQ(ToString(Recompute{RecomputeGranularity::kSelective}), "selective");
  // Method and num_layers do not matter below full.
  EXPECT_EQ(ToString(Recompute{RecomputeGranularity::kSelective,
                               RecomputeMethod::kBlock, 4}),
            "selective");
  EXPECT_EQ(ToString(Recompute{RecomputeGranularity::kFull,
                               RecomputeMethod::kUniform, 1}),
            "full");
  EXPECT_EQ(ToString(Recompute{RecomputeGranularity::kFull,
                               RecomputeMethod::kUniform, 2}),
            "full:uniform:2");
  EXPECT_EQ(ToString(Recompute{RecomputeGranularity::kFull,
                               RecomputeMethod::kBlock, 1}),
            "full:block:1");
  EXPECT_EQ(ToString(Recompute{RecomputeGranularity::kFull,
                               RecomputeMethod::kBlock, 4}),
            "full:block:4");
  EXPECT_EQ(ToString(Recompute{RecomputeGranularity::kFull,
                               RecomputeMethod::kUniform, 0}),
            "full:any");
}

TEST(ParallelConfigTest, ConfigToString) {
  ParallelConfig c;
  c.tp = 8;
  c.pp = 8;
  c.vpp = 3;
  c.dp = 16;
  c.sp = true;
  c.recompute.granularity = RecomputeGranularity::kSelective;
  c.dist_opt = true;
  EXPECT_EQ(ToString(c),
            "tp8 pp8 vpp3 cp1 ep1 dp16 sp mbs1 selective dist_opt");
  EXPECT_EQ(c.world(), 1024);

  ParallelConfig d;
  d.tp = 2;
  d.cp = 2;
  d.ep = 4;
  d.dp = 4;
  d.mbs = 2;
  d.recompute = {RecomputeGranularity::kFull, RecomputeMethod::kBlock, 3};
  EXPECT_EQ(ToString(d), "tp2 pp1 vpp1 cp2 ep4 dp4 mbs2 full:block:3");
}

}  // namespace
}  // namespace meshtune::search_spaces
