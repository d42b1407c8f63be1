// `tune launch --scheduler kubernetes`: the chosen plan as a Kubeflow
// PyTorchJob manifest (kubeflow.org/v1, training operator 1.7 or later for
// spec.nprocPerNode) that runs Megatron-LM's pretrain_gpt.py under torchrun:
// one Master pod and nodes - 1 Worker pods of gpus_per_node GPUs each; the
// operator sets torchrun's PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR and
// PET_MASTER_PORT. Checkpoints go to a persistent volume claim, and a
// restarted pod resumes from the newest one (restartPolicy OnFailure,
// runPolicy.backoffLimit = the run's max_jobs). docs/launch.md describes it.
//
// The engine (`tune train`) runs its ranks under MPI, which a PyTorchJob
// does not start, so only the Megatron trainer is written here.
#ifndef MESHTUNE_TUNER_INTEROP_KUBERNETES_JOB_H_
#define MESHTUNE_TUNER_INTEROP_KUBERNETES_JOB_H_

#include <string>

#include "search_spaces/status.h"
#include "tuner/interop/launch_script.h"

namespace meshtune::tuner {

struct KubernetesOptions {
  std::string namespace_name;  // metadata.namespace; "" = kubectl's current
  // The claim mounted at mount_path in every pod; it holds the data, the
  // tokenizer files and the checkpoints.
  std::string pvc = "meshtune-workspace";
  std::string mount_path = "/workspace";
  // Where the image has Megatron-LM (NVIDIA's NeMo images: /opt/megatron-lm).
  std::string megatron_dir = "/opt/megatron-lm";
};

// A Kubernetes name (metadata.name, namespace, claim): 1 to 63 lowercase
// letters, digits or '-', starting and ending with a letter or digit
// (RFC 1123 labels). InvalidArgument naming `flag` otherwise.
Status CheckKubernetesName(const std::string& flag, const std::string& value);

// `job_name` as a Kubernetes name: lowercase, '_' and '.' as '-', cut to 63.
std::string KubernetesName(const std::string& job_name);

// The manifest. InvalidArgument for trainer tune (see above), without a
// container image, for GPUs that are not whole nodes, and for the spec's
// checks (CheckLaunchSpec) and names (CheckKubernetesName).
StatusOr<std::string> KubernetesJob(const LaunchScriptSpec& spec,
                                    const KubernetesOptions& options);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_KUBERNETES_JOB_H_
