// StagedCommunicator: the DeviceCommunicator
// (engine/cuda/comm/device_communicator.h) that carries device data through the
// host. Every call synchronizes its stream, copies the device input to a host
// buffer, runs the host Communicator's collective (MPI across processes,
// threads in one process) and copies the result back on the same stream before
// returning.
//
// It exists so that several ranks can share one GPU (NCCL refuses that):
// the parallel layouts of the CUDA engine run and are checked against the
// one-rank run on a single-GPU machine. It is slow by design and is picked
// only when NCCL cannot run (ChooseDeviceCommKind) or when asked for.
//
// Precision: the host communicator moves float32. bf16 data is widened to
// float exactly, summed in fp32 in rank order (the host communicator's
// order) and rounded to bf16 once, so a bf16 all-reduce is the correctly
// rounded sum of exactly summed inputs whenever fp32 holds the sum exactly.
// Send/Recv carry bf16 as float too (exact both ways).
//
// In place: AllGather with in == out + rank()·count and ReduceScatterSum
// with out == in + rank()·count work because the whole input reaches the
// host before any output is written.
//
// Groups of one never touch the host: all-reduces are no-ops, all-gather
// and reduce-scatter are one device-to-device copy on the stream (none in
// place), and Send/Recv (necessarily to itself) are an error Status.
#ifndef MESHTUNE_ENGINE_CUDA_COMM_STAGED_COMMUNICATOR_H_
#define MESHTUNE_ENGINE_CUDA_COMM_STAGED_COMMUNICATOR_H_

#include <cstdint>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class StagedCommunicator : public DeviceCommunicator {
 public:
  // `group` (not owned) carries the data and must outlive this; like any
  // host Communicator it is used by one thread at a time, so this
  // communicator is too.
  explicit StagedCommunicator(Communicator* group);

  const char* kind() const override { return "staged"; }

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
  // Errors: `peer` is this rank or not a rank of the group.
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
  // Device -> host_in_ (float), widening bf16; ordered after the stream's
  // earlier work and complete on return.
  Status Download(const float* data, int64_t count, Stream stream);
  Status Download(const Bf16* data, int64_t count, Stream stream);
  // host_in_ all NaN (after a failed Download).
  void Poison();
  // `host` (count floats) -> device, rounding to bf16 once; complete on
  // return, so later work on any stream sees it.
  Status Upload(const float* host, float* data, int64_t count, Stream stream);
  Status Upload(const float* host, Bf16* data, int64_t count, Stream stream);
  Status CheckPeer(int peer, const char* op) const;
  // The collectives' shared bodies, for float and bf16 device data:
  // AllReduce runs `host_op(host, count)` in place; Gather and Scatter the
  // host all-gather and reduce-scatter (size-1 groups: a device copy).
  template <typename T, typename HostOp>
  Status AllReduce(T* data, int64_t count, Stream stream, HostOp host_op);
  template <typename T>
  Status Gather(const T* in, T* out, int64_t count, Stream stream);
  template <typename T>
  Status Scatter(const T* in, T* out, int64_t count, Stream stream);
  // Send and Recv's bodies for bf16 and float device data.
  template <typename T>
  Status SendTo(const T* data, int64_t count, int peer, Stream stream);
  template <typename T>
  Status RecvFrom(T* data, int64_t count, int peer, Stream stream);

  Communicator* group_;
  // Staging buffers, reused across calls: the host collective's input and
  // output (float), and the bf16 bits on their way to or from the device.
  std::vector<float> host_in_, host_out_;
  std::vector<Bf16> host_bf16_;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_COMM_STAGED_COMMUNICATOR_H_
