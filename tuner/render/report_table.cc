#include "tuner/render/report_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/pipeline_layout.h"
#include "tuner/io/terminal.h"
#include "tuner/io/text_format.h"
#include "tuner/render/model_facts.h"

namespace meshtune::tuner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const char* OnOff(bool b) { return b ? "on" : "off"; }

double Percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

bool NearCapacity(const costmodel::Estimate& e) {
  return search_spaces::IsNearMemoryCapacity(e.memory.total_bytes(),
                                             e.memory_capacity_bytes);
}

// The table's layout cell: "-" for Megatron's even split, else the decoder
// layers of the first and the last virtual stage ("1/0"; the embedding and
// the loss sit on those, and every other virtual stage holds an equal
// share). The full --pipeline-model-parallel-layout string is too wide for a
// column (DeepSeek-V3 on pp 16: "Et*4|(t*4|)*14tmL"); the best plan's
// breakdown prints it.
std::string LayoutCell(const search_spaces::ModelSpec& m,
                       const search_spaces::ParallelConfig& c) {
  if (!search_spaces::PipelineLayout::Valid(m.num_layers, c)) return "?";
  const search_spaces::PipelineLayout layout(m.num_layers, c);
  if (!layout.uneven() && !layout.accounts_embedding_and_loss()) return "-";
  return std::to_string(layout.LayersInChunk(0, 0)) + "/" +
         std::to_string(layout.LayersInChunk(c.pp - 1, c.vpp - 1));
}

// Marks a near-capacity row (after mem_GiB); explained under the table.
constexpr const char* kNearCapacityMark = "*";

}  // namespace

std::string FormatTokenCount(double tokens) {
  struct Unit {
    double scale;
    const char* name;
  };
  static const Unit kUnits[] = {
      {1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const Unit& u : kUnits) {
    if (tokens >= u.scale) return Fmt("%.4g %s", tokens / u.scale, u.name);
  }
  return Fmt("%.0f", tokens);
}

void PrintInputsHeader(std::ostream& out, const Inputs& in,
                       const std::string& calibration) {
  const auto& m = in.model;
  const auto& c = in.cluster;
  const auto& t = in.training;
  out << Fmt(
      "model        %s (%s): %s parameters, %lld layers, hidden %lld, "
      "%lld heads / %lld query groups\n",
      m.display_name.c_str(), m.name.c_str(), FormatParameterCount(m).c_str(),
      static_cast<long long>(m.num_layers),
      static_cast<long long>(m.hidden_size),
      static_cast<long long>(m.num_attention_heads),
      static_cast<long long>(m.num_query_groups));
  out << Fmt("gpu          %s%s: %s, %.0f GB HBM, usable %.1f GiB per GPU",
             c.name.c_str(),
             in.gpu_defaulted ? " (default; choose with --gpu)" : "",
             c.gpu.display_name.c_str(), c.gpu.hbm_gb, c.UsableMemoryGib());
  if (c.memory_headroom_gib > 0) {
    out << Fmt(" (%.1f GiB headroom kept free)", c.memory_headroom_gib);
  }
  out << "\n";
  out << Fmt("cluster      %lld GPUs = %lld node%s x %d GPUs per node\n",
             static_cast<long long>(t.num_gpus),
             static_cast<long long>(in.num_nodes()),
             in.num_nodes() == 1 ? "" : "s", c.gpus_per_node);
  out << Fmt(
      "training     gbs %lld sequences x seq %lld tokens = %s tokens per "
      "step, %s, token budget %s\n",
      static_cast<long long>(t.global_batch_size),
      static_cast<long long>(t.seq_length),
      FormatTokenCount(static_cast<double>(t.tokens_per_step())).c_str(),
      search_spaces::ToString(t.precision),
      FormatTokenCount(t.train_tokens).c_str());
  if (t.grad_reduce_in_bf16 || t.fp8_param_gather) {
    out << "state bytes  weights " << t.weight_bytes_per_param()
        << " B/param, main grads " << t.grad_bytes_per_param() << " B/param ("
        << (t.fp8_param_gather ? "--fp8-param-gather " : "")
        << (t.grad_reduce_in_bf16 ? "--grad-reduce-in-bf16" : "") << ")\n";
  }
  if (t.tp_comm_overlap) {
    out << "tp overlap   --tp-comm-overlap: TP collectives overlap GEMMs in "
           "configurations with sequence parallelism\n";
  }
  if (t.fp8_dot_product_attention) {
    out << "fp8 attn     --fp8-dot-product-attention: core attention runs "
           "in FP8\n";
  }
  if (t.moe_ep_overlap) {
    out << "ep overlap   --overlap-moe-expert-parallel-comm: MoE all-to-alls "
           "overlap another micro-batch's compute\n";
  }
  if (t.cuda_graphs.enabled()) {
    const std::string scope =
        search_spaces::CudaGraphScopeString(t.cuda_graphs.scope);
    out << "cuda graphs  --cuda-graph-impl "
        << search_spaces::ToString(t.cuda_graphs.impl)
        << (scope.empty() ? " (whole layers)" : " --cuda-graph-scope " + scope)
        << ": these modules launch as graph replays\n";
  }
  out << "calibration  " << calibration << "\n";
}

void PrintBreakdown(std::ostream& out, const Inputs& in,
                    const costmodel::Estimate& e) {
  std::vector<std::pair<const char*, double>> time_parts;
  for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
    time_parts.emplace_back(term.name, e.time.*term.seconds);
  }
  const search_spaces::ParallelConfig& c = e.config;
  if (search_spaces::PipelineLayout::Valid(in.model.num_layers, c) &&
      search_spaces::PipelineLayout(in.model.num_layers, c).uneven()) {
    const search_spaces::PipelineLayout layout(in.model.num_layers, c);
    out << Fmt(
        "  pipeline layout: --pipeline-model-parallel-layout '%s': %lld "
        "layers over pp %lld x vpp %lld; the first virtual stage holds %lld, "
        "the last %lld",
        layout.MegatronString(in.model.mtp_num_layers).c_str(),
        static_cast<long long>(in.model.num_layers),
        static_cast<long long>(c.pp), static_cast<long long>(c.vpp),
        static_cast<long long>(layout.LayersInChunk(0, 0)),
        static_cast<long long>(layout.LayersInChunk(c.pp - 1, c.vpp - 1)));
    if (c.pp * c.vpp > 2) {
      out << Fmt(", the others %lld",
                 static_cast<long long>(layout.units_per_chunk()));
    }
    out << "\n";
  } else if (search_spaces::PipelineLayout::AccountsEmbeddingAndLoss(
                 in.model.num_layers, c.pp, c.vpp)) {
    const search_spaces::PipelineLayout layout(in.model.num_layers, c.pp,
                                               c.vpp);
    out << Fmt(
        "  pipeline split: %lld layers + embedding + loss = %lld units over "
        "pp %lld x vpp %lld; the first and last stage hold %lld layers, the "
        "others %lld\n",
        static_cast<long long>(in.model.num_layers),
        static_cast<long long>(in.model.num_layers + 2),
        static_cast<long long>(c.pp), static_cast<long long>(c.vpp),
        static_cast<long long>(layout.LayersOnStage(0)),
        static_cast<long long>(layout.MaxLayersOnStage()));
  }
  out << Fmt("  %-22s %12s %10s\n", "time per step (exposed)", "s",
             "% of step");
  for (const auto& [name, s] : time_parts) {
    out << Fmt("  %-22s %12.4f %9.1f%%\n", name, s, Percent(s, e.step_time_s));
  }
  out << Fmt("  %-22s %12.4f %9.1f%%\n", "step", e.step_time_s, 100.0);

  const auto& m = e.memory;
  const std::vector<std::pair<const char*, double>> memory_parts = {
      {"weights", m.weights_bytes},     {"gradients", m.gradients_bytes},
      {"optimizer", m.optimizer_bytes}, {"activations", m.activations_bytes},
      {"other", m.rest_bytes()},
  };
  out << Fmt("  %-22s %12s\n", "memory per GPU", "GiB");
  for (const auto& [name, bytes] : memory_parts) {
    out << Fmt("  %-22s %12.2f\n", name, bytes / kGiB);
  }
  out << Fmt("  %-22s %12.2f of %.2f usable (%.1f%%)", "total",
             m.total_bytes() / kGiB, e.memory_capacity_bytes / kGiB,
             Percent(m.total_bytes(), e.memory_capacity_bytes))
      << (e.fits ? "" : StyleFor(out).Red(" -- does NOT fit"));
  if (NearCapacity(e)) {
    out << Fmt(" -- near capacity (within %.0f%%)",
               100 * (1 - search_spaces::kNearCapacityFraction))
        << (in.cluster.memory_headroom_gib > 0
                ? ""
                : ": keep a margin with --memory-headroom");
  }
  out << "\n";
  out << Fmt(
      "  throughput: %.0f tokens/s/GPU, %.3g tokens/s in total, %.1f "
      "model TFLOP/s per GPU, MFU %.1f%%, HFU %.1f%%\n",
      e.tokens_per_s_per_gpu, e.tokens_per_s, e.model_tflops_per_gpu,
      100 * e.mfu, 100 * e.hfu);
  out << Fmt("  days to train %s tokens: %.1f days on %lld GPUs\n",
             FormatTokenCount(in.training.train_tokens).c_str(),
             e.days_to_train, static_cast<long long>(in.training.num_gpus));
}

void PrintSearchReport(std::ostream& out, const Inputs& in,
                       const SearchResult& result, int64_t top_k) {
  PrintInputsHeader(out, in, result.ranked.front().calibration);
  // Colour only on a terminal (tuner/io/terminal.h): wrapped around whole
  // formatted cells, so that the columns line up either way.
  const Style style = StyleFor(out);
  const size_t n = std::min<size_t>(
      result.ranked.size(), static_cast<size_t>(std::max<int64_t>(top_k, 1)));
  out << "\n"
      << style.Bold(
             Fmt("top %zu of %lld feasible configurations (fastest first)", n,
                 static_cast<long long>(result.feasible)))
      << "\n";
  // Optional columns: etp for a model with experts, the layout when a listed
  // plan splits its layers unevenly (LayoutCell), as wide as its widest cell.
  const bool show_etp = in.model.is_moe();
  std::vector<std::string> layouts(n);
  size_t layout_width = 0;
  bool any_near_capacity = false;
  for (size_t i = 0; i < n; ++i) {
    layouts[i] = LayoutCell(in.model, result.ranked[i].config);
    if (layouts[i] != "-") layout_width = std::strlen("layout");
    any_near_capacity |= NearCapacity(result.ranked[i]);
  }
  if (layout_width > 0) {
    for (const std::string& cell : layouts) {
      layout_width = std::max(layout_width, cell.size());
    }
  }
  const int lw = static_cast<int>(layout_width);
  std::string header =
      Fmt("%4s %4s %4s %4s %4s %4s", "rank", "tp", "pp", "vpp", "cp", "ep");
  if (show_etp) header += Fmt(" %4s", "etp");
  header += Fmt(" %6s %4s %4s", "dp", "sp", "mbs");
  if (lw > 0) header += Fmt(" %-*s", lw, "layout");
  header += Fmt(" %-13s %-8s %9s %13s %6s %8s", "recompute", "dist_opt",
                "step_s", "tokens/s/GPU", "MFU%", "mem_GiB");
  out << style.Bold(header) << "\n";
  for (size_t i = 0; i < n; ++i) {
    const costmodel::Estimate& e = result.ranked[i];
    const auto& c = e.config;
    std::string row =
        Fmt("%4zu %4lld %4lld %4lld %4lld %4lld", i + 1,
            static_cast<long long>(c.tp), static_cast<long long>(c.pp),
            static_cast<long long>(c.vpp), static_cast<long long>(c.cp),
            static_cast<long long>(c.ep));
    if (show_etp) row += Fmt(" %4lld", static_cast<long long>(c.expert_tp()));
    row += Fmt(" %6lld %4s %4lld", static_cast<long long>(c.dp), OnOff(c.sp),
               static_cast<long long>(c.mbs));
    if (lw > 0) row += Fmt(" %-*s", lw, layouts[i].c_str());
    row += Fmt(" %-13s %-8s %9.3f %13.1f %6.1f %8.2f",
               FormatRecompute(c.recompute).c_str(), OnOff(c.dist_opt),
               e.step_time_s, e.tokens_per_s_per_gpu, 100 * e.mfu,
               e.memory.total_bytes() / kGiB);
    if (NearCapacity(e)) row += kNearCapacityMark;
    out << row << "\n";
  }
  if (lw > 0) {
    out << style.Dim(
               "layout: decoder layers on the first/last virtual pipeline "
               "stage (with the embedding / the loss); the others hold equal "
               "shares; - = even split")
        << "\n";
  }
  if (any_near_capacity) {
    const double headroom_gib = in.cluster.memory_headroom_gib;
    const std::string advice =
        headroom_gib > 0
            ? Fmt("the usable memory already leaves %.2f GiB of "
                  "--memory-headroom free",
                  headroom_gib)
            : std::string("keep a margin with --memory-headroom (e.g. 5%)");
    out << style.Dim(Fmt(
               "%s near capacity: memory within %.0f%% of the usable %.2f "
               "GiB; allocator fragmentation varies from run to run, so such "
               "a plan may run out of memory: %s",
               kNearCapacityMark,
               100 * (1 - search_spaces::kNearCapacityFraction),
               result.ranked.front().memory_capacity_bytes / kGiB,
               advice.c_str()))
        << "\n";
  }
  const costmodel::Estimate& best = result.ranked.front();
  out << "\n"
      << style.Green("best: " + search_spaces::ToString(best.config) +
                     " (recompute " + FormatRecompute(best.config.recompute) +
                     ", " +
                     std::to_string(best.config.num_microbatches(
                         in.training.global_batch_size)) +
                     " micro-batches per step)")
      << "\n";
  PrintBreakdown(out, in, best);
  out << Fmt("\nevaluated %lld configurations in %.0f ms: %lld feasible; ",
             static_cast<long long>(result.evaluated), result.elapsed_s * 1e3,
             static_cast<long long>(result.feasible))
      << style.Dim("rejected: " + FormatRejections(result)) << "\n";
}

void PrintEstimateReport(std::ostream& out, const Inputs& in,
                         const costmodel::Estimate& e) {
  PrintInputsHeader(out, in, e.calibration);
  out << "\nconfiguration: " << search_spaces::ToString(e.config)
      << " (recompute " << FormatRecompute(e.config.recompute) << ", "
      << e.config.num_microbatches(in.training.global_batch_size)
      << " micro-batches per step)\n";
  if (!e.fits) {
    out << StyleFor(out).Red("does not fit: " + e.infeasible_reason) << "\n";
  }
  PrintBreakdown(out, in, e);
}

}  // namespace meshtune::tuner
