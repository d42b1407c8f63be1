#include "tuner/interop/training_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tuner/interop/megatron_args.h"

namespace meshtune::tuner {
namespace {

// Brown et al. 2020, Table 2.1: parameters and learning rate of the eight
// GPT-3 models.
struct LrPoint {
  double parameters;
  double lr;
};
constexpr LrPoint kGpt3Table[] = {
    {125e6, 6.0e-4}, {350e6, 3.0e-4}, {760e6, 2.5e-4}, {1.3e9, 2.0e-4},
    {2.7e9, 1.6e-4}, {6.7e9, 1.2e-4}, {13e9, 1.0e-4},  {175e9, 0.6e-4},
};

// A job spends this long before its first iteration (loading the
// checkpoint, building the model and the data index): assumed, not
// measured, so the job count is an estimate the script does not rely on.
constexpr int64_t kJobStartupS = 10 * 60;

// Checkpoint about once an hour of training when not told otherwise.
constexpr double kSaveEveryS = 3600;

std::string Arg(const std::string& flag, int64_t value) {
  return flag + " " + std::to_string(value);
}

std::string Arg(const std::string& flag, double value) {
  return flag + " " + FormatMegatronNumber(value);
}

}  // namespace

double Gpt3LearningRate(double parameters) {
  const auto& t = kGpt3Table;
  const size_t n = std::size(kGpt3Table);
  if (!(parameters > t[0].parameters)) return t[0].lr;
  if (parameters >= t[n - 1].parameters) return t[n - 1].lr;
  size_t i = 1;
  while (t[i].parameters < parameters) ++i;
  if (t[i].parameters == parameters) return t[i].lr;
  const double x = (std::log(parameters) - std::log(t[i - 1].parameters)) /
                   (std::log(t[i].parameters) - std::log(t[i - 1].parameters));
  return std::exp(std::log(t[i - 1].lr) +
                  x * (std::log(t[i].lr) - std::log(t[i - 1].lr)));
}

int64_t ExitMarginS(int64_t time_limit_s) {
  return std::min<int64_t>(15 * 60, time_limit_s / 10);
}

StatusOr<TrainingRun> PlanTrainingRun(const TrainingRunInputs& in) {
  const auto& t = in.training;
  const double tokens_per_step =
      static_cast<double>(t.global_batch_size) * t.seq_length;
  if (!(t.train_tokens > 0) || !(tokens_per_step > 0)) {
    return Status::InvalidArgument(
        "the run has no token budget or no tokens per step",
        "give --train-tokens and a global batch and sequence length");
  }
  if (!(in.step_time_s > 0)) {
    return Status::InvalidArgument("the plan has no predicted step time",
                                   "launch a feasible configuration");
  }
  if (in.time_limit_s < 2 * kJobStartupS) {
    return Status::InvalidArgument(
        "--time: " + std::to_string(in.time_limit_s / 60) +
            " minutes leave no time to train after the job starts and "
            "before it saves",
        "give at least --time 00:20:00; clusters usually allow 4 to 48 "
        "hours");
  }
  TrainingRun r;
  r.train_iters =
      static_cast<int64_t>(std::ceil(t.train_tokens / tokens_per_step - 1e-9));
  r.train_iters = std::max<int64_t>(1, r.train_iters);

  const auto& m = in.model;
  if (m.lr > 0) {
    r.lr = m.lr;
    r.min_lr = m.min_lr > 0 ? m.min_lr : m.lr / 10;
    r.lr_source = "the model's recipe";
  } else {
    r.lr = Gpt3LearningRate(in.parameters);
    r.min_lr = r.lr / 10;
    r.lr_source = "GPT-3 Table 2.1 by size";
  }
  // Rounded to 3 significant digits: the interpolation is not more exact.
  const auto round3 = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g", x);
    return std::strtod(buf, nullptr);
  };
  r.lr = round3(r.lr);
  r.min_lr = round3(r.min_lr);
  // sqrt(2 / (5 h)) (Nguyen and Salazar 2019, the "small init" of
  // GPT-NeoX and of Megatron-LM's GPT-3 175B example, 0.006 there):
  // Megatron's default 0.02 is too large for wide models.
  r.init_method_std =
      round3(std::sqrt(2.0 / (5.0 * static_cast<double>(m.hidden_size))));
  r.lr_warmup_iters = m.lr_warmup_iters > 0
                          ? m.lr_warmup_iters
                          : static_cast<int64_t>(
                                std::ceil(kGpt3WarmupTokens / tokens_per_step));
  // A short run still decays: warm up over at most a tenth of it.
  r.lr_warmup_iters =
      std::max<int64_t>(1, std::min(r.lr_warmup_iters, r.train_iters / 10));
  r.lr_decay_iters = r.train_iters;

  r.save_interval =
      in.save_interval > 0
          ? in.save_interval
          : std::max<int64_t>(
                1, static_cast<int64_t>(kSaveEveryS / in.step_time_s));
  r.save_interval = std::min(r.save_interval, r.train_iters);

  r.predicted_run_s = static_cast<double>(r.train_iters) * in.step_time_s;
  r.time_limit_s = in.time_limit_s;
  const int64_t margin_s = ExitMarginS(in.time_limit_s);
  r.exit_duration_mins = (in.time_limit_s - margin_s) / 60;
  const double training_per_job_s =
      static_cast<double>(r.exit_duration_mins * 60 - kJobStartupS);
  r.jobs = std::max<int64_t>(
      1,
      static_cast<int64_t>(std::ceil(r.predicted_run_s / training_per_job_s)));
  // Room for slower steps than predicted and for restarts after failures;
  // a job that makes no progress stops the chain anyway.
  r.max_jobs = r.jobs + std::max<int64_t>(2, r.jobs / 4);
  return r;
}

std::vector<std::string> MegatronRunArgs(const TrainingRun& r) {
  std::vector<std::string> a;
  a.push_back(Arg("--train-iters", r.train_iters));
  a.push_back(Arg("--lr", r.lr));
  a.push_back(Arg("--min-lr", r.min_lr));
  a.push_back("--lr-decay-style cosine");
  a.push_back(Arg("--lr-warmup-iters", r.lr_warmup_iters));
  a.push_back(Arg("--lr-decay-iters", r.lr_decay_iters));
  a.push_back(Arg("--weight-decay", kWeightDecay));
  a.push_back(Arg("--adam-beta1", kAdamBeta1));
  a.push_back(Arg("--adam-beta2", kAdamBeta2));
  a.push_back(Arg("--adam-eps", kAdamEps));
  a.push_back(Arg("--clip-grad", kClipGrad));
  a.push_back(Arg("--init-method-std", r.init_method_std));
  a.push_back(Arg("--save-interval", r.save_interval));
  a.push_back(Arg("--exit-duration-in-mins", r.exit_duration_mins));
  return a;
}

std::vector<std::string> MegatronTokenizerArgs(
    const search_spaces::ModelSpec& m, bool model_as_variable) {
  const std::string& type = m.tokenizer_type;
  if (type.empty()) {
    return {"--tokenizer-type \"$TOKENIZER_TYPE\"",
            "--tokenizer-model \"$TOKENIZER_MODEL\""};
  }
  std::vector<std::string> a = {"--tokenizer-type " + type};
  if (type == "GPT2BPETokenizer") {
    a.push_back("--vocab-file \"$VOCAB_FILE\"");
    a.push_back("--merge-file \"$MERGE_FILE\"");
  } else if (type == "NullTokenizer") {
    // Megatron's NullTokenizer has --vocab-size tokens plus its EOD.
    a.push_back(Arg("--vocab-size", m.vocab_size - 1));
  } else if (model_as_variable || m.tokenizer_model.empty()) {
    a.push_back("--tokenizer-model \"$TOKENIZER_MODEL\"");
  } else {
    a.push_back("--tokenizer-model " + m.tokenizer_model);
  }
  return a;
}

std::vector<TokenizerVariable> TokenizerVariables(
    const search_spaces::ModelSpec& m, const std::string& tokenizer_model) {
  const std::string& type = m.tokenizer_type;
  if (type.empty()) {
    return {
        {"TOKENIZER_TYPE", "",
         "Megatron's tokenizer type (HuggingFaceTokenizer, ...)", ""},
        {"TOKENIZER_MODEL", tokenizer_model, "the tokenizer id or file", ""}};
  }
  if (type == "GPT2BPETokenizer") {
    return {{"VOCAB_FILE", "", "the GPT-2 vocab.json", "gpt2-vocab.json"},
            {"MERGE_FILE", "", "the GPT-2 merges.txt", "gpt2-merges.txt"}};
  }
  if (type == "NullTokenizer") return {};
  return {{"TOKENIZER_MODEL", tokenizer_model,
           "the " + type + " model (a Hugging Face id or a file)", ""}};
}

}  // namespace meshtune::tuner
