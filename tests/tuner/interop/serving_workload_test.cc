// TensorRT-LLM replicas over several nodes: one LeaderWorkerSet group per
// replica whose leader runs trtllm-serve under mpirun over SSH. Besides
// the manifests' structure, the leader's and the workers' shell scripts are
// run by sh against stand-ins for ssh, ssh-keygen, sshd and mpirun that
// record what they are given, with the pod's paths moved into a temporary
// directory: the hosts mpirun gets, the files sshd reads, and the errors of
// an image that lacks a tool.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tuner/interop/manifest_yaml.h"
#include "tests/tuner/run_tune.h"
#include "tuner/interop/launch_script.h"
#include "tuner/interop/serving_manifest.h"

namespace meshtune::tuner {
namespace {

using testing::Args;
using testing::Container;
using testing::Documents;
using testing::Gpus;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::WriteFile;

constexpr const char* kName = "tune-serve-llama3-405b";
constexpr const char* kLeader =
    "tune-serve-llama3-405b-lws-0.tune-serve-llama3-405b-lws.inference";

// LLaMA-3.1 405B over 3 nodes of 8 GPUs (tp 8, pp 3).
ServingManifestSpec Spec() {
  ServingManifestSpec s;
  s.name = kName;
  s.namespace_name = "inference";
  s.engine = ServingManifestEngine::kTensorRtLlm;
  s.image = "nvcr.io/nvidia/tensorrt-llm/release:1.0.0";
  s.command =
      "trtllm-serve 'meta-llama/Llama-3.1-405B' --tp_size 8 --pp_size 3 "
      "--max_batch_size 64 --extra_llm_api_options o.yaml";
  s.options_yaml = "enable_attention_dp: false\n";
  s.replicas = 2;
  s.gpus_per_replica = 24;
  s.gpus_per_node = 8;
  return s;
}

// The leader's and the worker's scripts of the manifests' one group.
struct Scripts {
  std::string leader;
  std::string worker;
};

Scripts GroupScripts(const std::string& yaml) {
  for (const YAML::Node& d : Documents(yaml)) {
    if (d["kind"].as<std::string>() != "LeaderWorkerSet") continue;
    const YAML::Node t = d["spec"]["leaderWorkerTemplate"];
    return {Args(Container(t["leaderTemplate"]))[0],
            Args(Container(t["workerTemplate"]))[0]};
  }
  ADD_FAILURE() << "no LeaderWorkerSet in\n" << yaml;
  return {};
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `text` with every `from` replaced by `to`.
std::string Replace(std::string text, const std::string& from,
                    const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// A pod's file system in a temporary directory: the mounted key, a home,
// /run, and bin/ with stand-ins that log their arguments, one per line, to
// log/TOOL (mpirun also the variables that keep FQDNs).
class Pod {
 public:
  Pod() : root_(MakeTempDir()) {
    for (const char* dir : {"/etc", "/home", "/run", "/bin", "/log"}) {
      mkdir((root_ + dir).c_str(), 0755);
    }
    WriteFile(root_ + "/etc/ssh-privatekey", "PRIVATE KEY\n");
    const std::string log =
        "for a in \"$@\"; do printf '%s\\n' \"$a\"; done >> " + root_ + "/log/";
    Tool("ssh", log + "ssh\n");
    Tool("mpirun", log + "mpirun\necho \"$OMPI_MCA_orte_keep_fqdn_hostnames" +
                       " $PRTE_MCA_prte_keep_fqdn_hostnames\" > " + root_ +
                       "/log/fqdn\n");
    Tool("trtllm-llmapi-launch", "exit 0\n");
    // -y prints the public key; -f PATH otherwise makes a host key pair,
    // failing as ssh-keygen does without a terminal when PATH exists.
    Tool("ssh-keygen", log +
                           "ssh-keygen\n"
                           "if [ \"$1\" = -y ]; then echo 'ssh-ed25519 PUB'; "
                           "exit 0; fi\n"
                           "while [ \"$1\" != -f ]; do shift; done\n"
                           "[ -e \"$2\" ] && { echo \"$2 already exists\" >&2; "
                           "exit 1; }\n"
                           "echo host > \"$2\"; echo host.pub > \"$2.pub\"\n");
    Tool("sshd", log + "sshd\n");
    // The only other programs the scripts run; PATH holds nothing else, so
    // that a tool removed here is missing whatever this machine has.
    for (const char* tool : {"mkdir", "cp", "chmod", "rm", "sleep"}) {
      for (const char* dir : {"/usr/bin/", "/bin/"}) {
        const std::string path = std::string(dir) + tool;
        if (access(path.c_str(), X_OK) == 0) {
          symlink(path.c_str(), (root_ + "/bin/" + tool).c_str());
          break;
        }
      }
    }
  }

  ~Pod() { std::system(("rm -rf " + ShellQuote(root_)).c_str()); }
  Pod(const Pod&) = delete;
  Pod& operator=(const Pod&) = delete;

  const std::string& root() const { return root_; }

  // Runs `script` with the pod's paths moved under root(), as a pod of
  // group size 3 with `env` added; its exit status and stderr.
  int Run(const std::string& script, const std::string& env,
          std::string* err) const {
    std::string s = Replace(script, "/etc/tune-ssh", root_ + "/etc");
    s = Replace(s, "/usr/sbin/sshd", root_ + "/bin/sshd");
    s = Replace(s, "/run/sshd", root_ + "/run/sshd");
    WriteFile(root_ + "/script.sh", s);
    // A script that waits forever fails the test instead of hanging it.
    const std::string cmd =
        "timeout -k 5 60 env -i HOME=" + root_ + "/home PATH=" + root_ +
        "/bin LD_LIBRARY_PATH=/opt/lib LWS_LEADER_ADDRESS=" + kLeader +
        " LWS_GROUP_SIZE=3 " + env + " /bin/sh " + root_ + "/script.sh 2> " +
        root_ + "/stderr";
    const int status = std::system(cmd.c_str());
    *err = ReadFile(root_ + "/stderr");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::vector<std::string> Log(const std::string& tool) const {
    return Lines(ReadFile(root_ + "/log/" + tool));
  }
  std::string Home(const std::string& file) const {
    return ReadFile(root_ + "/home/.ssh/" + file);
  }
  void Remove(const std::string& tool) const {
    std::remove((root_ + "/bin/" + tool).c_str());
  }

 private:
  void Tool(const std::string& name, const std::string& body) const {
    const std::string path = root_ + "/bin/" + name;
    WriteFile(path, "#!/bin/sh\n" + body);
    chmod(path.c_str(), 0755);
  }

  std::string root_;
};

TEST(TrtllmOverNodes, EachReplicaIsAGroupMountingTheSshKey) {
  const auto yaml = ServingDeployment(Spec());
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  // The file opens with how to create the Secret its pods mount.
  EXPECT_EQ(yaml.value().rfind(
                "# TensorRT-LLM's workers over several nodes start their ranks "
                "with mpirun over SSH.\n# Before applying this file, create "
                "the Secret tune-serve-llama3-405b-ssh with a key of your "
                "own:\n#   " +
                    ServingSshSecretCommand(kName, "inference") + "\n",
                0),
            0u);
  const std::vector<YAML::Node> docs = Documents(yaml.value());
  ASSERT_EQ(docs.size(), 3u) << yaml.value();
  EXPECT_EQ(docs[0]["kind"].as<std::string>(), "ConfigMap");
  const YAML::Node& lws = docs[1];
  EXPECT_EQ(lws["kind"].as<std::string>(), "LeaderWorkerSet");
  EXPECT_EQ(lws["metadata"]["name"].as<std::string>(),
            std::string(kName) + "-lws");
  EXPECT_EQ(lws["spec"]["replicas"].as<int64_t>(), 2);
  const YAML::Node t = lws["spec"]["leaderWorkerTemplate"];
  EXPECT_EQ(t["size"].as<int64_t>(), 3);
  for (const char* role : {"leaderTemplate", "workerTemplate"}) {
    const YAML::Node pod = t[role]["spec"];
    const YAML::Node c = Container(t[role]);
    EXPECT_EQ(Gpus(c), 8);
    EXPECT_EQ(c["command"].as<std::vector<std::string>>(),
              (std::vector<std::string>{"sh", "-c"}));
    EXPECT_EQ(c["volumeMounts"][2]["mountPath"].as<std::string>(),
              "/etc/tune-ssh");
    EXPECT_TRUE(c["volumeMounts"][2]["readOnly"].as<bool>());
    EXPECT_EQ(pod["volumes"][2]["secret"]["secretName"].as<std::string>(),
              "tune-serve-llama3-405b-ssh");
    EXPECT_EQ(pod["volumes"][2]["secret"]["defaultMode"].as<int>(), 0400);
    EXPECT_EQ(pod["volumes"][1]["configMap"]["name"].as<std::string>(),
              std::string(kName) + "-options");
  }
  // The leader serves HTTP and is what the Service selects.
  EXPECT_TRUE(Container(t["leaderTemplate"])["readinessProbe"]);
  EXPECT_FALSE(Container(t["workerTemplate"])["readinessProbe"]);
  EXPECT_EQ(docs[2]["spec"]["selector"]["role"].as<std::string>(), "leader");
  // Kubernetes expands $(NAME) in args: the scripts hold none.
  const Scripts s = GroupScripts(yaml.value());
  for (const std::string& script : {s.leader, s.worker}) {
    for (size_t at = script.find("$("); at != std::string::npos;
         at = script.find("$(", at + 1)) {
      EXPECT_EQ(script[at + 2], '(') << script;
    }
  }
  EXPECT_STREQ(ServingWorkloadKind(24, 8), "LeaderWorkerSet");
  EXPECT_TRUE(
      ServingNeedsSshSecret(ServingManifestEngine::kTensorRtLlm, 24, 8));
  EXPECT_FALSE(
      ServingNeedsSshSecret(ServingManifestEngine::kTensorRtLlm, 8, 8));
  EXPECT_FALSE(ServingNeedsSshSecret(ServingManifestEngine::kSglang, 24, 8));
}

TEST(TrtllmOverNodes, SecretCommandNamesTheNamespace) {
  EXPECT_EQ(ServingSshSecretCommand("tune-serve-x", ""),
            "d=\"$(mktemp -d)\" && ssh-keygen -q -t ed25519 -N '' -f "
            "\"$d/key\" && kubectl create secret generic tune-serve-x-ssh "
            "--type=kubernetes.io/ssh-auth "
            "--from-file=ssh-privatekey=\"$d/key\"; rm -rf \"$d\"");
  EXPECT_NE(ServingSshSecretCommand("tune-serve-x", "inference")
                .find("\" --namespace inference; rm -rf"),
            std::string::npos);
  // Single-node TensorRT-LLM plans need no Secret and say nothing of it.
  ServingManifestSpec one = Spec();
  one.gpus_per_replica = 8;
  one.command = "trtllm-serve m --tp_size 8";
  const auto yaml = ServingDeployment(one);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  EXPECT_EQ(yaml.value().find("ssh"), std::string::npos);
}

TEST(TrtllmOverNodes, LeaderWaitsForEachWorkerThenRunsMpirun) {
  const Scripts s = GroupScripts(ServingDeployment(Spec()).value());
  const Pod pod;
  std::string err;
  ASSERT_EQ(pod.Run(s.leader, "", &err), 0) << err;
  // It reached both workers over SSH, by their LWS names.
  const std::string domain = "tune-serve-llama3-405b-lws.inference";
  const std::string worker1 = "tune-serve-llama3-405b-lws-0-1." + domain;
  const std::string worker2 = "tune-serve-llama3-405b-lws-0-2." + domain;
  EXPECT_EQ(pod.Log("ssh"), (std::vector<std::string>{
                                "-o", "ConnectTimeout=5", worker1, "true", "-o",
                                "ConnectTimeout=5", worker2, "true"}));
  EXPECT_EQ(pod.Log("mpirun"),
            (std::vector<std::string>{
                "--allow-run-as-root",
                "-np",
                "24",
                "-H",
                std::string(kLeader) + ":8," + worker1 + ":8," + worker2 + ":8",
                "--mca",
                "pml",
                "ob1",
                "--mca",
                "btl",
                "tcp,self",
                "-x",
                "PATH",
                "-x",
                "LD_LIBRARY_PATH",
                "trtllm-llmapi-launch",
                "trtllm-serve",
                "meta-llama/Llama-3.1-405B",
                "--tp_size",
                "8",
                "--pp_size",
                "3",
                "--max_batch_size",
                "64",
                "--extra_llm_api_options",
                "/etc/tune-serve/extra_llm_api_options."
                "yaml",
                "--host",
                "0.0.0.0",
                "--port",
                "8000"}));
  EXPECT_EQ(ReadFile(pod.root() + "/log/fqdn"), "1 1\n");
  // The client's key and configuration.
  EXPECT_EQ(pod.Home("tune-ssh-key"), "PRIVATE KEY\n");
  struct stat key;
  ASSERT_EQ(stat((pod.root() + "/home/.ssh/tune-ssh-key").c_str(), &key), 0);
  EXPECT_EQ(key.st_mode & 0777, 0600u);
  EXPECT_EQ(pod.Home("config"),
            "Host *\n  Port 2222\n  IdentityFile ~/.ssh/tune-ssh-key\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
            "  LogLevel ERROR\n");
  // The Hugging Face token reaches the ranks when the pod has one.
  const Pod with_token;
  ASSERT_EQ(with_token.Run(s.leader, "HF_TOKEN=secret", &err), 0) << err;
  const std::vector<std::string> words = with_token.Log("mpirun");
  ASSERT_GE(words.size(), 17u);
  EXPECT_EQ(words[15], "-x");
  EXPECT_EQ(words[16], "HF_TOKEN");
}

TEST(TrtllmOverNodes, WorkerRunsSshdWithTheGroupsKey) {
  const Scripts s = GroupScripts(ServingDeployment(Spec()).value());
  const Pod pod;
  std::string err;
  ASSERT_EQ(pod.Run(s.worker, "", &err), 0) << err;
  const std::string ssh = pod.root() + "/home/.ssh";
  EXPECT_EQ(pod.Log("sshd"), (std::vector<std::string>{
                                 "-D", "-e", "-f", ssh + "/tune-sshd-config"}));
  EXPECT_EQ(pod.Home("authorized_keys"), "ssh-ed25519 PUB\n");
  EXPECT_EQ(pod.Home("tune-ssh-host-key"), "host\n");
  EXPECT_EQ(pod.Home("tune-sshd-config"),
            "Port 2222\nHostKey " + ssh + "/tune-ssh-host-key\nPidFile " + ssh +
                "/tune-sshd.pid\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nPermitUserEnvironment yes\n");
  // mpirun's sessions get the container's paths.
  EXPECT_EQ(pod.Home("environment"), "PATH=" + pod.root() +
                                         "/bin\n"
                                         "LD_LIBRARY_PATH=/opt/lib\n");
  // A restarted container makes a new host key instead of asking.
  const Pod again;
  ASSERT_EQ(again.Run(s.worker, "", &err), 0) << err;
  ASSERT_EQ(again.Run(s.worker, "", &err), 0) << err;
}

TEST(TrtllmOverNodes, ImageWithoutATool) {
  const Scripts s = GroupScripts(ServingDeployment(Spec()).value());
  std::string err;
  const Pod no_sshd;
  no_sshd.Remove("sshd");
  EXPECT_EQ(no_sshd.Run(s.worker, "", &err), 1);
  EXPECT_EQ(err, "tune serve: this image has no " + no_sshd.root() +
                     "/bin/sshd, through which mpirun starts TensorRT-LLM's "
                     "ranks on several nodes; use an image with "
                     "openssh-server\n");
  const Pod no_mpirun;
  no_mpirun.Remove("mpirun");
  EXPECT_EQ(no_mpirun.Run(s.leader, "", &err), 1);
  EXPECT_EQ(err,
            "tune serve: this image has no mpirun, which TensorRT-LLM over "
            "several nodes needs\n");
  EXPECT_TRUE(no_mpirun.Log("ssh").empty()) << "it stops before waiting";
}

TEST(TrtllmOverNodes, HostileCheckpointIsOneWord) {
  ServingManifestSpec spec = Spec();
  spec.command =
      "trtllm-serve 'a\"b $(touch pwned) `id`'\"'\"'x' --tp_size 8 "
      "--pp_size 3";
  const Scripts s = GroupScripts(ServingDeployment(spec).value());
  const Pod pod;
  std::string err;
  ASSERT_EQ(pod.Run(s.leader, "", &err), 0) << err;
  const std::vector<std::string> words = pod.Log("mpirun");
  ASSERT_GE(words.size(), 18u);
  EXPECT_EQ(words[17], "a\"b $(touch pwned) `id`'x");
  struct stat st;
  EXPECT_NE(stat((pod.root() + "/pwned").c_str(), &st), 0);
  EXPECT_NE(stat("pwned", &st), 0);
}

TEST(TrtllmOverNodes, DisaggregatedServerListsGroupLeaders) {
  // Prefill on 8-GPU workers (StatefulSet), decode over 2 nodes (LWS): the
  // disaggregated server lists each decode group's leader.
  ServingDisaggregatedSpec d;
  d.name = "tune-serve-deepseek-v3";
  d.engine = ServingManifestEngine::kTensorRtLlm;
  d.image = "nvcr.io/nvidia/tensorrt-llm/release:1.0.0";
  const std::string kv =
      "enable_attention_dp: true\ncache_transceiver_config:\n  backend: "
      "DEFAULT\n";
  d.prefill = {"trtllm-serve m --tp_size 8 --ep_size 8", 2, 8,
               "disable_overlap_scheduler: true\n" + kv};
  d.decode = {"trtllm-serve m --tp_size 16 --ep_size 16", 2, 16, kv};
  const auto yaml = ServingDisaggregatedDeployment(d);
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  EXPECT_EQ(
      yaml.value().rfind("# TensorRT-LLM's workers over several nodes", 0), 0u);
  std::vector<std::string> kinds;
  std::string config;
  for (const YAML::Node& doc : Documents(yaml.value())) {
    kinds.push_back(doc["kind"].as<std::string>() + " " +
                    doc["metadata"]["name"].as<std::string>());
    if (doc["data"] && doc["data"]["disagg_config.yaml"]) {
      config = doc["data"]["disagg_config.yaml"].as<std::string>();
    }
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "ConfigMap tune-serve-deepseek-v3-prefill-options",
                       "StatefulSet tune-serve-deepseek-v3-prefill",
                       "Service tune-serve-deepseek-v3-prefill",
                       "Service tune-serve-deepseek-v3-prefill-pods",
                       "ConfigMap tune-serve-deepseek-v3-decode-options",
                       "LeaderWorkerSet tune-serve-deepseek-v3-decode-lws",
                       "Service tune-serve-deepseek-v3-decode",
                       "ConfigMap tune-serve-deepseek-v3-router-config",
                       "Deployment tune-serve-deepseek-v3-router",
                       "Service tune-serve-deepseek-v3"}));
  const YAML::Node c = YAML::Load(config);
  EXPECT_EQ(c["context_servers"]["urls"].as<std::vector<std::string>>(),
            (std::vector<std::string>{
                "tune-serve-deepseek-v3-prefill-0.tune-serve-deepseek-v3-"
                "prefill-pods:8000",
                "tune-serve-deepseek-v3-prefill-1.tune-serve-deepseek-v3-"
                "prefill-pods:8000"}));
  EXPECT_EQ(c["generation_servers"]["urls"].as<std::vector<std::string>>(),
            (std::vector<std::string>{
                "tune-serve-deepseek-v3-decode-lws-0.tune-serve-deepseek-v3-"
                "decode-lws:8000",
                "tune-serve-deepseek-v3-decode-lws-1.tune-serve-deepseek-v3-"
                "decode-lws:8000"}));
  // Both roles' pods would mount the one Secret; here only the decode's.
  EXPECT_NE(yaml.value().find("secretName: tune-serve-deepseek-v3-ssh"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
