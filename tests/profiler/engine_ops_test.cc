// The engine-kernel cases, their CPU timings and rows (profiler/
// engine_ops.h, report.h).
#include "profiler/engine_ops.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/report.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::profiler {
namespace {

search_spaces::ModelSpec GptTiny() {
  auto m = search_spaces::ResolveModel("gpt-tiny");
  EXPECT_TRUE(m.ok());
  return *m;
}

std::map<std::string, EngineOpCase> ByOp(
    const std::vector<EngineOpCase>& cases) {
  std::map<std::string, EngineOpCase> out;
  for (const EngineOpCase& c : cases) out[c.op] = c;
  return out;
}

// gpt-tiny: h 256, 4 heads of 64, f 1024, vocab 4096, seq 256.
TEST(TransformerEngineOps, GptTinyShapesPerTpRank) {
  const auto cases = ByOp(TransformerEngineOps(GptTiny(), 2, 128));
  ASSERT_EQ(cases.size(), 6u);  // norm, bias-dropout-add, gelu, ce, emb, attn
  EXPECT_EQ(cases.at("elem:norm").kernel, EngineKernel::kLayerNorm);
  EXPECT_EQ(cases.at("elem:norm").elements, 64 * 256);  // SP shard
  EXPECT_EQ(cases.at("elem:bias_dropout_add").elements, 64 * 256);
  EXPECT_EQ(cases.at("elem:gelu").elements, 128 * 512);
  EXPECT_EQ(cases.at("elem:cross_entropy").elements, 128 * 2048);
  EXPECT_EQ(cases.at("elem:embedding").elements, 128 * 256);
  EXPECT_TRUE(cases.at("elem:embedding").learned_positions);
  const EngineOpCase& attn = cases.at("attn");
  EXPECT_EQ(attn.elements, 2);  // 1 sequence x 4/2 heads
  EXPECT_EQ(attn.seq, 128);
  EXPECT_EQ(attn.batch, 1);
  EXPECT_EQ(attn.head_dim, 64);
  EXPECT_EQ(attn.label, "tp2.attention");
}

TEST(TransformerEngineOps, LlamaHasRmsNormSwigluRopeAndResidualAdd) {
  search_spaces::ModelSpec m = GptTiny();
  m.normalization = search_spaces::Normalization::kRMSNorm;
  m.activation = search_spaces::Activation::kSwiglu;
  m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
  m.num_query_groups = 2;
  // 512 tokens of a 256-token model: 2 sequences.
  const auto cases = ByOp(TransformerEngineOps(m, 1, 512));
  EXPECT_EQ(cases.at("elem:norm").kernel, EngineKernel::kRmsNorm);
  EXPECT_EQ(cases.count("elem:residual_add"), 1u);
  EXPECT_EQ(cases.count("elem:bias_dropout_add"), 0u);
  EXPECT_EQ(cases.at("elem:swiglu").elements, 512 * 1024);
  // q and k heads: (4 + 2) x 64 per token.
  EXPECT_EQ(cases.at("elem:rope").elements, 512 * 6 * 64);
  EXPECT_EQ(cases.at("attn").elements, 2 * 4);
  EXPECT_EQ(cases.at("attn").seq, 256);
  EXPECT_FALSE(cases.at("elem:embedding").learned_positions);
}

TEST(CpuEngineOps, GptTinyRowsExistWithSaneValues) {
  auto backend = MakeCpuBackend();
  ASSERT_TRUE(backend.ok());
  std::ostringstream out, progress;
  // A quick shape: 32 tokens; tp 1 and 2 share the embedding case.
  std::vector<EngineOpCase> cases = TransformerEngineOps(GptTiny(), 1, 32);
  for (const EngineOpCase& c : TransformerEngineOps(GptTiny(), 2, 32)) {
    cases.push_back(c);
  }
  auto rows =
      RunEngineOpSweep(**backend, cases, "fp32", 1, 3, "hw1", out, progress);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  // 12 cases, the tp-independent embedding once: 11 forward + 11 backward.
  ASSERT_EQ(rows->size(), 22u);
  std::map<std::string, int> ops;
  for (const results::Measurement& r : *rows) {
    ++ops[r.op];
    EXPECT_EQ(r.hardware_id, "hw1");
    EXPECT_EQ(r.dtype, "fp32");
    EXPECT_EQ(r.samples, 3);
    EXPECT_EQ(r.timer, "steady_clock");
    EXPECT_GT(r.median_s, 0) << r.op;
    EXPECT_LT(r.median_s, 1.0) << r.op;  // 32 tokens of a tiny model
    EXPECT_GE(r.p99_s, r.min_s);
    EXPECT_GT(r.m, 0);
    if (r.op.rfind("attn:", 0) == 0) {
      EXPECT_EQ(r.n, 32);
      EXPECT_EQ(r.k, 64);
    } else {
      EXPECT_EQ(r.n, 0);
    }
  }
  EXPECT_EQ(ops["elem:gelu:fwd"], 2);
  EXPECT_EQ(ops["elem:gelu:bwd"], 2);
  EXPECT_EQ(ops["elem:embedding:fwd"], 1);
  EXPECT_EQ(ops["attn:bwd"], 2);
  // One table row per measurement, after the header.
  std::ostringstream header;
  PrintEngineOpTableHeader(header);
  EXPECT_NE(header.str().find("ns_per_elem"), std::string::npos);
  const std::string text = out.str();
  EXPECT_NE(text.find("tp2.gelu"), std::string::npos);
  EXPECT_NE(text.find("elem:cross_entropy:bwd"), std::string::npos);
  EXPECT_NE(text.find("2x32x64"), std::string::npos);  // attention shape
}

TEST(CpuEngineOps, RowPrintsNsPerElementAndAttentionTflops) {
  EngineOpCase gelu;
  gelu.label = "tp1.gelu";
  gelu.op = "elem:gelu";
  gelu.elements = 1000;
  TimingStats stats;
  stats.median_s = 2e-6;  // 2 ns per element
  stats.min_s = 1e-6;
  std::ostringstream out;
  PrintEngineOpRow(out, gelu, false, stats);
  EXPECT_NE(out.str().find("elem:gelu:fwd"), std::string::npos);
  EXPECT_NE(out.str().find("2.000"), std::string::npos);
  // Attention 1 head, 1000 tokens, d 500: 2·1000²·500 = 1e9 FLOPs forward
  // in 1 ms = 1 TFLOP/s; backward twice the FLOPs.
  EXPECT_DOUBLE_EQ(EngineAttentionFlops(1, 1000, 500, false), 1e9);
  EXPECT_DOUBLE_EQ(EngineAttentionFlops(1, 1000, 500, true), 2e9);
  EngineOpCase attn;
  attn.label = "tp1.attention";
  attn.op = "attn";
  attn.kernel = EngineKernel::kAttention;
  attn.elements = 1;
  attn.seq = 1000;
  attn.head_dim = 500;
  stats.median_s = 1e-3;
  std::ostringstream a;
  PrintEngineOpRow(a, attn, false, stats);
  EXPECT_NE(a.str().find("1.0000"), std::string::npos) << a.str();
  EXPECT_NE(a.str().find("1x1000x500"), std::string::npos);
}

TEST(CpuEngineOps, UnmeasurableCaseIsAnError) {
  EngineOpCase c = TransformerEngineOps(GptTiny(), 1, 32).front();
  c.rows = 0;
  auto sample = TimeCpuEngineOp(c, false, 0, 1);
  ASSERT_FALSE(sample.ok());
  EXPECT_EQ(sample.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(sample.status().message(),
            "engine kernel tp1.layernorm (0 rows x 256, 1 repetitions) is not "
            "measurable");
  EXPECT_EQ(sample.status().hint(),
            "use positive shapes with rows = seq x batch, heads a multiple of "
            "the query groups, and at least one repetition");
}

// A backend without the engine's kernels: only the default TimeEngineOp.
class NoKernelsBackend : public ProfilerBackend {
 public:
  std::string Name() const override { return "fake"; }
  StatusOr<results::HardwareFingerprint> Fingerprint() override {
    return results::HardwareFingerprint();
  }
  double PeakTflops(DType) const override { return 0; }
  StatusOr<Sample> TimeGemm(int64_t, int64_t, int64_t, DType, int,
                            int) override {
    return Sample();
  }
  StatusOr<Sample> TimeStream(double, int, int) override { return Sample(); }
  int64_t MaxGroupSize() const override { return 1; }
  StatusOr<Sample> TimeCollective(Collective, double, int64_t, int,
                                  int) override {
    return Sample();
  }
};

TEST(EngineOpSweep, BackendWithoutKernelsIsAnError) {
  NoKernelsBackend backend;
  std::ostringstream out, progress;
  auto rows = RunEngineOpSweep(backend, TransformerEngineOps(GptTiny(), 1, 32),
                               "fp32", 0, 1, "hw1", out, progress);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), Status::Code::kUnimplemented);
  EXPECT_EQ(rows.status().message(),
            "the fake backend cannot time the engine kernel 'elem:norm'");
  EXPECT_EQ(rows.status().hint(),
            "build the engine's kernels for this backend, or profile without "
            "--model");
}

}  // namespace
}  // namespace meshtune::profiler
