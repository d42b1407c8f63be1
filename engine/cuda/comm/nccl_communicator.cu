#include <nccl.h>

#include <cstring>
#include <vector>

#include "engine/cuda/comm/nccl_communicator.h"
#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/runtime/vendor_status.cuh"

namespace meshtune::engine::cuda {
namespace {

#define NCCL_RETURN_IF_ERROR(expr) \
  MESHTUNE_RETURN_IF_ERROR(NcclStatus((expr), #expr))

// A call's own result, then the communicator's asynchronous error: NCCL
// reports a failed peer or network there (ncclCommGetAsyncError), not in
// the result of later calls, which would otherwise be queued behind a
// collective that never ends.
Status Checked(ncclComm_t comm, ncclResult_t result, const char* what) {
  MESHTUNE_RETURN_IF_ERROR(NcclStatus(result, what));
  ncclResult_t async = ncclSuccess;
  MESHTUNE_RETURN_IF_ERROR(
      NcclStatus(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError"));
  if (async == ncclSuccess || async == ncclInProgress) return Status::Ok();
  return Status::IoError(
      std::string("NCCL ") + what +
          ": the communicator failed earlier: " + ncclGetErrorString(async),
      "a peer rank died or the network failed; see the "
      "other ranks' errors (NCCL_DEBUG=WARN for more)");
}

}  // namespace

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  ~Impl() {
    if (comm != nullptr) ncclCommDestroy(comm);
  }
};

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl, int rank,
                                   int size, std::string name)
    : DeviceCommunicator(rank, size, std::move(name)), impl_(std::move(impl)) {}

NcclCommunicator::~NcclCommunicator() = default;

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    Communicator* group) {
  MESHTUNE_RETURN_IF_ERROR(RequireDevice());
  // The 128-byte id travels as floats through the host communicator: MPI
  // and the in-process communicator copy bytes, so the bit pattern is kept.
  ncclUniqueId id;
  static_assert(sizeof(id) % sizeof(float) == 0, "ncclUniqueId size");
  // One more word says whether rank 0 got an id: the others are already
  // waiting in the broadcast, so rank 0 sends it even when it failed.
  const size_t id_words = sizeof(id) / sizeof(float);
  std::vector<float> words(id_words + 1, 0.0f);
  Status id_status = Status::Ok();
  if (group->rank() == 0) {
    id_status = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (id_status.ok()) {
      std::memcpy(words.data(), &id, sizeof(id));
      words[id_words] = 1.0f;
    }
  }
  if (group->size() > 1) {
    group->Broadcast(words.data(), static_cast<int64_t>(words.size()), 0);
  }
  if (!id_status.ok()) return id_status;
  if (words[id_words] != 1.0f) {
    return Status::IoError("rank 0 of group '" + group->name() +
                               "' could not create the NCCL unique id",
                           "see rank 0's error; check NCCL's network setup "
                           "(NCCL_DEBUG=WARN)");
  }
  std::memcpy(&id, words.data(), sizeof(id));
  auto impl = std::make_unique<Impl>();
  NCCL_RETURN_IF_ERROR(
      ncclCommInitRank(&impl->comm, group->size(), id, group->rank()));
  return StatusOr<std::unique_ptr<NcclCommunicator>>(
      std::unique_ptr<NcclCommunicator>(new NcclCommunicator(
          std::move(impl), group->rank(), group->size(), group->name())));
}

Status NcclCommunicator::AllReduceSum(float* data, int64_t count,
                                      Stream stream) {
  return Checked(
      impl_->comm,
      ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32,
                    ncclSum, impl_->comm, ToCuda(stream)),
      "all_reduce");
}

Status NcclCommunicator::AllReduceSum(Bf16* data, int64_t count,
                                      Stream stream) {
  return Checked(
      impl_->comm,
      ncclAllReduce(data, data, static_cast<size_t>(count), ncclBfloat16,
                    ncclSum, impl_->comm, ToCuda(stream)),
      "all_reduce");
}

Status NcclCommunicator::AllReduceMax(float* data, int64_t count,
                                      Stream stream) {
  return Checked(
      impl_->comm,
      ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32,
                    ncclMax, impl_->comm, ToCuda(stream)),
      "all_reduce");
}

Status NcclCommunicator::AllGather(const Bf16* in, Bf16* out, int64_t count,
                                   Stream stream) {
  return Checked(impl_->comm,
                 ncclAllGather(in, out, static_cast<size_t>(count),
                               ncclBfloat16, impl_->comm, ToCuda(stream)),
                 "all_gather");
}

Status NcclCommunicator::AllGather(const float* in, float* out, int64_t count,
                                   Stream stream) {
  return Checked(impl_->comm,
                 ncclAllGather(in, out, static_cast<size_t>(count), ncclFloat32,
                               impl_->comm, ToCuda(stream)),
                 "all_gather");
}

Status NcclCommunicator::ReduceScatterSum(const Bf16* in, Bf16* out,
                                          int64_t count, Stream stream) {
  return Checked(
      impl_->comm,
      ncclReduceScatter(in, out, static_cast<size_t>(count), ncclBfloat16,
                        ncclSum, impl_->comm, ToCuda(stream)),
      "reduce_scatter");
}

Status NcclCommunicator::ReduceScatterSum(const float* in, float* out,
                                          int64_t count, Stream stream) {
  return Checked(
      impl_->comm,
      ncclReduceScatter(in, out, static_cast<size_t>(count), ncclFloat32,
                        ncclSum, impl_->comm, ToCuda(stream)),
      "reduce_scatter");
}

Status NcclCommunicator::Send(const Bf16* data, int64_t count, int peer,
                              Stream stream) {
  return Checked(impl_->comm,
                 ncclSend(data, static_cast<size_t>(count), ncclBfloat16, peer,
                          impl_->comm, ToCuda(stream)),
                 "send");
}

Status NcclCommunicator::Recv(Bf16* data, int64_t count, int peer,
                              Stream stream) {
  return Checked(impl_->comm,
                 ncclRecv(data, static_cast<size_t>(count), ncclBfloat16, peer,
                          impl_->comm, ToCuda(stream)),
                 "recv");
}

Status NcclCommunicator::Send(const float* data, int64_t count, int peer,
                              Stream stream) {
  return Checked(impl_->comm,
                 ncclSend(data, static_cast<size_t>(count), ncclFloat32, peer,
                          impl_->comm, ToCuda(stream)),
                 "send");
}

Status NcclCommunicator::Recv(float* data, int64_t count, int peer,
                              Stream stream) {
  return Checked(impl_->comm,
                 ncclRecv(data, static_cast<size_t>(count), ncclFloat32, peer,
                          impl_->comm, ToCuda(stream)),
                 "recv");
}

// Grouped sends and receives, one pair per peer with data (NCCL has no
// all-to-all-v; this is how its documentation builds one). Groups nest, so
// a caller's GroupStart/GroupEnd may surround it.
Status NcclCommunicator::AllToAllV(const Bf16* in,
                                   const std::vector<int64_t>& send_counts,
                                   Bf16* out,
                                   const std::vector<int64_t>& recv_counts,
                                   Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(
      CheckAllToAllCounts(send_counts, recv_counts, size(), name()));
  NCCL_RETURN_IF_ERROR(ncclGroupStart());
  Status status = Status::Ok();
  int64_t send_at = 0, recv_at = 0;
  for (int r = 0; r < size() && status.ok(); ++r) {
    if (send_counts[r] > 0) {
      status =
          Checked(impl_->comm,
                  ncclSend(in + send_at, static_cast<size_t>(send_counts[r]),
                           ncclBfloat16, r, impl_->comm, ToCuda(stream)),
                  "send (all_to_all)");
    }
    if (status.ok() && recv_counts[r] > 0) {
      status =
          Checked(impl_->comm,
                  ncclRecv(out + recv_at, static_cast<size_t>(recv_counts[r]),
                           ncclBfloat16, r, impl_->comm, ToCuda(stream)),
                  "recv (all_to_all)");
    }
    send_at += send_counts[r];
    recv_at += recv_counts[r];
  }
  const Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd (all_to_all)");
  MESHTUNE_RETURN_IF_ERROR(status);
  return end;
}

}  // namespace meshtune::engine::cuda
