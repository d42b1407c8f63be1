// `tune launch` scripts run for real against stub cluster commands: bash runs
// the SLURM script with `srun`, `sbatch` and `scontrol` stubs on PATH (srun
// records its arguments and writes Megatron's checkpoint tracker as a
// training job would), and the Kubernetes manifest's container script with
// a `torchrun` stub. The recorded pretrain_gpt.py arguments parse back
// (ParseMegatronArgs) to the searched plan, name the model's tokenizer, save
// and load checkpoints and carry the iterations of the token budget; the job
// chain resubmits only while the checkpoint advances and is short of
// TRAIN_ITERS.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tuner/tune_in_process.h"
#include "tuner/interop/launch_script.h"
#include "tuner/interop/megatron_args_parser.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTuneInProcess;
using testing::WriteFile;

constexpr const char* k175b = "--model 175b --gpus 1024 --gpu a100-80g --no-db";
// ceil(300e9 tokens / (1536 x 2048 tokens per iteration)).
constexpr int64_t k175bIters = 95368;

// A directory with stub srun, sbatch, scontrol and torchrun. Each records
// its arguments one per line in $STUB_LOG/<name>.args (appending a "--"
// line per call); srun and torchrun then write $STUB_ITER into the tracker
// (when set) and exit with $STUB_RC (default 0).
std::string MakeStubs(const std::string& dir) {
  const std::string bin = dir + "/bin";
  mkdir(bin.c_str(), 0755);
  const std::string record =
      "#!/bin/bash\n"
      "for a in \"$@\"; do printf '%s\\n' \"$a\"; done "
      ">>\"$STUB_LOG/$(basename \"$0\").args\"\n"
      "echo -- >>\"$STUB_LOG/$(basename \"$0\").args\"\n";
  const std::string train = record +
                            "if [[ -n \"${STUB_ITER:-}\" ]]; then\n"
                            "  mkdir -p \"$CHECKPOINT_DIR\"\n"
                            "  echo \"$STUB_ITER\" >\"$CHECKPOINT_DIR/"
                            "latest_checkpointed_iteration.txt\"\n"
                            "fi\n"
                            "exit \"${STUB_RC:-0}\"\n";
  const std::string scontrol =
      record +
      "case \"$2\" in\n"
      "  hostnames) echo node001; echo node002 ;;\n"
      "  job) echo '   Command=/shared/jobs/from-scontrol.sh' ;;\n"
      "esac\n";
  for (const auto& [name, text] :
       std::vector<std::pair<std::string, std::string>>{
           {"srun", train},
           {"torchrun", train},
           {"sbatch", record + "echo 'Submitted batch job 43'\n"},
           {"scontrol", scontrol}}) {
    WriteFile(bin + "/" + name, text);
    chmod((bin + "/" + name).c_str(), 0755);
  }
  return bin;
}

struct ScriptRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::vector<std::string> srun;    // arguments of every srun call
  std::vector<std::string> sbatch;  // of every sbatch call
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Runs `script` with bash in `dir` with only `env` (and PATH with the
// stubs first) in its environment.
ScriptRun RunScript(const std::string& dir, const std::string& script,
                    const std::string& env, const std::string& launcher) {
  const std::string bin = MakeStubs(dir);
  const std::string log = dir + "/log";
  mkdir(log.c_str(), 0755);
  for (const char* name : {"srun", "sbatch", "torchrun", "scontrol"}) {
    std::remove((log + "/" + name + ".args").c_str());
  }
  const std::string path = dir + "/script.sh";
  WriteFile(path, script);
  const std::string cmd = "cd '" + dir + "' && env -i PATH='" + bin +
                          ":/usr/bin:/bin' STUB_LOG='" + log + "' " + env +
                          " bash '" + path + "' >out.txt 2>err.txt";
  ScriptRun run;
  const int status = std::system(cmd.c_str());
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFile(dir + "/out.txt");
  run.err = ReadFile(dir + "/err.txt");
  run.srun = Lines(ReadFile(log + "/" + launcher + ".args"));
  run.sbatch = Lines(ReadFile(log + "/sbatch.args"));
  return run;
}

// The recorded arguments from the first one ending in ".py", shell-quoted
// and joined, up to the call's "--" line.
std::string PretrainArgs(const std::vector<std::string>& args) {
  std::string out;
  bool in = false;
  for (const std::string& a : args) {
    if (a == "--" && in) break;
    if (in) out += ShellQuote(a) + " ";
    if (a.size() > 3 && a.compare(a.size() - 3, 3, ".py") == 0) in = true;
  }
  return out;
}

std::string Value(const ParsedMegatronArgs& p, const std::string& flag) {
  const auto it = p.ignored_values.find(flag);
  return it == p.ignored_values.end() ? "<absent>" : it->second;
}

std::string Script(const std::string& args) {
  const auto run = RunTuneInProcess("launch " + args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run.out;
}

std::string MegatronEnv(const std::string& ckpt) {
  return "SLURM_JOB_ID=42 SLURM_JOB_NODELIST='node[001-002]' "
         "SLURM_CPUS_PER_TASK=8 MEGATRON_DIR=/opt/megatron-lm "
         "DATA_PATH=/data/pile_text_document VOCAB_FILE=/tok/vocab.json "
         "MERGE_FILE=/tok/merges.txt CHECKPOINT_DIR='" +
         ckpt + "'";
}

TEST(LaunchRun, MegatronScriptTrainsThePlanAndResubmitsItself) {
  const std::string dir = MakeTempDir();
  const std::string script = Script(k175b);
  const std::string ckpt = dir + "/ckpt";
  const ScriptRun run =
      RunScript(dir, script, MegatronEnv(ckpt) + " STUB_ITER=500", "srun");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;

  auto parsed = ParseMegatronArgs(PretrainArgs(run.srun), 1024);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const auto search =
      RunTuneInProcess(std::string("search ") + k175b + " --format megatron");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  auto searched = ParseMegatronArgs(search.out, 1024);
  ASSERT_TRUE(searched.ok()) << searched.status().message();
  EXPECT_EQ(parsed->config, searched->config);
  EXPECT_EQ(parsed->model.num_layers, 96);

  EXPECT_EQ(Value(*parsed, "--tokenizer-type"), "GPT2BPETokenizer");
  EXPECT_EQ(Value(*parsed, "--vocab-file"), "/tok/vocab.json");
  EXPECT_EQ(Value(*parsed, "--merge-file"), "/tok/merges.txt");
  EXPECT_EQ(Value(*parsed, "--save"), ckpt);
  EXPECT_EQ(Value(*parsed, "--load"), ckpt);
  EXPECT_EQ(Value(*parsed, "--train-iters"), std::to_string(k175bIters));
  EXPECT_EQ(Value(*parsed, "--lr-decay-iters"), std::to_string(k175bIters));
  EXPECT_EQ(Value(*parsed, "--lr"), "6e-05");  // GPT-3 Table 2.1
  EXPECT_EQ(Value(*parsed, "--lr-decay-style"), "cosine");
  // 24 h limit minus 15 min to save.
  EXPECT_EQ(Value(*parsed, "--exit-duration-in-mins"), "1425");

  // 500 < 95368 after progress: the next job, after this one.
  const std::vector<std::string> next = {"--dependency=afterany:42",
                                         "--export=ALL,TUNE_JOB_INDEX=2",
                                         "/shared/jobs/from-scontrol.sh", "--"};
  EXPECT_EQ(run.sbatch, next);
  EXPECT_NE(run.out.find("submitted job 2"), std::string::npos) << run.out;
}

TEST(LaunchRun, ChainStopsWhenDoneOrStuck) {
  const std::string dir = MakeTempDir();
  const std::string script = Script(k175b);
  const std::string ckpt = dir + "/ckpt";
  const std::string env = MegatronEnv(ckpt);

  // The job reaches TRAIN_ITERS: done, nothing submitted.
  ScriptRun done = RunScript(
      dir, script, env + " STUB_ITER=" + std::to_string(k175bIters), "srun");
  EXPECT_EQ(done.exit_code, 0) << done.err;
  EXPECT_TRUE(done.sbatch.empty());
  EXPECT_NE(done.out.find("tune: done: iteration 95368 of 95368"),
            std::string::npos)
      << done.out;

  // A resubmitted job that finds the run done trains nothing.
  ScriptRun again = RunScript(dir, script, env, "srun");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(again.srun.empty());
  EXPECT_TRUE(again.sbatch.empty());

  // A job that fails without a new checkpoint stops the chain.
  WriteFile(ckpt + "/latest_checkpointed_iteration.txt", "700\n");
  ScriptRun stuck = RunScript(dir, script, env + " STUB_RC=1", "srun");
  EXPECT_EQ(stuck.exit_code, 1);
  EXPECT_TRUE(stuck.sbatch.empty());
  EXPECT_NE(stuck.err.find("tune: error: no new checkpoint in this job "
                           "(iteration 700, exit 1); not resubmitting"),
            std::string::npos)
      << stuck.err;

  // The last allowed job does not submit another.
  ScriptRun last =
      RunScript(dir, script,
                env + " STUB_ITER=900 TUNE_JOB_INDEX=23 MAX_JOBS=23", "srun");
  EXPECT_EQ(last.exit_code, 1);
  EXPECT_TRUE(last.sbatch.empty());
  EXPECT_NE(last.err.find("after 23 jobs; raise MAX_JOBS"), std::string::npos)
      << last.err;
}

// LLaMA-3 70B trains with its own tokenizer and RoPE base, not GPT-2's.
TEST(LaunchRun, Llama3ScriptNamesItsTokenizer) {
  const std::string dir = MakeTempDir();
  const std::string script =
      Script("--model llama3-70b --gpus 128 --gpu h100 --no-db");
  const std::string env =
      "SLURM_JOB_ID=7 SLURM_JOB_NODELIST=node001 MEGATRON_DIR=/m "
      "DATA_PATH=/d CHECKPOINT_DIR='" +
      dir + "/ckpt' STUB_ITER=10";
  const ScriptRun run = RunScript(dir, script, env, "srun");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto parsed = ParseMegatronArgs(PretrainArgs(run.srun), 128);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(Value(*parsed, "--tokenizer-type"), "HuggingFaceTokenizer");
  EXPECT_EQ(Value(*parsed, "--tokenizer-model"), "meta-llama/Meta-Llama-3-70B");
  EXPECT_EQ(Value(*parsed, "--vocab-file"), "<absent>");
  EXPECT_EQ(parsed->model.rotary_base, 500000);
  // ceil(300e9 / (512 x 8192)).
  EXPECT_EQ(Value(*parsed, "--train-iters"), "71526");
}

// The engine's script: `tune train` with the schedule, checkpoints, and
// --load once a checkpoint exists.
TEST(LaunchRun, TuneScriptResumesFromItsCheckpoint) {
  const std::string dir = MakeTempDir();
  const std::string script =
      Script("--model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
             " --gbs 4 --seq-len 64 --tokens 256000 --time 30 --no-db");
  const std::string env =
      "SLURM_JOB_ID=9 SLURM_JOB_NODELIST=node001 "
      "CONFIG=/c.yaml CHECKPOINT_DIR='" +
      dir + "/ckpt' STUB_ITER=400";
  const ScriptRun first = RunScript(dir, script, env, "srun");
  ASSERT_EQ(first.exit_code, 0) << first.err << first.out;
  const std::string args = testing::ReadFile(dir + "/log/srun.args");
  // 256000 tokens / (4 x 64) = 1000 iterations.
  EXPECT_NE(args.find("--steps\n1000\n"), std::string::npos) << args;
  EXPECT_NE(args.find("--mpi=pmix\ntune\ntrain\n--config\n/c.yaml\n"),
            std::string::npos)
      << args;
  EXPECT_EQ(args.find("--load"), std::string::npos) << args;
  EXPECT_EQ(args.find("--backend"), std::string::npos) << args;  // CPU
  ASSERT_FALSE(first.sbatch.empty());

  const ScriptRun second =
      RunScript(dir, script, env + " STUB_ITER=1000 TUNE_JOB_INDEX=2", "srun");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const std::string resumed = testing::ReadFile(dir + "/log/srun.args");
  EXPECT_NE(resumed.find("--load\n" + dir + "/ckpt\n"), std::string::npos)
      << resumed;
  EXPECT_TRUE(second.sbatch.empty());
}

// The PyTorchJob: parsed as YAML, its container script run with a torchrun
// stub and the manifest's own environment.
TEST(LaunchRun, KubernetesManifestRunsTorchrunWithThePlan) {
  const std::string dir = MakeTempDir();
  const std::string manifest = Script(
      "--model llama3-70b --gpus 128 --gpu h100 --no-db --scheduler "
      "kubernetes --container-image nvcr.io/nvidia/nemo:25.09 --data-path "
      "/workspace/data/text_document --namespace llm");
  const YAML::Node job = YAML::Load(manifest);
  EXPECT_EQ(job["kind"].as<std::string>(), "PyTorchJob");
  EXPECT_EQ(job["metadata"]["namespace"].as<std::string>(), "llm");
  const YAML::Node replicas = job["spec"]["pytorchReplicaSpecs"];
  EXPECT_EQ(replicas["Master"]["replicas"].as<int>(), 1);
  EXPECT_EQ(replicas["Worker"]["replicas"].as<int>(), 15);  // 128 / 8 - 1
  EXPECT_EQ(job["spec"]["nprocPerNode"].as<std::string>(), "8");
  const YAML::Node container =
      replicas["Worker"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["name"].as<std::string>(), "pytorch");
  EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 8);

  std::string env;
  for (const YAML::Node& e : container["env"]) {
    env += e["name"].as<std::string>() + "='" + e["value"].as<std::string>() +
           "' ";
  }
  // The claim's paths live in the test's directory.
  env += "CHECKPOINT_DIR='" + dir + "/ckpt'";
  const std::string body = container["args"][0].as<std::string>();
  // Kubernetes would expand $(NAME) in args itself: the script has none.
  EXPECT_EQ(body.find("$("), std::string::npos) << body;
  const ScriptRun run = RunScript(dir, body, env, "torchrun");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto parsed = ParseMegatronArgs(PretrainArgs(run.srun), 128);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const auto search = RunTuneInProcess(
      "search --model llama3-70b --gpus 128 --gpu h100 --no-db --format "
      "megatron");
  auto searched = ParseMegatronArgs(search.out, 128);
  ASSERT_TRUE(searched.ok()) << searched.status().message();
  EXPECT_EQ(parsed->config, searched->config);
  EXPECT_EQ(Value(*parsed, "--tokenizer-model"), "meta-llama/Meta-Llama-3-70B");
  EXPECT_EQ(Value(*parsed, "--data-path"), "/workspace/data/text_document");
  EXPECT_EQ(Value(*parsed, "--save"), dir + "/ckpt");
  EXPECT_EQ(Value(*parsed, "--train-iters"), "71526");
  EXPECT_EQ(Value(*parsed, "--exit-duration-in-mins"), "<absent>");
}

// A `tune search --out` file carries the whole model: launching it trains
// the model that was costed (before, MLA, the dense first layer and the
// shared experts of DeepSeek were lost on the way).
TEST(LaunchRun, ConfigFileKeepsTheWholeModel) {
  const std::string dir = MakeTempDir();
  const std::string search =
      "--model deepseek-v2-lite --gpus 16 --gpu h100 --no-db";
  ASSERT_EQ(
      RunTuneInProcess("search " + search + " --out " + dir + "/best.yaml")
          .exit_code,
      0);
  const std::string from_file =
      Script("--config " + dir + "/best.yaml --no-db");
  const auto direct =
      RunTuneInProcess("search " + search + " --format megatron");
  auto searched = ParseMegatronArgs(direct.out, 16);
  ASSERT_TRUE(searched.ok()) << searched.status().message();
  const size_t begin = from_file.find("MEGATRON_ARGS=(\n");
  const size_t end = from_file.find("\n)\n", begin);
  ASSERT_NE(end, std::string::npos) << from_file;
  auto launched =
      ParseMegatronArgs(from_file.substr(begin + 16, end - begin - 16), 16);
  ASSERT_TRUE(launched.ok()) << launched.status().message();
  EXPECT_EQ(launched->config, searched->config);
  EXPECT_TRUE(launched->model.multi_latent_attention);
  EXPECT_EQ(launched->model.kv_lora_rank, searched->model.kv_lora_rank);
  EXPECT_EQ(launched->model.num_moe_layers(), searched->model.num_moe_layers());
  EXPECT_EQ(launched->model.moe_shared_expert_intermediate_size,
            searched->model.moe_shared_expert_intermediate_size);
  EXPECT_GT(launched->model.moe_shared_expert_intermediate_size, 0);
}

// A model file that names no tokenizer: both scripts ask for its type and
// model, and the manifest has an env entry for each (TokenizerVariables).
TEST(LaunchRun, UnnamedTokenizerIsAskedForInBothSchedulers) {
  const std::string dir = MakeTempDir();
  std::string yaml = ReadFile(std::string(MESHTUNE_SOURCE_DIR) +
                              "/search_spaces/models/llama3-8b.yaml");
  for (const char* key : {"tokenizer_type:", "tokenizer_model:"}) {
    const size_t at = yaml.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    yaml.erase(at, yaml.find('\n', at) + 1 - at);
  }
  WriteFile(dir + "/plain.yaml", yaml);
  const std::string model =
      "--model " + dir + "/plain.yaml --gpus 8 --gpu h100 --no-db";
  const std::string script = Script(model);
  EXPECT_NE(script.find("TOKENIZER_TYPE=${TOKENIZER_TYPE:?set TOKENIZER_TYPE "
                        "to Megatron's tokenizer type"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("TOKENIZER_MODEL=${TOKENIZER_MODEL:?"),
            std::string::npos);
  const YAML::Node job = YAML::Load(
      Script(model + " --scheduler kubernetes --container-image img"));
  std::vector<std::string> names;
  for (const YAML::Node& e : job["spec"]["pytorchReplicaSpecs"]["Master"]
                                ["template"]["spec"]["containers"][0]["env"]) {
    names.push_back(e["name"].as<std::string>());
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "TOKENIZER_TYPE"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "TOKENIZER_MODEL"),
            names.end());
}

TEST(LaunchRun, KubernetesErrors) {
  auto run = RunTuneInProcess(std::string("launch ") + k175b +
                              " --scheduler kubernetes");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: --scheduler kubernetes needs --container-image (the "
            "pods' image)\ntune: hint: give an image with Megatron-LM, e.g. "
            "--container-image nvcr.io/nvidia/nemo:25.09\n");
  run = RunTuneInProcess(std::string("launch ") + k175b +
                         " --scheduler kubernetes --container-image x "
                         "--trainer tune");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("the meshtune engine runs its ranks under MPI"),
            std::string::npos)
      << run.err;
  // The engine trains no multi-latent attention: --trainer tune says so up
  // front (an MoE model it trains, mixtral-8x7b, launches).
  run = RunTuneInProcess(
      "launch --model deepseek-v3 --gpus 1024 --gpu h100 --no-db --trainer "
      "tune");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--trainer tune: the CUDA engine cannot train this "
                         "plan: the training engine does not support "
                         "multi-latent attention (deepseek-v3)"),
            std::string::npos)
      << run.err;
  run = RunTuneInProcess(
      "launch --model mixtral-8x7b --gpus 64 --gpu h100 --no-db --trainer "
      "tune");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  run = RunTuneInProcess(std::string("launch ") + k175b +
                         " --namespace Bad_Name");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--namespace: 'Bad_Name' is not a Kubernetes name"),
            std::string::npos)
      << run.err;
  run = RunTuneInProcess(std::string("launch ") + k175b +
                         " --container-image 'img$(reboot)'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--container-image: 'img$(reboot)' has a quote"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace meshtune::tuner
