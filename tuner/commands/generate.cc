// `tune generate`: text from a checkpoint that `tune train --save` wrote, on
// the engine's generator (engine/inference/generator.h) with tp ranks as
// threads of this process (tuner/generate/generation.h). Prints the prompt
// and its continuation, then one line of timings (TTFT, TPOT) on stderr.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/data/tokenizer.h"
#include "search_spaces/presets/presets.h"
#include "tuner/commands/cli.h"
#include "tuner/commands/command.h"
#include "tuner/generate/generation.h"
#include "tuner/io/text_format.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kGenerateExamples = R"(Examples:
  tune train --model gpt-tiny --steps 200 --seq-len 64 --save ckpt
  tune generate --load ckpt --prompt "The GNU General Public License"
  tune generate --load ckpt --prompt "Copyright" --temperature 0.8 --top-k 40 --seed 7
  tune generate --load ckpt --prompt "Permission is" --tp 2 --json
The model comes from the checkpoint (its metadata names the preset); pass
--model for a model YAML. Prompts are byte-tokenized, as tune train's
built-in corpus and tune data are; with --vocab-file/--merge-file, GPT-2
BPE. Generation stops at --max-new-tokens or the end-of-document token.)";

class GenerateCommand : public Command {
 public:
  explicit GenerateCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "generate",
        "generate text from a tune train checkpoint on the engine (prefill "
        "and decode with a KV cache)");
    sub->add_option("--load", load_, "checkpoint directory (tune train --save)")
        ->type_name("DIR")
        ->required();
    sub->add_option("--prompt", prompt_, "the text to continue")
        ->type_name("TEXT")
        ->required();
    sub->add_option("--model", model_,
                    "model preset or YAML (default: the checkpoint's model)")
        ->type_name("M");
    sub->add_option("--max-new-tokens", max_new_tokens_,
                    "tokens to generate at most (default 64)")
        ->type_name("N");
    sub->add_option("--temperature", temperature_,
                    "0 = greedy (default); > 0 samples from the softmax of "
                    "logits / T")
        ->type_name("T");
    sub->add_option("--top-k", top_k_,
                    "sample among the K most likely tokens (0 = all)")
        ->type_name("K");
    sub->add_option("--seed", seed_, "sampling seed (default 1234)")
        ->type_name("S");
    sub->add_option("--tp", tp_,
                    "tensor-parallel ranks, run as threads (default 1)")
        ->type_name("N");
    sub->add_option("--backend", backend_,
                    "engine backend: cpu (default) or cuda (one GPU per tp "
                    "rank)")
        ->type_name("B");
    sub->add_option("--vocab-file", vocab_file_,
                    "GPT-2 vocab.json (with --merge-file): BPE prompts")
        ->type_name("FILE");
    sub->add_option("--merge-file", merge_file_, "GPT-2 merges.txt")
        ->type_name("FILE");
    sub->add_flag("--json", json_,
                  "print {prompt, text, tokens, ttft_ms, tpot_ms, ...} as "
                  "JSON");
    sub->footer(kGenerateExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    MESHTUNE_RETURN_IF_ERROR(CheckFlags());
    std::unique_ptr<engine::data::Tokenizer> tokenizer;
    if (vocab_file_.empty() && merge_file_.empty()) {
      tokenizer = std::make_unique<engine::data::ByteTokenizer>();
    } else {
      auto bpe = engine::data::Gpt2BpeTokenizer::Load(vocab_file_, merge_file_);
      if (!bpe.ok()) return bpe.status();
      tokenizer = std::move(bpe).value();
    }
    GenerationRequest r;
    auto model = ResolveCheckpointModel();
    if (!model.ok()) return model.status();
    r.config.model = model.value();
    r.checkpoint_dir = load_;
    r.prompts = {tokenizer->Encode(prompt_)};
    r.max_new_tokens = max_new_tokens_;
    r.sampling.temperature = temperature_;
    r.sampling.top_k = top_k_;
    r.sampling.seed = seed_;
    r.sampling.vocab_limit = tokenizer->vocab_size();
    r.stop_token = tokenizer->eod_id();
    r.tp = static_cast<int>(tp_);
    r.backend = backend_;
    auto result = RunGeneration(r);
    if (!result.ok()) return result.status();
    std::vector<int32_t> tokens = result->generation.tokens.front();
    const bool stopped = !tokens.empty() && tokens.back() == r.stop_token;
    if (stopped) tokens.pop_back();
    const std::string text = tokenizer->Decode(tokens);
    const double ttft_ms = result->ttft_s.front() * 1e3;
    const double tpot_ms = result->tpot_s.front() * 1e3;
    if (json_) {
      nlohmann::json j;
      j["model"] = r.config.model.name;
      j["checkpoint"] = load_;
      j["prompt"] = prompt_;
      j["prompt_tokens"] = r.prompts.front().size();
      j["text"] = text;
      j["tokens"] = tokens;
      j["stopped_at_end_of_document"] = stopped;
      j["tp"] = tp_;
      j["backend"] = backend_;
      j["ttft_ms"] = ttft_ms;
      j["tpot_ms"] = tpot_ms;
      j["kv_cache_bytes_per_rank"] = result->kv_cache_bytes_per_rank;
      // Invalid UTF-8 (a byte model's partial characters) is replaced.
      out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
      return Status::Ok();
    }
    out << prompt_ << text << "\n";
    err << "tune: generated " << tokens.size() << " tokens"
        << (stopped ? " (end of document)" : "") << " with "
        << r.config.model.name << " at tp " << tp_ << " on " << backend_
        << ": TTFT " << Fixed(ttft_ms, 1) << " ms for "
        << r.prompts.front().size() << " prompt tokens, TPOT "
        << Fixed(tpot_ms, 2) << " ms\n";
    return Status::Ok();
  }

 private:
  Status CheckFlags() const {
    if (prompt_.empty()) {
      return Status::InvalidArgument("--prompt is empty",
                                     "give the text to continue");
    }
    if (max_new_tokens_ < 1 || max_new_tokens_ > kMaxNewTokens) {
      return Status::InvalidArgument(
          "--max-new-tokens must be in [1, " + std::to_string(kMaxNewTokens) +
              "], got " + std::to_string(max_new_tokens_),
          "e.g. --max-new-tokens 64");
    }
    if (!(temperature_ >= 0 && temperature_ <= 100)) {
      return Status::InvalidArgument(
          "--temperature must be in [0, 100], got " + Fmt("%g", temperature_),
          "0 is greedy; 0.7-1.0 are usual for sampling");
    }
    if (top_k_ < 0) {
      return Status::InvalidArgument(
          "--top-k must be 0 (all tokens) or more, got " +
              std::to_string(top_k_),
          "e.g. --top-k 40");
    }
    if (tp_ < 1 || tp_ > kMaxTp) {
      return Status::InvalidArgument(
          "--tp must be in [1, " + std::to_string(kMaxTp) + "], got " +
              std::to_string(tp_),
          "it must divide the model's attention heads and query groups");
    }
    if (vocab_file_.empty() != merge_file_.empty()) {
      return Status::InvalidArgument(
          "GPT-2 BPE needs both --vocab-file and --merge-file",
          "give both, or neither for the byte tokenizer");
    }
    return Status::Ok();
  }

  // --model, or the preset the checkpoint names.
  StatusOr<search_spaces::ModelSpec> ResolveCheckpointModel() const {
    if (!model_.empty()) return search_spaces::ResolveModel(model_);
    auto name = engine::CheckpointModelName(load_);
    if (!name.ok() && name.status().code() == Status::Code::kNotFound) {
      return Status::NotFound(name.status().message(),
                              "save one there with tune train --save " + load_ +
                                  ", or pass the directory of one");
    }
    if (!name.ok()) return name.status();
    auto model = search_spaces::ResolveModel(name.value());
    if (!model.ok()) {
      return Status::InvalidArgument(
          "checkpoint " + load_ + " was saved from model '" + name.value() +
              "', which is not a preset",
          "pass --model with the model YAML it was trained from");
    }
    return model;
  }

  // A run on this machine's cores: beyond these the positions or ranks
  // only cost time.
  static constexpr int64_t kMaxNewTokens = 1 << 16;
  static constexpr int64_t kMaxTp = 64;

  std::string load_, prompt_, model_, vocab_file_, merge_file_;
  std::string backend_ = "cpu";
  int64_t max_new_tokens_ = 64, top_k_ = 0, tp_ = 1;
  uint64_t seed_ = 1234;
  double temperature_ = 0;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> AddGenerateCommand(CLI::App* app) {
  return std::make_unique<GenerateCommand>(app);
}

}  // namespace meshtune::tuner
