// `tune serve`: the fastest inference deployment of a model on N GPUs under
// latency targets (tuner/serve/serve_search.h; docs/serving.md §6).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <string>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/kv_cache.h"
#include "costmodel/serving_model.h"
#include "engine/backends/registry.h"
#include "profiler/cpu_backend.h"
#include "search_spaces/limits.h"
#include "search_spaces/presets/presets.h"
#include "tuner/commands/cli.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/local_cluster.h"
#include "tuner/interop/bench_serve_command.h"
#include "tuner/interop/kubernetes_job.h"
#include "tuner/interop/launch_script.h"
#include "tuner/interop/serving_commands.h"
#include "tuner/interop/serving_manifest.h"
#include "tuner/io/output_file.h"
#include "tuner/io/text_format.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/machine/local_gpu.h"
#include "tuner/render/serve_html.h"
#include "tuner/serve/serve_benchmark.h"
#include "tuner/serve/serve_report.h"
#include "tuner/serve/serve_search.h"
#include "tuner/store/results_db.h"
#include "tuner/validate/serving.h"

namespace meshtune::tuner {
namespace {

constexpr const char* kServeExamples = R"(Examples:
  tune serve --model llama3-70b --gpus 8 --gpu h100 --isl 2048 --osl 512 --tpot-ms 50
  tune serve --model llama3-8b --gpus 8 --gpu h200 --isl 1024 --osl 1024 --precision fp8 --ttft-ms 500
  tune serve --model deepseek-v3 --gpus 8 --gpu b200 --isl 1024 --osl 2048 --precision nvfp4 --kv-cache-dtype fp8 --concurrency 1024
  tune serve --model mixtral-8x7b --gpus 4 --gpu h100 --isl 512 --osl 256 --json
  tune serve --model llama3-8b --gpus 8 --gpu h100 --isl 1024 --osl 256 --tpot-ms 20 --k8s serve.yaml
  tune serve --model llama3-70b --gpus 8 --gpu h100 --isl 2048 --osl 512 --tpot-ms 50 --html serve.html
  tune serve --model llama3-70b --gpus 8 --gpu h100 --isl 8192 --osl 512 --prefix 6144 --tpot-ms 50
  tune serve --model deepseek-v3 --gpus 32 --gpu gb200 --isl 4096 --osl 1024 --precision nvfp4 --disagg --tpot-ms 30
  tune serve --model deepseek-v3 --gpus 8 --gpu h200 --isl 1024 --osl 2048 --precision fp8 --nextn 3 --nextn-accepted 1.8 --tpot-ms 20
  tune serve --model deepseek-v3 --gpus 8 --gpu h200 --isl 1024 --osl 2048 --precision fp8 --nextn-accept-rates 0.85,0.6,0.4 --tpot-ms 20
  tune serve --model llama3-70b --gpus 8 --gpu h100 --isl 2048 --osl 512 --precision fp8 --spec-method eagle3 --draft-model yuhuili/EAGLE3-LLaMA3.3-Instruct-70B --nextn 3 --nextn-accepted 1.9 --tpot-ms 20
  tune serve --model llama-tiny --gpus 2 --gpu local --isl 128 --osl 16 --validate
Every aggregated deployment is priced: replicas of tp x attention-DP x pp
GPUs, experts over ep of them, the batch swept from 1 to what the KV cache
holds (or fixed by --concurrency over the replicas); with --disagg also
prefill and decode workers apart, in every split of the GPUs. The Pareto front of
tokens/s per GPU against tokens/s per user is listed; the best plan is the
one with the most tokens/s per GPU that meets --ttft-ms and --tpot-ms.
--nextn N prices speculative decoding by the model's MTP layers (N drafts
and a verify of N + 1 tokens a step, --nextn-accepted of them kept), or
with --spec-method eagle3 by an EAGLE-3 head (--draft-model);
--nextn-accept-rates prices each draft length from its positions' rates.
--validate runs plans (tp dividing --gpus x batches 1..16) on this machine's
CPU engine and prints predicted against measured TTFT and TPOT (--gpu local,
the default with --validate).
The cost model and its accuracy: docs/serving.md.)";

class ServeCommand : public Command {
 public:
  explicit ServeCommand(CLI::App* app) {
    CLI::App* sub = app->add_subcommand(
        "serve", "find the fastest inference deployment under latency targets");
    sub->add_option("--model", model_, "model preset or model YAML file")
        ->type_name("M")
        ->required();
    sub->add_option("--gpus", gpus_, "number of GPUs to serve on")
        ->type_name("N")
        ->required();
    gpu_option_ =
        sub->add_option("--gpu", gpu_,
                        "GPU/cluster preset, cluster YAML file or local "
                        "(this machine's cores); default h100")
            ->type_name("KIND");
    sub->add_option("--isl", isl_, "input (prompt) tokens per request")
        ->type_name("I")
        ->required();
    sub->add_option("--osl", osl_, "output tokens per request")
        ->type_name("O")
        ->required();
    sub->add_option("--prefix-pool", prefix_pool_,
                    "with --prefix: the distinct prefixes the requests "
                    "share, each held once in the KV cache (aiperf's "
                    "--prefix-prompt-pool-size; default 1, one system "
                    "prompt; the concurrency for a prefix of each "
                    "request's own)")
        ->type_name("K");
    sub->add_option("--prefix", prefix_,
                    "prompt tokens the engine's prefix cache already holds "
                    "(a shared system prompt, earlier turns), 0 to isl - 1 "
                    "(default 0)")
        ->type_name("P");
    sub->add_option("--nextn", nextn_,
                    "speculative decoding: draft tokens per step from the "
                    "model's MTP layers or an EAGLE-3 head (0 = off, the "
                    "default; up to 8); needs --nextn-accepted or "
                    "--nextn-accept-rates")
        ->type_name("N");
    sub->add_option("--spec-method", spec_method_,
                    "what drafts: mtp (the model's MTP layers, the default) "
                    "or eagle3 (an EAGLE-3 head, --draft-model)")
        ->type_name("METHOD");
    sub->add_option("--draft-model", draft_model_,
                    "with --spec-method eagle3: the head's Hugging Face id "
                    "or path, as the engines load it")
        ->type_name("ID");
    sub->add_option("--draft-intermediate", draft_intermediate_,
                    "with --spec-method eagle3: the head's MLP width "
                    "(intermediate_size; default the model's, needed for "
                    "MoE models)")
        ->type_name("F");
    sub->add_option("--draft-vocab", draft_vocab_,
                    "with --spec-method eagle3: the head's draft vocabulary "
                    "(draft_vocab_size; default 32000)")
        ->type_name("V");
    sub->add_option("--draft-topk", draft_topk_,
                    "with --nextn: a draft tree's candidates per request in "
                    "each pass after the first (SGLang's "
                    "--speculative-eagle-topk; default 1, a chain)")
        ->type_name("K");
    sub->add_option("--draft-tokens", draft_tokens_,
                    "with --draft-topk above 1: the tokens the verify checks "
                    "per request (SGLang's --speculative-num-draft-tokens)")
        ->type_name("T");
    nextn_accepted_option_ =
        sub->add_option(
               "--nextn-accepted", nextn_accepted_,
               "with --nextn: mean draft tokens accepted per step, 0 to "
               "N (the engine's mean acceptance length minus 1)")
            ->type_name("A");
    sub->add_option("--nextn-accept-rates", accept_rates_,
                    "instead of --nextn-accepted: each draft position's "
                    "acceptance rate, comma-separated (vLLM's per-position "
                    "rates); without --nextn the search also picks the "
                    "draft length, 0 to one per rate")
        ->delimiter(',')
        ->type_name("R1,R2,...");
    sub->add_option("--ttft-ms", ttft_ms_,
                    "time-to-first-token target in ms (default none)")
        ->type_name("T");
    sub->add_option("--tpot-ms", tpot_ms_,
                    "time-per-output-token target in ms (default none)")
        ->type_name("P");
    sub->add_option("--concurrency", concurrency_,
                    "requests in flight over all replicas (default: sweep "
                    "the batch)")
        ->type_name("C");
    sub->add_option("--request-rate", request_rate_,
                    "open-loop requests/s over the deployment (instead of "
                    "--concurrency; aggregated plans)")
        ->type_name("R");
    sub->add_option("--precision", precision_,
                    "weight precision: bf16 (default), fp8, mxfp8, nvfp4")
        ->type_name("P");
    sub->add_option("--kv-cache-dtype", kv_,
                    "bf16, fp8 or nvfp4 (default: fp8 with fp8/fp4 weights, "
                    "else bf16)")
        ->type_name("DTYPE");
    sub->add_option("--top", top_, "Pareto points to list (default 12)")
        ->type_name("K");
    sub->add_flag("--disagg", disagg_,
                  "also search disaggregated deployments: prefill and "
                  "decode on separate workers");
    sub->add_option("--k8s", k8s_,
                    "write the best plan as Kubernetes manifests running "
                    "vllm serve (or --k8s-engine sglang, trtllm): "
                    "Deployments, LeaderWorkerSets for replicas that span "
                    "nodes, prefill and decode workers apart for "
                    "disaggregated plans")
        ->type_name("FILE");
    sub->add_option("--k8s-engine", k8s_engine_,
                    "with --k8s: the engine the manifests run, vllm "
                    "(default), sglang or trtllm")
        ->type_name("E");
    sub->add_option("--k8s-image", k8s_image_,
                    "with --k8s: the container image (default "
                    "vllm/vllm-openai:latest, lmsysorg/sglang:latest; "
                    "TensorRT-LLM needs one, e.g. "
                    "nvcr.io/nvidia/tensorrt-llm/release:TAG)")
        ->type_name("IMAGE");
    sub->add_option("--k8s-router-image", k8s_router_image_,
                    "with --k8s: the image of a disaggregated plan's router "
                    "(default vllm/vllm-router:latest for vLLM, the "
                    "engine's image for SGLang and TensorRT-LLM)")
        ->type_name("IMAGE");
    sub->add_option("--k8s-namespace", k8s_namespace_,
                    "with --k8s: the namespace of every object (default: "
                    "none named, kubectl's current)")
        ->type_name("NS");
    sub->add_option("--html", html_,
                    "write the report as a self-contained HTML page: the "
                    "Pareto chart, the best plan and its commands")
        ->type_name("FILE");
    sub->add_flag("--validate", validate_,
                  "run serving plans on this machine's CPU engine and "
                  "compare measured TTFT/TPOT with the predictions");
    sub->add_option("--backend", backend_,
                    "with --validate: the engine backend, cpu (default; "
                    "--gpu local) or cuda (this machine's GPUs and their "
                    "preset)")
        ->type_name("B");
    sub->add_option("--repeats", repeats_,
                    "with --validate: timed rounds per plan (default 3)")
        ->type_name("R");
    AddDbOption(sub, &db_,
                "with this machine's measurements (tune profile) for --gpu "
                "local or a measured GPU");
    sub->add_flag("--no-db", no_db_,
                  "price with the datasheet, not the results database");
    sub->add_flag("--json", json_, "print the JSON report on stdout");
    sub->footer(kServeExamples);
  }

  Status Run(std::ostream& out, std::ostream& err) override {
    if (validate_) return RunValidation(out, err);
    auto engine = CheckManifestFlags();
    if (!engine.ok()) return engine.status();
    if (!html_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(CheckOutputPath(html_, "--html"));
    }
    ServeProblem p;
    MESHTUNE_RETURN_IF_ERROR(search_spaces::CheckLimit(
        gpus_, search_spaces::limits::kNumGpus, "--gpus"));
    auto model = search_spaces::ResolveModel(model_);
    if (!model.ok()) return model.status();
    auto cluster = Cluster();
    if (!cluster.ok()) return cluster.status();
    auto precision = ParsePrecision(precision_);
    if (!precision.ok()) return precision.status();
    p.model = model.value();
    p.cluster = cluster.value();
    p.num_gpus = gpus_;
    p.workload = {isl_, osl_, concurrency_};
    p.workload.prefix = prefix_;
    p.workload.prefix_pool = prefix_pool_;
    p.workload.nextn_accepted = nextn_accepted_;
    p.workload.nextn_accept_rates = accept_rates_;
    p.nextn = nextn_;
    auto drafter = search_spaces::ParseDrafter(spec_method_);
    if (!drafter.ok()) return drafter.status();
    p.drafter = drafter.value();
    if (p.drafter == search_spaces::Drafter::kMtp &&
        (!draft_model_.empty() || draft_intermediate_ != 0 ||
         draft_vocab_ != search_spaces::DraftHead().vocab_size)) {
      return Status::InvalidArgument(
          "--draft-model, --draft-intermediate and --draft-vocab describe an "
          "EAGLE-3 head",
          "add --spec-method eagle3, or leave them out to draft with the "
          "model's MTP layers");
    }
    p.draft_head.checkpoint = draft_model_;
    p.draft_head.intermediate_size = draft_intermediate_;
    p.draft_head.vocab_size = draft_vocab_;
    p.draft_topk = draft_topk_;
    p.draft_tokens = draft_tokens_;
    if (nextn_ > 0 && nextn_accepted_option_->count() == 0 &&
        accept_rates_.empty()) {
      // No built-in acceptance: it is the traffic's, not the hardware's.
      return Status::InvalidArgument(
          "--nextn " + std::to_string(nextn_) +
              " needs --nextn-accepted or --nextn-accept-rates",
          "give the mean draft tokens accepted per step, 0 to " +
              std::to_string(nextn_) +
              " (the engine's mean acceptance length minus 1), or each "
              "position's rate");
    }
    p.weights = precision.value();
    if (kv_.empty()) {
      p.kv_cache = search_spaces::IsQuantized(p.weights)
                       ? search_spaces::KvCacheDtype::kFp8
                       : search_spaces::KvCacheDtype::kBf16;
    } else {
      auto kv = search_spaces::ParseKvCacheDtype(kv_);
      if (!kv.ok()) return kv.status();
      p.kv_cache = kv.value();
    }
    p.disaggregated = disagg_;
    p.request_rate = request_rate_;
    p.ttft_target_s = ttft_ms_ / 1e3;
    p.tpot_target_s = tpot_ms_ / 1e3;
    if (top_ < 1) {
      return Status::InvalidArgument(
          "--top must be at least 1, got " + std::to_string(top_),
          "give how many Pareto points to list");
    }
    MESHTUNE_RETURN_IF_ERROR(ValidateServeProblem(p));
    auto calibration = CalibrationFor(p.cluster, db_, no_db_);
    if (!calibration.ok()) return calibration.status();
    const ServeResult result = ServeSearch(p, **calibration);
    if (result.points.empty()) {
      std::string why;
      for (const auto& [reason, n] : result.rejected) {
        why += (why.empty() ? "" : "; ") + std::to_string(n) + " x " + reason;
      }
      return Status::InvalidArgument(
          "no deployment of " + p.model.name + " fits on " +
              std::to_string(p.num_gpus) + " x " + p.cluster.name +
              (why.empty() ? "" : " (" + why + ")"),
          "add GPUs, quantise the weights (--precision fp8), shorten "
          "--isl/--osl or lower the load");
    }
    nlohmann::json report = ServeReportJson(p, result);
    if (result.best) {
      AddCommands(p, result.points[*result.best], &report);
      AddBenchmark(p, result.points[*result.best], **calibration, &report);
    }
    if (!k8s_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(
          WriteManifest(p, result, report, engine.value(), err));
    }
    if (!html_.empty()) {
      HtmlReportSource source;
      source.command = CommandLine();
      source.version = VersionString();
      const std::string html = RenderServeHtml(report, source);
      MESHTUNE_RETURN_IF_ERROR(WriteOutputFile(html_, html, "--html"));
      err << "tune: wrote the HTML report to " << html_ << " ("
          << (html.size() + 1023) / 1024 << " KiB)\n";
    }
    if (json_) {
      out << report.dump(2) << "\n";
      return Status::Ok();
    }
    PrintServeReport(out, p, result, static_cast<size_t>(top_));
    if (result.best) {
      PrintCommands(out, report["commands"]);
      PrintBenchmark(out, report["benchmark"]);
    }
    return Status::Ok();
  }

 private:
  // --gpu: a preset or cluster YAML, or `local` (this machine's cores,
  // tuner/inputs/local_cluster.h, its node sized for --gpus ranks).
  StatusOr<search_spaces::ClusterSpec> Cluster() const {
    if (gpu_ != kLocalCluster) return search_spaces::ResolveCluster(gpu_);
    search_spaces::ClusterSpec c = LocalCluster(profiler::ReadCpuInfo());
    LocalNodeForRanks(gpus_, &c);
    return c;
  }

  // --validate: plans run on the CPU engine (tuner/validate/serving.h).
  Status RunValidation(std::ostream& out, std::ostream& err) {
    if (nextn_ != 0 || nextn_accepted_ != 0 || !accept_rates_.empty() ||
        spec_method_ != "mtp" || draft_topk_ != 1) {
      return Status::InvalidArgument(
          "--validate runs the plans on meshtune's engine, which has no "
          "speculative decoding",
          "leave out --nextn, --nextn-accepted, --nextn-accept-rates, "
          "--spec-method and --draft-topk with --validate");
    }
    if (backend_ != "cpu" && backend_ != "cuda") {
      return Status::InvalidArgument(
          "--backend must be cpu or cuda, got '" + backend_ + "'",
          "cpu runs the plans on this machine's cores, cuda on its GPUs");
    }
    if (backend_ == "cuda") {
      // Ranks beyond the devices would share them, which no preset
      // describes.
      const int devices = engine::backends::CudaDeviceCount();
      if (gpus_ > devices) {
        return Status::InvalidArgument(
            "--validate --backend cuda runs one rank per GPU: --gpus " +
                std::to_string(gpus_) + " but this machine has " +
                std::to_string(devices) + " CUDA device" +
                (devices == 1 ? "" : "s"),
            devices == 0 ? "run it on a machine with an NVIDIA GPU and "
                           "driver, or use --backend cpu"
                         : "pass --gpus " + std::to_string(devices) +
                               " or fewer, or use --backend cpu");
      }
      // The GPUs' own preset: --gpu, else the one matching the device.
      if (gpu_option_->count() == 0) gpu_ = DetectedGpuPreset();
      if (gpu_.empty() || gpu_ == kLocalCluster) {
        return Status::InvalidArgument(
            "--validate --backend cuda predicts the plans on this machine's "
            "GPU preset, and none matches its GPU",
            "pass --gpu PRESET with the preset closest to it ('tune gpus')");
      }
    } else if (gpu_ != kLocalCluster && gpu_option_->count() > 0) {
      return Status::InvalidArgument(
          "--validate runs the plans on this machine's CPU engine, so it "
          "predicts them on --gpu local, not " +
              gpu_,
          "leave out --gpu or pass --gpu local (or --backend cuda on a GPU "
          "machine)");
    } else {
      gpu_ = kLocalCluster;
    }
    MESHTUNE_RETURN_IF_ERROR(search_spaces::CheckLimit(
        gpus_, search_spaces::limits::kNumGpus, "--gpus"));
    if (repeats_ < 1 || repeats_ > 100) {
      return Status::InvalidArgument(
          "--repeats must be in [1, 100], got " + std::to_string(repeats_),
          "e.g. --repeats 3");
    }
    auto model = search_spaces::ResolveModel(model_);
    if (!model.ok()) return model.status();
    auto cluster = Cluster();
    if (!cluster.ok()) return cluster.status();
    auto calibration = CalibrationFor(*cluster, db_, no_db_);
    if (!calibration.ok()) return calibration.status();
    ServeValidationRequest r;
    r.model = model.value();
    r.cluster = cluster.value();
    r.calibration = calibration->get();
    r.gpus = gpus_;
    r.isl = isl_;
    r.osl = osl_;
    r.prefix = prefix_;
    r.repeats = repeats_;
    r.backend = backend_;
    auto result = ValidateServing(r, err);
    if (!result.ok()) return result.status();
    if (json_) {
      out << ServeValidationJson(r, *result).dump(2) << "\n";
    } else {
      PrintServeValidation(out, r, *result);
    }
    return Status::Ok();
  }

  // The best plan's engine commands (tuner/interop/serving_commands.h) into
  // report["commands"]: vllm (or vllm_error), sglang, trtllm and its
  // options file (or trtllm_error), and how many replicas to run behind a load
  // balancer. One role's engine commands: vllm (or vllm_error), sglang, trtllm
  // and its options file (or trtllm_error).
  static nlohmann::json RoleCommands(const search_spaces::ServingConfig& c,
                                     const ServingLaunch& launch) {
    nlohmann::json j;
    j["gpus_per_worker"] = c.gpus();
    auto vllm = VllmServeCommand(c, launch);
    if (vllm.ok()) {
      j["vllm"] = vllm.value();
    } else {
      j["vllm_error"] = vllm.status().message();
    }
    j["sglang"] = SglangServeCommand(c, launch);
    std::string yaml;
    auto trtllm = TrtllmServeCommand(c, launch, &yaml);
    if (trtllm.ok()) {
      j["trtllm"] = trtllm.value();
      j["trtllm_extra_llm_api_options"] = yaml;
    } else {
      j["trtllm_error"] = trtllm.status().message();
    }
    return j;
  }

  // The checkpoint every engine and the benchmark client are given: the
  // preset's Hugging Face id.
  static std::string Checkpoint(const ServeProblem& p) {
    return p.model.tokenizer_model.empty() ? p.model.name
                                           : p.model.tokenizer_model;
  }

  // The best plan's engine commands (tuner/interop/serving_commands.h) into
  // report["commands"]: aggregated, the replicas and one replica's
  // commands; disaggregated, the prefill and the decode workers' commands.
  static void AddCommands(const ServeProblem& p, const ServePoint& best,
                          nlohmann::json* report) {
    ServingLaunch launch;
    launch.model = Checkpoint(p);
    launch.max_batch = best.estimate.batch;
    if (p.request_rate > 0) {
      // Arrivals come in bursts around the mean concurrency: let the
      // engine take as many as its cache holds.
      launch.max_batch = std::min(best.estimate.max_sequences,
                                  costmodel::MaxBatch(best.config));
    }
    launch.max_model_len = p.workload.isl + p.workload.osl;
    launch.prefix_caching = p.workload.prefix > 0;
    launch.attention_windows =
        costmodel::KeptAttentionWindows(p.model, launch.max_model_len);
    launch.replicas = best.estimate.replicas;
    nlohmann::json c;
    c["checkpoint"] = launch.model;
    c["disaggregated"] = best.disaggregated;
    if (!best.disaggregated) {
      c["replicas"] = launch.replicas;
      c.update(RoleCommands(best.config, launch));
      (*report)["commands"] = std::move(c);
      return;
    }
    ServingLaunch prefill = launch;
    prefill.role = ServingRole::kPrefill;
    prefill.max_batch = best.prefill.attention_dp;  // one request per rank
    prefill.replicas = best.prefill_workers;
    ServingLaunch decode = launch;
    decode.role = ServingRole::kDecode;
    c["prefill"] = RoleCommands(best.prefill, prefill);
    c["prefill"]["workers"] = best.prefill_workers;
    c["decode"] = RoleCommands(best.config, decode);
    c["decode"]["workers"] = best.estimate.replicas;
    (*report)["commands"] = std::move(c);
  }

  // report["benchmark"]: the run of vLLM's benchmark client that checks
  // the best plan (tuner/serve/serve_benchmark.h) and its predicted means.
  static void AddBenchmark(const ServeProblem& p, const ServePoint& best,
                           const costmodel::Calibration& cal,
                           nlohmann::json* report) {
    const ServeBenchmark b = PredictServeBenchmark(p, best, cal);
    BenchServeLoad load;
    load.model = Checkpoint(p);
    load.isl = p.workload.isl;
    load.osl = p.workload.osl;
    load.prefix = p.workload.prefix;
    load.prefix_pool = p.workload.prefix_pool;
    load.max_concurrency = b.max_concurrency;
    load.request_rate = b.request_rate;
    load.num_prompts = b.num_prompts;
    nlohmann::json j;
    j["command"] = VllmBenchServeCommand(load);
    if (b.max_concurrency > 0) {
      j["max_concurrency"] = b.max_concurrency;
    } else {
      j["request_rate"] = b.request_rate;
    }
    j["num_prompts"] = b.num_prompts;
    if (!b.not_predicted.empty()) {
      j["not_predicted"] = b.not_predicted;
    } else {
      j["ttft_ms"] = b.ttft_s * 1e3;
      j["tpot_ms"] = b.tpot_s * 1e3;
      j["output_tokens_per_s"] = b.output_tokens_per_s;
    }
    (*report)["benchmark"] = std::move(j);
  }

  static void PrintBenchmark(std::ostream& out, const nlohmann::json& b) {
    out << "\ncheck it with vLLM's benchmark client (it drives any of the "
           "three servers), against the deployment's endpoint:\n"
        << b["command"].get<std::string>() << "\n";
    if (b.contains("not_predicted")) {
      out << "(that run is not predicted: "
          << b["not_predicted"].get<std::string>() << ")\n";
      return;
    }
    out << Fmt(
        "predicted for that run, first requests included: mean TTFT "
        "%.1f ms, mean TPOT %.2f ms, %.0f output tokens/s\n",
        b["ttft_ms"].get<double>(), b["tpot_ms"].get<double>(),
        b["output_tokens_per_s"].get<double>());
  }

  // The --k8s flags, checked before the search: the file's folder, the
  // engine, an image where TensorRT-LLM needs one, the namespace's name,
  // and none of the others without --k8s.
  StatusOr<ServingManifestEngine> CheckManifestFlags() const {
    auto engine = ParseServingManifestEngine(k8s_engine_);
    if (!engine.ok()) return engine.status();
    if (k8s_.empty()) {
      for (const auto& [flag, given] :
           {std::pair<const char*, bool>{"--k8s-engine", k8s_engine_ != "vllm"},
            {"--k8s-image", !k8s_image_.empty()},
            {"--k8s-router-image", !k8s_router_image_.empty()},
            {"--k8s-namespace", !k8s_namespace_.empty()}}) {
        if (given) {
          return Status::InvalidArgument(
              std::string(flag) + " needs --k8s FILE",
              std::string("add --k8s FILE or drop ") + flag);
        }
      }
      return engine;
    }
    MESHTUNE_RETURN_IF_ERROR(CheckOutputPath(k8s_, "--k8s"));
    auto image = ServingImage(engine.value(), k8s_image_);
    if (!image.ok()) return image.status();
    auto router_image =
        ServingRouterImage(engine.value(), k8s_image_, k8s_router_image_);
    if (!router_image.ok()) return router_image.status();
    if (!k8s_namespace_.empty()) {
      MESHTUNE_RETURN_IF_ERROR(
          CheckKubernetesName("--k8s-namespace", k8s_namespace_));
    }
    return engine;
  }

  // --k8s: the best plan's workloads and Services
  // (tuner/interop/serving_manifest.h), written atomically: a Deployment
  // per group of workers that fit a node, a LeaderWorkerSet per group whose
  // workers span nodes; a disaggregated plan's prefill and decode workers
  // apart.
  Status WriteManifest(const ServeProblem& p, const ServeResult& result,
                       const nlohmann::json& report,
                       ServingManifestEngine engine, std::ostream& err) const {
    if (!result.best) {
      return Status::InvalidArgument(
          "--k8s: no plan meets the targets, so there is nothing to deploy",
          "relax --ttft-ms/--tpot-ms or add GPUs");
    }
    const ServePoint& best = result.points[*result.best];
    const nlohmann::json& c = report["commands"];
    std::string name = KubernetesName("tune-serve-" + p.model.name);
    // Room for the names the manifests derive (serving_manifest.h).
    if (name.size() > kMaxServingNameLength) {
      name.resize(kMaxServingNameLength);
    }
    while (!name.empty() && name.back() == '-') name.pop_back();
    const int64_t per_node = p.cluster.gpus_per_node;
    // The role's workers for the manifests' engine: SGLang writes every
    // layout; vLLM and TensorRT-LLM refuse some.
    auto group = [engine](const nlohmann::json& role, const std::string& what,
                          int64_t workers,
                          int64_t gpus) -> StatusOr<ServingWorkerGroup> {
      ServingWorkerGroup g;
      g.workers = workers;
      g.gpus_per_worker = gpus;
      if (engine == ServingManifestEngine::kSglang) {
        g.command = role["sglang"].get<std::string>();
        return g;
      }
      const bool trtllm = engine == ServingManifestEngine::kTensorRtLlm;
      const char* key = trtllm ? "trtllm" : "vllm";
      if (!role.contains(key)) {
        return Status::InvalidArgument(
            std::string("--k8s runs ") +
                (trtllm ? "trtllm-serve" : "vllm serve") + ", and " + what +
                role[std::string(key) + "_error"].get<std::string>(),
            "write SGLang's manifests (--k8s-engine sglang)");
      }
      g.command = role[key].get<std::string>();
      if (trtllm) {
        g.options_yaml =
            role["trtllm_extra_llm_api_options"].get<std::string>();
      }
      return g;
    };
    // "2 x 4 GPUs" or "1 x 16 GPUs over 2 nodes".
    auto sizes = [per_node](int64_t workers, int64_t gpus) {
      std::string s =
          std::to_string(workers) + " x " + std::to_string(gpus) + " GPUs";
      if (gpus > per_node) {
        s += " over " + std::to_string((gpus + per_node - 1) / per_node) +
             " nodes";
      }
      return s;
    };
    std::string yaml;
    std::string what;
    if (!best.disaggregated) {
      ServingManifestSpec spec;
      spec.name = name;
      spec.engine = engine;
      spec.image = k8s_image_;
      spec.namespace_name = k8s_namespace_;
      auto aggregated =
          group(c, "", best.estimate.replicas, best.config.gpus());
      if (!aggregated.ok()) return aggregated.status();
      spec.command = aggregated.value().command;
      spec.options_yaml = aggregated.value().options_yaml;
      spec.replicas = best.estimate.replicas;
      spec.gpus_per_replica = best.config.gpus();
      spec.gpus_per_node = per_node;
      auto manifest = ServingDeployment(spec);
      if (!manifest.ok()) return manifest.status();
      yaml = manifest.value();
      what = std::string(ServingWorkloadKind(spec.gpus_per_replica, per_node)) +
             " and Service '" + spec.name +
             "': " + sizes(spec.replicas, spec.gpus_per_replica);
    } else {
      ServingDisaggregatedSpec spec;
      spec.name = name;
      spec.engine = engine;
      spec.image = k8s_image_;
      spec.router_image = k8s_router_image_;
      spec.namespace_name = k8s_namespace_;
      spec.gpus_per_node = per_node;
      auto prefill = group(c["prefill"], "for the prefill workers ",
                           best.prefill_workers, best.prefill.gpus());
      if (!prefill.ok()) return prefill.status();
      auto decode = group(c["decode"], "for the decode workers ",
                          best.estimate.replicas, best.config.gpus());
      if (!decode.ok()) return decode.status();
      spec.prefill = prefill.value();
      spec.decode = decode.value();
      auto manifest = ServingDisaggregatedDeployment(spec);
      if (!manifest.ok()) return manifest.status();
      yaml = manifest.value();
      auto kind = [&](int64_t gpus) -> std::string {
        return ServingRoleWorkloadKind(engine, gpus, per_node);
      };
      what = "prefill " + kind(spec.prefill.gpus_per_worker) +
             " and Service '" + name + "-prefill': " +
             sizes(spec.prefill.workers, spec.prefill.gpus_per_worker) +
             "; decode " + kind(spec.decode.gpus_per_worker) +
             " and Service '" + name + "-decode': " +
             sizes(spec.decode.workers, spec.decode.gpus_per_worker) + "; " +
             ServingRouterName(engine) + ", Deployment '" + name +
             "-router' behind Service '" + name + "'";
    }
    MESHTUNE_RETURN_IF_ERROR(WriteOutputFile(k8s_, yaml, "--k8s"));
    err << "tune: wrote " << k8s_ << " (" << what << ")\n";
    const bool ssh =
        ServingNeedsSshSecret(engine, best.config.gpus(), per_node) ||
        (best.disaggregated &&
         ServingNeedsSshSecret(engine, best.prefill.gpus(), per_node));
    if (ssh) {
      err << "tune: mpirun starts TensorRT-LLM's ranks on several nodes over "
             "SSH; before applying "
          << k8s_ << ", create the Secret " << ServingSshSecret(name)
          << " with a key of your own:\n  "
          << ServingSshSecretCommand(name, k8s_namespace_) << "\n";
    }
    return Status::Ok();
  }

  static void PrintRole(std::ostream& out, const nlohmann::json& c) {
    if (c.contains("vllm")) {
      out << "# vLLM\n" << c["vllm"].get<std::string>() << "\n";
    } else {
      out << "# vLLM: " << c["vllm_error"].get<std::string>() << "\n";
    }
    out << "# SGLang\n" << c["sglang"].get<std::string>() << "\n";
    if (c.contains("trtllm")) {
      out << "# TensorRT-LLM, with extra_llm_api_options.yaml:\n"
          << c["trtllm_extra_llm_api_options"].get<std::string>()
          << c["trtllm"].get<std::string>() << "\n";
    } else {
      out << "# TensorRT-LLM: " << c["trtllm_error"].get<std::string>() << "\n";
    }
  }

  static void PrintCommands(std::ostream& out, const nlohmann::json& c) {
    if (!c["disaggregated"].get<bool>()) {
      const int64_t replicas = c["replicas"].get<int64_t>();
      out << "\nrun " << replicas << " replica" << (replicas == 1 ? "" : "s")
          << " of " << c["gpus_per_worker"].get<int64_t>()
          << " GPUs each (behind one load balancer), each with one of:\n";
      PrintRole(out, c);
    } else {
      for (const char* role : {"prefill", "decode"}) {
        const nlohmann::json& r = c[role];
        out << "\n"
            << role << ": run " << r["workers"].get<int64_t>() << " worker"
            << (r["workers"].get<int64_t>() == 1 ? "" : "s") << " of "
            << r["gpus_per_worker"].get<int64_t>()
            << " GPUs each, each with one of:\n";
        PrintRole(out, r);
      }
      out << "(behind a disaggregation router: vLLM's vllm-router, SGLang's "
             "router, TensorRT-LLM's trtllm-serve disaggregated or NVIDIA "
             "Dynamo)\n";
    }
    out << "(the checkpoint is " << c["checkpoint"].get<std::string>()
        << "; quantised checkpoints need their own path)\n";
  }

  // The command line that reproduces the report, user values quoted for
  // the shell.
  std::string CommandLine() const {
    auto number = [](double v) {
      std::string s = std::to_string(v);
      s.erase(s.find_last_not_of('0') + 1);
      if (s.back() == '.') s.pop_back();
      return s;
    };
    std::string s = "tune serve --model " + ShellQuote(model_) + " --gpus " +
                    std::to_string(gpus_) + " --gpu " + ShellQuote(gpu_) +
                    " --isl " + std::to_string(isl_) + " --osl " +
                    std::to_string(osl_);
    if (prefix_ > 0) s += " --prefix " + std::to_string(prefix_);
    if (prefix_pool_ != 1) {
      s += " --prefix-pool " + std::to_string(prefix_pool_);
    }
    if (spec_method_ != "mtp") {
      s += " --spec-method " + ShellQuote(spec_method_) + " --draft-model " +
           ShellQuote(draft_model_);
      if (draft_intermediate_ != 0) {
        s += " --draft-intermediate " + std::to_string(draft_intermediate_);
      }
      if (draft_vocab_ != search_spaces::DraftHead().vocab_size) {
        s += " --draft-vocab " + std::to_string(draft_vocab_);
      }
    }
    if (nextn_ > 0) s += " --nextn " + std::to_string(nextn_);
    if (draft_topk_ != 1) {
      s += " --draft-topk " + std::to_string(draft_topk_) + " --draft-tokens " +
           std::to_string(draft_tokens_);
    }
    if (nextn_ > 0 && accept_rates_.empty()) {
      s += " --nextn-accepted " + number(nextn_accepted_);
    }
    if (!accept_rates_.empty()) {
      s += " --nextn-accept-rates ";
      for (size_t k = 0; k < accept_rates_.size(); ++k) {
        s += (k > 0 ? "," : "") + number(accept_rates_[k]);
      }
    }
    if (ttft_ms_ > 0) s += " --ttft-ms " + number(ttft_ms_);
    if (tpot_ms_ > 0) s += " --tpot-ms " + number(tpot_ms_);
    if (concurrency_ > 0) s += " --concurrency " + std::to_string(concurrency_);
    if (request_rate_ > 0) s += " --request-rate " + number(request_rate_);
    if (precision_ != "bf16") s += " --precision " + ShellQuote(precision_);
    if (!kv_.empty()) s += " --kv-cache-dtype " + ShellQuote(kv_);
    if (disagg_) s += " --disagg";
    return s + " --html " + ShellQuote(html_);
  }

  std::string model_;
  int64_t gpus_ = 0;
  std::string gpu_ = "h100";
  int64_t isl_ = 0;
  int64_t osl_ = 0;
  int64_t prefix_ = 0;
  int64_t prefix_pool_ = 1;
  int64_t nextn_ = 0;
  std::string spec_method_ = "mtp";
  std::string draft_model_;
  int64_t draft_intermediate_ = 0;
  int64_t draft_vocab_ = search_spaces::DraftHead().vocab_size;
  int64_t draft_topk_ = 1;
  int64_t draft_tokens_ = 0;
  double nextn_accepted_ = 0;
  CLI::Option* nextn_accepted_option_ = nullptr;
  std::vector<double> accept_rates_;
  double ttft_ms_ = 0;
  double tpot_ms_ = 0;
  int64_t concurrency_ = 0;
  std::string precision_ = "bf16";
  std::string kv_;
  int64_t top_ = 12;
  bool disagg_ = false;
  double request_rate_ = 0;
  std::string k8s_;
  std::string k8s_engine_ = "vllm";
  std::string k8s_image_;
  std::string k8s_router_image_;
  std::string k8s_namespace_;
  std::string html_;
  bool json_ = false;
  bool validate_ = false;
  CLI::Option* gpu_option_ = nullptr;
  int64_t repeats_ = 3;
  std::string backend_ = "cpu";
  std::string db_;
  bool no_db_ = false;
};

}  // namespace

std::unique_ptr<Command> AddServeCommand(CLI::App* app) {
  return std::make_unique<ServeCommand>(app);
}

}  // namespace meshtune::tuner
