// `tune scale`: the search at each of several GPU counts, one row per size.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "search_spaces/parallel_config.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/io/terminal.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/render/scale_report.h"
#include "tuner/search/search_driver.h"
#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kScaleExamples = R"(Examples:
  tune scale --model 175b --gpus 64,128,256,512,1024 --gpu a100-80g
  tune scale --model 175b --gpus 64,128,256,512,1024 --price-per-gpu-hour 2.5
  tune scale --model llama3-70b --gpus 64,256,1024,4096 --gpu h100 --gbs 2048 --json
--gpus takes a comma list here; every size runs the full search (pins such as
--tp 8 or --recompute selective narrow it). The global batch stays fixed at
every size: the model's default, or --gbs. eff % is tokens/s per GPU relative
to the smallest size that has a feasible configuration; days are for --tokens
(default 300B); cost = days x 24 x gpus x --price-per-gpu-hour.
--quiet prints one line per size: GPUs, best configuration, step time.)";

// The line --quiet prints for one size.
std::string QuietRow(const ScaleRow& row) {
  char gpus[32];
  std::snprintf(gpus, sizeof(gpus), "%6lld  ",
                static_cast<long long>(row.gpus));
  if (!row.feasible)
    return gpus + ("no feasible configuration (" + row.reason + ")");
  char step[48];
  std::snprintf(step, sizeof(step), " %.3f s", row.best.step_time_s);
  return gpus + search_spaces::ToString(row.best.config) + step;
}

StatusOr<double> ParsePrice(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value) || value <= 0) {
    return Status::InvalidArgument(
        "--price-per-gpu-hour must be a positive number of USD, got '" + text +
            "'",
        "e.g. --price-per-gpu-hour 2.5");
  }
  return value;
}

class ScaleCommand : public Command {
 public:
  explicit ScaleCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "scale",
        "best configuration, throughput, efficiency and cost at several GPU "
        "counts");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/true);
    sub->add_option("--price-per-gpu-hour", price_,
                    "USD per GPU-hour; adds a cost column")
        ->type_name("USD");
    sub->add_flag("--json", json_, "print the rows as one JSON object");
    AddDbOption(sub, &flags_.db,
                "whose measurements, if any, calibrate the estimates");
    sub->add_flag("--no-db", flags_.no_db,
                  "use datasheet numbers, ignore any database");
    AddTerminalFlags(sub, &terminal_);
    sub->footer(kScaleExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    MESHTUNE_RETURN_IF_ERROR(ApplyTerminalFlags(terminal_));
    auto sizes = ParseIntList(flags_.gpus, "--gpus");
    if (!sizes.ok()) return sizes.status();
    std::vector<int64_t> gpus = sizes.value();
    std::sort(gpus.begin(), gpus.end());
    for (size_t i = 1; i < gpus.size(); ++i) {
      if (gpus[i] == gpus[i - 1]) {
        return Status::InvalidArgument(
            "--gpus lists " + std::to_string(gpus[i]) + " twice",
            "give each GPU count once");
      }
    }
    ScaleReport report;
    report.gbs_from_flag = !flags_.gbs.empty();
    if (!price_.empty()) {
      auto price = ParsePrice(price_);
      if (!price.ok()) return price.status();
      report.price_per_gpu_hour = price.value();
    }
    // Resolve every size before searching, so that a bad size fails fast
    // and without partial output.
    std::vector<Inputs> per_size;
    for (int64_t n : gpus) {
      InputFlags f = flags_;
      f.gpus = std::to_string(n);
      auto inputs = ResolveInputs(f);
      if (!inputs.ok()) return inputs.status();
      per_size.push_back(inputs.value());
    }
    report.first = per_size.front();
    auto calibration =
        CalibrationFor(report.first.cluster, flags_.db, flags_.no_db);
    if (!calibration.ok()) return calibration.status();

    // One tick per size; large sizes search for seconds each.
    ProgressBar bar(err, "sizes", static_cast<int64_t>(per_size.size()),
                    DefaultProgressOptions(err, terminal_.quiet));
    for (const Inputs& in : per_size) {
      bar.Update(static_cast<int64_t>(report.rows.size()));
      ScaleRow row;
      row.gpus = in.training.num_gpus;
      const SearchResult result = RunSearch(in.model, in.cluster, in.training,
                                            in.space, *calibration.value());
      if (result.feasible == 0) {
        row.reason =
            NoFeasibleConfigStatus(in.model, in.cluster, in.training, result)
                .message();
      } else {
        row.feasible = true;
        row.best = result.ranked.front();
      }
      report.rows.push_back(row);
    }
    bar.Update(static_cast<int64_t>(report.rows.size()));
    bar.Finish();
    FinishScaleRows(&report);
    if (json_) {
      out << ScaleToJson(report).dump(2) << "\n";
    } else if (terminal_.quiet) {
      for (const ScaleRow& row : report.rows) out << QuietRow(row) << "\n";
    } else {
      PrintScaleTable(out, report);
    }
    return Status::Ok();
  }

 private:
  InputFlags flags_;
  std::string price_;
  bool json_ = false;
  TerminalFlags terminal_;
};

}  // namespace

std::unique_ptr<Command> AddScaleCommand(CLI::App* app) {
  return std::make_unique<ScaleCommand>(app);
}

}  // namespace meshtune::tuner
