// CudaGraphs: Megatron's --cuda-graph-impl / --cuda-graph-scope spellings,
// which modules each setting captures, and the combinations refused.
#include "search_spaces/cuda_graphs.h"

#include <gtest/gtest.h>

namespace meshtune::search_spaces {
namespace {

TEST(CudaGraphs, ParsesMegatronSpellings) {
  CudaGraphImpl impl = CudaGraphImpl::kNone;
  ASSERT_TRUE(ParseCudaGraphImpl("transformer_engine", &impl).ok());
  EXPECT_EQ(impl, CudaGraphImpl::kTransformerEngine);
  ASSERT_TRUE(ParseCudaGraphImpl("local", &impl).ok());
  EXPECT_EQ(impl, CudaGraphImpl::kLocal);
  ASSERT_TRUE(ParseCudaGraphImpl("none", &impl).ok());
  EXPECT_EQ(impl, CudaGraphImpl::kNone);

  uint32_t scope = 0;
  ASSERT_TRUE(
      ParseCudaGraphScope("attn moe_router,moe_preprocess", &scope).ok());
  EXPECT_EQ(scope, kGraphAttn | kGraphMoeRouter | kGraphMoePreprocess);
  EXPECT_EQ(CudaGraphScopeString(scope), "attn moe_router moe_preprocess");
  EXPECT_EQ(CudaGraphScopeString(scope, ','), "attn,moe_router,moe_preprocess");
  ASSERT_TRUE(ParseCudaGraphScope("", &scope).ok());
  EXPECT_EQ(scope, 0u);
  EXPECT_EQ(CudaGraphScopeString(0), "");
  EXPECT_STREQ(ToString(CudaGraphImpl::kTransformerEngine),
               "transformer_engine");
}

TEST(CudaGraphs, UnknownValuesNameTheChoices) {
  CudaGraphImpl impl = CudaGraphImpl::kNone;
  const Status a = ParseCudaGraphImpl("te", &impl);
  EXPECT_EQ(a.message(), "unknown --cuda-graph-impl 'te'");
  EXPECT_EQ(a.hint(), "use none, local or transformer_engine");
  uint32_t scope = 0;
  const Status b = ParseCudaGraphScope("attn,router", &scope);
  EXPECT_EQ(b.message(), "unknown --cuda-graph-scope value 'router'");
  EXPECT_EQ(b.ExitCode(), 2);
}

TEST(CudaGraphs, ValidationFollowsMegatron) {
  CudaGraphs g;
  EXPECT_TRUE(ValidateCudaGraphs(g).ok());
  g.scope = kGraphAttn;
  EXPECT_EQ(ValidateCudaGraphs(g).message(),
            "--cuda-graph-scope attn has no effect with --cuda-graph-impl "
            "none");
  g.impl = CudaGraphImpl::kTransformerEngine;
  EXPECT_TRUE(ValidateCudaGraphs(g).ok());
  g.scope = kGraphFullIteration;
  EXPECT_EQ(ValidateCudaGraphs(g).message(),
            "--cuda-graph-scope full_iteration needs --cuda-graph-impl local");
  g.impl = CudaGraphImpl::kLocal;
  EXPECT_TRUE(ValidateCudaGraphs(g).ok());
  g.scope |= kGraphAttn;
  EXPECT_FALSE(ValidateCudaGraphs(g).ok());
}

TEST(CudaGraphs, ParseCudaGraphsReadsBothFlagsAndValidates) {
  auto g = ParseCudaGraphs("local", "full_iteration");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g.value().full_iteration());
  auto none = ParseCudaGraphs("", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().enabled());
  EXPECT_EQ(ParseCudaGraphs("", "attn").status().message(),
            "--cuda-graph-scope attn has no effect with --cuda-graph-impl "
            "none");
  EXPECT_EQ(ParseCudaGraphs("graph", "").status().message(),
            "unknown --cuda-graph-impl 'graph'");
}

TEST(CudaGraphs, CapturesWhatTheScopeNames) {
  CudaGraphs none;
  EXPECT_FALSE(none.Captures(kGraphAttn));
  CudaGraphs router{CudaGraphImpl::kTransformerEngine,
                    kGraphMoeRouter | kGraphMoePreprocess};
  EXPECT_FALSE(router.Captures(kGraphAttn));
  EXPECT_TRUE(router.Captures(kGraphMoeRouter));
  EXPECT_FALSE(router.Captures(kGraphMoe));
  // An empty scope is Megatron's default: whole layers.
  CudaGraphs layers{CudaGraphImpl::kTransformerEngine, 0};
  EXPECT_TRUE(layers.Captures(kGraphAttn));
  EXPECT_TRUE(layers.Captures(kGraphMamba));
  EXPECT_TRUE(layers.Captures(kGraphMoe));
  EXPECT_FALSE(layers.full_iteration());
  // The whole MoE block holds its router and preprocess.
  CudaGraphs moe{CudaGraphImpl::kTransformerEngine, kGraphMoe};
  EXPECT_TRUE(moe.Captures(kGraphMoePreprocess));
  CudaGraphs step{CudaGraphImpl::kLocal, kGraphFullIteration};
  EXPECT_TRUE(step.full_iteration());
  EXPECT_TRUE(step.Captures(kGraphMlp));
}

}  // namespace
}  // namespace meshtune::search_spaces
