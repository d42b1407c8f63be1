#include "engine/cuda/comm/staged_communicator.h"

#include <algorithm>
#include <limits>
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
// A failed copy leaves NaNs in host_in_: the caller still enters the host
// collective its peers wait in (else they wait forever), then returns the
// error; the peers' results are NaN, which the step's finiteness check
// reports if they get that far.
Status StagedCommunicator::Download(const float* data, int64_t count,
                                    Stream stream) {
  host_in_.resize(static_cast<size_t>(count));
  Status status = CopyDeviceToHostAsync(host_in_.data(), data,
                                        Bytes(count, sizeof(float)), stream);
  if (status.ok()) {
    status = SynchronizeStream(stream, "staged device to host copy");
  }
  if (!status.ok()) Poison();
  return status;
}

Status StagedCommunicator::Download(const Bf16* data, int64_t count,
                                    Stream stream) {
  host_bf16_.resize(static_cast<size_t>(count));
  host_in_.resize(static_cast<size_t>(count));
  Status status = CopyDeviceToHostAsync(host_bf16_.data(), data,
                                        Bytes(count, sizeof(Bf16)), stream);
  if (status.ok()) {
    status = SynchronizeStream(stream, "staged device to host copy");
  }
  if (!status.ok()) {
    Poison();
    return status;
  }
  for (int64_t i = 0; i < count; ++i) host_in_[i] = Bf16ToFloat(host_bf16_[i]);
  return Status::Ok();
}

void StagedCommunicator::Poison() {
  std::fill(host_in_.begin(), host_in_.end(),
            std::numeric_limits<float>::quiet_NaN());
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
  const Status downloaded = Download(data, count, stream);
  host_op(host_in_.data(), count);  // entered even after a failed download
  MESHTUNE_RETURN_IF_ERROR(downloaded);
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
  const Status downloaded = Download(in, count, stream);
  host_out_.resize(static_cast<size_t>(count) * size());
  group_->AllGather(host_in_.data(), host_out_.data(), count);
  MESHTUNE_RETURN_IF_ERROR(downloaded);
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
  const Status downloaded = Download(in, count * size(), stream);
  host_out_.resize(static_cast<size_t>(count));
  group_->ReduceScatterSum(host_in_.data(), host_out_.data(), count);
  MESHTUNE_RETURN_IF_ERROR(downloaded);
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
template <typename T>
Status StagedCommunicator::SendTo(const T* data, int64_t count, int peer,
                                  Stream stream) {
  MESHTUNE_CHECK(count >= 0);
  MESHTUNE_RETURN_IF_ERROR(CheckPeer(peer, "send"));
  const Status downloaded = Download(data, count, stream);
  group_->Send(host_in_.data(), count, peer);  // the peer's Recv waits for it
  return downloaded;
}

template <typename T>
Status StagedCommunicator::RecvFrom(T* data, int64_t count, int peer,
                                    Stream stream) {
  MESHTUNE_CHECK(count >= 0);
  MESHTUNE_RETURN_IF_ERROR(CheckPeer(peer, "recv"));
  host_out_.resize(static_cast<size_t>(count));
  group_->Recv(host_out_.data(), count, peer);
  return Upload(host_out_.data(), data, count, stream);
}

Status StagedCommunicator::Send(const Bf16* data, int64_t count, int peer,
                                Stream stream) {
  return SendTo(data, count, peer, stream);
}

Status StagedCommunicator::Recv(Bf16* data, int64_t count, int peer,
                                Stream stream) {
  return RecvFrom(data, count, peer, stream);
}

Status StagedCommunicator::Send(const float* data, int64_t count, int peer,
                                Stream stream) {
  return SendTo(data, count, peer, stream);
}

Status StagedCommunicator::Recv(float* data, int64_t count, int peer,
                                Stream stream) {
  return RecvFrom(data, count, peer, stream);
}

// One host all-to-all of the widened rows; a group of one copies.
Status StagedCommunicator::AllToAllV(const Bf16* in,
                                     const std::vector<int64_t>& send_counts,
                                     Bf16* out,
                                     const std::vector<int64_t>& recv_counts,
                                     Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(
      CheckAllToAllCounts(send_counts, recv_counts, size(), name()));
  int64_t sent = 0, received = 0;
  for (int r = 0; r < size(); ++r) {
    sent += send_counts[r];
    received += recv_counts[r];
  }
  if (size() == 1) {
    if (sent == 0) return Status::Ok();
    return CopyDeviceToDevice(out, in, Bytes(sent, sizeof(Bf16)), stream);
  }
  const Status downloaded = Download(in, sent, stream);
  host_out_.resize(static_cast<size_t>(received));
  group_->AllToAllV(host_in_.data(), send_counts, host_out_.data(),
                    recv_counts);
  MESHTUNE_RETURN_IF_ERROR(downloaded);
  return Upload(host_out_.data(), out, received, stream);
}

}  // namespace meshtune::engine::cuda
