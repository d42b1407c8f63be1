// PlanTrainingRun and its pieces against hand-computed values and the
// published recipes (GPT-3 Table 2.1; the 175B run's 300 B tokens).
#include "tuner/interop/training_run.h"

#include <gtest/gtest.h>

#include <cmath>

#include "search_spaces/presets/presets.h"

namespace meshtune::tuner {
namespace {

TEST(Gpt3LearningRate, TablePointsAndLogLogInterpolation) {
  EXPECT_DOUBLE_EQ(Gpt3LearningRate(125e6), 6e-4);
  EXPECT_DOUBLE_EQ(Gpt3LearningRate(1.3e9), 2e-4);
  EXPECT_DOUBLE_EQ(Gpt3LearningRate(175e9), 0.6e-4);
  // Held constant outside the table.
  EXPECT_DOUBLE_EQ(Gpt3LearningRate(10e6), 6e-4);
  EXPECT_DOUBLE_EQ(Gpt3LearningRate(1e12), 0.6e-4);
  // 70e9 between 13e9 (1e-4) and 175e9 (0.6e-4):
  // x = ln(70/13) / ln(175/13) = 0.647560, lr = 1e-4 · 0.6^x = 7.18356e-5.
  EXPECT_NEAR(Gpt3LearningRate(70e9), 7.18356e-5, 1e-10);
}

TEST(ExitMarginS, FifteenMinutesOrATenth) {
  EXPECT_EQ(ExitMarginS(86400), 900);
  EXPECT_EQ(ExitMarginS(30 * 60), 180);
}

TrainingRunInputs Gpt3_175b() {
  TrainingRunInputs in;
  in.model = search_spaces::ResolveModel("gpt3-175b").value();
  in.training.global_batch_size = 1536;
  in.training.seq_length = 2048;
  in.training.train_tokens = 300e9;
  in.parameters = 175e9;
  in.step_time_s = 16.0;
  in.time_limit_s = 86400;
  return in;
}

TEST(PlanTrainingRun, Gpt3_175bRecipe) {
  const auto run = PlanTrainingRun(Gpt3_175b());
  ASSERT_TRUE(run.ok()) << run.status().message();
  // 300e9 / (1536 · 2048) = 95367.4 -> 95368.
  EXPECT_EQ(run->train_iters, 95368);
  EXPECT_EQ(run->lr_decay_iters, 95368);
  // The preset's recipe: 6e-5 to 6e-6.
  EXPECT_DOUBLE_EQ(run->lr, 6e-5);
  EXPECT_DOUBLE_EQ(run->min_lr, 6e-6);
  EXPECT_EQ(run->lr_source, "the model's recipe");
  // 375e6 / 3145728 = 119.2 -> 120 iterations of warm-up.
  EXPECT_EQ(run->lr_warmup_iters, 120);
  // sqrt(2 / (5 · 12288)) = 0.0057054.
  EXPECT_DOUBLE_EQ(run->init_method_std, 0.00571);
  // floor(3600 / 16) = 225 iterations per checkpoint.
  EXPECT_EQ(run->save_interval, 225);
  // 24 h - 15 min = 1425 minutes; 95368 · 16 s = 1525888 s over
  // (1425 · 60 - 600) s per job = 84900 s -> 17.97 -> 18 jobs.
  EXPECT_EQ(run->exit_duration_mins, 1425);
  EXPECT_DOUBLE_EQ(run->predicted_run_s, 95368.0 * 16.0);
  EXPECT_EQ(run->jobs, 18);
  EXPECT_EQ(run->max_jobs, 18 + 4);
}

TEST(PlanTrainingRun, SizeRuleWithoutARecipeAndShortRuns) {
  TrainingRunInputs in = Gpt3_175b();
  in.model.lr = 0;
  in.model.min_lr = 0;
  in.parameters = 1.3e9;
  in.training.train_tokens = 3145728.0 * 50;  // 50 iterations
  in.save_interval = 20;
  const auto run = PlanTrainingRun(in);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->lr_source, "GPT-3 Table 2.1 by size");
  EXPECT_DOUBLE_EQ(run->lr, 2e-4);
  EXPECT_DOUBLE_EQ(run->min_lr, 2e-5);
  EXPECT_EQ(run->train_iters, 50);
  EXPECT_EQ(run->lr_warmup_iters, 5);  // at most a tenth of the run
  EXPECT_EQ(run->save_interval, 20);
  EXPECT_EQ(run->jobs, 1);
}

TEST(PlanTrainingRun, RejectsWhatCannotRun) {
  TrainingRunInputs in = Gpt3_175b();
  in.time_limit_s = 10 * 60;
  auto run = PlanTrainingRun(in);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().message(),
            "--time: 10 minutes leave no time to train after the job starts "
            "and before it saves");
  in = Gpt3_175b();
  in.step_time_s = 0;
  EXPECT_FALSE(PlanTrainingRun(in).ok());
  in = Gpt3_175b();
  in.training.train_tokens = 0;
  EXPECT_FALSE(PlanTrainingRun(in).ok());
}

TEST(MegatronTokenizerArgs, PerTokenizerType) {
  search_spaces::ModelSpec m;
  m.tokenizer_type = "GPT2BPETokenizer";
  EXPECT_EQ(MegatronTokenizerArgs(m, true),
            (std::vector<std::string>{"--tokenizer-type GPT2BPETokenizer",
                                      "--vocab-file \"$VOCAB_FILE\"",
                                      "--merge-file \"$MERGE_FILE\""}));
  m.tokenizer_type = "NullTokenizer";
  m.vocab_size = 4096;
  EXPECT_EQ(MegatronTokenizerArgs(m, true),
            (std::vector<std::string>{"--tokenizer-type NullTokenizer",
                                      "--vocab-size 4095"}));
  m.tokenizer_type = "HuggingFaceTokenizer";
  EXPECT_EQ(
      MegatronTokenizerArgs(m, true),
      (std::vector<std::string>{"--tokenizer-type HuggingFaceTokenizer",
                                "--tokenizer-model \"$TOKENIZER_MODEL\""}));
  // Exports name the published tokenizer itself.
  m.tokenizer_model = "meta-llama/Meta-Llama-3-8B";
  EXPECT_EQ(MegatronTokenizerArgs(m, false)[1],
            "--tokenizer-model meta-llama/Meta-Llama-3-8B");
  m.tokenizer_type = "";
  EXPECT_EQ(MegatronTokenizerArgs(m, true)[0],
            "--tokenizer-type \"$TOKENIZER_TYPE\"");
}

// Every preset names its tokenizer, so every launch script trains the
// vocabulary that was costed.
TEST(MegatronTokenizerArgs, EveryPresetNamesItsTokenizer) {
  for (const search_spaces::ModelSpec& m : search_spaces::ModelPresets()) {
    EXPECT_FALSE(m.tokenizer_type.empty()) << m.name;
  }
}

}  // namespace
}  // namespace meshtune::tuner
