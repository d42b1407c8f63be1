// `tune launch`: search (the flags of `tune search`), take the candidate of
// --rank, and turn it into a SLURM batch script (tuner/interop/launch_script.h)
// that trains it with `tune train` or with Megatron-LM's pretrain_gpt.py.
//
// Without --out (or with --dry-run) the script goes to stdout and nothing is
// written. With --out FILE the script is written executable and, for trainer
// tune, the config YAML it runs (tuner/render/report_yaml.h) next to it as
// FILE-without-.sh + ".yaml"; with a database that YAML carries the search:
// section, so the run is stored against the prediction
// (tuner/inputs/search_link.h).
//
// Instead of searching, --search ID [--rank R] launches a candidate of a
// recorded search (linked by construction), and --config FILE a config YAML
// `tune search --out` wrote: the script trains FILE itself, so nothing else
// is written, and FILE's search: section (if any) names the source.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "costmodel/cost_model.h"
#include "engine/backends/registry.h"
#include "search_spaces/space/enumerate.h"
#include "tuner/commands/cli.h"
#include "tuner/commands/command.h"
#include "tuner/commands/planned_run.h"
#include "tuner/inputs/config_file_inputs.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/local_cluster.h"
#include "tuner/inputs/search_link.h"
#include "tuner/inputs/train_config_yaml.h"
#include "tuner/interop/kubernetes_job.h"
#include "tuner/interop/launch_script.h"
#include "tuner/interop/training_run.h"
#include "tuner/io/output_file.h"
#include "tuner/io/terminal.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/render/report_yaml.h"
#include "tuner/search/search_driver.h"
#include "tuner/search/search_progress.h"
#include "tuner/store/results_db.h"
#include "tuner/store/stored_candidates.h"
#include "tuner/store/stored_search.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kLaunchExamples = R"(Examples:
  tune launch --model 175b --gpus 1024                        print the sbatch script (Megatron-LM)
  tune launch --model 175b --gpus 1024 --rank 2 --partition gpu --account proj --time 2-00:00:00
  tune launch --model 175b --gpus 1024 --container-image nvcr.io/nvidia/nemo:25.09 --out job.sh
  tune launch --model llama3-70b --gpus 128 --gpu h100 --scheduler kubernetes \
      --container-image nvcr.io/nvidia/nemo:25.09 --out job.yaml   a PyTorchJob manifest
  tune launch --model gpt-tiny --gpus 2 --gpu local --out job.sh    the engine (tune train), job.yaml
  tune launch --search 3 --rank 2 --out job.sh                a candidate of a recorded search
  tune launch --config best.yaml --out job.sh                 a 'tune search --out' file
  sbatch job.sh                                               submit it (kubectl apply -f job.yaml)
The SLURM script asks for MEGATRON_DIR, DATA_PATH, CHECKPOINT_DIR and the
tokenizer's files (TUNE and CONFIG for the engine); TRAIN_ITERS defaults to
the token budget's iterations. It saves checkpoints and resubmits itself
until the run is done. --quiet drops the 'wrote' notes. docs/launch.md
describes every line.)";

// The flags that make up a search; --search and --config replace them.
constexpr const char* kSearchFlags[] = {"--model",
                                        "--gpus",
                                        "--gpu",
                                        "--gpus-per-node",
                                        "--gbs",
                                        "--seq-len",
                                        "--precision",
                                        "--tokens",
                                        "--space",
                                        "--tp",
                                        "--pp",
                                        "--vpp",
                                        "--cp",
                                        "--ep",
                                        "--dp",
                                        "--mbs",
                                        "--recompute",
                                        "--sp",
                                        "--no-sp",
                                        "--dist-opt",
                                        "--no-dist-opt",
                                        "--grad-reduce-in-bf16",
                                        "--fp8-param-gather",
                                        "--tp-comm-overlap"};

// What the script launches, whichever input chose it.
struct LaunchPlan {
  Inputs in;
  costmodel::Estimate chosen;
  std::optional<SearchLink> link;
  std::string source;       // the script's "# Source:" text
  std::string config_file;  // --config: the YAML the script trains (absolute)
  bool flash_attention = true;  // what the calibration assumes
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The default job name: "tune-<model>" in the characters CheckSlurmName
// allows (a model file's name may hold anything), cut to its length limit.
std::string JobName(const std::string& model) {
  std::string name = "tune-" + model;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' &&
        c != '.') {
      c = '-';
    }
  }
  return name.substr(0, kMaxSlurmNameLength);
}

// job.sh -> job.yaml; anything else gets ".yaml" appended.
std::string ConfigPathFor(const std::string& script_path) {
  const std::string ext = ".sh";
  if (script_path.size() > ext.size() &&
      script_path.compare(script_path.size() - ext.size(), ext.size(), ext) ==
          0) {
    return script_path.substr(0, script_path.size() - ext.size()) + ".yaml";
  }
  return script_path + ".yaml";
}

// Atomically (tuner/io/output_file.h), then +x: a failed write leaves a
// previous script as it was, never a truncated one that sbatch would run.
Status WriteExecutable(const std::string& path, const std::string& text) {
  MESHTUNE_RETURN_IF_ERROR(WriteOutputFile(path, text, "--out"));
  if (chmod(path.c_str(), 0755) != 0) {
    return Status::IoError("--out: cannot make " + path + " executable",
                           "run chmod +x on it, or write it elsewhere");
  }
  return Status::Ok();
}

class LaunchCommand : public Command {
 public:
  explicit LaunchCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "launch",
        "search and write a ready SLURM script for the chosen configuration");
    sub_ = sub;
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/true);
    // Not required: --search and --config replace them (checked in Run).
    sub->get_option("--model")->required(false);
    sub->get_option("--gpus")->required(false);
    sub->add_option("--search", search_text_,
                    "launch a candidate of this recorded search instead of "
                    "searching (tune db searches)")
        ->type_name("ID");
    sub->add_option("--config", config_file_,
                    "launch the configuration in FILE (written by tune search "
                    "--out) instead of searching")
        ->type_name("FILE");
    sub->add_option("--space", flags_.space_file,
                    "search-space YAML file (pins; flags narrow it further)")
        ->type_name("FILE");
    sub->add_option("--rank", rank_text_,
                    "which candidate to launch (default 1 = best)")
        ->type_name("R");
    sub->add_option("--scheduler", scheduler_,
                    "slurm (an sbatch script, default) or kubernetes (a "
                    "Kubeflow PyTorchJob manifest)")
        ->type_name("NAME");
    sub->add_option("--trainer", trainer_,
                    "auto (default: megatron on GPUs, tune on the local "
                    "preset), megatron (pretrain_gpt.py) or tune (tune train, "
                    "the CUDA engine on GPUs)")
        ->type_name("NAME");
    sub->add_option("--container-image", container_image_,
                    "run the ranks in this image (SLURM: pyxis "
                    "--container-image; required for kubernetes)")
        ->type_name("IMAGE");
    sub->add_option("--container-mounts", container_mounts_,
                    "SLURM pyxis --container-mounts (SRC:DST[,...])")
        ->type_name("MOUNTS");
    sub->add_flag("--no-exclusive", no_exclusive_,
                  "share nodes (default: #SBATCH --exclusive and --mem=0)");
    sub->add_option("--data-path", data_path_,
                    "default of DATA_PATH (an indexed dataset prefix)")
        ->type_name("PREFIX");
    sub->add_option("--checkpoint-dir", checkpoint_dir_,
                    "default of CHECKPOINT_DIR (save and load)")
        ->type_name("DIR");
    sub->add_option("--tokenizer-model", tokenizer_model_,
                    "default of TOKENIZER_MODEL (default: the model's "
                    "published tokenizer)")
        ->type_name("ID");
    sub->add_option("--save-interval", save_interval_text_,
                    "iterations between checkpoints (default: about one hour "
                    "of predicted training)")
        ->type_name("N");
    sub->add_option("--namespace", k8s_.namespace_name,
                    "kubernetes: metadata.namespace")
        ->type_name("NAME");
    sub->add_option("--pvc", k8s_.pvc,
                    "kubernetes: the claim with data and checkpoints "
                    "(default meshtune-workspace), mounted at /workspace")
        ->type_name("NAME");
    sub->add_option("--time", time_,
                    "job time limit (default 24:00:00; D-HH:MM:SS or minutes)")
        ->type_name("LIMIT");
    sub->add_option("--partition", partition_, "SLURM partition")
        ->type_name("NAME");
    sub->add_option("--account", account_, "SLURM account")->type_name("NAME");
    sub->add_option("--job-name", job_name_,
                    "SLURM job name (default tune-<model>)")
        ->type_name("NAME");
    sub->add_option("--cpus-per-task", cpus_text_,
                    "CPU cores per GPU task (default 8)")
        ->type_name("N");
    sub->add_option("--out", out_file_,
                    "write the script to FILE (chmod +x); trainer tune also "
                    "writes its config YAML next to it")
        ->type_name("FILE");
    sub->add_flag("--dry-run", dry_run_,
                  "print the script and write nothing (the default without "
                  "--out)");
    AddDbOption(sub, &flags_.db, "recording this search");
    sub->add_flag("--no-db", flags_.no_db, "record nothing");
    AddTerminalFlags(sub, &terminal_);
    sub->footer(kLaunchExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    MESHTUNE_RETURN_IF_ERROR(ApplyTerminalFlags(terminal_));
    // Launch flags first, so that a typo fails before the search runs.
    auto scheduler = ParseLaunchScheduler(scheduler_);
    if (!scheduler.ok()) return scheduler.status();
    auto trainer_choice = ParseLaunchTrainer(trainer_);
    if (!trainer_choice.ok()) return trainer_choice.status();
    auto time_limit_s = SlurmTimeSeconds(time_);
    if (!time_limit_s.ok()) return time_limit_s.status();
    MESHTUNE_RETURN_IF_ERROR(CheckLaunchValues());
    auto rank = ParsePositiveInt(rank_text_, "--rank");
    if (!rank.ok()) return rank.status();
    auto cpus = ParsePositiveInt(cpus_text_, "--cpus-per-task");
    if (!cpus.ok()) return cpus.status();
    int64_t save_interval = 0;  // 0 = about an hour of predicted steps
    if (!save_interval_text_.empty()) {
      auto n = ParsePositiveInt(save_interval_text_, "--save-interval");
      if (!n.ok()) return n.status();
      save_interval = n.value();
    }
    // Every value that lands in the script is checked before the search.
    // Given but empty is an error too: it would silently mean the default.
    if (sub_->count("--job-name") > 0) {
      MESHTUNE_RETURN_IF_ERROR(CheckSlurmName("--job-name", job_name_));
    }
    if (sub_->count("--partition") > 0) {
      MESHTUNE_RETURN_IF_ERROR(CheckSlurmPartition(partition_));
    }
    if (sub_->count("--account") > 0) {
      MESHTUNE_RETURN_IF_ERROR(CheckSlurmName("--account", account_));
    }
    if (sub_->count("--out") > 0 && !dry_run_) {
      MESHTUNE_RETURN_IF_ERROR(CheckOutputPath(out_file_, "--out"));
    }

    auto plan = !search_text_.empty()   ? PlanFromSearch(rank.value())
                : !config_file_.empty() ? PlanFromConfigFile()
                                        : PlanBySearching(rank.value(), err);
    if (!plan.ok()) return plan.status();
    const Inputs& in = plan->in;
    const costmodel::Estimate& chosen = plan->chosen;
    const std::optional<SearchLink>& link = plan->link;
    auto trainer = ResolveTrainer(trainer_choice.value(), in, chosen);
    if (!trainer.ok()) return trainer.status();
    const bool kubernetes = scheduler.value() == LaunchScheduler::kKubernetes;
    LaunchScriptSpec spec = Spec(in, chosen, trainer.value(), cpus.value());
    spec.source = plan->source;
    spec.flash_attention = plan->flash_attention;
    // The run: iterations, schedule, checkpoints, jobs
    // (tuner/interop/training_run.h); a pod has no time limit.
    auto run = PlannedRun(in.model, in.training, chosen.step_time_s,
                          kubernetes ? kNoTimeLimitS : time_limit_s.value(),
                          save_interval);
    if (!run.ok()) return run.status();
    spec.run = run.value();

    const bool write = !out_file_.empty() && !dry_run_;
    if (write) {
      spec.script_path =
          std::filesystem::absolute(out_file_).lexically_normal().string();
    }
    const bool tune_trainer = trainer.value() == LaunchTrainer::kTune;
    std::string config_path;
    if (!plan->config_file.empty() && tune_trainer) {
      // The file is what to train; it is not rewritten.
      spec.config_path = plan->config_file;
    } else if (!out_file_.empty() && tune_trainer) {
      config_path = std::filesystem::absolute(ConfigPathFor(out_file_))
                        .lexically_normal()
                        .string();
      spec.config_path = config_path;
    }
    auto script = kubernetes ? KubernetesJob(spec, k8s_) : SlurmScript(spec);
    if (!script.ok()) return script.status();
    if (!write) {
      out << script.value();
      return Status::Ok();
    }
    if (!config_path.empty()) {
      MESHTUNE_RETURN_IF_ERROR(
          WriteConfigYaml(config_path, in, chosen, link ? &*link : nullptr));
      if (!terminal_.quiet) {
        err << "tune: wrote the configuration to " << config_path << "\n";
      }
    }
    if (kubernetes) {
      MESHTUNE_RETURN_IF_ERROR(
          WriteOutputFile(out_file_, script.value(), "--out"));
      if (!terminal_.quiet) {
        err << "tune: wrote the PyTorchJob manifest to " << out_file_
            << "; submit it with: kubectl apply -f " << out_file_ << "\n";
      }
      return Status::Ok();
    }
    MESHTUNE_RETURN_IF_ERROR(WriteExecutable(out_file_, script.value()));
    if (!terminal_.quiet) {
      err << "tune: wrote the SLURM script to " << out_file_
          << "; submit it with: sbatch " << out_file_ << "\n";
    }
    return Status::Ok();
  }

 private:
  // The values that land inside the script, checked before the search.
  Status CheckLaunchValues() const {
    const std::pair<const char*, const std::string*> values[] = {
        {"--container-image", &container_image_},
        {"--container-mounts", &container_mounts_},
        {"--data-path", &data_path_},
        {"--checkpoint-dir", &checkpoint_dir_},
        {"--tokenizer-model", &tokenizer_model_}};
    for (const auto& [flag, value] : values) {
      if (sub_->count(flag) > 0 && value->empty()) {
        return Status::InvalidArgument(
            std::string(flag) + " is empty",
            std::string("give a value, or drop ") + flag);
      }
      MESHTUNE_RETURN_IF_ERROR(CheckLaunchValue(flag, *value));
    }
    if (sub_->count("--namespace") > 0) {
      MESHTUNE_RETURN_IF_ERROR(
          CheckKubernetesName("--namespace", k8s_.namespace_name));
    }
    MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("--pvc", k8s_.pvc));
    return Status::Ok();
  }

  // --trainer auto: Megatron-LM on GPU clusters (the production trainer;
  // the CUDA engine has not been measured on GPUs yet, docs/engine-cuda.md),
  // the engine on the CPU `local` preset, which Megatron cannot run. The
  // engine on GPUs (--trainer tune) only for plans it can train.
  StatusOr<LaunchTrainer> ResolveTrainer(LaunchTrainer choice, const Inputs& in,
                                         const costmodel::Estimate& e) const {
    const bool local = in.cluster.name == kLocalCluster;
    if (choice == LaunchTrainer::kAuto) {
      return local ? LaunchTrainer::kTune : LaunchTrainer::kMegatron;
    }
    if (choice == LaunchTrainer::kMegatron && local) {
      return Status::InvalidArgument(
          "--trainer megatron: the local preset trains on CPUs, which "
          "Megatron-LM does not run on",
          "use --trainer tune (the default) for the local preset");
    }
    if (choice == LaunchTrainer::kTune && !local) {
      auto file = ParseTrainConfigYaml(ConfigToYaml(in, e), "the plan");
      if (!file.ok()) return file.status();
      engine::TrainConfig c = file->config;
      c.global_batch_size = in.training.global_batch_size;
      c.seq_length = in.training.seq_length;
      c.train_iters = 1;
      const Status s = engine::backends::TrainerBackendBuilt("cuda")
                           ? engine::backends::CheckTrainerSupported("cuda", c)
                           : c.Validate();
      if (!s.ok()) {
        return Status::InvalidArgument(
            "--trainer tune: the CUDA engine cannot train this plan: " +
                s.message(),
            "use --trainer megatron (the default on GPUs)");
      }
    }
    return choice;
  }

  // --search and --config take the problem from the search or the file;
  // a search flag next to them would be ignored, so it is an error.
  Status CheckNoSearchFlags(const std::string& input) const {
    for (const char* name : kSearchFlags) {
      if (sub_->count(name) > 0) {
        return Status::InvalidArgument(
            std::string(name) + " does not apply with " + input,
            input + " gives the model, GPUs and configuration; drop " + name);
      }
    }
    return Status::Ok();
  }

  // The default: search with the flags of `tune search`, take --rank.
  StatusOr<LaunchPlan> PlanBySearching(int64_t rank, std::ostream& err) const {
    for (const char* name : {"--model", "--gpus"}) {
      if (sub_->count(name) == 0) {
        return Status::InvalidArgument(
            std::string(name) + " is required",
            "give --model and --gpus to search, or launch --search ID or "
            "--config FILE");
      }
    }
    LaunchPlan plan;
    auto inputs = ResolveInputs(flags_);
    if (!inputs.ok()) return inputs.status();
    plan.in = inputs.value();
    const Inputs& in = plan.in;
    auto db = OpenSearchDb(flags_, err);
    if (!db.ok()) return db.status();
    auto calibration = ChooseCalibration(db->get(), in.cluster);
    if (!calibration.ok()) return calibration.status();
    const SearchResult result =
        RunSearchWithProgress(in, *calibration.value(), err, terminal_.quiet);
    if (result.feasible == 0) {
      return NoFeasibleConfigStatus(in.model, in.cluster, in.training, result);
    }
    const int64_t found = static_cast<int64_t>(result.ranked.size());
    if (rank > found) {
      return Status::InvalidArgument(
          "--rank: the search found " + std::to_string(found) +
              " fitting configuration" + (found == 1 ? "" : "s") +
              ", not rank " + std::to_string(rank),
          "pick a rank from 1 to " + std::to_string(found));
    }
    plan.chosen = result.ranked[rank - 1];
    plan.flash_attention = calibration.value()->UsesFlashAttention();
    plan.link = Record(db->get(), in, result, rank, err);
    plan.source = plan.link
                      ? LinkSource(*plan.link)
                      : "rank " + std::to_string(rank) +
                            " of a search that was not recorded (--no-db)";
    return plan;
  }

  // --search ID [--rank R]: the stored candidate, estimated again with the
  // calibration the database now offers.
  StatusOr<LaunchPlan> PlanFromSearch(int64_t rank) const {
    if (!config_file_.empty()) {
      return Status::InvalidArgument(
          "--search and --config both choose what to launch",
          "pick one of them");
    }
    MESHTUNE_RETURN_IF_ERROR(CheckNoSearchFlags("--search"));
    if (flags_.no_db) {
      return Status::InvalidArgument(
          "--search reads the results database, but --no-db is given",
          "drop --no-db (--db PATH names the database)");
    }
    auto id = ParsePositiveInt(search_text_, "--search");
    if (!id.ok()) return id.status();
    results::OpenOptions options;
    options.read_only = true;
    auto store = results::Store::Open(ResolveDbPath(flags_.db), options);
    if (!store.ok()) return store.status();
    auto search = FindStoredSearch(**store, id.value());
    if (!search.ok()) return search.status();
    auto candidates =
        FindStoredRanks(**store, search.value(), {rank}, "--rank");
    if (!candidates.ok()) return candidates.status();
    LaunchPlan plan;
    auto inputs = InputsOfStoredSearch(search.value());
    if (!inputs.ok()) return inputs.status();
    plan.in = inputs.value();
    auto calibration = ChooseCalibration(store->get(), plan.in.cluster);
    if (!calibration.ok()) return calibration.status();
    const results::CandidateRecord& c = candidates->front();
    plan.flash_attention = calibration.value()->UsesFlashAttention();
    plan.chosen = costmodel::EstimateConfig(plan.in.model, plan.in.cluster,
                                            plan.in.training, c.config,
                                            *calibration.value());
    plan.link = MakeSearchLink(
        StoredCandidate{AbsoluteDbPath((*store)->path()), search.value(), c});
    plan.source = LinkSource(*plan.link);
    return plan;
  }

  // --config FILE: the file's configuration on the file's cluster.
  StatusOr<LaunchPlan> PlanFromConfigFile() const {
    MESHTUNE_RETURN_IF_ERROR(CheckNoSearchFlags("--config"));
    if (sub_->count("--rank") > 0) {
      return Status::InvalidArgument(
          "--rank does not apply with --config",
          "the file holds one configuration; drop --rank");
    }
    auto file = ReadTrainConfigYaml(config_file_);
    if (!file.ok()) return file.status();
    LaunchPlan plan;
    auto inputs = InputsOfConfigFile(config_file_, file.value());
    if (!inputs.ok()) return inputs.status();
    plan.in = inputs.value();
    const Inputs& in = plan.in;
    const search_spaces::ParallelConfig& config = file->config.parallel;
    std::string detail;
    const std::string reason = search_spaces::CheckConfig(
        in.model, in.training, in.cluster, config, &detail);
    if (!reason.empty()) {
      return Status::InvalidArgument(
          "--config " + config_file_ + ": " +
              (detail.empty() ? reason : detail) + " (" + reason + ")",
          "fix its parallelism: section, or write a new file with 'tune "
          "search ... --out FILE'");
    }
    auto calibration = CalibrationFor(in.cluster, flags_.db, flags_.no_db);
    if (!calibration.ok()) return calibration.status();
    plan.chosen = costmodel::EstimateConfig(in.model, in.cluster, in.training,
                                            config, *calibration.value());
    plan.flash_attention = calibration.value()->UsesFlashAttention();
    plan.config_file =
        std::filesystem::absolute(config_file_).lexically_normal().string();
    plan.link = file->search;
    plan.source = plan.link
                      ? LinkSource(*plan.link) + " via " + plan.config_file
                      : plan.config_file;
    return plan;
  }

  static std::string LinkSource(const SearchLink& link) {
    return "search " + std::to_string(link.search_id) + ", rank " +
           std::to_string(link.rank) + " (" + link.db + ")";
  }

  // Records the search like `tune search` (at least down to `rank`) and
  // returns the link to the launched candidate; a failure is a warning
  // only, the script is still useful without it.
  std::optional<SearchLink> Record(results::Store* db, const Inputs& in,
                                   const SearchResult& result, int64_t rank,
                                   std::ostream& err) const {
    if (db == nullptr) return std::nullopt;
    auto id = RecordSearch(db, flags_, in, result, std::max<int64_t>(rank, 10));
    if (!id.ok()) {
      err << "tune: warning: search not recorded: " << id.status().message()
          << "\n";
      return std::nullopt;
    }
    auto stored = FindCandidate(*db, id.value(), rank);
    if (!stored.ok()) {
      err << "tune: warning: the script is not linked to search " << id.value()
          << ": " << stored.status().message() << "\n";
      return std::nullopt;
    }
    return MakeSearchLink(stored.value());
  }

  LaunchScriptSpec Spec(const Inputs& in, const costmodel::Estimate& e,
                        LaunchTrainer trainer, int64_t cpus) const {
    LaunchScriptSpec s;
    s.trainer = trainer;
    s.model = in.model;
    s.training = in.training;
    s.config = e.config;
    s.cluster_name = in.cluster.name;
    s.gpus_per_node = in.cluster.gpus_per_node;
    s.request_gpus = in.cluster.name != kLocalCluster;
    s.job_name = job_name_.empty() ? JobName(in.model.name) : job_name_;
    s.time = time_;
    s.partition = partition_;
    s.account = account_;
    s.cpus_per_task = cpus;
    s.exclusive = !no_exclusive_;
    s.container_image = container_image_;
    s.container_mounts = container_mounts_;
    s.data_path = data_path_;
    s.checkpoint_dir = checkpoint_dir_;
    s.tokenizer_model = tokenizer_model_;
    s.version = VersionString();
    s.predicted_step_time_s = e.step_time_s;
    s.predicted_memory_gib = e.memory.total_bytes() / kGiB;
    s.memory_capacity_gib = e.memory_capacity_bytes / kGiB;
    return s;
  }

  CLI::App* sub_ = nullptr;
  InputFlags flags_;
  std::string search_text_;
  std::string config_file_;
  TerminalFlags terminal_;
  std::string rank_text_ = "1";
  std::string scheduler_ = "slurm";
  std::string trainer_ = "auto";
  std::string container_image_;
  std::string container_mounts_;
  bool no_exclusive_ = false;
  std::string data_path_;
  std::string checkpoint_dir_;
  std::string tokenizer_model_;
  std::string save_interval_text_;
  KubernetesOptions k8s_;
  std::string time_ = "24:00:00";
  std::string partition_;
  std::string account_;
  std::string job_name_;
  std::string cpus_text_ = "8";
  std::string out_file_;
  bool dry_run_ = false;
};

}  // namespace

std::unique_ptr<Command> AddLaunchCommand(CLI::App* app) {
  return std::make_unique<LaunchCommand>(app);
}

}  // namespace meshtune::tuner
