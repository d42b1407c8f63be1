#include "tuner/train/report.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "profiler/stats.h"
#include "search_spaces/parallel_config.h"
#include "tuner/inputs/inputs.h"
#include "tuner/render/report_json.h"

namespace meshtune::tuner {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// printf into a std::string (the lines are short).
template <typename... Args>
std::string Format(const char* format, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), format, args...);
  return buf;
}

}  // namespace

std::string FormatIterationLine(const std::vector<engine::IterationLog>& logs,
                                int64_t train_iters, int64_t global_batch_size,
                                std::optional<double> eta_s) {
  MESHTUNE_CHECK(!logs.empty());
  const engine::IterationLog& last = logs.back();
  double step_s = 0, loss = 0, tokens_per_s = 0, tflops = 0;
  for (const engine::IterationLog& l : logs) {
    step_s += l.step_s;
    loss += l.loss;
    tokens_per_s += l.tokens_per_s;
    tflops += l.tflops_per_rank;
  }
  const double n = static_cast<double>(logs.size());
  std::string line =
      Format(" iteration %8lld/%8lld |", static_cast<long long>(last.iteration),
             static_cast<long long>(train_iters));
  line += Format(" consumed samples: %12lld |",
                 static_cast<long long>(last.consumed_samples));
  line += Format(" elapsed time per iteration (ms): %.1f |", 1000 * step_s / n);
  line += Format(" throughput per rank (TFLOP/s/rank): %.3f |", tflops / n);
  line += Format(" learning rate: %.6E |", static_cast<double>(last.lr));
  line += Format(" global batch size: %5lld |",
                 static_cast<long long>(global_batch_size));
  line += Format(" lm loss: %.6E |", loss / n);
  if (last.load_balancing_loss.has_value()) {
    double lb = 0;
    for (const engine::IterationLog& l : logs) {
      lb += l.load_balancing_loss.value_or(0);
    }
    line += Format(" load_balancing_loss: %.6E |", lb / n);
  }
  line += Format(" grad norm: %.3f |", last.grad_norm);
  line += Format(" tokens per second: %.0f |", tokens_per_s / n);
  if (eta_s.has_value()) line += " ETA: " + FormatDuration(*eta_s) + " |";
  return line;
}

double EtaSeconds(const std::vector<engine::IterationLog>& run_logs,
                  int64_t train_iters) {
  if (run_logs.empty()) return 0;
  double total_s = 0;
  for (const engine::IterationLog& l : run_logs) total_s += l.step_s;
  const int64_t left = train_iters - run_logs.back().iteration;
  return left > 0 ? total_s / static_cast<double>(run_logs.size()) *
                        static_cast<double>(left)
                  : 0;
}

std::string FormatDuration(double seconds) {
  const long long s =
      seconds > 0 ? static_cast<long long>(std::llround(seconds)) : 0;
  if (s < 60) return Format("%llds", s);
  if (s < 3600) return Format("%lldm %02llds", s / 60, s % 60);
  return Format("%lldh %02lldm %02llds", s / 3600, s / 60 % 60, s % 60);
}

std::string FormatCheckpointLine(const engine::CheckpointEvent& event) {
  const long long it = static_cast<long long>(event.iteration);
  if (!event.saved) {
    // Concatenated: the directory has any length.
    return "saving checkpoint to " + event.dir + " (iteration " +
           std::to_string(it) + ") ...";
  }
  return Format("saved checkpoint of iteration %lld in %.1f s", it,
                event.elapsed_s);
}

TrainSummary SummarizeRun(const std::vector<engine::IterationLog>& logs,
                          int64_t tokens_per_step) {
  TrainSummary s;
  s.iterations = static_cast<int64_t>(logs.size());
  if (logs.empty()) return s;
  const size_t skip = logs.size() > static_cast<size_t>(kWarmupIterations)
                          ? static_cast<size_t>(kWarmupIterations)
                          : 0;
  std::vector<double> times;
  for (size_t i = skip; i < logs.size(); ++i) times.push_back(logs[i].step_s);
  const profiler::TimingStats t = profiler::Summarize(times);
  s.measured_steps = t.samples;
  s.step_time_median_s = t.median_s;
  s.step_time_min_s = t.min_s;
  s.step_time_p99_s = t.p99_s;
  s.step_time_cv = t.cv;
  s.tokens_per_s = t.median_s > 0 ? tokens_per_step / t.median_s : 0;
  s.final_loss = logs.back().loss;
  return s;
}

double SignedErrorPercent(double predicted_s, double measured_s) {
  return measured_s > 0 ? 100 * (predicted_s - measured_s) / measured_s : 0;
}

StepTimePrediction CandidatePrediction(const StoredCandidate& linked) {
  StepTimePrediction p;
  p.step_time_s = linked.candidate.step_time_s;
  // Concatenated, not printed into a fixed buffer: the path has any length.
  p.source = "search " + std::to_string(linked.search.id) + " rank " +
             std::to_string(linked.candidate.rank) + ", candidate " +
             std::to_string(linked.candidate.id) + " in " + linked.db + ": " +
             std::to_string(linked.search.gpus) + " x " + linked.search.gpu;
  // Older databases may lack the candidate's calibration.
  if (!linked.candidate.calibration.empty()) {
    p.source += ", " + linked.candidate.calibration + " calibration";
  }
  return p;
}

std::string FormatPredictionLine(const StepTimePrediction& p) {
  if (!p.step_time_s.has_value()) {
    return "  predicted:   n/a (" + p.source + ")\n";
  }
  return Format("  predicted:   %.1f ms per iteration (",
                1000 * *p.step_time_s) +
         p.source + ")\n";
}

std::string FormatSummary(const TrainSummary& s,
                          const StepTimePrediction& prediction) {
  std::string out;
  const bool skipped = s.iterations > kWarmupIterations;
  out += Format(
      "summary: %lld iterations; step time over %lld (%s): median %.1f ms, "
      "min %.1f ms, p99 %.1f ms, cv %.3f\n",
      static_cast<long long>(s.iterations),
      static_cast<long long>(s.measured_steps),
      skipped ? Format("without the first %lld, warm-up",
                       static_cast<long long>(kWarmupIterations))
                    .c_str()
              : "too few to leave out a warm-up",
      1000 * s.step_time_median_s, 1000 * s.step_time_min_s,
      1000 * s.step_time_p99_s, s.step_time_cv);
  out +=
      Format("summary: %.0f tokens/s at the median step, final lm loss %.6E\n",
             s.tokens_per_s, s.final_loss);
  if (prediction.step_time_s.has_value() && *prediction.step_time_s > 0 &&
      s.step_time_median_s > 0) {
    const double predicted_s = *prediction.step_time_s;
    out += Format("summary: predicted %.1f ms per iteration (",
                  1000 * predicted_s) +
           prediction.source +
           Format(
               "), measured median %.1f ms: error %+.1f %%, measured / "
               "predicted = %.2f\n",
               1000 * s.step_time_median_s,
               SignedErrorPercent(predicted_s, s.step_time_median_s),
               s.step_time_median_s / predicted_s);
  }
  return out;
}

std::string FormatMemoryTable(const std::vector<engine::RankMemory>& ranks) {
  std::string out =
      "  rank  tp  pp  cp  dp  ep etp      params  params MiB  grads MiB  "
      "optimizer MiB\n";
  for (const engine::RankMemory& r : ranks) {
    out += Format("  %4d %3d %3d %3d %3d %3d %3d %11lld %11.2f %10.2f %14.2f\n",
                  r.rank, r.tp_rank, r.pp_rank, r.cp_rank, r.dp_rank, r.ep_rank,
                  r.etp_rank, static_cast<long long>(r.num_params),
                  r.param_bytes / kMiB, r.grad_bytes / kMiB,
                  r.optimizer_bytes / kMiB);
  }
  return out;
}

nlohmann::json TrainRunToJson(const engine::TrainConfig& config,
                              const std::vector<engine::IterationLog>& logs,
                              const TrainSummary& summary,
                              const std::vector<engine::RankMemory>& memory,
                              const StepTimePrediction& prediction,
                              const StoredCandidate* linked,
                              const std::string& backend) {
  using nlohmann::json;
  // The search's config object (CPU engine: fp32, CUDA engine: bf16 mixed
  // precision), plus the run's sizes.
  json cfg = ConfigToJson(config.parallel, config.global_batch_size,
                          backend == "cuda" ? "bf16" : "fp32");
  cfg["seq_length"] = config.seq();
  cfg["train_iters"] = config.train_iters;
  json iterations = json::array();
  for (const engine::IterationLog& l : logs) {
    json it = {{"iteration", l.iteration}, {"lr", l.lr},
               {"loss", l.loss},           {"grad_norm", l.grad_norm},
               {"step_s", l.step_s},       {"tokens_per_s", l.tokens_per_s}};
    if (l.load_balancing_loss.has_value()) {
      it["load_balancing_loss"] = *l.load_balancing_loss;
    }
    iterations.push_back(std::move(it));
  }
  json mem = json::array();
  for (const engine::RankMemory& r : memory) {
    mem.push_back({{"rank", r.rank},
                   {"tp_rank", r.tp_rank},
                   {"pp_rank", r.pp_rank},
                   {"cp_rank", r.cp_rank},
                   {"dp_rank", r.dp_rank},
                   {"ep_rank", r.ep_rank},
                   {"etp_rank", r.etp_rank},
                   {"num_params", r.num_params},
                   {"param_bytes", r.param_bytes},
                   {"grad_bytes", r.grad_bytes},
                   {"optimizer_bytes", r.optimizer_bytes}});
  }
  return json{
      {"model", config.model.name},
      {"config", cfg},
      {"iterations", iterations},
      {"step_time_median_s", summary.step_time_median_s},
      {"step_time_min_s", summary.step_time_min_s},
      {"step_time_p99_s", summary.step_time_p99_s},
      {"step_time_cv", summary.step_time_cv},
      {"tokens_per_s", summary.tokens_per_s},
      {"final_loss", summary.final_loss},
      {"predicted_step_time_s",
       prediction.step_time_s ? json(*prediction.step_time_s) : json(nullptr)},
      {"prediction_source", prediction.source},
      {"search_id", linked ? json(linked->search.id) : json(nullptr)},
      {"candidate_id", linked ? json(linked->candidate.id) : json(nullptr)},
      {"predicted_step_s",
       linked ? json(linked->candidate.step_time_s) : json(nullptr)},
      {"memory", mem},
      {"backend", backend},
      {"model_flops_per_step", config.model_flops_per_iteration},
  };
}

}  // namespace meshtune::tuner
