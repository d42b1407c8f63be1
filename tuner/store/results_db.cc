#include "tuner/store/results_db.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <system_error>

#include "tuner/io/terminal.h"
#include "tuner/io/version.h"
#include "tuner/render/report_json.h"

namespace meshtune::tuner {

std::string DescribeFlags(const InputFlags& f) {
  std::string s = "tune search";
  auto add = [&s](const char* name, const std::string& value) {
    if (!value.empty()) s += std::string(" ") + name + " " + value;
  };
  add("--model", f.model);
  add("--gpus", f.gpus);
  add("--gpu", f.gpu);
  add("--gpus-per-node", f.gpus_per_node);
  add("--gbs", f.gbs);
  add("--seq-len", f.seq_len);
  add("--precision", f.precision);
  add("--tokens", f.tokens);
  // "5 %" and "4 GiB" are one word here, so stored_search.cc reads it back.
  std::string headroom;
  for (char ch : f.memory_headroom) {
    if (ch != ' ' && ch != '\t') headroom += ch;
  }
  add("--memory-headroom", headroom);
  add("--space", f.space_file);
  add("--tp", f.tp);
  add("--pp", f.pp);
  add("--vpp", f.vpp);
  add("--cp", f.cp);
  add("--ep", f.ep);
  add("--etp", f.etp);
  add("--dp", f.dp);
  add("--mbs", f.mbs);
  add("--recompute", f.recompute);
  if (f.sp) s += *f.sp ? " --sp" : " --no-sp";
  if (f.dist_opt) s += *f.dist_opt ? " --dist-opt" : " --no-dist-opt";
  if (f.grad_reduce_in_bf16) s += " --grad-reduce-in-bf16";
  if (f.fp8_param_gather) s += " --fp8-param-gather";
  if (f.tp_comm_overlap) s += " --tp-comm-overlap";
  if (f.moe_ep_overlap) s += " --overlap-moe-expert-parallel-comm";
  if (f.fp8_dot_product_attention) s += " --fp8-dot-product-attention";
  // The scope is stored as one comma-joined word (stored_search.cc).
  add("--cuda-graph-impl", f.cuda_graph_impl);
  add("--cuda-graph-scope", f.cuda_graph_scope);
  return s;
}

std::string ResolveDbPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("TUNE_DB");
  return env != nullptr && *env != '\0' ? env : kDefaultDbPath;
}

CLI::Option* AddDbOption(CLI::App* command, std::string* path,
                         const std::string& purpose) {
  const std::string help = "results database" +
                           (purpose.empty() ? "" : " " + purpose) +
                           " (default $TUNE_DB, else ./" + kDefaultDbPath + ")";
  return command->add_option("--db", *path, help)->type_name("PATH");
}

Status CheckDbFlags(const CLI::App& app) {
  const CLI::Option* db = app.get_option_no_throw("--db");
  if (db != nullptr && db->count() > 0) {
    for (const std::string& value : db->results()) {
      if (value.empty()) {
        return Status::InvalidArgument(
            "--db: the database path is empty",
            "give the database file, e.g. --db tune.db, or leave --db out to "
            "use $TUNE_DB, else ./tune.db");
      }
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) {
    MESHTUNE_RETURN_IF_ERROR(CheckDbFlags(*sub));
  }
  return Status::Ok();
}

results::Provenance ToolProvenance() {
  return results::MakeProvenance(MESHTUNE_VERSION, MESHTUNE_GIT_REVISION);
}

std::string CreatedDbNote(const std::string& path) {
  // A bare file name is shown as ./NAME: "recording searches in tune.db"
  // reads like a name, "./tune.db" like the file in this directory.
  const std::string shown =
      path.find('/') == std::string::npos ? "./" + path : path;
  return "tune: recording searches in " + shown +
         " (created); --no-db records nothing, --db PATH chooses the file";
}

StatusOr<std::unique_ptr<results::Store>> OpenSearchDb(const InputFlags& flags,
                                                       std::ostream& err) {
  if (flags.no_db) {
    if (!flags.db.empty()) {
      return Status::InvalidArgument("--db and --no-db contradict each other",
                                     "pass one of them");
    }
    return std::unique_ptr<results::Store>();
  }
  const std::string path = ResolveDbPath(flags.db);
  // Whether this search creates the implicit database: searching then
  // leaves a file behind, which deserves one line the first time.
  std::error_code ec;
  const bool creates =
      flags.db.empty() && !std::filesystem::exists(path, ec) && !ec;
  StatusOr<std::unique_ptr<results::Store>> store = results::Store::Open(path);
  if (store.ok() && creates && !QuietMode()) {
    err << CreatedDbNote(path) << "\n";
  }
  if (store.ok() || !flags.db.empty()) return store;
  err << "tune: warning: not recording this search: "
      << store.status().message() << "\n";
  return std::unique_ptr<results::Store>();
}

StatusOr<int64_t> RecordSearch(results::Store* store, const InputFlags& flags,
                               const Inputs& inputs, const SearchResult& result,
                               int64_t top_k) {
  results::SearchRecord search;
  search.model = inputs.model.name;
  search.gpu = inputs.cluster.name;
  search.gpus = inputs.training.num_gpus;
  search.gpus_per_node = inputs.cluster.gpus_per_node;
  search.gbs = inputs.training.global_batch_size;
  search.seq_length = inputs.training.seq_length;
  search.precision = search_spaces::ToString(inputs.training.precision);
  search.arguments = DescribeFlags(flags);
  search.evaluated = result.evaluated;
  search.feasible = result.feasible;
  search.elapsed_s = result.elapsed_s;
  const std::string measured = "measured:";
  std::vector<results::CandidateRecord> candidates;
  for (size_t i = 0;
       i < result.ranked.size() && static_cast<int64_t>(i) < top_k; ++i) {
    const costmodel::Estimate& e = result.ranked[i];
    results::CandidateRecord c;
    c.rank = static_cast<int64_t>(i) + 1;
    c.config = e.config;
    c.fits = e.fits;
    c.infeasible_reason = e.infeasible_reason;
    c.step_time_s = e.step_time_s;
    c.tokens_per_s = e.tokens_per_s;
    c.mfu = e.mfu;
    c.memory_gib = e.memory.total_bytes() / (1024.0 * 1024.0 * 1024.0);
    c.calibration = e.calibration;
    c.estimate_json = EstimateToJson(e, inputs.training).dump();
    // A search calibrated by measurements is tied to that machine.
    if (search.hardware_id.empty() && e.calibration.rfind(measured, 0) == 0) {
      // "measured:<id>" or, with learned factors, "measured:<id>+fit:...".
      const std::string rest = e.calibration.substr(measured.size());
      search.hardware_id = rest.substr(0, rest.find('+'));
    }
    candidates.push_back(std::move(c));
  }
  return store->PutSearch(search, candidates, ToolProvenance());
}

}  // namespace meshtune::tuner
