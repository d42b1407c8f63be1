// `tune search` (also `tune --model M --gpus N` without a subcommand).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "tuner/commands/command.h"
#include "tuner/commands/planned_run.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/search_link.h"
#include "tuner/interop/export_format.h"
#include "tuner/io/output_file.h"
#include "tuner/io/terminal.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/render/report_json.h"
#include "tuner/render/report_table.h"
#include "tuner/render/report_yaml.h"
#include "tuner/search/search_driver.h"
#include "tuner/search/search_progress.h"
#include "tuner/store/results_db.h"
#include "tuner/store/stored_candidates.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kSearchExamples = R"(Examples:
  tune --model 175b --gpus 1024                       best config on 1024 A100-80GB (default GPU)
  tune search --model llama3-70b --gpus 512 --gpu h100 --gbs 1024 --top 5
  tune --model 175b --gpus 1024 --tp 8 --pp 8,16 --recompute selective,full
  tune --model 175b --gpus 1024 --json > result.json
  tune --model 175b --gpus 1024 --out best.yaml --format megatron
  tune --model my_model.yaml --gpus 64 --space my_space.yaml
  tune search --model deepseek-v2-lite --gpus 16 --gpu h100 --etp 1 --memory-headroom 5%
  tune --model 175b --gpus 1024 --db runs.db          record into runs.db (default ./tune.db)
  tune search --model gpt-tiny --gpus 2 --gpu local --gbs 4 --seq-len 64 --out best.yaml
  tune train --config best.yaml --steps 20            train it; the run is stored against
                                                      the search's prediction (tune db runs)
With a database, --out also writes a search: section (db, id, rank, candidate_id,
predicted_step_time_s) that links 'tune train --config' runs to this search.
--memory-headroom (GiB, or % of the GPU's memory) keeps that much free on every GPU; a
'*' after mem_GiB marks a plan within 5 % of the usable memory.
--quiet prints only the winner line (or the JSON / Megatron arguments).)";

// The one line --quiet prints: the winner and its headline numbers.
std::string WinnerLine(const costmodel::Estimate& best) {
  char numbers[160];
  std::snprintf(
      numbers, sizeof(numbers),
      ": step %.3f s, %.1f tokens/s/GPU, MFU %.1f%%, %.2f GiB per GPU",
      best.step_time_s, best.tokens_per_s_per_gpu, 100 * best.mfu,
      best.memory.total_bytes() / (1024.0 * 1024.0 * 1024.0));
  return "best: " + search_spaces::ToString(best.config) + " (recompute " +
         FormatRecompute(best.config.recompute) + ")" + numbers;
}

class SearchCommand : public Command {
 public:
  explicit SearchCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "search", "search parallel configurations (default command)");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/true);
    sub->add_option("--space", flags_.space_file,
                    "search-space YAML file (pins; flags narrow it further)")
        ->type_name("FILE");
    sub->add_option("--top", top_, "how many candidates to list (default 10)")
        ->type_name("K");
    sub->add_flag("--json", json_,
                  "print the JSON report (docs/design.md §5) on stdout");
    sub->add_option("--out", out_file_,
                    "write the best configuration as YAML to FILE")
        ->type_name("FILE");
    sub->add_option("--format", format_,
                    "table (default), megatron (pretrain_gpt.py arguments), "
                    "nemo (NeMo megatron_gpt overrides) or bridge "
                    "(Megatron-Bridge recipe overrides)")
        ->type_name("FMT");
    AddDbOption(sub, &flags_.db, "recording this search");
    sub->add_flag("--no-db", flags_.no_db, "record nothing");
    AddTerminalFlags(sub, &terminal_);
    sub->footer(kSearchExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    MESHTUNE_RETURN_IF_ERROR(ApplyTerminalFlags(terminal_));
    auto top = ParsePositiveInt(top_, "--top");
    if (!top.ok()) return top.status();
    std::optional<ExportFormat> export_format;
    if (format_ != "table") {
      auto parsed = ParseExportFormat(format_, "--format", {"table"});
      if (!parsed.ok()) return parsed.status();
      export_format = parsed.value();
    }
    if (json_ && export_format) {
      return Status::InvalidArgument(
          "--json and --format " + format_ + " both choose the stdout format",
          "pick one of them");
    }
    // A mistyped --out directory fails before the search, as an input error.
    if (!out_file_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(CheckOutputPath(out_file_, "--out"));
    }
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    const Inputs& in = inputs.value();
    // Opened before searching so that a bad --db fails without output.
    auto db = OpenSearchDb(flags_, err);
    if (!db.ok()) return db.status();

    // Measurements in the database just opened calibrate the search.
    auto calibration = ChooseCalibration(db->get(), in.cluster);
    if (!calibration.ok()) return calibration.status();
    // Large spaces (thousands of GPUs, every axis free) take seconds: a
    // bar appears only then, on a terminal.
    const SearchResult result =
        RunSearchWithProgress(in, *calibration.value(), err, terminal_.quiet);
    if (result.feasible == 0) {
      return NoFeasibleConfigStatus(in.model, in.cluster, in.training, result);
    }
    const costmodel::Estimate& best = result.ranked.front();
    // Recorded first, so that the --out file can name the candidate it is
    // (its search: section) for `tune train` to store its run against. A
    // failed write is a warning only: the search itself succeeded.
    std::optional<SearchLink> link;
    if (*db != nullptr) {
      auto id = RecordSearch(db->get(), flags_, in, result, top.value());
      if (!id.ok()) {
        err << "tune: warning: search not recorded: " << id.status().message()
            << "\n";
      } else if (!out_file_.empty()) {
        auto stored = FindCandidate(**db, id.value(), /*rank=*/1);
        if (stored.ok()) {
          link = MakeSearchLink(stored.value());
        } else {
          err << "tune: warning: --out " << out_file_
              << " is not linked to search " << id.value() << ": "
              << stored.status().message() << "\n";
        }
      }
    }
    if (!out_file_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(
          WriteConfigYaml(out_file_, in, best, link ? &*link : nullptr));
      if (!terminal_.quiet) {
        err << "tune: wrote the best configuration to " << out_file_ << "\n";
      }
    }
    if (json_) {
      out << SearchToJson(result, in, top.value()).dump(2) << "\n";
    } else if (export_format) {
      PlanToExport plan;
      plan.model = in.model;
      plan.training = in.training;
      plan.config = best.config;
      plan.gpus_per_node = in.cluster.gpus_per_node;
      // The attention backend the calibration's kernel times assume.
      plan.flash_attention = calibration.value()->UsesFlashAttention();
      auto run =
          PlannedRun(in.model, in.training, best.step_time_s, kNoTimeLimitS);
      if (!run.ok()) return run.status();
      plan.run = run.value();
      auto text = ExportPlan(*export_format, plan);
      if (!text.ok()) return text.status();
      for (const std::string& note : text->notes) {
        err << "tune: note: " << note << "\n";
      }
      out << text->text;
    } else if (terminal_.quiet) {
      out << StyleFor(out).Green(WinnerLine(best)) << "\n";
    } else {
      PrintSearchReport(out, in, result, top.value());
    }
    return Status::Ok();
  }

 private:
  InputFlags flags_;
  std::string top_ = "10";
  bool json_ = false;
  std::string out_file_;
  std::string format_ = "table";
  TerminalFlags terminal_;
};

}  // namespace

std::unique_ptr<Command> AddSearchCommand(CLI::App* app) {
  return std::make_unique<SearchCommand>(app);
}

}  // namespace meshtune::tuner
