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
  if (DeviceCount() == 0) {
    return Status::InvalidArgument(
        "no CUDA device: cudaGetDeviceCount found none",
        "run on a machine with an NVIDIA GPU and driver, or use the CPU "
        "backend (--backend cpu)");
  }
  // The 128-byte id travels as floats through the host communicator: MPI
  // and the in-process communicator copy bytes, so the bit pattern is kept.
  ncclUniqueId id;
  static_assert(sizeof(id) % sizeof(float) == 0, "ncclUniqueId size");
  std::vector<float> words(sizeof(id) / sizeof(float), 0.0f);
  if (group->rank() == 0) {
    NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    std::memcpy(words.data(), &id, sizeof(id));
  }
  if (group->size() > 1) {
    group->Broadcast(words.data(), static_cast<int64_t>(words.size()), 0);
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
  return NcclStatus(
      ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32,
                    ncclSum, impl_->comm, ToCuda(stream)),
      "all_reduce");
}

Status NcclCommunicator::AllReduceSum(Bf16* data, int64_t count,
                                      Stream stream) {
  return NcclStatus(
      ncclAllReduce(data, data, static_cast<size_t>(count), ncclBfloat16,
                    ncclSum, impl_->comm, ToCuda(stream)),
      "all_reduce");
}

Status NcclCommunicator::AllReduceMax(float* data, int64_t count,
                                      Stream stream) {
  return NcclStatus(
      ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32,
                    ncclMax, impl_->comm, ToCuda(stream)),
      "all_reduce");
}

Status NcclCommunicator::AllGather(const Bf16* in, Bf16* out, int64_t count,
                                   Stream stream) {
  return NcclStatus(ncclAllGather(in, out, static_cast<size_t>(count),
                                  ncclBfloat16, impl_->comm, ToCuda(stream)),
                    "all_gather");
}

Status NcclCommunicator::AllGather(const float* in, float* out, int64_t count,
                                   Stream stream) {
  return NcclStatus(ncclAllGather(in, out, static_cast<size_t>(count),
                                  ncclFloat32, impl_->comm, ToCuda(stream)),
                    "all_gather");
}

Status NcclCommunicator::ReduceScatterSum(const Bf16* in, Bf16* out,
                                          int64_t count, Stream stream) {
  return NcclStatus(
      ncclReduceScatter(in, out, static_cast<size_t>(count), ncclBfloat16,
                        ncclSum, impl_->comm, ToCuda(stream)),
      "reduce_scatter");
}

Status NcclCommunicator::ReduceScatterSum(const float* in, float* out,
                                          int64_t count, Stream stream) {
  return NcclStatus(
      ncclReduceScatter(in, out, static_cast<size_t>(count), ncclFloat32,
                        ncclSum, impl_->comm, ToCuda(stream)),
      "reduce_scatter");
}

Status NcclCommunicator::Send(const Bf16* data, int64_t count, int peer,
                              Stream stream) {
  return NcclStatus(ncclSend(data, static_cast<size_t>(count), ncclBfloat16,
                             peer, impl_->comm, ToCuda(stream)),
                    "send");
}

Status NcclCommunicator::Recv(Bf16* data, int64_t count, int peer,
                              Stream stream) {
  return NcclStatus(ncclRecv(data, static_cast<size_t>(count), ncclBfloat16,
                             peer, impl_->comm, ToCuda(stream)),
                    "recv");
}

}  // namespace meshtune::engine::cuda
