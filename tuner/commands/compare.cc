// `tune compare`: two or more configurations of one model on one cluster,
// every time and memory term side by side.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/cost_model.h"
#include "search_spaces/space/enumerate.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/compare_config.h"
#include "tuner/inputs/inputs.h"
#include "tuner/io/terminal.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/render/compare_report.h"
#include "tuner/store/results_db.h"
#include "tuner/store/stored_candidates.h"
#include "tuner/store/stored_search.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kCompareExamples = R"(Examples:
  tune compare --model 175b --gpus 1024 --config "tp8 pp8 sp selective" --config "tp4 pp16 sp selective"
  tune compare --model 175b --gpus 1024 --config tp=8,pp=8,vpp=3,mbs=1,sp,recompute=selective,dist-opt --config tp=8,pp=16,sp --json
  tune compare --search 3 --ranks 1,2,5        candidates of a recorded search (tune db searches)
Each --config is one configuration: tp=N pp=N vpp=N cp=N ep=N dp=N mbs=N
(also tp8 pp8 ...), sp, dist-opt, recompute=MODE (or a bare none, selective,
full, full:N, full:block:N), separated by commas or spaces. Axes not given
default to 1 / off / none; dp = gpus / (tp*pp*cp). The search report's config
lines paste in as they are. The last columns are each configuration minus the
first; the closing lines name the time terms behind each difference.
--search ID takes the model, GPUs and batch of that recorded search and the
configurations it stored under --ranks (default 1,2); --quiet prints only
the closing lines.)";

// The flags that define the problem; a recorded search defines it instead.
constexpr const char* kProblemFlags[] = {"--model",
                                         "--gpus",
                                         "--gpu",
                                         "--gpus-per-node",
                                         "--gbs",
                                         "--seq-len",
                                         "--precision",
                                         "--tokens",
                                         "--grad-reduce-in-bf16",
                                         "--fp8-param-gather",
                                         "--tp-comm-overlap"};

class CompareCommand : public Command {
 public:
  explicit CompareCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "compare", "two or more configurations side by side, term by term");
    sub_ = sub;
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/false);
    // Not required: --search gives them. Run() asks for them otherwise.
    sub->get_option("--model")->required(false);
    sub->get_option("--gpus")->required(false);
    sub->add_option("--config", configs_,
                    "one configuration (repeat: at least two), e.g. "
                    "\"tp8 pp8 sp selective\"")
        ->type_name("CONFIG");
    sub->add_option("--search", search_text_,
                    "compare candidates of this recorded search instead "
                    "(tune db searches)")
        ->type_name("ID");
    sub->add_option("--ranks", ranks_text_,
                    "with --search: the candidate ranks (default 1,2)")
        ->type_name("R,R,..");
    AddTerminalFlags(sub, &terminal_);
    sub->add_flag("--json", json_, "print one JSON object on stdout");
    AddDbOption(sub, &flags_.db,
                "whose measurements, if any, calibrate the estimates");
    sub->add_flag("--no-db", flags_.no_db,
                  "use datasheet numbers, ignore any database");
    sub->footer(kCompareExamples);
  }

  Status Run(std::ostream& out, std::ostream& /*err*/) override {
    MESHTUNE_RETURN_IF_ERROR(ApplyTerminalFlags(terminal_));
    MESHTUNE_RETURN_IF_ERROR(CheckPinsAbsent());
    Inputs in;
    std::vector<search_spaces::ParallelConfig> configs;
    std::unique_ptr<costmodel::Calibration> calibration;
    if (!search_text_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(FromSearch(&in, &configs, &calibration));
    } else {
      MESHTUNE_RETURN_IF_ERROR(FromConfigFlags(&in, &configs, &calibration));
    }
    std::vector<costmodel::Estimate> estimates;
    for (const auto& c : configs) {
      estimates.push_back(costmodel::EstimateConfig(
          in.model, in.cluster, in.training, c, *calibration));
    }
    if (json_) {
      out << CompareToJson(in, estimates).dump(2) << "\n";
    } else if (terminal_.quiet) {
      for (size_t i = 1; i < estimates.size(); ++i) {
        out << ExplainDifference(estimates[0], estimates[i]) << "\n";
      }
    } else {
      PrintCompareTable(out, in, estimates);
    }
    return Status::Ok();
  }

 private:
  // The pins AddInputFlags registers would be ignored here: say so.
  Status CheckPinsAbsent() const {
    const std::pair<const char*, bool> pins[] = {
        {"--tp", !flags_.tp.empty()},
        {"--pp", !flags_.pp.empty()},
        {"--vpp", !flags_.vpp.empty()},
        {"--cp", !flags_.cp.empty()},
        {"--ep", !flags_.ep.empty()},
        {"--dp", !flags_.dp.empty()},
        {"--mbs", !flags_.mbs.empty()},
        {"--recompute", !flags_.recompute.empty()},
        {"--sp", flags_.sp.has_value()},
        {"--dist-opt", flags_.dist_opt.has_value()}};
    for (const auto& [name, given] : pins) {
      if (given) {
        return Status::InvalidArgument(
            std::string(name) + " does not apply to tune compare",
            "put the sizes in each --config, e.g. --config \"tp8 pp8 sp\"");
      }
    }
    return Status::Ok();
  }

  // --search ID --ranks R,R: the problem and the configurations as stored.
  Status FromSearch(Inputs* in,
                    std::vector<search_spaces::ParallelConfig>* configs,
                    std::unique_ptr<costmodel::Calibration>* calibration) {
    if (!configs_.empty()) {
      return Status::InvalidArgument(
          "--config and --search both choose the configurations",
          "pick one of them");
    }
    for (const char* name : kProblemFlags) {
      if (sub_->count(name) > 0) {
        return Status::InvalidArgument(
            std::string(name) + " does not apply with --search",
            "the recorded search gives the model, GPUs and batch; drop " +
                std::string(name));
      }
    }
    if (flags_.no_db) {
      return Status::InvalidArgument(
          "--search reads the results database, but --no-db is given",
          "drop --no-db (--db PATH names the database)");
    }
    auto id = ParsePositiveInt(search_text_, "--search");
    if (!id.ok()) return id.status();
    auto ranks = ParseIntList(ranks_text_, "--ranks");
    if (!ranks.ok()) return ranks.status();
    if (ranks->size() < 2) {
      return Status::InvalidArgument(
          "tune compare needs at least two --ranks, got " +
              std::to_string(ranks->size()),
          "e.g. --ranks 1,2");
    }
    for (size_t i = 0; i < ranks->size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if ((*ranks)[i] == (*ranks)[j]) {
          return Status::InvalidArgument(
              "--ranks lists " + std::to_string((*ranks)[i]) + " twice",
              "give each rank once");
        }
      }
    }
    results::OpenOptions options;
    options.read_only = true;
    auto store = results::Store::Open(ResolveDbPath(flags_.db), options);
    if (!store.ok()) return store.status();
    auto search = FindStoredSearch(**store, id.value());
    if (!search.ok()) return search.status();
    auto candidates =
        FindStoredRanks(**store, search.value(), ranks.value(), "--ranks");
    if (!candidates.ok()) return candidates.status();
    auto inputs = InputsOfStoredSearch(search.value());
    if (!inputs.ok()) return inputs.status();
    *in = inputs.value();
    for (const results::CandidateRecord& c : candidates.value()) {
      configs->push_back(c.config);
    }
    // The database the search came from also calibrates the comparison,
    // as it calibrated the search.
    auto chosen = ChooseCalibration(store->get(), in->cluster);
    if (!chosen.ok()) return chosen.status();
    *calibration = std::move(chosen).value();
    return Status::Ok();
  }

  // --model ... --config "..." --config "...".
  Status FromConfigFlags(Inputs* in,
                         std::vector<search_spaces::ParallelConfig>* configs,
                         std::unique_ptr<costmodel::Calibration>* calibration) {
    if (sub_->count("--ranks") > 0) {
      return Status::InvalidArgument(
          "--ranks needs --search",
          "add --search ID (tune db searches lists them), or give --config");
    }
    if (configs_.size() < 2) {
      return Status::InvalidArgument(
          "tune compare needs at least two --config, got " +
              std::to_string(configs_.size()),
          "repeat --config, e.g. --config \"tp8 pp8\" --config \"tp4 pp16\"");
    }
    for (const char* name : {"--model", "--gpus"}) {
      if (sub_->count(name) == 0) {
        return Status::InvalidArgument(
            std::string(name) + " is required",
            "give --model and --gpus with the --config strings, or "
            "--search ID to compare candidates of a recorded search");
      }
    }
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    *in = inputs.value();
    for (size_t i = 0; i < configs_.size(); ++i) {
      const std::string flag = "--config " + std::to_string(i + 1);
      auto c = ParseConfigString(configs_[i], in->training.num_gpus, flag);
      if (!c.ok()) return c.status();
      std::string detail;
      const std::string reason = search_spaces::CheckConfig(
          in->model, in->training, in->cluster, c.value(), &detail);
      if (!reason.empty()) {
        return Status::InvalidArgument(
            flag + ": " + (detail.empty() ? reason : detail) + " (" + reason +
                ")",
            "change the sizes; 'tune search' with the same flags lists the "
            "valid configurations");
      }
      configs->push_back(c.value());
    }
    auto chosen = CalibrationFor(in->cluster, flags_.db, flags_.no_db);
    if (!chosen.ok()) return chosen.status();
    *calibration = std::move(chosen).value();
    return Status::Ok();
  }

  CLI::App* sub_ = nullptr;
  InputFlags flags_;
  std::vector<std::string> configs_;
  std::string search_text_;
  std::string ranks_text_ = "1,2";
  bool json_ = false;
  TerminalFlags terminal_;
};

}  // namespace

std::unique_ptr<Command> AddCompareCommand(CLI::App* app) {
  return std::make_unique<CompareCommand>(app);
}

}  // namespace meshtune::tuner
