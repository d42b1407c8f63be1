#include "profiler/sweep.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "profiler/report.h"

namespace meshtune::profiler {
namespace {

results::Measurement StatsRow(const std::string& op, const std::string& dtype,
                              const TimingStats& stats,
                              const std::string& timer,
                              const std::string& hardware_id) {
  results::Measurement row;
  row.hardware_id = hardware_id;
  row.op = op;
  row.dtype = dtype;
  row.samples = stats.samples;
  row.median_s = stats.median_s;
  row.min_s = stats.min_s;
  row.p99_s = stats.p99_s;
  row.cv = stats.cv;
  row.timer = timer;
  return row;
}

}  // namespace

std::vector<GemmShape> TransformerGemmShapes(
    const search_spaces::ModelSpec& model, int64_t tp, int64_t tokens) {
  const int64_t h = model.hidden_size;
  const int64_t q = model.query_projection_size() > 0
                        ? model.query_projection_size()
                        : model.hidden_size;
  const int64_t kv_dim =
      (model.kv_channels > 0
           ? model.kv_channels
           : h / std::max<int64_t>(1, model.num_attention_heads)) *
      std::max<int64_t>(1, model.num_query_groups);
  const int64_t f =
      model.is_moe() ? model.expert_ffn_hidden_size() : model.ffn_hidden_size;
  const int64_t f_in =
      model.activation == search_spaces::Activation::kSwiglu ? 2 * f : f;
  tp = std::max<int64_t>(1, tp);
  auto per_rank = [tp](int64_t x) { return std::max<int64_t>(1, x / tp); };
  // Forward [T, k] x [k, n] for each layer GEMM.
  const std::vector<std::tuple<std::string, int64_t, int64_t>> forward = {
      {"qkv", h, per_rank(q + 2 * kv_dim)},
      {"proj", per_rank(q), h},
      {"fc1", h, per_rank(f_in)},
      {"fc2", per_rank(f), h},
      {"logits", h, per_rank(model.vocab_size)},
  };
  std::vector<GemmShape> shapes;
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  auto add = [&](const std::string& name, int64_t m, int64_t n, int64_t k) {
    if (seen.insert({m, n, k}).second) shapes.push_back({name, m, n, k});
  };
  for (const auto& [name, k, n] : forward) {
    add(name + ".fwd", tokens, n, k);
    add(name + ".dgrad", tokens, k, n);  // dX = dY [T,n] x W^T [n,k]
    add(name + ".wgrad", k, n, tokens);  // dW = X^T [k,T] x dY [T,n]
  }
  return shapes;
}

std::vector<GemmShape> StandardGemmShapes(bool quick) {
  if (quick) {
    return {{"sq128", 128, 128, 128},
            {"sq256", 256, 256, 256},
            {"rect512", 512, 256, 128}};
  }
  return {{"sq256", 256, 256, 256},      {"sq512", 512, 512, 512},
          {"sq1024", 1024, 1024, 1024},  {"sq2048", 2048, 2048, 2048},
          {"tall2048", 2048, 512, 2048}, {"wide512", 512, 4096, 1024},
          {"fc1_1k", 1024, 4096, 1024},  {"fc2_1k", 1024, 1024, 4096}};
}

std::vector<double> StandardStreamSizes(bool quick) {
  const double mib = 1024.0 * 1024.0;
  return quick ? DoublingSizes(1 * mib, 4 * mib)
               : DoublingSizes(1 * mib, 256 * mib);
}

StatusOr<std::vector<results::Measurement>> RunGemmSweep(
    ProfilerBackend& backend, const std::vector<GemmShape>& shapes, DType dtype,
    const SweepOptions& options, const std::string& hardware_id,
    std::ostream& out, std::ostream& progress) {
  std::vector<results::Measurement> rows;
  const double peak = backend.PeakTflops(dtype);
  int64_t i = 0;
  for (const GemmShape& s : shapes) {
    PrintProgress(progress, ++i, static_cast<int64_t>(shapes.size()),
                  "gemm " + s.name);
    StatusOr<Sample> sample =
        backend.TimeGemm(s.m, s.n, s.k, dtype, options.warmup, options.reps);
    if (!sample.ok()) return sample.status();
    TimingStats stats = Summarize(sample->times_s);
    PrintGemmRow(out, s.name, s.m, s.n, s.k, dtype, stats, peak);
    results::Measurement row =
        StatsRow("gemm", DTypeName(dtype), stats, sample->timer, hardware_id);
    row.m = s.m;
    row.n = s.n;
    row.k = s.k;
    rows.push_back(row);
  }
  return rows;
}

StatusOr<std::vector<results::Measurement>> RunStreamSweep(
    ProfilerBackend& backend, const std::vector<double>& sizes,
    const SweepOptions& options, const std::string& hardware_id,
    std::ostream& out, std::ostream& progress) {
  std::vector<results::Measurement> rows;
  int64_t i = 0;
  for (double bytes : sizes) {
    PrintProgress(progress, ++i, static_cast<int64_t>(sizes.size()),
                  "stream " + std::to_string(static_cast<int64_t>(bytes)));
    StatusOr<Sample> sample =
        backend.TimeStream(bytes, options.warmup, options.reps);
    if (!sample.ok()) return sample.status();
    TimingStats stats = Summarize(sample->times_s);
    PrintStreamRow(out, bytes, stats);
    results::Measurement row =
        StatsRow("stream", "fp32", stats, sample->timer, hardware_id);
    row.bytes = bytes;
    rows.push_back(row);
  }
  return rows;
}

results::Measurement CollectiveMeasurement(Collective op, double bytes,
                                           int64_t group_size, int64_t nodes,
                                           const TimingStats& stats,
                                           const std::string& timer,
                                           const std::string& hardware_id) {
  results::Measurement row = StatsRow(search_spaces::CollectiveName(op), "fp32",
                                      stats, timer, hardware_id);
  row.bytes = bytes;
  row.group_size = group_size;
  row.nodes = std::max<int64_t>(1, nodes);
  row.ranks_per_node = std::max<int64_t>(1, group_size / row.nodes);
  return row;
}

}  // namespace meshtune::profiler
