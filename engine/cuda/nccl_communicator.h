// NCCL collectives on device buffers for the CUDA backend: one
// NcclCommunicator per process group of the rank grid (tp, cp, ep, dp, pp,
// as engine/process_groups.h builds them on the host), bootstrapped through
// that group's host Communicator (MPI across processes, in-process in
// tests): rank 0 of the group creates the ncclUniqueId and broadcasts its
// 128 bytes, then every member calls ncclCommInitRank. A group of one
// needs no bootstrap traffic at all.
//
// Collectives are asynchronous on the stream given (nullptr = default
// stream) and come as the engine's forward/backward pairs need them:
// all-reduce (sum, max), all-gather, reduce-scatter, send/recv, for bf16
// activations and fp32 gradients. Errors come back as Status with NCCL's
// message (ncclGetErrorString / ncclGetLastError).
#ifndef MESHTUNE_ENGINE_CUDA_NCCL_COMMUNICATOR_H_
#define MESHTUNE_ENGINE_CUDA_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "engine/communicator.h"
#include "engine/cuda/bf16.h"
#include "engine/cuda/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class NcclCommunicator {
 public:
  // Collective over `group` (every member calls it, with its GPU current).
  // `group` is used only during the call.
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      Communicator* group);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }

  // In place: data[count] = Σ_ranks data[count].
  Status AllReduceSum(float* data, int64_t count, Stream stream);
  Status AllReduceSum(Bf16* data, int64_t count, Stream stream);
  Status AllReduceMax(float* data, int64_t count, Stream stream);
  // out[size·count] rank-major (as Communicator::AllGather).
  Status AllGather(const Bf16* in, Bf16* out, int64_t count, Stream stream);
  // in[size·count] -> out[count] = Σ_ranks in[rank()·count ..].
  Status ReduceScatterSum(const Bf16* in, Bf16* out, int64_t count,
                          Stream stream);
  Status ReduceScatterSum(const float* in, float* out, int64_t count,
                          Stream stream);
  // Point to point (pipeline stages); `peer` is a rank of this group.
  Status Send(const Bf16* data, int64_t count, int peer, Stream stream);
  Status Recv(Bf16* data, int64_t count, int peer, Stream stream);

 private:
  struct Impl;
  NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size,
                   std::string name);
  std::unique_ptr<Impl> impl_;
  int rank_, size_;
  std::string name_;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_NCCL_COMMUNICATOR_H_
