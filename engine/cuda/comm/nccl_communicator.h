// NCCL collectives on device buffers for the CUDA backend: the
// DeviceCommunicator (engine/cuda/comm/device_communicator.h) for groups whose
// ranks each have their own GPU. One NcclCommunicator per process group of
// the rank grid (tp, cp, ep, dp, pp, as engine/process_groups.h builds them
// on the host), bootstrapped through
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
#ifndef MESHTUNE_ENGINE_CUDA_COMM_NCCL_COMMUNICATOR_H_
#define MESHTUNE_ENGINE_CUDA_COMM_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class NcclCommunicator : public DeviceCommunicator {
 public:
  // Collective over `group` (every member calls it, with its GPU current).
  // `group` is used only during the call.
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      Communicator* group);
  ~NcclCommunicator() override;

  const char* kind() const override { return "nccl"; }

  Status AllReduceSum(float* data, int64_t count, Stream stream) override;
  Status AllReduceSum(Bf16* data, int64_t count, Stream stream) override;
  Status AllReduceMax(float* data, int64_t count, Stream stream) override;
  Status AllGather(const Bf16* in, Bf16* out, int64_t count,
                   Stream stream) override;
  Status AllGather(const float* in, float* out, int64_t count,
                   Stream stream) override;
  Status ReduceScatterSum(const Bf16* in, Bf16* out, int64_t count,
                          Stream stream) override;
  Status ReduceScatterSum(const float* in, float* out, int64_t count,
                          Stream stream) override;
  Status Send(const Bf16* data, int64_t count, int peer,
              Stream stream) override;
  Status Recv(Bf16* data, int64_t count, int peer, Stream stream) override;
  Status Send(const float* data, int64_t count, int peer,
              Stream stream) override;
  Status Recv(float* data, int64_t count, int peer, Stream stream) override;
  Status AllToAllV(const Bf16* in, const std::vector<int64_t>& send_counts,
                   Bf16* out, const std::vector<int64_t>& recv_counts,
                   Stream stream) override;

 private:
  struct Impl;
  NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size,
                   std::string name);
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_COMM_NCCL_COMMUNICATOR_H_
