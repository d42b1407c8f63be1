// `tune validate`: search, run the top candidates (and a few deliberately
// different ones) for real on this machine, compare predicted with measured
// step times, learn this machine's efficiency factors, and recommend the
// measured best. Selection and statistics: tuner/validate/analysis.h;
// running one candidate: tuner/validate/runner.h; learning:
// tuner/machine/learned_factors.h. With --backend cuda the candidates run on
// this machine's GPUs through the CUDA engine (engine/backends/registry.h) and
// what is learned is filed under the GPU machine (GpuMachineHardwareId).
#include <CLI/CLI.hpp>
#include <charconv>
#include <memory>
#include <string>
#include <vector>

#include "engine/backends/registry.h"
#include "search_spaces/yaml_util.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/local_cluster.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/machine/local_gpu.h"
#include "tuner/store/results_db.h"
#include "tuner/validate/report.h"
#include "tuner/validate/workflow.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kValidateExamples = R"(Examples:
  tune validate --model gpt-tiny --gpus 2 --gpu local --gbs 8 --seq-len 128
  tune validate --model llama-tiny --gpus 4 --gpu local --top 3 --steps 10 --json
  tune validate --model gpt-tiny --gpus 4 --gpu local --gbs 8 --seq-len 128 --top 2 --extra 0 --spread 8
  tune validate --backend cuda --model gpt-tiny --gpus 1 --top 2 --extra 1
  tune db export --table validations --csv -      earlier validations
Runs each candidate as 'tune train --from-search ID --rank R' (mpirun for
more than one rank; with --backend cuda one rank per GPU) and records
everything in the results database.)";

// With --backend cuda: checks that this tune has the CUDA engine and this
// machine a GPU, and defaults --gpu to the GPU's preset. Sets *gpu_name and
// *gpu_count to the local devices.
Status PrepareCudaValidation(InputFlags* flags, std::string* gpu_name,
                             int* gpu_count) {
  if (!engine::backends::TrainerBackendBuilt("cuda")) {
    return Status::Unimplemented(
        "tune validate --backend cuda needs the CUDA engine, and this tune "
        "was built without it (CMake found no CUDA toolkit with cuBLASLt and "
        "NCCL)",
        "rebuild where the CUDA toolkit is installed (/usr/local/cuda), or "
        "use --backend cpu");
  }
  *gpu_count = engine::backends::CudaDeviceCount();
  if (*gpu_count == 0) {
    return Status::InvalidArgument(
        "tune validate --backend cuda found no CUDA device on this machine "
        "(cudaGetDeviceCount found none)",
        "run it on a machine with an NVIDIA GPU and driver, or use "
        "--backend cpu");
  }
  *gpu_name = engine::backends::CudaDeviceName();
  if (flags->gpu == kLocalCluster) {
    return Status::InvalidArgument(
        "--gpu local is the CPU engine's preset, not a GPU's",
        "leave out --gpu to use this machine's GPU (" + *gpu_name +
            "), or pass its preset ('tune gpus')");
  }
  if (flags->gpu.empty()) {
    flags->gpu = DetectedGpuPreset();
    if (flags->gpu.empty()) {
      return Status::InvalidArgument(
          "no GPU preset matches this machine's GPU '" + *gpu_name + "'",
          "pass --gpu PRESET with the preset closest to it ('tune gpus')");
    }
  }
  return Status::Ok();
}

class ValidateCommand : public Command {
 public:
  explicit ValidateCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "validate",
        "run the top candidates for real on this machine; predicted vs "
        "measured");
    AddInputFlags(sub, &flags_, /*pins_are_lists=*/true);
    sub->add_option("--top", top_,
                    "analytical best candidates to run (default 5)")
        ->type_name("K");
    sub->add_option("--extra", extra_,
                    "deliberately different candidates to add: other tp/pp "
                    "split, other recompute, other micro-batch (default 3)")
        ->type_name("E");
    sub->add_option("--spread", spread_,
                    "candidates to add across the predicted range: the ones "
                    "nearest the quantiles 0, 1/(N-1), ..., 1 of the "
                    "trainable candidates' predicted step times, so that the "
                    "rank correlation sees differences larger than the "
                    "machine's noise (default 0: off; else at least 2)")
        ->type_name("N");
    sub->add_option("--steps", steps_,
                    "training steps per candidate; the first 2 are warm-up "
                    "(default 8)")
        ->type_name("S");
    sub->add_option("--repeats", repeats_,
                    "runs per candidate, interleaved across candidates; the "
                    "measured step time is their median (default 3)")
        ->type_name("R");
    sub->add_option("--backend", backend_,
                    "engine that runs the candidates: cpu (default: MPI "
                    "ranks on this machine's cores, --gpu local) or cuda "
                    "(one rank per GPU of this machine)")
        ->type_name("cpu|cuda");
    sub->add_option("--timeout", timeout_,
                    "seconds one candidate may run before it is killed and "
                    "recorded as failed (default 600)")
        ->type_name("SEC");
    sub->add_flag("--no-learn", no_learn_,
                  "do not refit this machine's efficiency factors");
    sub->add_flag("--json", json_, "print the result as JSON on stdout");
    AddDbOption(sub, &flags_.db);
    sub->footer(kValidateExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    ValidationRequest request;
    MESHTUNE_RETURN_IF_ERROR(ParseRunFlags(&request));
    const bool cuda = request.backend == "cuda";
    std::string gpu_name;
    int gpu_count = 0;
    if (cuda) {
      MESHTUNE_RETURN_IF_ERROR(
          PrepareCudaValidation(&flags_, &gpu_name, &gpu_count));
    }
    MESHTUNE_ASSIGN_OR_RETURN(request.inputs, ResolveInputs(flags_));
    MESHTUNE_RETURN_IF_ERROR(CheckRunnable(cuda, gpu_count, &request.inputs));
    request.flags = flags_;

    auto db = OpenSearchDb(flags_, err);
    if (!db.ok()) return db.status();
    if (*db == nullptr) {
      return Status::InvalidArgument(
          "tune validate needs a results database to record the runs in",
          "pass --db PATH");
    }
    results::Store* store = db->get();
    // The CPU engine's runs belong to this CPU; the CUDA engine's to the GPU
    // machine, under the id its profile (if any) has, so that its measured
    // calibration and the factors learned here go together.
    request.hardware_id = LocalHardwareId();
    if (cuda) {
      MESHTUNE_ASSIGN_OR_RETURN(
          request.hardware_id,
          FileGpuMachine(store, request.inputs.cluster, gpu_name, gpu_count));
    }
    auto v = RunValidation(request, store, err);
    if (!v.ok()) return v.status();

    // What `tune train --from-search` needs besides the rank to run a
    // candidate the way it ran here.
    const std::string train_flags =
        cuda ? " --backend cuda --gpu " + request.inputs.cluster.name : "";
    if (json_) {
      PrintValidationJson(out, request, *v);
    } else {
      PrintValidationTable(out, request, *v, train_flags);
    }
    if (v->stats.measured == 0) {
      return Status::IoError("every candidate failed; see the errors above",
                             "run one of them with 'tune train --from-search " +
                                 std::to_string(v->search_id) + " --rank R" +
                                 train_flags + "' to see its output");
    }
    return Status::Ok();
  }

 private:
  // The counts, the timeout, the backend and --no-learn into `request`.
  Status ParseRunFlags(ValidationRequest* request) const {
    MESHTUNE_ASSIGN_OR_RETURN(request->top, ParsePositiveInt(top_, "--top"));
    MESHTUNE_ASSIGN_OR_RETURN(request->steps,
                              ParsePositiveInt(steps_, "--steps"));
    MESHTUNE_ASSIGN_OR_RETURN(request->repeats,
                              ParsePositiveInt(repeats_, "--repeats"));
    int64_t timeout = 0;
    MESHTUNE_ASSIGN_OR_RETURN(timeout, ParsePositiveInt(timeout_, "--timeout"));
    request->timeout_s = static_cast<double>(timeout);
    request->extra = 0;
    if (extra_ != "0") {
      MESHTUNE_ASSIGN_OR_RETURN(request->extra,
                                ParsePositiveInt(extra_, "--extra"));
    }
    MESHTUNE_ASSIGN_OR_RETURN(request->spread, ParseSpread(spread_));
    if (backend_ != "cpu" && backend_ != "cuda") {
      return Status::InvalidArgument(
          "--backend: unknown backend '" + backend_ + "'",
          "use --backend cpu or --backend cuda");
    }
    request->backend = backend_;
    request->learn = !no_learn_;
    return Status::Ok();
  }

  // --spread N: 0 (off) or at least 2 (the fastest and the slowest
  // trainable candidates are its first and last quantiles).
  static StatusOr<int64_t> ParseSpread(const std::string& text) {
    const std::string hint =
        "write 0 (off) or a whole number of at least 2, e.g. --spread 6: the "
        "candidates nearest 6 evenly spaced quantiles of the predicted step "
        "times, fastest to slowest";
    const size_t begin = text.find_first_not_of(" \t");
    const size_t end = text.find_last_not_of(" \t");
    const std::string trimmed =
        begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
    int64_t v = 0;
    const char* first = trimmed.data();
    const char* last = first + trimmed.size();
    const auto [at, ec] = std::from_chars(first, last, v);
    if (trimmed.empty() || ec != std::errc() || at != last) {
      return Status::InvalidArgument(
          "--spread must be a whole number, got '" +
              search_spaces::yaml_util::Printable(text) + "'",
          hint);
    }
    if (v < 0 || v == 1) {
      return Status::InvalidArgument(
          "--spread must be 0 (off) or at least 2, got " + std::to_string(v),
          hint);
    }
    return v;
  }

  // Whether the engine can run the search's plans here: the CPU engine only
  // the `local` preset, the CUDA engine on at most this machine's GPUs.
  // Which plans a backend trains (engine::backends::CheckTrainerSupported)
  // is the selection's `trainable` check.
  static Status CheckRunnable(bool cuda, int gpu_count, Inputs* in) {
    // The candidates run on meshtune's engine, which launches from C++.
    in->training.python_launches = false;
    if (!cuda && in->cluster.name != kLocalCluster) {
      return Status::InvalidArgument(
          "tune validate runs the candidates on this machine with the CPU "
          "engine, so it needs --gpu local (got --gpu " +
              in->cluster.name + ")",
          "use --gpu local, or --backend cuda to run them on this machine's "
          "GPUs");
    }
    if (cuda && in->training.num_gpus > gpu_count) {
      return Status::InvalidArgument(
          "--gpus " + std::to_string(in->training.num_gpus) +
              " is more than the " + std::to_string(gpu_count) +
              " GPU(s) of this machine",
          "pass --gpus " + std::to_string(gpu_count) + " or fewer");
    }
    return Status::Ok();
  }

  InputFlags flags_;
  std::string top_ = "5";
  std::string extra_ = "3";
  std::string spread_ = "0";
  std::string steps_ = "8";
  std::string repeats_ = "3";
  std::string timeout_ = "600";
  std::string backend_ = "cpu";
  bool no_learn_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> AddValidateCommand(CLI::App* app) {
  return std::make_unique<ValidateCommand>(app);
}

}  // namespace meshtune::tuner
