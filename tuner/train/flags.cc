#include "tuner/train/flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/model_stats.h"
#include "engine/checkpoint.h"
#include "profiler/cpu_backend.h"
#include "results/store.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/yaml_util.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/train_config_yaml.h"
#include "tuner/store/results_db.h"
#include "tuner/store/stored_candidates.h"

namespace meshtune::tuner {
namespace {

using DecayStyle = engine::OptimizerConfig::DecayStyle;

// A finite number >= 0 ("3e-4", "0.1").
StatusOr<double> ParseNonNegativeNumber(const std::string& text,
                                        const std::string& flag) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || end != text.c_str() + text.size() ||
      !std::isfinite(v) || v < 0) {
    return Status::InvalidArgument(
        flag + " must be a number >= 0, got '" + text + "'",
        "write e.g. " + flag + " 3e-4");
  }
  return v;
}

// A whole number >= 0 (seed, warm-up iterations).
StatusOr<int64_t> ParseNonNegativeInt(const std::string& text,
                                      const std::string& flag) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || end != text.c_str() + text.size() ||
      v < 0) {
    return Status::InvalidArgument(
        flag + " must be a whole number >= 0, got '" + text + "'",
        "write e.g. " + flag + " 0");
  }
  return static_cast<int64_t>(v);
}

Status SetPositive(const std::string& text, const std::string& flag,
                   int64_t* out) {
  if (text.empty()) return Status::Ok();
  StatusOr<int64_t> v = ParsePositiveInt(text, flag);
  if (!v.ok()) return v.status();
  *out = v.value();
  return Status::Ok();
}

Status SetFloat(const std::string& text, const std::string& flag, float* out) {
  if (text.empty()) return Status::Ok();
  StatusOr<double> v = ParseNonNegativeNumber(text, flag);
  if (!v.ok()) return v.status();
  *out = static_cast<float>(v.value());
  return Status::Ok();
}

StatusOr<DecayStyle> ParseDecayStyle(const std::string& text) {
  if (text == "cosine") return DecayStyle::kCosine;
  if (text == "linear") return DecayStyle::kLinear;
  if (text == "constant") return DecayStyle::kConstant;
  return Status::InvalidArgument(
      "--lr-decay-style: unknown style '" + text + "'",
      "use cosine, linear or constant");
}

// The flags that would change what a search candidate is: its model, batch
// and parallel layout, with whether each was given.
std::vector<std::pair<std::string, bool>> LayoutFlags(const TrainFlags& f) {
  auto opt = [](const std::optional<bool>& v, const char* on,
                const char* off) -> std::pair<std::string, bool> {
    return {v.value_or(true) ? on : off, v.has_value()};
  };
  return {{"--model", !f.model.empty()},
          {"--tp", !f.tp.empty()},
          {"--pp", !f.pp.empty()},
          {"--vpp", !f.vpp.empty()},
          {"--dp", !f.dp.empty()},
          {"--cp", !f.cp.empty()},
          {"--ep", !f.ep.empty()},
          {"--etp", !f.etp.empty()},
          {"--mbs", !f.mbs.empty()},
          {"--gbs", !f.gbs.empty()},
          {"--seq-len", !f.seq_len.empty()},
          {"--recompute", !f.recompute.empty()},
          opt(f.sp, "--sp", "--no-sp"),
          opt(f.dist_opt, "--dist-opt", "--no-dist-opt")};
}

// --from-search ID [--rank R]: the candidate as a config file would give it
// (model, gbs, seq length, parallel config) plus the link to it.
StatusOr<TrainFileConfig> ReadFromSearch(const TrainFlags& f) {
  if (!f.config.empty()) {
    return Status::InvalidArgument(
        "--from-search and --config both say what to train",
        "pass one of them: --config FILE trains a 'tune search --out' file, "
        "--from-search ID a search recorded in the database");
  }
  for (const auto& [flag, given] : LayoutFlags(f)) {
    if (!given) continue;
    return Status::InvalidArgument(
        "--from-search and " + flag +
            " cannot be combined: the search candidate fixes the model, "
            "batch and parallel layout",
        "leave out " + flag +
            "; to train another layout, use 'tune train --model M --tp T "
            "...' (that run is not linked to the search)");
  }
  if (f.no_db) {
    return Status::InvalidArgument(
        "--from-search reads the search from the results database, which "
        "--no-db turns off",
        "leave out --no-db (the database is --db PATH, else $TUNE_DB, else "
        "./tune.db)");
  }
  StatusOr<int64_t> id = ParsePositiveInt(f.from_search, "--from-search");
  if (!id.ok()) return id.status();
  int64_t rank = 1;
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.rank, "--rank", &rank));
  results::OpenOptions options;
  options.read_only = true;
  StatusOr<std::unique_ptr<results::Store>> store =
      results::Store::Open(ResolveDbPath(f.db), options);
  if (!store.ok()) return store.status();
  StatusOr<StoredCandidate> found = FindCandidate(*store.value(), *id, rank);
  if (!found.ok()) return found.status();
  const results::SearchRecord& search = found->search;
  const results::CandidateRecord& candidate = found->candidate;
  const std::string which = "--from-search " + std::to_string(*id) +
                            " --rank " + std::to_string(rank);
  if (!candidate.fits) {
    StatusOr<std::vector<results::CandidateRecord>> all =
        store.value()->GetCandidates(*id);
    int64_t feasible = 0;
    if (all.ok()) {
      for (const auto& c : *all) feasible += c.fits ? 1 : 0;
    }
    return Status::Infeasible(
        which + ": candidate " + search_spaces::ToString(candidate.config) +
            " is infeasible (" + candidate.infeasible_reason + ")",
        feasible == 0   ? "the search has no feasible candidate; search again "
                          "with other --gpus or pins"
        : feasible == 1 ? "use --rank 1, its feasible candidate"
                        : "use --rank 1 to " + std::to_string(feasible) +
                              ", its feasible candidates");
  }
  StatusOr<search_spaces::ModelSpec> model =
      search_spaces::ResolveModel(search.model);
  if (!model.ok()) {
    return Status::InvalidArgument(
        which + ": search " + std::to_string(*id) + " was for model '" +
            search.model + "', which is not a built-in preset",
        "train the search's --out file instead: tune search ... --out "
        "best.yaml, then tune train --config best.yaml");
  }
  TrainFileConfig file;
  file.config.model = model.value();
  file.has_model = true;
  file.config.parallel = candidate.config;
  file.config.global_batch_size = search.gbs;
  file.config.seq_length = search.seq_length;
  file.search = MakeSearchLink(found.value());
  return file;
}

}  // namespace

void AddTrainFlags(CLI::App* app, TrainFlags* f) {
  app->add_option("--config", f->config,
                  "training config YAML written by 'tune search --out' "
                  "(flags given here override its values)")
      ->type_name("FILE");
  app->add_option("--from-search", f->from_search,
                  "train a candidate of search ID recorded in the results "
                  "database (tune db searches), linked to its prediction")
      ->type_name("ID");
  app->add_option("--rank", f->rank,
                  "with --from-search: the candidate's rank (default 1, the "
                  "best)")
      ->type_name("R");
  app->add_option("--model", f->model,
                  "model preset (tune models) or a model YAML file")
      ->type_name("M");
  app->add_option("--tp", f->tp, "tensor parallel size (default 1)")
      ->type_name("T");
  app->add_option("--pp", f->pp, "pipeline parallel size (default 1)")
      ->type_name("P");
  app->add_option("--vpp", f->vpp,
                  "virtual pipeline stages per rank (default 1)")
      ->type_name("V");
  app->add_option("--dp", f->dp, "data parallel size (default 1)")
      ->type_name("D");
  app->add_option("--cp", f->cp,
                  "context parallel size: the sequence split over cp ranks, "
                  "ring attention (default 1)")
      ->type_name("C");
  // Taken, not hidden: the engine trains ep = 1 only, and a value above 1
  // gets its message (with the hint to use 1) instead of CLI11's
  // "arguments were not expected".
  app->add_option("--ep", f->ep,
                  "expert parallel size, MoE models: the experts split over "
                  "ep ranks folded over dp·tp (default 1)")
      ->type_name("E");
  app->add_option("--etp", f->etp,
                  "expert tensor parallel size, MoE models (default tp)")
      ->type_name("T");
  app->add_option("--moe-router-load-balancing-type",
                  f->moe_load_balancing_type,
                  "MoE load-balancing loss: aux_loss (default, per "
                  "micro-batch), seq_aux_loss (per sequence) or none")
      ->type_name("TYPE");
  app->add_option("--moe-aux-loss-coeff", f->moe_aux_loss_coeff,
                  "MoE load-balancing loss coefficient (Megatron "
                  "--moe-aux-loss-coeff; default 0)")
      ->type_name("X");
  app->add_option("--moe-router-bias-update-rate", f->moe_bias_update_rate,
                  "step of the aux-loss-free expert bias per iteration, for "
                  "models with moe_router_enable_expert_bias (Megatron's "
                  "flag; default 1e-3)")
      ->type_name("X");
  auto* sp = app->add_flag_callback(
      "--sp", [f] { f->sp = true; }, "sequence parallel on");
  auto* no_sp = app->add_flag_callback(
      "--no-sp", [f] { f->sp = false; }, "sequence parallel off (default)");
  sp->excludes(no_sp);
  app->add_option("--mbs", f->mbs, "micro batch size (default 1)")
      ->type_name("B");
  app->add_option("--gbs", f->gbs,
                  "global batch size in sequences; default from the model")
      ->type_name("G");
  app->add_option("--recompute", f->recompute,
                  "none | selective | full[:N] | full:block:N (default none)")
      ->type_name("MODE");
  auto* dist = app->add_flag_callback(
      "--dist-opt", [f] { f->dist_opt = true; }, "distributed optimizer on");
  auto* no_dist = app->add_flag_callback(
      "--no-dist-opt", [f] { f->dist_opt = false; },
      "distributed optimizer off (default)");
  dist->excludes(no_dist);
  app->add_option("--seq-len", f->seq_len,
                  "sequence length in tokens; default from the model")
      ->type_name("S");
  app->add_option("--steps", f->steps,
                  "total training iterations, counting those of a loaded "
                  "checkpoint (Megatron --train-iters; default 50)")
      ->type_name("N");
  app->add_option("--data", f->data,
                  "Megatron --data-path: PREFIX (PREFIX.bin + PREFIX.idx, "
                  "see 'tune data') or W1 PREFIX1 W2 PREFIX2 ...; default "
                  "the built-in corpus")
      ->type_name("PATH...");
  app->add_option("--nproc", f->nproc,
                  "processes to run; must equal tp*pp*cp*dp (the default)")
      ->type_name("N");
  app->add_option("--lr", f->lr, "peak learning rate (default 3e-4)")
      ->type_name("X");
  app->add_option("--min-lr", f->min_lr,
                  "learning rate at the end of the decay (default 3e-5)")
      ->type_name("X");
  app->add_option("--lr-warmup-iters", f->lr_warmup_iters,
                  "linear warm-up iterations (default 0)")
      ->type_name("N");
  app->add_option("--lr-decay-style", f->lr_decay_style,
                  "cosine | linear | constant (default cosine)")
      ->type_name("STYLE");
  app->add_option("--weight-decay", f->weight_decay,
                  "AdamW weight decay (default 0.1)")
      ->type_name("X");
  app->add_option("--clip-grad", f->clip_grad,
                  "gradient norm clip, 0 = off (default 1.0)")
      ->type_name("X");
  app->add_option("--hidden-dropout", f->hidden_dropout,
                  "dropout on the embedding and on the attention and MLP "
                  "outputs before each residual add (Megatron "
                  "--hidden-dropout; default 0 = off)")
      ->type_name("P");
  app->add_option("--attention-dropout", f->attention_dropout,
                  "dropout on the attention probabilities (Megatron "
                  "--attention-dropout; default 0 = off)")
      ->type_name("P");
  app->add_option("--seed", f->seed,
                  "initialisation and data order seed (default 1234)")
      ->type_name("N");
  app->add_option("--save", f->save, "checkpoint directory to write")
      ->type_name("DIR");
  app->add_option("--save-interval", f->save_interval,
                  "save every N iterations (default: at the end only)")
      ->type_name("N");
  app->add_option("--load", f->load,
                  "checkpoint directory to resume from (its newest "
                  "checkpoint)")
      ->type_name("DIR");
  app->add_option("--log-interval", f->log_interval,
                  "print an iteration line every N iterations (default 1)")
      ->type_name("N");
  app->add_option("--distributed-timeout-minutes",
                  f->distributed_timeout_minutes,
                  "abort the job when a rank waits this long for another "
                  "(a stopped, hung or dead rank; default 10)")
      ->type_name("MIN");
  AddDbOption(app, &f->db, "recording the training_runs row");
  app->add_flag("--no-db", f->no_db, "do not record the run");
  app->add_flag("--json", f->json,
                "print one JSON object at the end (iteration lines go to "
                "stderr)");
  app->add_option("--backend", f->backend,
                  "cpu (default: Eigen, MPI ranks) or cuda (bf16; every "
                  "layout of the CPU engine, MoE and cp included, one "
                  "GPU per rank, or ranks sharing a GPU through staged "
                  "collectives)")
      ->type_name("NAME");
  app->add_option("--gpu", f->gpu,
                  "with --backend cuda: GPU preset for the predicted step "
                  "time (default: the one matching the device)")
      ->type_name("PRESET");
}

StatusOr<TrainPlan> ResolveTrainFlags(const TrainFlags& f) {
  TrainPlan plan;
  engine::TrainConfig& c = plan.config;
  bool has_model = false;
  if (!f.from_search.empty()) {
    StatusOr<TrainFileConfig> from = ReadFromSearch(f);
    if (!from.ok()) return from.status();
    c = from->config;
    has_model = true;
    plan.search = from->search;
  } else if (!f.rank.empty()) {
    return Status::InvalidArgument(
        "--rank applies to --from-search only",
        "add --from-search ID (tune db searches lists them), or leave out "
        "--rank");
  } else if (!f.config.empty()) {
    StatusOr<TrainFileConfig> file = ReadTrainConfigYaml(f.config);
    if (!file.ok()) return file.status();
    c = file->config;
    has_model = file->has_model;
    plan.data.data_path = file->data_path;
    plan.search = file->search;
  }
  if (!f.model.empty()) {
    StatusOr<search_spaces::ModelSpec> model =
        search_spaces::ResolveModel(f.model);
    if (!model.ok()) return model.status();
    c.model = model.value();
    has_model = true;
  }
  if (!has_model) {
    return Status::InvalidArgument(
        f.config.empty() ? "tune train needs a model: give --model M or "
                           "--config FILE"
                         : "--config " + f.config +
                               " has no model: section and no --model was "
                               "given",
        "e.g. tune train --model gpt-tiny, or tune search --model gpt-tiny "
        "--gpus 1 --gpu local --out best.yaml && tune train --config "
        "best.yaml");
  }

  search_spaces::ParallelConfig& p = c.parallel;
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.tp, "--tp", &p.tp));
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.pp, "--pp", &p.pp));
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.vpp, "--vpp", &p.vpp));
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.dp, "--dp", &p.dp));
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.cp, "--cp", &p.cp));
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.ep, "--ep", &p.ep));
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.etp, "--etp", &p.etp));
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.mbs, "--mbs", &p.mbs));
  if (f.sp.has_value()) p.sp = *f.sp;
  if (f.dist_opt.has_value()) p.dist_opt = *f.dist_opt;
  if (!f.recompute.empty()) {
    StatusOr<search_spaces::Recompute> r =
        ParseRecompute(f.recompute, /*any_full=*/false);
    if (!r.ok()) return r.status();
    p.recompute = r.value();
  }

  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.gbs, "--gbs", &c.global_batch_size));
  if (c.global_batch_size == 0) {
    if (c.model.global_batch_size <= 0) {
      return Status::InvalidArgument(
          "model " + c.model.name + " has no default global batch size",
          "pass --gbs B (sequences per step)");
    }
    c.global_batch_size = c.model.global_batch_size;
  }
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.seq_len, "--seq-len", &c.seq_length));
  if (c.seq_length == 0) c.seq_length = c.model.seq_length;
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.steps, "--steps", &c.train_iters));
  if (c.train_iters == 0) c.train_iters = kDefaultTrainSteps;

  engine::OptimizerConfig& o = c.optimizer;
  MESHTUNE_RETURN_IF_ERROR(SetFloat(f.lr, "--lr", &o.lr));
  MESHTUNE_RETURN_IF_ERROR(SetFloat(f.min_lr, "--min-lr", &o.min_lr));
  MESHTUNE_RETURN_IF_ERROR(
      SetFloat(f.weight_decay, "--weight-decay", &o.weight_decay));
  MESHTUNE_RETURN_IF_ERROR(SetFloat(f.clip_grad, "--clip-grad", &o.clip_grad));
  MESHTUNE_RETURN_IF_ERROR(
      SetFloat(f.hidden_dropout, "--hidden-dropout", &c.hidden_dropout));
  MESHTUNE_RETURN_IF_ERROR(SetFloat(f.attention_dropout, "--attention-dropout",
                                    &c.attention_dropout));
  if (!f.moe_aux_loss_coeff.empty()) {
    StatusOr<double> v =
        ParseNonNegativeNumber(f.moe_aux_loss_coeff, "--moe-aux-loss-coeff");
    if (!v.ok()) return v.status();
    c.moe_aux_loss_coeff = v.value();
  }
  if (!f.moe_bias_update_rate.empty()) {
    StatusOr<double> v = ParseNonNegativeNumber(
        f.moe_bias_update_rate, "--moe-router-bias-update-rate");
    if (!v.ok()) return v.status();
    c.moe_router_bias_update_rate = v.value();
  }
  if (!f.moe_load_balancing_type.empty()) {
    using LoadBalancing = engine::TrainConfig::LoadBalancing;
    const std::string& t = f.moe_load_balancing_type;
    if (t == "aux_loss") {
      c.moe_router_load_balancing_type = LoadBalancing::kAuxLoss;
    } else if (t == "seq_aux_loss") {
      c.moe_router_load_balancing_type = LoadBalancing::kSeqAuxLoss;
    } else if (t == "none") {
      c.moe_router_load_balancing_type = LoadBalancing::kNone;
    } else {
      return Status::InvalidArgument(
          "--moe-router-load-balancing-type: unknown type '" +
              search_spaces::yaml_util::Printable(t) + "'",
          "use aux_loss, seq_aux_loss or none");
    }
  }
  if (!f.lr_warmup_iters.empty()) {
    StatusOr<int64_t> v =
        ParseNonNegativeInt(f.lr_warmup_iters, "--lr-warmup-iters");
    if (!v.ok()) return v.status();
    o.lr_warmup_iters = v.value();
  }
  if (!f.lr_decay_style.empty()) {
    StatusOr<DecayStyle> style = ParseDecayStyle(f.lr_decay_style);
    if (!style.ok()) return style.status();
    o.lr_decay_style = style.value();
  }
  if (!f.seed.empty()) {
    StatusOr<int64_t> v = ParseNonNegativeInt(f.seed, "--seed");
    if (!v.ok()) return v.status();
    c.seed = static_cast<uint64_t>(v.value());
  }

  if (!f.save.empty()) c.save_dir = f.save;
  if (!f.load.empty()) c.load_dir = f.load;
  MESHTUNE_RETURN_IF_ERROR(
      SetPositive(f.save_interval, "--save-interval", &c.save_interval));
  MESHTUNE_RETURN_IF_ERROR(
      SetPositive(f.log_interval, "--log-interval", &c.log_interval));
  if (!f.distributed_timeout_minutes.empty()) {
    // Fractions are allowed (Megatron takes whole minutes): a test or a
    // tiny run may want seconds.
    StatusOr<double> v = ParseNonNegativeNumber(
        f.distributed_timeout_minutes, "--distributed-timeout-minutes");
    if (!v.ok() || v.value() <= 0) {
      return Status::InvalidArgument(
          "--distributed-timeout-minutes must be a number of minutes > 0, "
          "got '" +
              f.distributed_timeout_minutes + "'",
          "write e.g. --distributed-timeout-minutes 10 (Megatron's default)");
    }
    c.distributed_timeout_s = 60 * v.value();
  }

  plan.nproc = p.world();
  MESHTUNE_RETURN_IF_ERROR(SetPositive(f.nproc, "--nproc", &plan.nproc));
  if (!f.backend.empty()) plan.backend = f.backend;
  if (plan.backend != "cpu" && plan.backend != "cuda") {
    return Status::InvalidArgument(
        "--backend: unknown backend '" + plan.backend + "'",
        "use --backend cpu or --backend cuda");
  }
  if (!f.gpu.empty() && plan.backend != "cuda") {
    return Status::InvalidArgument(
        "--gpu is for --backend cuda (a CPU run predicts with the local "
        "preset)",
        "add --backend cuda, or leave out --gpu");
  }
  plan.gpu = f.gpu;

  // Megatron num_floating_point_operations, for the TFLOP/s column.
  c.model_flops_per_iteration = costmodel::ModelFlopsPerStep(
      c.model, c.global_batch_size, c.seq(), c.padded_vocab_size());

  if (!f.data.empty()) plan.data.data_path = f.data;
  plan.data.seq_length = c.seq();
  if (__builtin_mul_overflow(c.global_batch_size, c.train_iters,
                             &plan.data.num_samples)) {
    return Status::InvalidArgument(
        "--gbs " + std::to_string(c.global_batch_size) + " times --steps " +
            std::to_string(c.train_iters) +
            " is more training samples than can be counted",
        "lower --steps or --gbs");
  }
  plan.data.seed = c.seed;
  // A resumed run reads from the checkpoint's consumed samples on, which
  // may lie past train_iters·gbs (saved with a larger --gbs). A missing
  // --load directory is ValidateTrainPlan's error.
  std::error_code ec;
  if (!c.load_dir.empty() && std::filesystem::is_directory(c.load_dir, ec)) {
    StatusOr<engine::CheckpointState> state =
        engine::ReadCheckpointState(c.load_dir);
    if (!state.ok()) return state.status();
    StatusOr<int64_t> samples =
        engine::ResumeSamples(c.load_dir, state.value(), c);
    if (!samples.ok()) return samples.status();
    plan.data.num_samples = samples.value();
  }
  return plan;
}

Status ValidateTrainPlan(const TrainPlan& plan) {
  const engine::TrainConfig& c = plan.config;
  // First: a plan made for a GPU cluster (a search for gpt3-175b on 1024
  // GPUs) may also use features the engine lacks, but what matters is that
  // it cannot run here at all.
  MESHTUNE_RETURN_IF_ERROR(
      CheckHostMemory(c, profiler::ReadCpuInfo().memory_gib));
  MESHTUNE_RETURN_IF_ERROR(c.Validate());
  const auto& p = c.parallel;
  if (plan.nproc != p.world()) {
    return Status::InvalidArgument(
        "--nproc " + std::to_string(plan.nproc) +
            " does not match tp·pp·cp·dp = " + std::to_string(p.tp) + "·" +
            std::to_string(p.pp) + "·" + std::to_string(p.cp) + "·" +
            std::to_string(p.dp) + " = " + std::to_string(p.world()),
        "pass --nproc " + std::to_string(p.world()) +
            " (or leave it out), or change --tp/--pp/--cp/--dp so that their "
            "product is " +
            std::to_string(plan.nproc));
  }
  if (c.save_interval > 0 && c.save_dir.empty()) {
    return Status::InvalidArgument(
        "--save-interval " + std::to_string(c.save_interval) +
            " is set but there is no --save directory",
        "add --save DIR");
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!c.load_dir.empty()) {
    if (!fs::exists(c.load_dir, ec)) {
      return Status::NotFound(
          "--load " + c.load_dir + ": no such directory",
          "give a directory written by 'tune train --save', or leave out "
          "--load to start from scratch");
    }
    if (!fs::is_directory(c.load_dir, ec)) {
      return Status::InvalidArgument(
          "--load " + c.load_dir + ": not a directory",
          "give a directory written by 'tune train --save'");
    }
  }
  if (!c.save_dir.empty()) {
    // Megatron creates --save on the first save; creating it now turns a
    // typo or a read-only disk into an error before hours of training.
    fs::create_directories(c.save_dir, ec);
    if (!fs::is_directory(c.save_dir)) {
      return Status::IoError(
          "--save " + c.save_dir + ": cannot create directory" +
              (ec ? " (" + ec.message() + ")" : std::string()),
          "choose a directory that can be created and written");
    }
    if (access(c.save_dir.c_str(), W_OK | X_OK) != 0) {
      return Status::IoError("--save " + c.save_dir +
                                 ": directory is not writable (" +
                                 std::strerror(errno) + ")",
                             "choose a writable directory");
    }
  }
  return Status::Ok();
}

double MinStateBytes(const engine::TrainConfig& c) {
  const costmodel::ModelStats stats = costmodel::ComputeModelStats(
      c.model, c.padded_vocab_size(), c.model.seq_length);
  const double params = stats.total_params;
  // Every dp and cp rank holds the same weights (cp splits the sequence,
  // not the model).
  const double dp = static_cast<double>(c.parallel.dp * c.parallel.cp);
  constexpr double kFp32Bytes = 4;
  const double weights_and_grads = 2 * kFp32Bytes * params * dp;
  const double adam = 2 * kFp32Bytes * params * (c.parallel.dist_opt ? 1 : dp);
  return weights_and_grads + adam;
}

Status CheckHostMemory(const engine::TrainConfig& c, double host_memory_gib) {
  const auto& p = c.parallel;
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.cp < 1) return Status::Ok();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const double need_gib = MinStateBytes(c) / kGiB;
  // An unreadable /proc/meminfo (0) cannot tell; the ranks will find out.
  if (host_memory_gib <= 0 || need_gib <= host_memory_gib) return Status::Ok();
  char need[64], have[64];
  std::snprintf(need, sizeof(need), "%.1f GiB", need_gib);
  std::snprintf(have, sizeof(have), "%.1f GiB", host_memory_gib);
  return Status::Infeasible(
      c.model.name + " on " + std::to_string(c.parallel.world()) + " ranks (" +
          search_spaces::ToString(c.parallel) + ") needs at least " + need +
          " for fp32 weights, gradients and Adam states; this machine has " +
          have,
      "train a model that fits here (tune models), e.g. a search made for "
      "this machine: tune search --model gpt-tiny --gpus 2 --gpu local");
}

std::vector<std::string> TrainFlagsToArgs(const TrainFlags& f) {
  std::vector<std::string> args;
  auto add = [&args](const char* name, const std::string& value) {
    if (value.empty()) return;
    args.push_back(name);
    args.push_back(value);
  };
  add("--config", f.config);
  add("--from-search", f.from_search);
  add("--rank", f.rank);
  add("--model", f.model);
  add("--tp", f.tp);
  add("--pp", f.pp);
  add("--vpp", f.vpp);
  add("--dp", f.dp);
  add("--cp", f.cp);
  add("--ep", f.ep);
  add("--etp", f.etp);
  if (f.sp.has_value()) args.push_back(*f.sp ? "--sp" : "--no-sp");
  add("--mbs", f.mbs);
  add("--gbs", f.gbs);
  add("--recompute", f.recompute);
  if (f.dist_opt.has_value()) {
    args.push_back(*f.dist_opt ? "--dist-opt" : "--no-dist-opt");
  }
  add("--seq-len", f.seq_len);
  add("--steps", f.steps);
  if (!f.data.empty()) {
    args.push_back("--data");
    args.insert(args.end(), f.data.begin(), f.data.end());
  }
  add("--nproc", f.nproc);
  add("--lr", f.lr);
  add("--min-lr", f.min_lr);
  add("--lr-warmup-iters", f.lr_warmup_iters);
  add("--lr-decay-style", f.lr_decay_style);
  add("--weight-decay", f.weight_decay);
  add("--clip-grad", f.clip_grad);
  add("--hidden-dropout", f.hidden_dropout);
  add("--attention-dropout", f.attention_dropout);
  add("--moe-router-load-balancing-type", f.moe_load_balancing_type);
  add("--moe-aux-loss-coeff", f.moe_aux_loss_coeff);
  add("--moe-router-bias-update-rate", f.moe_bias_update_rate);
  add("--seed", f.seed);
  add("--save", f.save);
  add("--save-interval", f.save_interval);
  add("--load", f.load);
  add("--log-interval", f.log_interval);
  add("--distributed-timeout-minutes", f.distributed_timeout_minutes);
  add("--db", f.db);
  if (f.no_db) args.push_back("--no-db");
  if (f.json) args.push_back("--json");
  add("--backend", f.backend);
  add("--gpu", f.gpu);
  return args;
}

}  // namespace meshtune::tuner
