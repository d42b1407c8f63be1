// `tune export`: any stored candidate of a recorded search as arguments for
// another trainer (tuner/interop/export_format.h): Megatron-LM pretrain_gpt.py
// flags, a NeMo megatron_gpt YAML override block or Megatron-Bridge recipe
// overrides.
//
// Reads the results database only (read-only open): the search row gives the
// model name, GPUs, GPUs per node, batch, sequence length, precision and the
// command line it ran with (for the --grad-reduce-in-bf16, --fp8-param-gather
// and --tp-comm-overlap switches), the candidate row its ParallelConfig. The
// model is resolved again by name, so its architecture is that of this build's
// preset (or of the YAML file at the stored path).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "results/store.h"
#include "search_spaces/presets/presets.h"
#include "tuner/commands/command.h"
#include "tuner/commands/planned_run.h"
#include "tuner/inputs/inputs.h"
#include "tuner/interop/export_format.h"
#include "tuner/store/results_db.h"
#include "tuner/store/stored_candidates.h"
#include "tuner/store/stored_search.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kExportExamples = R"(Examples:
  tune db searches                                 find a search id
  tune export --search 3 --format megatron         its best candidate as pretrain_gpt.py flags
  tune export --search 3 --rank 2 --format nemo    the second best as a NeMo override block
  tune export --search 3 --format bridge           Megatron-Bridge recipe overrides
  tune export --search 3 --rank 5 --format megatron --db runs.db > args.txt
Only the ranks a search stored can be exported ('tune search --top K' stores K).
docs/export.md maps every flag and key.)";

// The switches of the search's command line (results_db.cc DescribeFlags)
// that are part of the TrainingSpec but have no column of their own.
bool HasSwitch(const std::string& arguments, const std::string& flag) {
  std::istringstream words(arguments);
  std::string word;
  while (words >> word) {
    if (word == flag) return true;
  }
  return false;
}

// The word after `flag` in the search's command line, "" when absent.
std::string WordAfter(const std::string& arguments, const std::string& flag) {
  std::istringstream words(arguments);
  std::string word;
  while (words >> word) {
    if (word == flag && words >> word) return word;
  }
  return "";
}

class ExportCommand : public Command {
 public:
  explicit ExportCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "export",
        "print a stored candidate as Megatron-LM arguments or NeMo overrides");
    sub->add_option("--search", search_text_,
                    "search id (from 'tune db searches')")
        ->required()
        ->type_name("ID");
    sub->add_option("--rank", rank_text_,
                    "candidate rank within the search (default 1 = best)")
        ->type_name("R");
    sub->add_option("--format", format_,
                    "megatron (pretrain_gpt.py arguments), nemo (NeMo "
                    "megatron_gpt override block) or bridge (Megatron-Bridge "
                    "recipe overrides)")
        ->required()
        ->type_name("FMT");
    AddDbOption(sub, &db_);
    sub->footer(kExportExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    // Flags first, so that a typo fails before the file is touched.
    auto format = ParseExportFormat(format_, "--format", {});
    if (!format.ok()) return format.status();
    auto search_id = ParsePositiveInt(search_text_, "--search");
    if (!search_id.ok()) return search_id.status();
    auto rank = ParsePositiveInt(rank_text_, "--rank");
    if (!rank.ok()) return rank.status();

    results::OpenOptions options;
    options.read_only = true;
    auto store = results::Store::Open(ResolveDbPath(db_), options);
    if (!store.ok()) return store.status();
    auto search = FindStoredSearch(**store, search_id.value());
    if (!search.ok()) return search.status();
    auto candidate =
        FindStoredRanks(**store, search.value(), {rank.value()}, "--rank");
    if (!candidate.ok()) return candidate.status();

    const results::SearchRecord& s = search.value();
    auto model = ResolveStoredModel(s);
    if (!model.ok()) return model.status();
    auto training = StoredTraining(s);
    if (!training.ok()) return training.status();

    const results::CandidateRecord& c = candidate->front();
    err << "tune: search " << s.id << " rank " << c.rank << ": " << s.model
        << " on " << s.gpus << " GPUs, " << search_spaces::ToString(c.config)
        << "\n";
    if (!c.fits) {
      err << "tune: warning: rank " << c.rank
          << " does not fit: " << c.infeasible_reason << "\n";
    }
    PlanToExport plan;
    plan.model = model.value();
    plan.training = training.value();
    plan.config = c.config;
    plan.gpus_per_node = s.gpus_per_node;
    // The step time sizes only job flags (checkpoint interval), which an
    // export leaves out: a candidate stored without one still exports.
    auto run =
        PlannedRun(plan.model, plan.training,
                   c.step_time_s > 0 ? c.step_time_s : 1.0, kNoTimeLimitS);
    if (!run.ok()) return run.status();
    plan.run = run.value();
    auto text = ExportPlan(format.value(), plan);
    if (!text.ok()) return text.status();
    for (const std::string& note : text->notes) {
      err << "tune: note: " << note << "\n";
    }
    out << text->text;
    return Status::Ok();
  }

 private:
  // The stored name is the model's canonical name; for a model read from a
  // YAML file that is the file's `name:`, so the --model argument the search
  // ran with (the path as typed) is tried next.
  static StatusOr<search_spaces::ModelSpec> ResolveStoredModel(
      const results::SearchRecord& s) {
    auto model = search_spaces::ResolveModel(s.model);
    if (model.ok()) return model;
    const std::string typed = WordAfter(s.arguments, "--model");
    if (!typed.empty() && typed != s.model) {
      model = search_spaces::ResolveModel(typed);
      if (model.ok()) return model;
    }
    return Status::InvalidArgument(
        "search " + std::to_string(s.id) + "'s model '" + s.model +
            "' no longer resolves: " + model.status().message(),
        "restore that model file or preset, or search again with a model "
        "'tune models' lists");
  }

  static StatusOr<search_spaces::TrainingSpec> StoredTraining(
      const results::SearchRecord& s) {
    search_spaces::TrainingSpec t;
    t.num_gpus = s.gpus;
    t.global_batch_size = s.gbs;
    t.seq_length = s.seq_length;
    auto precision = ParsePrecision(s.precision);
    if (!precision.ok()) {
      return Status::InvalidArgument(
          "search " + std::to_string(s.id) + " stores precision '" +
              s.precision + "', which this build does not know",
          "search again with --precision bf16, fp16 or fp8");
    }
    t.precision = precision.value();
    t.grad_reduce_in_bf16 = HasSwitch(s.arguments, "--grad-reduce-in-bf16");
    t.fp8_param_gather = HasSwitch(s.arguments, "--fp8-param-gather");
    t.tp_comm_overlap = HasSwitch(s.arguments, "--tp-comm-overlap");
    t.moe_ep_overlap =
        HasSwitch(s.arguments, "--overlap-moe-expert-parallel-comm");
    t.fp8_dot_product_attention =
        HasSwitch(s.arguments, "--fp8-dot-product-attention");
    auto graphs = CudaGraphsFromFlags(FlagsOfStoredSearch(s));
    if (!graphs.ok()) return graphs.status();
    t.cuda_graphs = graphs.value();
    return t;
  }

  std::string search_text_;
  std::string rank_text_ = "1";
  std::string format_;
  std::string db_;
};

}  // namespace

std::unique_ptr<Command> AddExportCommand(CLI::App* app) {
  return std::make_unique<ExportCommand>(app);
}

}  // namespace meshtune::tuner
