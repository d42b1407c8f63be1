#include "engine/cuda/comm/staged_communicator.h"

#include <string>

namespace meshtune::engine::cuda {
namespace {

size_t Bytes(int64_t count, size_t element_bytes) {
  return static_cast<size_t>(count) * element_bytes;
}

}  // namespace

StagedCommunicator::StagedCommunicator(Communicator* group)
    : DeviceCommunicator(group->rank(), group->size(), group->name()),
      group_(group) {}

// The device -> host copy is enqueued on `stream`, so it reads the data
// after the stream's earlier work; synchronizing the stream (not the
// device) waits for just that, which is what lets several threads drive
// one GPU, each blocked in the host collective in turn, without waiting
// for each other's kernels.
Status StagedCommunicator::Download(const float* data, int64_t count,
                                    Stream stream) {
  host_in_.resize(static_cast<size_t>(count));
  MESHTUNE_RETURN_IF_ERROR(CopyDeviceToHostAsync(
      host_in_.data(), data, Bytes(count, sizeof(float)), stream));
  return SynchronizeStream(stream, "staged device to host copy");
}

Status StagedCommunicator::Download(const Bf16* data, int64_t count,
                                    Stream stream) {
  host_bf16_.resize(static_cast<size_t>(count));
  MESHTUNE_RETURN_IF_ERROR(CopyDeviceToHostAsync(
      host_bf16_.data(), data, Bytes(count, sizeof(Bf16)), stream));
  MESHTUNE_RETURN_IF_ERROR(
      SynchronizeStream(stream, "staged device to host copy"));
  host_in_.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) host_in_[i] = Bf16ToFloat(host_bf16_[i]);
  return Status::Ok();
}

// Synchronizing after the host -> device copy keeps the staging buffer
// alive until the copy has read it (pageable memory may be copied after
// cudaMemcpyAsync returns) and makes the result visible to every stream.
Status StagedCommunicator::Upload(const float* host, float* data, int64_t count,
                                  Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(
      CopyHostToDeviceAsync(data, host, Bytes(count, sizeof(float)), stream));
  return SynchronizeStream(stream, "staged host to device copy");
}

Status StagedCommunicator::Upload(const float* host, Bf16* data, int64_t count,
                                  Stream stream) {
  host_bf16_.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) host_bf16_[i] = FloatToBf16(host[i]);
  MESHTUNE_RETURN_IF_ERROR(CopyHostToDeviceAsync(
      data, host_bf16_.data(), Bytes(count, sizeof(Bf16)), stream));
  return SynchronizeStream(stream, "staged host to device copy");
}

Status StagedCommunicator::CheckPeer(int peer, const char* op) const {
  if (peer == rank()) {
    return Status::InvalidArgument(
        std::string("staged ") + op + " of rank " + std::to_string(rank()) +
            " to itself in group '" + name() + "'",
        "point-to-point transfers need two different ranks of the group; "
        "keep the data on the device instead");
  }
  if (peer < 0 || peer >= size()) {
    return Status::InvalidArgument(
        std::string("staged ") + op + " with peer " + std::to_string(peer) +
            " outside group '" + name() + "' of " + std::to_string(size()) +
            " ranks",
        "peer is a rank of this group: 0 to " + std::to_string(size() - 1));
  }
  return Status::Ok();
}

template <typename T, typename HostOp>
Status StagedCommunicator::AllReduce(T* data, int64_t count, Stream stream,
                                     HostOp host_op) {
  MESHTUNE_CHECK(count >= 0);
  if (size() == 1) return Status::Ok();
  MESHTUNE_RETURN_IF_ERROR(Download(data, count, stream));
  host_op(host_in_.data(), count);
  return Upload(host_in_.data(), data, count, stream);
}

template <typename T>
Status StagedCommunicator::Gather(const T* in, T* out, int64_t count,
                                  Stream stream) {
  MESHTUNE_CHECK(count >= 0);
  if (size() == 1) {
    if (in == out) return Status::Ok();
    return CopyDeviceToDevice(out, in, Bytes(count, sizeof(T)), stream);
  }
  MESHTUNE_RETURN_IF_ERROR(Download(in, count, stream));
  host_out_.resize(static_cast<size_t>(count) * size());
  group_->AllGather(host_in_.data(), host_out_.data(), count);
  return Upload(host_out_.data(), out, count * size(), stream);
}

template <typename T>
Status StagedCommunicator::Scatter(const T* in, T* out, int64_t count,
                                   Stream stream) {
  MESHTUNE_CHECK(count >= 0);
  if (size() == 1) {
    if (in == out) return Status::Ok();
    return CopyDeviceToDevice(out, in, Bytes(count, sizeof(T)), stream);
  }
  MESHTUNE_RETURN_IF_ERROR(Download(in, count * size(), stream));
  host_out_.resize(static_cast<size_t>(count));
  group_->ReduceScatterSum(host_in_.data(), host_out_.data(), count);
  return Upload(host_out_.data(), out, count, stream);
}

Status StagedCommunicator::AllReduceSum(float* data, int64_t count,
                                        Stream stream) {
  return AllReduce(data, count, stream,
                   [this](float* x, int64_t c) { group_->AllReduceSum(x, c); });
}

Status StagedCommunicator::AllReduceSum(Bf16* data, int64_t count,
                                        Stream stream) {
  return AllReduce(data, count, stream,
                   [this](float* x, int64_t c) { group_->AllReduceSum(x, c); });
}

Status StagedCommunicator::AllReduceMax(float* data, int64_t count,
                                        Stream stream) {
  return AllReduce(data, count, stream,
                   [this](float* x, int64_t c) { group_->AllReduceMax(x, c); });
}

Status StagedCommunicator::AllGather(const Bf16* in, Bf16* out, int64_t count,
                                     Stream stream) {
  return Gather(in, out, count, stream);
}

Status StagedCommunicator::AllGather(const float* in, float* out, int64_t count,
                                     Stream stream) {
  return Gather(in, out, count, stream);
}

Status StagedCommunicator::ReduceScatterSum(const Bf16* in, Bf16* out,
                                            int64_t count, Stream stream) {
  return Scatter(in, out, count, stream);
}

Status StagedCommunicator::ReduceScatterSum(const float* in, float* out,
                                            int64_t count, Stream stream) {
  return Scatter(in, out, count, stream);
}

// The host Send is buffered (it returns once the data is copied), so a
// staged Send never waits for its Recv: GroupStart/GroupEnd need not defer
// anything here.
Status StagedCommunicator::Send(const Bf16* data, int64_t count, int peer,
                                Stream stream) {
  MESHTUNE_CHECK(count >= 0);
  MESHTUNE_RETURN_IF_ERROR(CheckPeer(peer, "send"));
  MESHTUNE_RETURN_IF_ERROR(Download(data, count, stream));
  group_->Send(host_in_.data(), count, peer);
  return Status::Ok();
}

Status StagedCommunicator::Recv(Bf16* data, int64_t count, int peer,
                                Stream stream) {
  MESHTUNE_CHECK(count >= 0);
  MESHTUNE_RETURN_IF_ERROR(CheckPeer(peer, "recv"));
  host_out_.resize(static_cast<size_t>(count));
  group_->Recv(host_out_.data(), count, peer);
  return Upload(host_out_.data(), data, count, stream);
}

}  // namespace meshtune::engine::cuda
