// DeviceCommunicator: the collectives and point-to-point transfers the CUDA
// engine issues on device buffers, behind one small interface (as
// engine/comm/communicator.h is for host buffers). One per process group of the
// rank grid (tp, pp, dp, mp, embd as engine/process_groups.h builds them on
// the host), created collectively over that group's host Communicator.
//
// Two implementations:
// - NCCL (engine/cuda/comm/nccl_communicator.h): real runs, one GPU per rank.
// - Staged (engine/cuda/comm/staged_communicator.h): copies device data to the
//   host, runs the host Communicator's collective (MPI, or threads in one
//   process) and copies the result back. It exists because NCCL refuses two
//   ranks of one communicator on the same GPU ("Duplicate GPU detected"):
//   with it, every parallel layout of the CUDA engine runs and is tested
//   against the one-rank run on a machine with a single GPU. Slow (every
//   call synchronizes its stream), so it is chosen only when needed.
//
// Semantics (both implementations):
// - Calls are ordered on `stream` (nullptr = the legacy default stream):
//   a collective reads its input after the stream's earlier work and later
//   work sees its output. NCCL returns at once; staged returns when done.
// - Every member of the group makes the same calls in the same order.
// - bf16 reductions: NCCL sums in bf16 in its own order; staged sums in
//   fp32 in rank order and rounds once. Both are within the engine's bf16
//   tolerance, neither is bitwise equal to the other.
// - In place is allowed where NCCL allows it: AllGather with in ==
//   out + rank()·count, ReduceScatterSum with out == in + rank()·count.
// - Send/Recv match in order per (sender, receiver) pair. A Send may not
//   complete before its Recv is posted (NCCL), so a pipeline schedule must
//   post matching pairs together: calls between GroupStart() and
//   GroupEnd() progress together (ncclGroupStart/End; the staged
//   implementation's sends are buffered, so it needs no grouping). Within a
//   group, post every Send before any Recv.
#ifndef MESHTUNE_ENGINE_CUDA_COMM_DEVICE_COMMUNICATOR_H_
#define MESHTUNE_ENGINE_CUDA_COMM_DEVICE_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  DeviceCommunicator(const DeviceCommunicator&) = delete;
  DeviceCommunicator& operator=(const DeviceCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  // "nccl" or "staged" (logs, error messages, tests).
  virtual const char* kind() const = 0;

  // In place: data[count] = Σ_ranks data[count].
  virtual Status AllReduceSum(float* data, int64_t count, Stream stream) = 0;
  virtual Status AllReduceSum(Bf16* data, int64_t count, Stream stream) = 0;
  virtual Status AllReduceMax(float* data, int64_t count, Stream stream) = 0;
  // out[size·count] rank-major: block r = rank r's in[count].
  virtual Status AllGather(const Bf16* in, Bf16* out, int64_t count,
                           Stream stream) = 0;
  virtual Status AllGather(const float* in, float* out, int64_t count,
                           Stream stream) = 0;
  // in[size·count] -> out[count] = Σ_ranks in[rank()·count ..].
  virtual Status ReduceScatterSum(const Bf16* in, Bf16* out, int64_t count,
                                  Stream stream) = 0;
  virtual Status ReduceScatterSum(const float* in, float* out, int64_t count,
                                  Stream stream) = 0;
  // Point to point (pipeline stages); `peer` is a rank of this group.
  virtual Status Send(const Bf16* data, int64_t count, int peer,
                      Stream stream) = 0;
  virtual Status Recv(Bf16* data, int64_t count, int peer, Stream stream) = 0;
  // fp32 point to point (context parallelism's partial dK/dV, which the
  // ring accumulates in fp32), same rules.
  virtual Status Send(const float* data, int64_t count, int peer,
                      Stream stream) = 0;
  virtual Status Recv(float* data, int64_t count, int peer, Stream stream) = 0;
  // All-to-all with per-peer counts (the MoE token dispatcher, Megatron's
  // all_to_all with input/output split sizes): in holds send_counts[r]
  // elements for rank r, rank-major; out receives recv_counts[r] from rank
  // r, rank-major. Both vectors have size() entries, each >= 0, and every
  // rank's send_counts[q] equals rank q's recv_counts[rank()] (the caller
  // exchanged them). in and out must not overlap.
  virtual Status AllToAllV(const Bf16* in,
                           const std::vector<int64_t>& send_counts, Bf16* out,
                           const std::vector<int64_t>& recv_counts,
                           Stream stream) = 0;

 protected:
  DeviceCommunicator(int rank, int size, std::string name)
      : rank_(rank), size_(size), name_(std::move(name)) {}

 private:
  int rank_, size_;
  std::string name_;
};

// The checks both AllToAllV implementations make first: `size` entries in
// each vector, none negative. The error names the group and the fix.
Status CheckAllToAllCounts(const std::vector<int64_t>& send_counts,
                           const std::vector<int64_t>& recv_counts, int size,
                           const std::string& group);

// Brackets point-to-point calls that must progress together (see above).
// Groups do not nest across threads; each thread brackets its own calls.
Status GroupStart();
Status GroupEnd();

enum class DeviceCommKind { kNccl, kStaged };

// The kind MESHTUNE_CUDA_COMM names: "nccl" or "staged"; unset (nullptr),
// empty or "auto" return `automatic`. Anything else is an error naming the
// value and the accepted ones.
StatusOr<DeviceCommKind> ParseDeviceCommKind(const char* value,
                                             DeviceCommKind automatic);

// The automatic choice for a group whose members run on the devices named
// by `device_ids` (one per member, in rank order; a device id is the host
// name and the GPU's PCI bus id): staged when two members share a device
// (NCCL cannot run them), NCCL otherwise. One member (or none): staged,
// as CreateDeviceCommunicator gives a group of one.
DeviceCommKind ChooseDeviceCommKind(const std::vector<std::string>& device_ids);

// Collective over `world` (every rank calls it with its GPU current): true
// when two ranks of the whole world run on one device. Then every group
// must be staged, not only those whose own members share a GPU: the
// project issues NCCL calls on the legacy default stream, one per GPU and
// shared by the process's threads, so with more ranks than GPUs the NCCL
// kernels of two communicators can queue in one order on one GPU and in
// the other order on another, each waiting for a peer stuck behind the
// other (tp 2 · pp 2 as 4 thread ranks on 2 GPUs: the tp groups {0, 1} and
// {2, 3} both span GPUs 0 and 1). A rank that cannot name its device still
// takes part, so every rank returns the same error instead of waiting.
StatusOr<bool> WorldSharesDevices(Communicator* world);

// Collective over `group` (every member calls it with its GPU current):
// gathers the members' device ids over `group`, picks the kind
// (MESHTUNE_CUDA_COMM, else staged when `world_shares_devices`, as
// WorldSharesDevices tells for the whole world, else ChooseDeviceCommKind),
// and creates it. A group of one gets the staged kind (no NCCL communicator
// is needed: every collective is a copy or nothing). `group` must outlive a
// staged communicator (it carries the data); NCCL uses it only here.
StatusOr<std::unique_ptr<DeviceCommunicator>> CreateDeviceCommunicator(
    Communicator* group, bool world_shares_devices = false);

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_COMM_DEVICE_COMMUNICATOR_H_
