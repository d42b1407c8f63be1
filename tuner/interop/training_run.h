// The run a launch script trains, beyond the parallel plan: how many
// iterations the token budget takes, the learning-rate schedule, how often
// to checkpoint, and how many jobs of the scheduler's time limit the
// predicted run needs. `tune launch` writes it as Megatron flags
// (MegatronRunArgs) and as `tune train` flags; docs/launch.md explains each
// number.
#ifndef MESHTUNE_TUNER_INTEROP_TRAINING_RUN_H_
#define MESHTUNE_TUNER_INTEROP_TRAINING_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

// AdamW and clipping of the GPT-3, LLaMA 1-3 and DeepSeek-V3 recipes (every
// one uses these): betas 0.9 / 0.95, eps 1e-8, weight decay 0.1, gradient
// norm clipped at 1.0.
inline constexpr double kAdamBeta1 = 0.9;
inline constexpr double kAdamBeta2 = 0.95;
inline constexpr double kAdamEps = 1e-8;
inline constexpr double kWeightDecay = 0.1;
inline constexpr double kClipGrad = 1.0;

// GPT-3's warm-up (Brown et al. 2020, Appendix B): 375 M tokens.
inline constexpr double kGpt3WarmupTokens = 375e6;

struct TrainingRunInputs {
  search_spaces::ModelSpec model;
  search_spaces::TrainingSpec training;  // gbs, seq, train_tokens
  double parameters = 0;                 // total parameter count
  double step_time_s = 0;                // predicted, > 0
  int64_t time_limit_s = 0;              // one job's limit, > 0
  // Iterations between checkpoints; 0 = about one hour of predicted time.
  int64_t save_interval = 0;
};

struct TrainingRun {
  // ceil(train_tokens / (global_batch_size · seq_length)), Megatron's
  // --train-iters.
  int64_t train_iters = 0;

  // Cosine decay from lr to min_lr over lr_decay_iters (= train_iters)
  // after a linear warm-up of lr_warmup_iters.
  double lr = 0;
  double min_lr = 0;
  int64_t lr_warmup_iters = 0;
  int64_t lr_decay_iters = 0;
  // Where lr came from: "the model's recipe" or "GPT-3 Table 2.1 by size".
  std::string lr_source;

  // Megatron --init-method-std: sqrt(2 / (5 · hidden_size)), 3 digits.
  double init_method_std = 0;

  // Checkpoint every save_interval iterations.
  int64_t save_interval = 0;

  // Time: the whole run, and what one job of the limit trains.
  double predicted_run_s = 0;  // train_iters · step_time_s
  int64_t time_limit_s = 0;    // one job's limit (the input)
  // Megatron --exit-duration-in-mins: stop, save and exit this long after
  // the start, leaving ExitMarginS(limit) of the limit to write the last
  // checkpoint.
  int64_t exit_duration_mins = 0;
  // Jobs of time_limit_s the run needs: ceil(predicted_run_s / the
  // iterations' share of one job); the script resubmits itself until the
  // checkpoint reaches train_iters, at most max_jobs times.
  int64_t jobs = 1;
  int64_t max_jobs = 1;
};

// The run. InvalidArgument when the inputs cannot make one (no token budget,
// a step time or time limit <= 0, a limit shorter than the margins).
StatusOr<TrainingRun> PlanTrainingRun(const TrainingRunInputs& in);

// GPT-3 Table 2.1's learning rate for a model of `parameters`: the table's
// points (125 M: 6e-4 ... 175 B: 0.6e-4) interpolated in log-log, held
// constant outside.
double Gpt3LearningRate(double parameters);

// Seconds of a job's limit left for the last checkpoint and exit:
// min(15 min, 10 % of the limit).
int64_t ExitMarginS(int64_t time_limit_s);

// Megatron's schedule, optimizer and checkpoint flags for `run`, one per
// element: --train-iters, --lr, --min-lr, --lr-decay-style cosine,
// --lr-warmup-iters, --lr-decay-iters, --weight-decay, --adam-beta1/2,
// --adam-eps, --clip-grad, --init-method-std, --save-interval,
// --exit-duration-in-mins.
std::vector<std::string> MegatronRunArgs(const TrainingRun& run);

// The model's tokenizer as Megatron flags: --tokenizer-type T, then
// --tokenizer-model, --vocab-file/--merge-file, or --vocab-size
// (NullTokenizer, vocab_size - 1: Megatron adds the EOD token). Files are
// shell variables ("$VOCAB_FILE"); the tokenizer model is the model's
// published id, or "$TOKENIZER_MODEL" when it has none or when
// `model_as_variable` (a launch script, where the variable defaults to it).
std::vector<std::string> MegatronTokenizerArgs(
    const search_spaces::ModelSpec& model, bool model_as_variable);

// A shell variable a launch job needs for the model's tokenizer (the same
// choice MegatronTokenizerArgs makes): its name, its default ("" = the job
// must be given it), what it is ("the GPT-2 vocab.json") and, for a file
// with a conventional name, that name ("gpt2-vocab.json").
struct TokenizerVariable {
  std::string name;
  std::string value;
  std::string what;
  std::string file;
};

// TOKENIZER_TYPE and TOKENIZER_MODEL when the model names no tokenizer;
// VOCAB_FILE and MERGE_FILE for GPT-2 BPE; none for NullTokenizer;
// TOKENIZER_MODEL otherwise. `tokenizer_model` (a --tokenizer-model, else
// the model's published id; may be "") is TOKENIZER_MODEL's default.
std::vector<TokenizerVariable> TokenizerVariables(
    const search_spaces::ModelSpec& model, const std::string& tokenizer_model);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_TRAINING_RUN_H_
