#include "tuner/interop/kubernetes_job.h"

#include <cctype>
#include <sstream>
#include <vector>

#include "search_spaces/yaml_util.h"
#include "tuner/interop/megatron_args.h"
#include "tuner/interop/yaml_text.h"
#include "tuner/io/text_format.h"

namespace meshtune::tuner {
namespace {

constexpr size_t kMaxKubernetesName = 63;

// The container's bash script: the plan, the run, then torchrun. Kubernetes
// expands $(NAME) in args itself, so the script uses no command
// substitution.
std::vector<std::string> ContainerScript(const LaunchScriptSpec& s) {
  std::vector<std::string> lines = {"set -euo pipefail"};
  lines.push_back(
      ": \"${DATA_PATH:?set the DATA_PATH env of the manifest to an indexed "
      "dataset prefix on the volume}\"");
  for (const TokenizerVariable& v : LaunchTokenizerVariables(s)) {
    lines.push_back(": \"${" + v.name + ":?set the " + v.name +
                    " env of the manifest to " + v.what + "}\"");
  }
  lines.push_back("mkdir -p \"$CHECKPOINT_DIR\"");
  lines.push_back("MEGATRON_ARGS=(");
  for (const std::string& a :
       MegatronArgs(s.model, s.training, s.config, s.flash_attention)) {
    lines.push_back("  " + a);
  }
  lines.push_back(")");
  lines.push_back("TRAINING_ARGS=(");
  for (const std::string& a : MegatronTrainingArgs(s)) {
    // A pod has no time limit: it trains to the end.
    if (a.rfind("--exit-duration-in-mins", 0) == 0) continue;
    lines.push_back("  " + a);
  }
  lines.push_back(")");
  lines.push_back(
      "exec torchrun \"$MEGATRON_DIR/pretrain_gpt.py\" "
      "\"${MEGATRON_ARGS[@]}\" \"${TRAINING_ARGS[@]}\"");
  return lines;
}

void Env(const std::string& name, const std::string& value,
         const std::string& indent, std::ostream& o) {
  o << indent << "- name: " << name << "\n";
  o << indent << "  value: " << YamlQuoted(value) << "\n";
}

void WritePod(const LaunchScriptSpec& s, const KubernetesOptions& k,
              int64_t gpus, std::ostream& o) {
  const std::string in = "        ";  // under template:
  o << in << "spec:\n";
  o << in << "  containers:\n";
  // The training operator finds the container named pytorch.
  o << in << "    - name: pytorch\n";
  o << in << "      image: " << YamlQuoted(s.container_image) << "\n";
  o << in << "      command: [\"bash\", \"-c\"]\n";
  o << in << "      args:\n";
  o << in << "        - |\n";
  for (const std::string& line : ContainerScript(s)) {
    o << in << "          " << line << "\n";
  }
  o << in << "      env:\n";
  const std::string e = in + "        ";
  Env("MEGATRON_DIR", k.megatron_dir, e, o);
  Env("DATA_PATH", s.data_path, e, o);
  Env("CHECKPOINT_DIR",
      s.checkpoint_dir.empty()
          ? k.mount_path + "/checkpoints/" + KubernetesName(s.job_name)
          : s.checkpoint_dir,
      e, o);
  // Tokenizer files default to the claim's tokenizer/ folder.
  for (const TokenizerVariable& v : LaunchTokenizerVariables(s)) {
    Env(v.name,
        v.value.empty() && !v.file.empty()
            ? k.mount_path + "/tokenizer/" + v.file
            : v.value,
        e, o);
  }
  Env("TRAIN_ITERS", std::to_string(s.run.train_iters), e, o);
  // As in the SLURM script (docs/launch.md, Environment).
  Env("CUDA_DEVICE_MAX_CONNECTIONS", "1", e, o);
  Env("TORCH_NCCL_AVOID_RECORD_STREAMS", "1", e, o);
  Env("OMP_NUM_THREADS", std::to_string(s.cpus_per_task), e, o);
  o << in << "      resources:\n";
  o << in << "        limits:\n";
  o << in << "          nvidia.com/gpu: " << gpus << "\n";
  o << in << "      volumeMounts:\n";
  o << in << "        - name: workspace\n";
  o << in << "          mountPath: " << YamlQuoted(k.mount_path) << "\n";
  // NCCL and the data loaders need more shared memory than the 64 MiB a
  // container gets by default.
  o << in << "        - name: dshm\n";
  o << in << "          mountPath: /dev/shm\n";
  o << in << "  volumes:\n";
  o << in << "    - name: workspace\n";
  o << in << "      persistentVolumeClaim:\n";
  o << in << "        claimName: " << k.pvc << "\n";
  o << in << "    - name: dshm\n";
  o << in << "      emptyDir:\n";
  o << in << "        medium: Memory\n";
}

void WriteReplica(const std::string& role, int64_t replicas,
                  const LaunchScriptSpec& s, const KubernetesOptions& k,
                  int64_t gpus, std::ostream& o) {
  o << "    " << role << ":\n";
  o << "      replicas: " << replicas << "\n";
  // A failed pod restarts and resumes from the newest checkpoint (--load).
  o << "      restartPolicy: OnFailure\n";
  o << "      template:\n";
  WritePod(s, k, gpus, o);
}

}  // namespace

Status CheckKubernetesName(const std::string& flag, const std::string& value) {
  bool ok = !value.empty() && value.size() <= kMaxKubernetesName &&
            std::isalnum(static_cast<unsigned char>(value.front())) &&
            std::isalnum(static_cast<unsigned char>(value.back()));
  for (const char c : value) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  }
  if (ok) return Status::Ok();
  return Status::InvalidArgument(
      flag + ": '" + search_spaces::yaml_util::Printable(value) +
          "' is not a Kubernetes name",
      "use 1 to 63 lowercase letters, digits or '-', starting and ending "
      "with a letter or digit, e.g. " +
          flag + " run-1");
}

std::string KubernetesName(const std::string& job_name) {
  std::string out;
  for (const char ch : job_name) {
    const char c =
        static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    out += (std::isalnum(static_cast<unsigned char>(c)) != 0) ? c : '-';
  }
  if (out.size() > kMaxKubernetesName) out.resize(kMaxKubernetesName);
  while (!out.empty() && out.back() == '-') out.pop_back();
  while (!out.empty() && out.front() == '-') out.erase(0, 1);
  return out.empty() ? "tune" : out;
}

StatusOr<std::string> KubernetesJob(const LaunchScriptSpec& spec,
                                    const KubernetesOptions& options) {
  if (spec.trainer != LaunchTrainer::kMegatron) {
    return Status::InvalidArgument(
        "--scheduler kubernetes: the meshtune engine runs its ranks under "
        "MPI, which a PyTorchJob does not start",
        "use --trainer megatron with Kubernetes, or --scheduler slurm for "
        "the engine");
  }
  if (spec.container_image.empty()) {
    return Status::InvalidArgument(
        "--scheduler kubernetes needs --container-image (the pods' image)",
        "give an image with Megatron-LM, e.g. --container-image "
        "nvcr.io/nvidia/nemo:25.09");
  }
  MESHTUNE_RETURN_IF_ERROR(CheckLaunchSpec(spec));
  const std::string name = KubernetesName(spec.job_name);
  MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("--job-name", name));
  if (!options.namespace_name.empty()) {
    MESHTUNE_RETURN_IF_ERROR(
        CheckKubernetesName("--namespace", options.namespace_name));
  }
  MESHTUNE_RETURN_IF_ERROR(CheckKubernetesName("--pvc", options.pvc));
  MESHTUNE_RETURN_IF_ERROR(
      CheckLaunchValue("--mount-path", options.mount_path));
  MESHTUNE_RETURN_IF_ERROR(
      CheckLaunchValue("--megatron-dir", options.megatron_dir));
  auto layout = ComputeSlurmLayout(spec.training.num_gpus, spec.gpus_per_node);
  if (!layout.ok()) return layout.status();
  const int64_t nodes = layout->nodes;
  const int64_t gpus = layout->tasks_per_node;
  const auto printable = [](const std::string& t) {
    return search_spaces::yaml_util::Printable(t, 200);
  };

  std::ostringstream o;
  o << "# Generated by tune launch (" << printable(spec.version) << ").\n";
  o << "# Source: " << printable(spec.source) << "\n";
  o << "# Model " << printable(spec.model.name) << " on "
    << spec.training.num_gpus << " " << printable(spec.cluster_name)
    << " GPUs (" << nodes << " pod" << (nodes == 1 ? "" : "s") << " x " << gpus
    << "), global batch " << spec.training.global_batch_size << ", sequence "
    << spec.training.seq_length << ", "
    << search_spaces::ToString(spec.training.precision) << "\n";
  o << "# Configuration: " << search_spaces::ToString(spec.config) << "\n";
  o << "# Predicted: step time " << Fixed(spec.predicted_step_time_s, 3)
    << " s, " << spec.run.train_iters << " iterations, "
    << Fixed(spec.run.predicted_run_s / 86400, 1) << " days\n";
  o << "# Needs the Kubeflow training operator (PyTorchJob, v1.7+) and the\n";
  o << "# claim " << options.pvc << " holding the data and checkpoints.\n";
  o << "# Submit with: kubectl apply -f <this file>\n";
  o << "apiVersion: kubeflow.org/v1\n";
  o << "kind: PyTorchJob\n";
  o << "metadata:\n";
  o << "  name: " << name << "\n";
  if (!options.namespace_name.empty()) {
    o << "  namespace: " << options.namespace_name << "\n";
  }
  o << "spec:\n";
  o << "  nprocPerNode: \"" << gpus << "\"\n";
  o << "  runPolicy:\n";
  o << "    backoffLimit: " << spec.run.max_jobs << "\n";
  o << "    cleanPodPolicy: Running\n";
  o << "  pytorchReplicaSpecs:\n";
  WriteReplica("Master", 1, spec, options, gpus, o);
  if (nodes > 1) WriteReplica("Worker", nodes - 1, spec, options, gpus, o);
  return o.str();
}

}  // namespace meshtune::tuner
