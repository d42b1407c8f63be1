// NCCL collectives of the "cuda" backend (cuda_backend.h): all_reduce,
// all_gather, reduce_scatter, all_to_all (grouped send/recv, which every NCCL
// release has) and send_recv (a ring: rank r sends to r+1 and receives from
// r-1), over the first g local GPUs in one process.
//
// Sizes follow nccl-tests (src/*.cu): `bytes` is the all_reduce buffer, the
// all_gather output, the reduce_scatter input, each rank's all_to_all send
// buffer, the send_recv message. Data are fp32 (nccl-tests' default type), so
// sums of the small integers below are exact and the check is equality.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "profiler/cuda/cuda_backend.h"
#include "profiler/cuda/cuda_backend_impl.cuh"
#include "profiler/cuda/cuda_check.cuh"

namespace meshtune::profiler::cuda {
namespace {

// Per-rank send/receive buffers for one collective call.
struct RankBuffers {
  std::vector<DeviceBuffer> send, recv;
  int64_t send_elements = 0, recv_elements = 0;
};

// Element counts per rank: (send, recv) for `elements` = CollectiveElements.
void Counts(Collective op, int64_t elements, int64_t ranks, int64_t* send,
            int64_t* recv) {
  switch (op) {
    case Collective::kAllGather:  // elements = gathered output
      *send = elements / ranks;
      *recv = elements;
      return;
    case Collective::kReduceScatter:  // elements = scattered input
      *send = elements;
      *recv = elements / ranks;
      return;
    case Collective::kAllReduce:
    case Collective::kAllToAll:
    case Collective::kSendRecv:
      *send = elements;
      *recv = elements;
      return;
  }
}

// Enqueues one collective on every rank's stream.
void Launch(Collective op, const RankBuffers& buf,
            const std::vector<ncclComm_t>& comms,
            const std::vector<cudaStream_t>& streams) {
  const int n = static_cast<int>(comms.size());
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    const float* send = buf.send[r].as<float>();
    float* recv = buf.recv[r].as<float>();
    switch (op) {
      case Collective::kAllReduce:
        NCCL_CHECK(ncclAllReduce(send, recv, buf.send_elements, ncclFloat,
                                 ncclSum, comms[r], streams[r]));
        break;
      case Collective::kAllGather:
        NCCL_CHECK(ncclAllGather(send, recv, buf.send_elements, ncclFloat,
                                 comms[r], streams[r]));
        break;
      case Collective::kReduceScatter:
        NCCL_CHECK(ncclReduceScatter(send, recv, buf.recv_elements, ncclFloat,
                                     ncclSum, comms[r], streams[r]));
        break;
      case Collective::kAllToAll: {
        const int64_t chunk = buf.send_elements / n;
        for (int p = 0; p < n; ++p) {
          NCCL_CHECK(ncclSend(send + p * chunk, chunk, ncclFloat, p, comms[r],
                              streams[r]));
          NCCL_CHECK(ncclRecv(recv + p * chunk, chunk, ncclFloat, p, comms[r],
                              streams[r]));
        }
        break;
      }
      case Collective::kSendRecv:
        NCCL_CHECK(ncclSend(send, buf.send_elements, ncclFloat, (r + 1) % n,
                            comms[r], streams[r]));
        NCCL_CHECK(ncclRecv(recv, buf.recv_elements, ncclFloat, (r + n - 1) % n,
                            comms[r], streams[r]));
        break;
    }
  }
  NCCL_CHECK(ncclGroupEnd());
}

// Wrong elements in every rank's output, given rank r's input is all r+1:
// sums are n(n+1)/2, gathered chunk j is j+1, all_to_all chunk p came from
// rank p (p+1), the ring delivers rank r-1's value r.
int64_t CountErrors(Collective op, const RankBuffers& buf,
                    const std::vector<cudaStream_t>& streams) {
  const int64_t n = static_cast<int64_t>(buf.send.size());
  const float sum = static_cast<float>(n * (n + 1) / 2);
  int64_t errors = 0;
  for (int64_t r = 0; r < n; ++r) {
    CUDA_CHECK(cudaSetDevice(static_cast<int>(r)));
    const float* out = buf.recv[r].as<float>();
    switch (op) {
      case Collective::kAllReduce:
      case Collective::kReduceScatter:
        errors += CountNotEqual(out, buf.recv_elements, sum, streams[r]);
        break;
      case Collective::kAllGather:
      case Collective::kAllToAll: {
        const int64_t chunk = buf.recv_elements / n;
        for (int64_t j = 0; j < n; ++j) {
          errors += CountNotEqual(out + j * chunk, chunk,
                                  static_cast<float>(j + 1), streams[r]);
        }
        break;
      }
      case Collective::kSendRecv:
        errors +=
            CountNotEqual(out, buf.recv_elements,
                          static_cast<float>((r + n - 1) % n + 1), streams[r]);
        break;
    }
  }
  return errors;
}

StatusOr<RankBuffers> Prepare(Collective op, double bytes, int64_t n,
                              const std::vector<cudaStream_t>& streams) {
  RankBuffers buf;
  Counts(op, CollectiveElements(bytes, n), n, &buf.send_elements,
         &buf.recv_elements);
  const std::string what =
      std::string(search_spaces::CollectiveName(op)) + " of " +
      std::to_string(static_cast<int64_t>(bytes)) + " bytes";
  for (int r = 0; r < n; ++r) {
    auto send = DeviceBuffer::Allocate(r, buf.send_elements * sizeof(float),
                                       what + " (send buffer)");
    if (!send.ok()) return send.status();
    auto recv = DeviceBuffer::Allocate(r, buf.recv_elements * sizeof(float),
                                       what + " (receive buffer)");
    if (!recv.ok()) return recv.status();
    FillConstant(send.value().as<float>(), buf.send_elements,
                 static_cast<float>(r + 1), streams[r]);
    // A value no correct result has, so a collective that writes nothing is
    // caught by the check.
    FillConstant(recv.value().as<float>(), buf.recv_elements, -1.f, streams[r]);
    buf.send.push_back(std::move(send).value());
    buf.recv.push_back(std::move(recv).value());
  }
  return StatusOr<RankBuffers>(std::move(buf));
}

Status CheckGroup(int64_t group_size, int64_t max) {
  if (group_size < 1 || group_size > max) {
    return Status::InvalidArgument(
        "collective group of " + std::to_string(group_size) +
            " GPUs, but this machine has " + std::to_string(max),
        "use a group size between 1 and " + std::to_string(max));
  }
  return Status::Ok();
}

}  // namespace

const std::vector<ncclComm_t>& CudaBackend::Impl::Comms(int64_t group_size) {
  auto it = comms.find(group_size);
  if (it != comms.end()) return it->second;
  std::vector<ncclComm_t> created(group_size);
  std::vector<int> devices(group_size);
  for (int64_t d = 0; d < group_size; ++d) devices[d] = static_cast<int>(d);
  NCCL_CHECK(ncclCommInitAll(created.data(), static_cast<int>(group_size),
                             devices.data()));
  return comms.emplace(group_size, std::move(created)).first->second;
}

StatusOr<Sample> CudaBackend::TimeCollective(Collective op, double bytes,
                                             int64_t group_size, int warmup,
                                             int reps) {
  Status group = CheckGroup(group_size, impl_->device_count);
  if (!group.ok()) return group;
  if (bytes < 1 || reps < 1 || warmup < 0) {
    return Status::InvalidArgument("collective needs bytes >= 1 and reps > 0",
                                   "check the sizes and --reps");
  }
  const std::vector<ncclComm_t>& comms = impl_->Comms(group_size);
  auto buf = Prepare(op, bytes, group_size, impl_->streams);
  if (!buf.ok()) return buf.status();
  Sample sample = impl_->TimeRepetitions(
      static_cast<int>(group_size),
      [&] { Launch(op, buf.value(), comms, impl_->streams); }, warmup, reps);
  // Every repetition rewrites the same output, so the last one is checked.
  const int64_t errors = CountErrors(op, buf.value(), impl_->streams);
  if (errors > 0) {
    return Status::Internal(
        "NCCL " + std::string(search_spaces::CollectiveName(op)) + " over " +
        std::to_string(group_size) + " GPUs at " +
        std::to_string(static_cast<int64_t>(bytes)) + " bytes gave " +
        std::to_string(errors) + " wrong elements");
  }
  return sample;
}

StatusOr<int64_t> CudaBackend::CountCollectiveErrors(Collective op,
                                                     double bytes,
                                                     int64_t group_size) {
  Status group = CheckGroup(group_size, impl_->device_count);
  if (!group.ok()) return group;
  const std::vector<ncclComm_t>& comms = impl_->Comms(group_size);
  auto buf = Prepare(op, bytes, group_size, impl_->streams);
  if (!buf.ok()) return buf.status();
  Launch(op, buf.value(), comms, impl_->streams);
  return CountErrors(op, buf.value(), impl_->streams);
}

}  // namespace meshtune::profiler::cuda
