// `tune accuracy` on the 2025-26 development rows (issue 17): every row that
// cannot be predicted is skipped with its reason and the file goes on; the
// variants of the model column; every precision spelling of
// the development CSVs (docs/accuracy.md, "The development data"); the
// per-layer and allocated-memory metrics; the megatron_args column; the JSON
// fields. The dev CSVs are not in the repository, so the rows here are copied
// from them (tests/tuner/testdata/accuracy_dev_rows.csv holds twelve of them).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "costmodel/compute_model.h"
#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/accuracy/cases.h"
#include "tuner/accuracy/report.h"
#include "tuner/io/csv_reader.h"

namespace meshtune::tuner {
namespace {

using search_spaces::Precision;
using search_spaces::TokenDispatcher;

const char* const kHeader =
    "source,model,params_b,layers,hidden,heads,kv_heads,ffn_hidden,vocab,"
    "seq_len,gpu,num_gpus,tp,pp,dp,cp,ep,vp,sp,mbs,gbs,recompute,precision,"
    "measured_metric,measured_value,megatron_args,notes";

// measured_b200_dev.csv's first run (SimuMax v1.2: a 12-layer LLaMA-3 70B,
// tp1 pp2 dp4 on 8 B200), with `cells` replacing columns ("" = blank).
std::map<std::string, std::string> Llama12() {
  return {{"source", "SimuMax_B200_v1.2"},
          {"model", "Llama3-70B (12-layer)"},
          {"layers", "12"},
          {"hidden", "8192"},
          {"heads", "64"},
          {"kv_heads", "8"},
          {"ffn_hidden", "28672"},
          {"vocab", "128256"},
          {"seq_len", "4096"},
          {"gpu", "B200"},
          {"num_gpus", "8"},
          {"tp", "1"},
          {"pp", "2"},
          {"dp", "4"},
          {"cp", "1"},
          {"ep", "1"},
          {"vp", "1"},
          {"sp", "0"},
          {"mbs", "1"},
          {"gbs", "16"},
          {"recompute", "none"},
          {"precision", "bf16"},
          {"measured_metric", "iteration_time_s"},
          {"measured_value", "0.8430"},
          {"megatron_args",
           "--use-distributed-optimizer --cross-entropy-loss-fusion "
           "--transformer-impl transformer_engine"}};
}

// The same file's 4-layer DeepSeek-V2 run (tp1 pp1 ep8 dp8) with its flags.
std::map<std::string, std::string> DeepSeekV2Four() {
  std::map<std::string, std::string> row = Llama12();
  row["model"] = "DeepSeek-V2 (4-layer)";
  row["layers"] = "4";
  row["hidden"] = "5120";
  row["heads"] = "128";
  row["kv_heads"] = "128";
  row["ffn_hidden"] = "12288";
  row["vocab"] = "102400";
  row["pp"] = "1";
  row["dp"] = "8";
  row["ep"] = "8";
  row["gbs"] = "32";
  row["measured_value"] = "0.3666";
  row["megatron_args"] =
      "--use-distributed-optimizer --cross-entropy-loss-fusion "
      "--transformer-impl transformer_engine --moe-layer-freq "
      "([0]*1+[1]*3) --moe-token-dispatcher-type alltoall "
      "--moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity "
      "--moe-grouped-gemm --moe-permute-fusion --moe-router-pre-softmax "
      "--moe-router-topk-scaling-factor 16 --moe-router-num-groups 8 "
      "--moe-router-group-topk 3 --qk-layernorm";
  return row;
}

// published_dev.csv's Korthikanti et al. 2022 Table 4 row (one layer of the
// 22B model, tp8, SP + selective recompute).
std::map<std::string, std::string> KorthikantiLayer(const std::string& metric,
                                                    const std::string& value) {
  return {{"source", "Korthikanti2022_Table4"},
          {"model", "GPT-22B (single transformer layer)"},
          {"layers", "48"},
          {"hidden", "6144"},
          {"heads", "64"},
          {"kv_heads", "64"},
          {"ffn_hidden", "24576"},
          {"vocab", "51200"},
          {"seq_len", "2048"},
          {"gpu", "A100-SXM4-80GB (Selene)"},
          {"num_gpus", "8"},
          {"tp", "8"},
          {"pp", "1"},
          {"dp", "1"},
          {"cp", "1"},
          {"ep", "1"},
          {"sp", "1"},
          {"mbs", "4"},
          {"gbs", "4"},
          {"recompute", "selective (attention core)"},
          {"precision", "mixed (16-bit)"},
          {"measured_metric", metric},
          {"measured_value", value}};
}

// A Megatron-Bridge DeepSeek-V3 / Qwen3 style row: `model` on 64 GB200.
std::map<std::string, std::string> MoeRow(const std::string& model) {
  return {{"source", "MegatronBridge_26.04_perf_summary"},
          {"model", model},
          {"gpu", "GB200 (DGX-GB200 NVL72)"},
          {"num_gpus", "64"},
          {"tp", "1"},
          {"pp", "1"},
          {"ep", "8"},
          {"mbs", "1"},
          {"gbs", "512"},
          {"precision", "bf16"},
          {"measured_metric", "tokens_per_sec_per_gpu"},
          {"measured_value", "10000"}};
}

std::string Csv(const std::map<std::string, std::string>& row) {
  std::string line, column;
  const std::string header = kHeader;
  for (size_t i = 0; i <= header.size(); ++i) {
    if (i == header.size() || header[i] == ',') {
      const auto it = row.find(column);
      const std::string v = it == row.end() ? "" : it->second;
      line +=
          "," +
          (v.find_first_of(",\"") == std::string::npos ? v : "\"" + v + "\"");
      column.clear();
    } else {
      column += header[i];
    }
  }
  return line.substr(1);
}

std::vector<AccuracyCase> Map(
    const std::vector<std::map<std::string, std::string>>& rows) {
  std::string text = std::string(kHeader) + "\n";
  for (const auto& r : rows) text += Csv(r) + "\n";
  auto table = ParseCsv(text, "dev.csv");
  EXPECT_TRUE(table.ok()) << table.status().message();
  if (!table.ok()) return {};
  auto cases = MapAccuracyRows(table.value());
  EXPECT_TRUE(cases.ok()) << cases.status().message();
  return cases.ok() ? cases.value() : std::vector<AccuracyCase>{};
}

AccuracyCase MapOne(const std::map<std::string, std::string>& row) {
  const std::vector<AccuracyCase> cases = Map({row});
  return cases.empty() ? AccuracyCase{} : cases.front();
}

std::map<std::string, std::string> With(
    std::map<std::string, std::string> row,
    const std::map<std::string, std::string>& cells) {
  for (const auto& [k, v] : cells) row[k] = v;
  return row;
}

TEST(AccuracyRows, EachReasonKindSkipsTheRowAndTheFileGoesOn) {
  const std::vector<AccuracyCase> cases = Map({
      Llama12(),
      With(Llama12(), {{"num_gpus", ""}}),
      With(Llama12(), {{"model", "Mystery-9B"}, {"layers", ""}}),
      With(Llama12(), {{"gpu", "MI300X"}}),
      With(Llama12(), {{"precision", "int4"}}),
      With(Llama12(), {{"tp", "3"}, {"dp", ""}, {"num_gpus", "6"}}),
      With(Llama12(), {{"model", "Llama3-70B (sparse)"}}),
      With(Llama12(), {{"megatron_args", "--frobnicate"}}),
      With(Llama12(), {{"measured_value", ""}}),
      Llama12(),
  });
  ASSERT_EQ(cases.size(), 10u);
  EXPECT_EQ(cases[0].skipped_reason, "");
  EXPECT_EQ(cases[1].skipped_reason,
            "column 'num_gpus' is blank; it is required");
  EXPECT_EQ(cases[2].skipped_reason,
            "no model preset matches 'Mystery-9B' and the row does not give "
            "layers, hidden and heads");
  EXPECT_EQ(cases[3].skipped_reason,
            "no cluster preset for GPU 'MI300X' (known: GB300, GB200, GH200, "
            "B300, B200, H200, H100, A100 40GB/80GB, L40S, RTX PRO 6000 "
            "Server)");
  EXPECT_EQ(cases[4].skipped_reason,
            "unknown precision 'int4' (known: bf16, fp16, mixed 16-bit, fp8 "
            "(delayed), FP8-CS / current scaling, blockwise / 128x128, MXFP8 "
            "/ FP8-MX, NVFP4)");
  // The cost model's (search_spaces::CheckConfig's) refusal text.
  EXPECT_EQ(cases[5].skipped_reason,
            "invalid configuration: tp 3 does not divide num_attention_heads "
            "64");
  EXPECT_EQ(cases[6].skipped_reason,
            "unknown model variant '(sparse)' in 'Llama3-70B (sparse)' "
            "(known: tokendrop, dropless, w/o MTP, w/ MTP, alt, N-layer, "
            "single transformer layer)");
  EXPECT_EQ(cases[7].skipped_reason,
            "megatron_args: unknown Megatron argument '--frobnicate'");
  EXPECT_EQ(cases[8].skipped_reason,
            "column 'measured_value' is blank; it is required");
  // The row after them all is mapped as the first one was.
  EXPECT_EQ(cases[9].skipped_reason, "");
  EXPECT_EQ(cases[9].line, 11);
  EXPECT_EQ(cases[9].config, cases[0].config);
}

TEST(AccuracyRows, ABlankCellInTheMiddleOfTheFileSkipsOnlyItsRow) {
  const AccuracySummary s = Summarize(
      PredictAll(Map({Llama12(), With(Llama12(), {{"tp", ""}}), Llama12()}),
                 DefaultEstimator()));
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(s.predicted, 2);
  EXPECT_EQ(s.skipped, 1);
  ASSERT_EQ(s.skip_reasons.size(), 1u);
  EXPECT_EQ(s.skip_reasons[0].reason, "column 'tp' is blank; it is required");
  EXPECT_EQ(s.skip_reasons[0].count, 1);
  // Malformed cells stay errors for the whole file.
  auto table = ParseCsv(std::string(kHeader) + "\n" + Csv(Llama12()) + "\n" +
                            Csv(With(Llama12(), {{"tp", "two"}})) + "\n",
                        "dev.csv");
  ASSERT_TRUE(table.ok());
  auto cases = MapAccuracyRows(table.value());
  ASSERT_FALSE(cases.ok());
  EXPECT_EQ(cases.status().message(),
            "dev.csv:3: column 'tp' is 'two', not a positive integer");
}

TEST(AccuracyRows, ModelVariantsParse) {
  ModelVariant v = ParseModelVariant("DeepSeekV3 (tokendrop)");
  EXPECT_EQ(v.base_name, "DeepSeekV3");
  EXPECT_EQ(v.moe_expert_capacity_factor, 1.0);
  EXPECT_TRUE(v.moe_pad_expert_input_to_capacity);
  v = ParseModelVariant("Mixtral-8x7B (dropless)");
  EXPECT_EQ(v.base_name, "Mixtral-8x7B");
  EXPECT_EQ(v.moe_expert_capacity_factor, 0.0);
  EXPECT_FALSE(v.moe_pad_expert_input_to_capacity);
  v = ParseModelVariant("DeepSeekV3 (w/o MTP)");
  EXPECT_EQ(v.mtp_num_layers, 0);
  v = ParseModelVariant("DeepSeekV3 (w/ MTP)");
  EXPECT_FALSE(v.mtp_num_layers.has_value());
  EXPECT_EQ(v.unknown, "");
  v = ParseModelVariant("Llama3-70B (12-layer)");
  EXPECT_EQ(v.base_name, "Llama3-70B");
  EXPECT_EQ(v.num_layers, 12);
  EXPECT_EQ(ParseModelVariant("DeepSeek-V2 (4-layer)").num_layers, 4);
  v = ParseModelVariant("GPT-22B (single transformer layer)");
  EXPECT_EQ(v.base_name, "GPT-22B");
  EXPECT_FALSE(v.num_layers.has_value());
  EXPECT_EQ(v.unknown, "");
  v = ParseModelVariant("LLAMA3-8B (alt)");
  EXPECT_EQ(v.base_name, "LLAMA3-8B");
  EXPECT_EQ(v.unknown, "");
  EXPECT_FALSE(v.moe_expert_capacity_factor.has_value());
  EXPECT_EQ(ParseModelVariant("Llama3-70B (0-layer)").unknown, "0-layer");
  EXPECT_EQ(ParseModelVariant("X (Sparse) (dropless)").unknown, "Sparse");
  EXPECT_EQ(ParseModelVariant("Qwen3_30B_a3B").base_name, "Qwen3_30B_a3B");
  // Several variants in one pair of parentheses, separated by commas.
  v = ParseModelVariant("DeepSeek-V3 (4-layer, w/o MTP)");
  EXPECT_EQ(v.base_name, "DeepSeek-V3");
  EXPECT_EQ(v.num_layers, 4);
  EXPECT_EQ(v.mtp_num_layers, 0);
  EXPECT_TRUE(v.mtp_stated);
  EXPECT_EQ(v.unknown, "");
  v = ParseModelVariant("DeepSeek-V3 (tokendrop,4-layer) (w/ MTP)");
  EXPECT_EQ(v.moe_expert_capacity_factor, 1.0);
  EXPECT_EQ(v.num_layers, 4);
  EXPECT_TRUE(v.mtp_stated);
  EXPECT_FALSE(v.mtp_num_layers.has_value());
  EXPECT_FALSE(ParseModelVariant("DeepSeek-V3 (4-layer)").mtp_stated);
  EXPECT_EQ(ParseModelVariant("DeepSeek-V3 (4-layer, Sparse)").unknown,
            "Sparse");
}

// SimuMax v1.2's 4-layer DeepSeek-V3 runs on 8 B200 pass the DeepSeek-V2
// script's flags with V3's sizes and no --mtp-num-layers, so Megatron trains
// no MTP: with megatron_args, the preset's MTP depth stays only when the
// model column states it or a flag asks for it.
TEST(AccuracyRows, MegatronArgsRowsTrainMtpOnlyWhenAsked) {
  const auto v3_row = [](const std::string& model) {
    std::map<std::string, std::string> row = DeepSeekV2Four();
    row["model"] = model;
    row["hidden"] = "7168";
    row["ffn_hidden"] = "18432";
    row["vocab"] = "129280";
    return row;
  };
  const auto v3 = [&](const std::string& model, const std::string& extra) {
    std::map<std::string, std::string> row = v3_row(model);
    row["megatron_args"] += extra;
    return MapOne(row);
  };
  const AccuracyCase plain = v3("DeepSeek-V3 (4-layer)", "");
  ASSERT_EQ(plain.skipped_reason, "");
  EXPECT_EQ(plain.model.num_layers, 4);
  EXPECT_EQ(plain.model.mtp_num_layers, 0);
  EXPECT_EQ(
      v3("DeepSeek-V3 (4-layer)", " --mtp-num-layers 1").model.mtp_num_layers,
      1);
  EXPECT_EQ(v3("DeepSeek-V3 (4-layer, w/ MTP)", "").model.mtp_num_layers, 1);
  EXPECT_EQ(v3("DeepSeek-V3 (4-layer, w/o MTP)", "").model.mtp_num_layers, 0);
  // Without megatron_args (NVIDIA's recipes) the preset's depth stays.
  std::map<std::string, std::string> recipe = v3_row("DeepSeek-V3 (4-layer)");
  recipe["megatron_args"] = "";
  const AccuracyCase from_recipe = MapOne(recipe);
  ASSERT_EQ(from_recipe.skipped_reason, "");
  EXPECT_EQ(from_recipe.model.mtp_num_layers, 1);
  // A hybrid model's MTP depths are its pattern's '/' parts.
  std::map<std::string, std::string> nano = Llama12();
  for (const char* dim :
       {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"}) {
    nano[dim] = "";
  }
  nano["model"] = "nemotron3-nano";
  nano["ep"] = "8";
  nano["megatron_args"] = "--mtp-num-layers 2";
  EXPECT_EQ(MapOne(nano).skipped_reason,
            "megatron_args: --mtp-num-layers 2 but the hybrid layer pattern "
            "has 0 MTP depths ('/' parts)");
}

TEST(AccuracyRows, VariantsArePartOfTheRowsConfiguration) {
  const AccuracyCase plain = MapOne(MoeRow("Mixtral-8x7B"));
  ASSERT_EQ(plain.skipped_reason, "");
  const AccuracyCase drop = MapOne(MoeRow("Mixtral-8x7B (tokendrop)"));
  ASSERT_EQ(drop.skipped_reason, "");
  EXPECT_EQ(drop.model.moe_expert_capacity_factor, 1.0);
  EXPECT_TRUE(drop.model.moe_pad_expert_input_to_capacity);
  const AccuracyCase dropless = MapOne(MoeRow("Mixtral-8x7B (dropless)"));
  ASSERT_EQ(dropless.skipped_reason, "");
  EXPECT_EQ(dropless.model.moe_expert_capacity_factor, 0.0);
  EXPECT_FALSE(dropless.model.moe_pad_expert_input_to_capacity);
  // (alt): the same model and configuration.
  const AccuracyCase alt = MapOne(MoeRow("Mixtral-8x7B (alt)"));
  ASSERT_EQ(alt.skipped_reason, "");
  EXPECT_EQ(alt.model.num_layers, plain.model.num_layers);
  EXPECT_EQ(alt.model.num_experts, plain.model.num_experts);
  EXPECT_EQ(alt.config, plain.config);
  // A capacity variant on a dense model says why it cannot apply.
  EXPECT_EQ(MapOne(With(Llama12(), {{"model", "Llama3-70B (tokendrop)"}}))
                .skipped_reason,
            "variant in 'Llama3-70B (tokendrop)' sets the expert capacity, but "
            "the model has no experts");

  // MTP: DeepSeek-V3 has one depth, "(w/o MTP)" none, "(w/ MTP)" keeps it.
  const auto v3 = [](const std::string& model) {
    return MapOne(With(MoeRow(model), {{"pp", "1"}, {"ep", "64"}}));
  };
  const AccuracyCase with = v3("DeepSeekV3 (w/ MTP)");
  ASSERT_EQ(with.skipped_reason, "");
  EXPECT_EQ(with.model.mtp_num_layers, 1);
  const AccuracyCase without = v3("DeepSeekV3 (w/o MTP)");
  ASSERT_EQ(without.skipped_reason, "");
  EXPECT_EQ(without.model.mtp_num_layers, 0);
  EXPECT_EQ(v3("DeepSeekV3").model.mtp_num_layers, 1);

  // Megatron-Bridge's MoE recipes run ETP 1 where the row leaves it to
  // Megatron's default (the tensor-parallel size); NeMo rows keep it.
  const AccuracyCase bridge_tp2 =
      MapOne(With(MoeRow("DeepSeekV3"), {{"tp", "2"}, {"ep", "32"}}));
  ASSERT_EQ(bridge_tp2.skipped_reason, "");
  EXPECT_EQ(bridge_tp2.config.etp, 1);
  const AccuracyCase nemo_tp2 = MapOne(
      With(MoeRow("Mixtral-8x7B"),
           {{"source", "NeMo_25.04_perf_summary"}, {"tp", "2"}, {"ep", "8"}}));
  ASSERT_EQ(nemo_tp2.skipped_reason, "");
  EXPECT_EQ(nemo_tp2.config.etp, 0);

  // "(12-layer)": the layers column wins; blank, the variant's count.
  EXPECT_EQ(MapOne(Llama12()).model.num_layers, 12);
  EXPECT_EQ(MapOne(With(Llama12(), {{"layers", ""}})).model.num_layers, 12);
  EXPECT_EQ(MapOne(With(Llama12(), {{"layers", "10"}})).model.num_layers, 10);
  // ffn_hidden of an MoE row naming the experts' width keeps the dense one
  // (DeepSeek-V3: experts 2048, its first three dense layers 18432).
  const AccuracyCase v3_ffn = MapOne(
      With(MoeRow("DeepSeekV3"), {{"ep", "64"}, {"ffn_hidden", "2048"}}));
  ASSERT_EQ(v3_ffn.skipped_reason, "");
  EXPECT_EQ(v3_ffn.model.ffn_hidden_size, 18432);
  EXPECT_EQ(v3_ffn.model.expert_ffn_hidden_size(), 2048);
  // A shorter DeepSeek-V2 keeps the preset's leading dense layer.
  const AccuracyCase ds =
      MapOne(With(DeepSeekV2Four(), {{"megatron_args", ""}}));
  ASSERT_EQ(ds.skipped_reason, "");
  EXPECT_EQ(ds.model.num_layers, 4);
  EXPECT_EQ(ds.model.moe_layer_pattern, (std::vector<uint8_t>{0, 1, 1, 1}));
}

TEST(AccuracyRows, EveryPrecisionSpellingOfTheDevSets) {
  struct Spelling {
    const char* text;
    const char* source;
    Precision want;
  };
  // Every distinct precision cell of published_dev.csv (with a source that
  // writes it) and measured_b200_dev.csv.
  const Spelling spellings[] = {
      {"MXFP8", "MegatronBridge_26.04_perf_summary", Precision::kMxfp8},
      {"FP8-MX", "MegatronBridge_25.11_perf_summary", Precision::kMxfp8},
      {"mxfp8 (fp8-recipe mxfp8, e4m3)", "MegatronCore_DeepSeekV3_GB200_guide",
       Precision::kMxfp8},
      {"fp8 block-scaled MXFP8 (page note: 32x32 granularity)",
       "MegatronBridge_25.09_perf_summary", Precision::kMxfp8},
      {"fp8 alternative (parenthesised value; legend not in stored excerpt - "
       "probably MXFP8 block scaling) UNCERTAIN",
       "NeMo_25.07_perf_summary", Precision::kMxfp8},
      {"FP8-CS", "MegatronBridge_25.11_perf_summary",
       Precision::kFp8Tensorwise},
      {"fp8 current scaling (FP8-CS) [inferred from 25.11 labels]",
       "MegatronBridge_25.09_perf_summary", Precision::kFp8Tensorwise},
      {"fp8 (per-tensor, current scaling)", "NeMo_25.04_perf_summary",
       Precision::kFp8Tensorwise},
      {"fp8 block-scaled: 128x128 weights / 1x128 activations (DeepSeek-V3 "
       "style)",
       "MegatronBridge_25.09_perf_summary", Precision::kFp8Blockwise},
      {"NVFP4", "MegatronBridge_26.04_perf_summary", Precision::kNvfp4},
      // Megatron-Bridge 25.09+: the unqualified FP8 column is current
      // scaling (on H100 and Blackwell rows alike).
      {"FP8", "MegatronBridge_26.04.01_perf_summary",
       Precision::kFp8Tensorwise},
      {"FP8", "MegatronBridge_26.02_perf_summary", Precision::kFp8Tensorwise},
      // Elsewhere plain fp8 is Megatron's default, delayed scaling.
      {"fp8", "NeMo_25.02_perf_summary", Precision::kFp8},
      {"fp8", "NeMo_long_sequence_CP_table", Precision::kFp8},
      {"fp8", "DGXC_benchmarking_v24.11.1", Precision::kFp8},
      {"fp8 (hybrid format)", "MegatronLM_examples_llama_FP8", Precision::kFp8},
      {"FP8", "MegatronBridge_25.06_perf_summary", Precision::kFp8},
      {"bf16", "MegatronCore_MoE_README", Precision::kBf16},
      {"BF16", "MegatronBridge_25.11_perf_summary", Precision::kBf16},
      {"mixed (16-bit)", "Korthikanti2022_Table4", Precision::kBf16},
      {"bf16", "SimuMax_B200_v1.2", Precision::kBf16},
  };
  for (const Spelling& s : spellings) {
    EXPECT_EQ(PrecisionForRow(s.text, s.source), s.want)
        << s.text << " (" << s.source << ")";
  }
  EXPECT_FALSE(PrecisionForRow("int4", "x").has_value());
  // Through a whole row: an MXFP8 row on GB200 maps; on H100 it is skipped.
  const AccuracyCase gb200 =
      MapOne(With(MoeRow("Mixtral-8x7B"), {{"precision", "FP8-MX"}}));
  ASSERT_EQ(gb200.skipped_reason, "");
  EXPECT_EQ(gb200.training.precision, Precision::kMxfp8);
  EXPECT_EQ(MapOne(With(MoeRow("Mixtral-8x7B"),
                        {{"precision", "MXFP8"}, {"gpu", "H100-SXM-80GB"}}))
                .skipped_reason,
            "mxfp8 run on h100, which has no block-scaled (Blackwell) tensor "
            "cores");
}

TEST(AccuracyRows, AllocatedMemoryIsThePredictedPeakOfTheMostLoadedRank) {
  const AccuracyCase c =
      MapOne(With(Llama12(), {{"measured_metric", "allocated_memory_gib"},
                              {"measured_value", "66.55"}}));
  ASSERT_EQ(c.skipped_reason, "");
  EXPECT_EQ(c.kind, MetricKind::kAllocatedMemory);
  EXPECT_STREQ(MetricUnit(c.kind), "GiB");
  EXPECT_DOUBLE_EQ(c.published, 66.55);
  EXPECT_DOUBLE_EQ(c.published_step_s, 0.0);
  const AccuracyPrediction p = Predict(c, DefaultEstimator());
  const costmodel::DatasheetCalibration calibration(c.cluster, c.attention);
  const costmodel::Estimate e = costmodel::EstimateConfig(
      c.model, c.cluster, c.training, c.config, calibration);
  // The allocator's peak (torch.cuda.max_memory_allocated), not what must
  // fit (total_bytes() adds fragmentation, CUDA context and NCCL buffers).
  const double gib = e.memory.allocated_bytes() / (1024.0 * 1024.0 * 1024.0);
  EXPECT_LE(gib, p.memory_gib);
  EXPECT_DOUBLE_EQ(p.predicted, gib);
  EXPECT_DOUBLE_EQ(p.error_pct, 100 * (gib - 66.55) / 66.55);
  EXPECT_DOUBLE_EQ(p.predicted_step_s, e.step_time_s);
  // Compared apart from step times.
  const AccuracySummary s = Summarize({{c, p, std::nullopt}});
  EXPECT_EQ(s.all.n, 0);
  EXPECT_EQ(s.memory.all.n, 1);
  EXPECT_DOUBLE_EQ(s.memory.all.mape_pct, std::fabs(p.error_pct));
}

TEST(AccuracyRows, PerLayerTimesComeFromOneMoreLayer) {
  const AccuracyCase fwd = MapOne(KorthikantiLayer("layer_fwd_ms", "7.2"));
  const AccuracyCase bwd = MapOne(KorthikantiLayer("layer_bwd_ms", "13.1"));
  const AccuracyCase both =
      MapOne(KorthikantiLayer("layer_fwd_bwd_ms", "20.3"));
  ASSERT_EQ(fwd.skipped_reason, "");
  ASSERT_EQ(bwd.skipped_reason, "");
  ASSERT_EQ(both.skipped_reason, "");
  EXPECT_EQ(both.kind, MetricKind::kLayerForwardBackward);
  EXPECT_STREQ(MetricUnit(both.kind), "ms");
  EXPECT_DOUBLE_EQ(both.published, 20.3);
  const Estimator estimator = DefaultEstimator();
  const double f = Predict(fwd, estimator).predicted;
  const double b = Predict(bwd, estimator).predicted;
  const double fb = Predict(both, estimator).predicted;
  EXPECT_NEAR(f + b, fb, 1e-9);
  // By hand: the 49-layer estimate minus the 48-layer one (one micro-batch:
  // gbs 4 = mbs 4), compute + recompute + exposed collectives.
  const costmodel::DatasheetCalibration calibration(both.cluster,
                                                    both.attention);
  search_spaces::ModelSpec longer = both.model;
  longer.num_layers = 49;
  const costmodel::Estimate e48 = costmodel::EstimateConfig(
      both.model, both.cluster, both.training, both.config, calibration);
  const costmodel::Estimate e49 = costmodel::EstimateConfig(
      longer, both.cluster, both.training, both.config, calibration);
  auto layer = [](const costmodel::TimeBreakdown& t) {
    return t.compute_s + t.recompute_s + t.tp_comm_s + t.cp_comm_s +
           t.ep_comm_s;
  };
  EXPECT_NEAR(fb, 1e3 * (layer(e49.time) - layer(e48.time)), 1e-9);
  // The forward: its compute share plus half the exposed collectives; the
  // recompute belongs to the backward.
  const costmodel::LayerCompute lc = costmodel::LayerComputeTime(
      both.model, both.config, 2048, both.training.precision, false,
      calibration, costmodel::ModelOptions());
  const double comm = e49.time.tp_comm_s - e48.time.tp_comm_s;
  const double compute = e49.time.compute_s - e48.time.compute_s;
  EXPECT_NEAR(
      f, 1e3 * (compute * lc.fwd_s() / (lc.fwd_s() + lc.bwd_s()) + comm / 2),
      1e-9);
  EXPECT_GT(b, f);
  // Only pp 1 runs hold every layer on one stage.
  EXPECT_EQ(MapOne(With(KorthikantiLayer("layer_fwd_ms", "7.2"),
                        {{"pp", "2"}, {"num_gpus", "16"}}))
                .skipped_reason,
            "layer_fwd_ms: per-layer times are predicted for pp 1 runs only "
            "(this row has pp 2)");
}

TEST(AccuracyRows, LayerRowsFitAsTheOneLayerRunTheyTimed) {
  // Korthikanti's baseline (no SP, no recompute): the full 48-layer 22B
  // model holds s·b·h·(10 + 24/t) ≈ 3.4 GiB per layer, 165 GiB in all, far
  // beyond 80 GB, but the timed run had one layer.
  const AccuracyCase c = MapOne(With(KorthikantiLayer("layer_fwd_ms", "7.2"),
                                     {{"sp", "0"}, {"recompute", "none"}}));
  ASSERT_EQ(c.skipped_reason, "");
  const Estimator estimator = DefaultEstimator();
  const costmodel::DatasheetCalibration calibration(c.cluster, c.attention);
  const costmodel::Estimate full = costmodel::EstimateConfig(
      c.model, c.cluster, c.training, c.config, calibration);
  EXPECT_FALSE(full.fits);
  search_spaces::ModelSpec one = c.model;
  one.num_layers = 1;
  const costmodel::Estimate single = costmodel::EstimateConfig(
      one, c.cluster, c.training, c.config, calibration);
  const AccuracyPrediction p = Predict(c, estimator);
  EXPECT_TRUE(p.fits);
  EXPECT_DOUBLE_EQ(p.memory_gib,
                   single.memory.total_bytes() / (1024.0 * 1024.0 * 1024.0));
  EXPECT_TRUE(single.fits);
}

TEST(AccuracyRows, FsdpNotesTurnOnMegatronFsdp) {
  std::map<std::string, std::string> row = {
      {"source", "MegatronBridge_26.04_perf_summary"},
      {"model", "LLAMA3_70B"},
      {"gpu", "GB200 (DGX-GB200 NVL72)"},
      {"num_gpus", "64"},
      {"tp", "1"},
      {"pp", "1"},
      {"mbs", "2"},
      {"gbs", "256"},
      {"seq_len", "8192"},
      {"precision", "FP8"},
      {"measured_metric", "tokens_per_sec_per_gpu"},
      {"measured_value", "3000"},
      {"notes", "container NeMo 26.04; FSDP=64 (0=DDP; >0 Megatron-FSDP)"}};
  const AccuracyCase fsdp = MapOne(row);
  ASSERT_EQ(fsdp.skipped_reason, "");
  EXPECT_TRUE(fsdp.training.megatron_fsdp);
  EXPECT_TRUE(fsdp.training.cross_entropy_loss_fusion);
  EXPECT_EQ(fsdp.training.cpu_offloading_num_layers, 40);
  EXPECT_TRUE(Predict(fsdp, DefaultEstimator()).fits);
  row["notes"] = "container NeMo 26.04; FSDP=0 (0=DDP)";
  const AccuracyCase ddp = MapOne(row);
  EXPECT_FALSE(ddp.training.megatron_fsdp);
  EXPECT_EQ(ddp.training.cpu_offloading_num_layers, 0);
  EXPECT_FALSE(Predict(ddp, DefaultEstimator()).fits);
}

TEST(AccuracyRows, MegatronArgsColumnOnTopOfMegatronDefaults) {
  const AccuracyCase c = MapOne(DeepSeekV2Four());
  ASSERT_EQ(c.skipped_reason, "");
  const search_spaces::ModelSpec& m = c.model;
  EXPECT_EQ(m.moe_layer_pattern, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(m.moe_token_dispatcher_type, TokenDispatcher::kAlltoall);
  EXPECT_EQ(m.moe_expert_capacity_factor, 1.0);
  EXPECT_TRUE(m.moe_pad_expert_input_to_capacity);
  EXPECT_TRUE(m.moe_grouped_gemm);
  EXPECT_TRUE(m.moe_router_pre_softmax);
  EXPECT_EQ(m.moe_router_num_groups, 8);
  EXPECT_EQ(m.moe_router_group_topk, 3);
  EXPECT_TRUE(m.qk_layernorm);
  // Megatron's defaults with the flags on top: the distributed optimizer is
  // given, nothing else is.
  EXPECT_TRUE(c.config.dist_opt);
  EXPECT_FALSE(c.training.tp_comm_overlap);
  EXPECT_FALSE(c.training.grad_reduce_in_bf16);
  EXPECT_FALSE(c.training.fp8_param_gather);
  // No DP overlap unless a flag says so; the fused cross-entropy is one.
  EXPECT_FALSE(c.training.overlap_grad_reduce);
  EXPECT_FALSE(c.training.overlap_param_gather);
  EXPECT_TRUE(c.training.cross_entropy_loss_fusion);
  // Megatron's default fused kernel unless --cross-entropy-fusion-impl says.
  EXPECT_EQ(c.training.cross_entropy_fusion_impl,
            search_spaces::CrossEntropyFusionImpl::kNative);
  EXPECT_EQ(
      c.flags_without_effect,
      (std::vector<std::string>{"--transformer-impl", "--moe-permute-fusion",
                                "--moe-router-topk-scaling-factor"}));
  // Without --use-distributed-optimizer there is none, even for a source
  // whose recipes use it.
  const AccuracyCase plain = MapOne(
      With(Llama12(), {{"source", "NeMo_25.04_perf_summary"},
                       {"megatron_args", "--cross-entropy-loss-fusion"}}));
  ASSERT_EQ(plain.skipped_reason, "");
  EXPECT_FALSE(plain.config.dist_opt);
  const AccuracyCase recipe =
      MapOne(With(Llama12(), {{"source", "NeMo_25.04_perf_summary"},
                              {"megatron_args", ""}}));
  EXPECT_TRUE(recipe.config.dist_opt);
  const AccuracyCase te = MapOne(
      With(Llama12(),
           {{"megatron_args",
             "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te"}}));
  ASSERT_EQ(te.skipped_reason, "");
  EXPECT_EQ(te.training.cross_entropy_fusion_impl,
            search_spaces::CrossEntropyFusionImpl::kTe);
  EXPECT_EQ(MapOne(With(Llama12(), {{"megatron_args",
                                     "--cross-entropy-fusion-impl triton"}}))
                .skipped_reason,
            "megatron_args: --cross-entropy-fusion-impl: expected native or "
            "te, got 'triton'");
  // A MoE flag on a dense model.
  EXPECT_EQ(MapOne(With(Llama12(), {{"megatron_args", "--moe-grouped-gemm"}}))
                .skipped_reason,
            "megatron_args: --moe-grouped-gemm needs a mixture-of-experts "
            "model, and 'llama3-70b' has no experts");
}

// ---- Through the built binary. ----

const std::string kRows = std::string(MESHTUNE_SOURCE_DIR) +
                          "/tests/tuner/testdata/accuracy_dev_rows.csv";

TEST(AccuracyRowsCommand, JsonRowsCarryMetricPublishedPredictedAndError) {
  const auto run =
      testing::RunTuneInProcess("accuracy --csv '" + kRows + "' --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  const nlohmann::json& rows = doc["rows"];
  ASSERT_EQ(rows.size(), 12u);
  const std::vector<std::string> units = {"s",  "s",  "s",  "GiB", "s", "GiB",
                                          "ms", "ms", "ms", "s",   "s", "s"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& r = rows[i];
    EXPECT_EQ(r["line"], static_cast<int>(i) + 2);
    EXPECT_EQ(r["unit"], units[i]) << i;
    if (!r["skipped_reason"].is_null()) {
      EXPECT_TRUE(r["predicted"].is_null());
      EXPECT_TRUE(r["error_pct"].is_null());
      continue;
    }
    const double published = r["published"].get<double>();
    const double predicted = r["predicted"].get<double>();
    EXPECT_NEAR(r["error_pct"].get<double>(),
                100 * (predicted - published) / published, 1e-9)
        << i;
  }
  // Step time in seconds, memory in GiB, layers in ms; as written in
  // published_value.
  EXPECT_EQ(rows[2]["metric"], "iteration_time_s");
  EXPECT_DOUBLE_EQ(rows[2]["published"].get<double>(), 0.843);
  EXPECT_EQ(rows[3]["metric"], "allocated_memory_gib");
  EXPECT_DOUBLE_EQ(rows[3]["published"].get<double>(), 66.55);
  EXPECT_LE(rows[3]["predicted"].get<double>(),
            rows[3]["memory_gib"].get<double>());
  EXPECT_GT(rows[3]["predicted"].get<double>(), 0.0);
  EXPECT_TRUE(rows[3]["published_step_s"].is_null());
  EXPECT_EQ(rows[6]["metric"], "layer_fwd_ms");
  EXPECT_DOUBLE_EQ(rows[6]["published"].get<double>(), 7.2);
  EXPECT_EQ(rows[1]["skipped_reason"],
            "column 'num_gpus' is blank; it is required");
  EXPECT_EQ(rows[9]["skipped_reason"],
            "megatron_args: unknown Megatron argument '--frobnicate'");

  const nlohmann::json& s = doc["summary"];
  EXPECT_EQ(s["rows"], 12);
  EXPECT_EQ(s["predicted"], 8);
  EXPECT_EQ(s["skipped"], 4);
  EXPECT_EQ(s["out_of_memory"], 0);
  EXPECT_EQ(s["step_time"]["all"]["n"], 3);
  EXPECT_EQ(s["layer_time"]["all"]["n"], 3);
  EXPECT_EQ(s["memory"]["all"]["n"], 2);
  EXPECT_EQ(s["memory"]["SimuMax_B200_v1.2"]["n"], 2);
  EXPECT_FALSE(s["memory"].contains("Korthikanti2022_Table5"));
  const double m1 = std::fabs(rows[3]["error_pct"].get<double>());
  const double m2 = std::fabs(rows[5]["error_pct"].get<double>());
  EXPECT_NEAR(s["memory"]["all"]["mape_pct"].get<double>(), (m1 + m2) / 2,
              1e-9);
  EXPECT_DOUBLE_EQ(s["memory"]["all"]["max_abs_pct"].get<double>(),
                   std::max(m1, m2));
  ASSERT_EQ(s["skip_reasons"].size(), 3u);
  EXPECT_EQ(s["skip_reasons"][0]["reason"],
            "column 'num_gpus' is blank; it is required");
  EXPECT_EQ(s["skip_reasons"][0]["count"], 2);

  const auto table =
      testing::RunTuneInProcess("accuracy --csv '" + kRows + "'");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("# Rows predicted      : 8 of 12\n"
                           "# Rows skipped        : 4 (reasons below)\n"
                           "#       2  column 'num_gpus' is blank; it is "
                           "required\n"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("# allocated memory (GiB)"), std::string::npos);
  EXPECT_NE(table.out.find("# Memory MAPE         : "), std::string::npos);
  EXPECT_NE(table.out.find("# Layer time MAPE     : "), std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
