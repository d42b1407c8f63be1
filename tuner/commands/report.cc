// `tune report --html FILE`: the self-contained HTML report of a search
// (tuner/render/report_html.h, docs/report.md), either of a search recorded in
// the results database (--search ID: its recorded command line is searched
// again, which is deterministic for the same build and database) or of a
// search given by the usual search flags.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tuner/commands/cli.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/interop/shell_words.h"
#include "tuner/io/output_file.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/render/explain_report.h"
#include "tuner/render/report_html.h"
#include "tuner/render/scale_report.h"
#include "tuner/search/search_driver.h"
#include "tuner/store/results_db.h"
#include "tuner/store/stored_candidates.h"
#include "tuner/store/stored_search.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kReportExamples = R"(Examples:
  tune report --html report.html --model 175b --gpus 1024
  tune report --html report.html --search 3            search 3 of ./tune.db
  tune report --html report.html --search 3 --db runs.db
  tune report --html report.html --model 175b --gpus 1024 --scale-gpus 256,512,1024
With --search the recorded search's command line is searched again with this
build and the database's measurements; stored validation runs of its
candidates are plotted against their predictions (tune validate).)";

// The recorded command line of `search` parsed back into search flags.
StatusOr<InputFlags> FlagsOfRecordedSearch(
    const results::SearchRecord& search) {
  const std::string what = "search " + std::to_string(search.id) + "'s command";
  auto words = SplitShellWords(search.arguments, what);
  if (!words.ok()) return words.status();
  std::vector<std::string> args = words.value();
  if (args.size() < 2 || args[0] != "tune" || args[1] != "search") {
    return Status::InvalidArgument(
        what + " is not a 'tune search' command line: '" + search.arguments +
            "'",
        "run that search again with 'tune search' and report the new one");
  }
  InputFlags flags;
  CLI::App app("recorded search", "search");
  AddInputFlags(&app, &flags, /*pins_are_lists=*/true);
  app.add_option("--space", flags.space_file);
  std::vector<std::string> reversed(args.rbegin(), args.rend() - 2);
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(
        what + " does not parse with this build: " + e.what(),
        "run that search again with 'tune search' and report the new one");
  }
  return flags;
}

class ReportCommand : public Command {
 public:
  explicit ReportCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "report", "write a self-contained HTML report of a search");
    sub->add_option("--html", html_file_, "write the report to FILE")
        ->type_name("FILE");
    sub->add_option("--search", search_text_,
                    "report search ID of the results database (instead of "
                    "search flags)")
        ->type_name("ID");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/true);
    // Not required here: --search names the search instead (Run checks
    // that one of the two is given).
    sub->get_option("--model")->required(false);
    sub->get_option("--gpus")->required(false);
    sub->add_option("--space", flags_.space_file,
                    "search-space YAML file (pins; flags narrow it further)")
        ->type_name("FILE");
    sub->add_option("--scale-gpus", scale_gpus_,
                    "add a scaling section: the same search at each of these "
                    "GPU counts (comma list, as tune scale --gpus)")
        ->type_name("N,N,...");
    sub->add_option("--top", top_,
                    "candidates in the breakdown charts (default 5)")
        ->type_name("K");
    AddDbOption(sub, &flags_.db,
                "holding the --search, measurements and validation runs");
    sub->add_flag("--no-db", flags_.no_db,
                  "use no database (datasheet numbers; not with --search)");
    sub->footer(kReportExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    (void)out;
    if (html_file_.empty()) {
      return Status::InvalidArgument("tune report needs --html FILE",
                                     "e.g. tune report --html report.html "
                                     "--model 175b --gpus 1024");
    }
    auto top = ParsePositiveInt(top_, "--top");
    if (!top.ok()) return top.status();
    const bool typed_search = !flags_.model.empty() || !flags_.gpus.empty();
    if (!search_text_.empty() && typed_search) {
      return Status::InvalidArgument(
          "--search and --model/--gpus both choose the search to report",
          "pass --search ID alone, or the search flags without --search");
    }
    if (search_text_.empty() && !typed_search) {
      return Status::InvalidArgument(
          "no search to report",
          "pass --search ID (see 'tune db searches') or search flags such as "
          "--model 175b --gpus 1024");
    }
    // Checked before searching so that a mistyped directory fails at once;
    // the file itself is only written (atomically) once the report exists,
    // so a failing search leaves a previous report untouched.
    MESHTUNE_RETURN_IF_ERROR(CheckOutputPath(html_file_, "--html"));

    Report report;
    Status status = search_text_.empty() ? SearchTyped(&report)
                                         : SearchRecorded(&report, err);
    if (status.ok() && !scale_gpus_.empty()) status = Scale(&report);
    if (!status.ok()) return status;
    report.source.version = VersionString();
    HtmlReportOptions options;
    options.top_k = top.value();
    // The best plan against the model's published recipe, where it has one.
    std::optional<PlanExplanation> explanation;
    const search_spaces::ModelSpec& m = report.inputs.model;
    if (!m.recipe_config.empty()) {
      explanation =
          ExplainPlan(report.inputs, report.result, *report.calibration,
                      m.recipe_config, "recipe", m.recipe_source,
                      m.recipe_global_batch_size, m.recipe_seq_length);
    }
    const std::string html = RenderHtmlReport(
        report.inputs, report.result, report.validations, report.source,
        options, report.scale ? &*report.scale : nullptr,
        explanation ? &*explanation : nullptr);
    MESHTUNE_RETURN_IF_ERROR(WriteOutputFile(html_file_, html, "--html"));
    err << "tune: wrote the HTML report to " << html_file_ << " ("
        << (html.size() + 1023) / 1024 << " KiB; best "
        << search_spaces::ToString(report.result.ranked.front().config)
        << ")\n";
    return Status::Ok();
  }

 private:
  struct Report {
    Inputs inputs;
    SearchResult result;
    std::vector<results::PredictedVsMeasured> validations;
    HtmlReportSource source;
    InputFlags flags;  // the search's flags, typed or recorded
    std::unique_ptr<costmodel::Calibration> calibration;
    std::optional<ScaleReport> scale;
  };

  // `tune scale` for the report's search: the same flags at every size of
  // --scale-gpus, the same calibration.
  Status Scale(Report* report) const {
    auto sizes = ParseIntList(scale_gpus_, "--scale-gpus");
    if (!sizes.ok()) return sizes.status();
    std::vector<int64_t> gpus = sizes.value();
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    ScaleReport scale;
    scale.gbs_from_flag = !report->flags.gbs.empty();
    for (const int64_t n : gpus) {
      InputFlags f = report->flags;
      f.gpus = std::to_string(n);
      auto in = ResolveInputs(f);
      if (!in.ok()) return in.status();
      if (scale.rows.empty()) scale.first = in.value();
      ScaleRow row;
      row.gpus = n;
      const SearchResult result =
          RunSearch(in->model, in->cluster, in->training, in->space,
                    *report->calibration);
      if (result.feasible == 0) {
        row.reason =
            NoFeasibleConfigStatus(in->model, in->cluster, in->training, result)
                .message();
      } else {
        row.feasible = true;
        row.best = result.ranked.front();
      }
      scale.rows.push_back(row);
    }
    FinishScaleRows(&scale);
    report->scale = std::move(scale);
    return Status::Ok();
  }

  std::string ReportCommandLine() const {
    std::string s = "tune report --html " + html_file_;
    if (top_ != "5") s += " --top " + top_;
    if (!scale_gpus_.empty()) s += " --scale-gpus " + scale_gpus_;
    return s;
  }

  static Status Search(const Inputs& in, const costmodel::Calibration& cal,
                       SearchResult* result) {
    SearchOptions options;
    options.keep_out_of_memory = true;
    *result =
        RunSearch(in.model, in.cluster, in.training, in.space, cal, options);
    if (result->feasible == 0) {
      return NoFeasibleConfigStatus(in.model, in.cluster, in.training, *result);
    }
    return Status::Ok();
  }

  Status SearchTyped(Report* report) const {
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    report->inputs = std::move(inputs.value());
    report->flags = flags_;
    auto calibration =
        CalibrationFor(report->inputs.cluster, flags_.db, flags_.no_db);
    if (!calibration.ok()) return calibration.status();
    report->calibration = std::move(calibration.value());
    MESHTUNE_RETURN_IF_ERROR(
        Search(report->inputs, *report->calibration, &report->result));
    // "tune search --model ..." -> "tune report --html F --model ...".
    std::string command = DescribeFlags(flags_);
    command.replace(0, std::string("tune search").size(), ReportCommandLine());
    if (flags_.no_db) command += " --no-db";
    if (!flags_.db.empty()) command += " --db " + flags_.db;
    report->source.command = command;
    return Status::Ok();
  }

  Status SearchRecorded(Report* report, std::ostream& err) const {
    auto id = ParsePositiveInt(search_text_, "--search");
    if (!id.ok()) return id.status();
    if (flags_.no_db) {
      return Status::InvalidArgument(
          "--search reads the results database, --no-db forbids it",
          "drop --no-db");
    }
    results::OpenOptions open;
    open.read_only = true;
    const std::string db_path = ResolveDbPath(flags_.db);
    auto store = results::Store::Open(db_path, open);
    if (!store.ok()) return store.status();
    auto found = FindStoredSearch(**store, id.value());
    if (!found.ok()) return found.status();
    const results::SearchRecord* search = &found.value();
    auto flags = FlagsOfRecordedSearch(*search);
    if (!flags.ok()) return flags.status();
    auto inputs = ResolveInputs(flags.value());
    if (!inputs.ok()) return inputs.status();
    report->inputs = std::move(inputs.value());
    report->flags = flags.value();
    auto calibration =
        ChooseCalibration(store.value().get(), report->inputs.cluster);
    if (!calibration.ok()) return calibration.status();
    report->calibration = std::move(calibration.value());
    MESHTUNE_RETURN_IF_ERROR(
        Search(report->inputs, *report->calibration, &report->result));

    // The database may have learned measurements since: say when the search
    // no longer ranks the recorded best first.
    auto stored = store.value()->GetCandidates(search->id);
    if (!stored.ok()) return stored.status();
    const std::string best =
        search_spaces::ToString(report->result.ranked.front().config);
    for (const results::CandidateRecord& c : stored.value()) {
      if (c.rank == 1 && c.config_text != best) {
        err << "tune: warning: search " << search->id
            << " searched again ranks " << best << " first; it recorded "
            << c.config_text
            << " (the measurements in the database changed since)\n";
      }
    }
    auto validations = store.value()->GetPredictedVsMeasured(search->id);
    if (!validations.ok()) return validations.status();
    report->validations = std::move(validations.value());
    report->source.search_id = search->id;
    report->source.db_path = db_path;
    report->source.command = ReportCommandLine() + " --search " +
                             std::to_string(search->id) + " --db " + db_path +
                             "\n# search " + std::to_string(search->id) +
                             " ran: " + search->arguments;
    return Status::Ok();
  }

  InputFlags flags_;
  std::string html_file_;
  std::string search_text_;
  std::string top_ = "5";
  std::string scale_gpus_;
};

}  // namespace

std::unique_ptr<Command> AddReportCommand(CLI::App* app) {
  return std::make_unique<ReportCommand>(app);
}

}  // namespace meshtune::tuner
