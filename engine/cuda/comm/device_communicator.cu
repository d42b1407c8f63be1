// The kind choice and the factory of engine/cuda/comm/device_communicator.h,
// and GroupStart/GroupEnd (NCCL's group calls; the staged kind needs none, and
// calling them around staged calls is harmless).
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/comm/nccl_communicator.h"
#include "engine/cuda/comm/staged_communicator.h"
#include "engine/cuda/runtime/vendor_status.cuh"

namespace meshtune::engine::cuda {
namespace {

constexpr const char* kCommEnv = "MESHTUNE_CUDA_COMM";

// Device ids travel as fixed-size, zero-padded byte blocks packed in floats
// (the host communicators copy bytes, so the bit patterns survive, as with
// NcclCommunicator::Create's unique id). 256 bytes hold a host name
// (HOST_NAME_MAX is 64 on Linux), ':' and a PCI bus id ("0000:41:00.0").
constexpr size_t kDeviceIdBytes = 256;
static_assert(kDeviceIdBytes % sizeof(float) == 0, "device id block size");

// The first two members (in rank order) that run on the same device, or
// {-1, -1} when every device is distinct.
std::pair<int, int> FirstSharedDevice(const std::vector<std::string>& ids) {
  for (size_t j = 1; j < ids.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      if (ids[i] == ids[j]) {
        return {static_cast<int>(i), static_cast<int>(j)};
      }
    }
  }
  return {-1, -1};
}

// "host:0000:41:00.0" for this thread's current device.
StatusOr<std::string> CurrentDeviceId() {
  int device = 0;
  MESHTUNE_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  char bus_id[64] = {};
  MESHTUNE_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device),
                 "cudaDeviceGetPCIBusId"));
  char host[kDeviceIdBytes] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) {
    return Status::IoError(
        std::string("gethostname failed: ") + std::strerror(errno),
        "check the machine's host name configuration");
  }
  std::string id = std::string(host) + ":" + bus_id;
  // Keep one terminating zero inside the block.
  if (id.size() >= kDeviceIdBytes) id.resize(kDeviceIdBytes - 1);
  return id;
}

// Every member's device id, in rank order (collective over `group`).
std::vector<std::string> GatherDeviceIds(Communicator* group,
                                         const std::string& mine) {
  constexpr int64_t kWords = kDeviceIdBytes / sizeof(float);
  std::vector<float> block(kWords, 0.0f);
  std::memcpy(block.data(), mine.data(), mine.size());
  std::vector<float> all(static_cast<size_t>(kWords) * group->size());
  group->AllGather(block.data(), all.data(), kWords);
  std::vector<std::string> ids(group->size());
  for (int r = 0; r < group->size(); ++r) {
    const char* bytes = reinterpret_cast<const char*>(
        all.data() + static_cast<size_t>(r) * kWords);
    ids[r] = std::string(bytes, strnlen(bytes, kDeviceIdBytes));
  }
  return ids;
}

}  // namespace

Status CheckAllToAllCounts(const std::vector<int64_t>& send_counts,
                           const std::vector<int64_t>& recv_counts, int size,
                           const std::string& group) {
  if (static_cast<int>(send_counts.size()) != size ||
      static_cast<int>(recv_counts.size()) != size) {
    return Status::InvalidArgument(
        "all_to_all on group '" + group + "' of " + std::to_string(size) +
            " ranks got " + std::to_string(send_counts.size()) + " send and " +
            std::to_string(recv_counts.size()) + " receive counts",
        "pass one count per rank of the group");
  }
  for (int r = 0; r < size; ++r) {
    if (send_counts[r] < 0 || recv_counts[r] < 0) {
      return Status::InvalidArgument("all_to_all on group '" + group +
                                         "': negative count for rank " +
                                         std::to_string(r),
                                     "counts are element numbers, 0 or more");
    }
  }
  return Status::Ok();
}

Status GroupStart() { return NcclStatus(ncclGroupStart(), "group start"); }

Status GroupEnd() { return NcclStatus(ncclGroupEnd(), "group end"); }

StatusOr<DeviceCommKind> ParseDeviceCommKind(const char* value,
                                             DeviceCommKind automatic) {
  if (value == nullptr) return automatic;
  const std::string text = value;
  if (text.empty() || text == "auto") return automatic;
  if (text == "nccl") return DeviceCommKind::kNccl;
  if (text == "staged") return DeviceCommKind::kStaged;
  return Status::InvalidArgument(
      std::string(kCommEnv) + "=" + text + " is not a communicator kind",
      "set it to nccl, staged or auto, or unset it");
}

DeviceCommKind ChooseDeviceCommKind(
    const std::vector<std::string>& device_ids) {
  // One member needs no NCCL communicator (see CreateDeviceCommunicator).
  if (device_ids.size() <= 1) return DeviceCommKind::kStaged;
  return FirstSharedDevice(device_ids).first >= 0 ? DeviceCommKind::kStaged
                                                  : DeviceCommKind::kNccl;
}

StatusOr<bool> WorldSharesDevices(Communicator* world) {
  if (world->size() <= 1) return false;
  StatusOr<std::string> mine = CurrentDeviceId();
  // An empty id tells the others this rank has none (ids are never empty).
  const std::vector<std::string> ids =
      GatherDeviceIds(world, mine.ok() ? *mine : std::string());
  for (int r = 0; r < world->size(); ++r) {
    if (!ids[r].empty()) continue;
    if (!mine.ok()) return mine.status();
    return Status::IoError(
        "rank " + std::to_string(r) + " of '" + world->name() +
            "' could not name its CUDA device",
        "check that every rank sees a GPU (nvidia-smi, CUDA_VISIBLE_DEVICES)");
  }
  return FirstSharedDevice(ids).first >= 0;
}

StatusOr<std::unique_ptr<DeviceCommunicator>> CreateDeviceCommunicator(
    Communicator* group, bool world_shares_devices) {
  using Result = StatusOr<std::unique_ptr<DeviceCommunicator>>;
  // Read once per call (tests and launchers change it between groups) and
  // copied, since a later setenv may free the string getenv returned.
  const char* env = std::getenv(kCommEnv);
  const bool env_set = env != nullptr;
  const std::string env_value = env_set ? env : "";
  // Validate before any traffic, so a bad value fails every member at once
  // instead of leaving the others waiting in the all-gather.
  auto forced = ParseDeviceCommKind(env_set ? env_value.c_str() : nullptr,
                                    DeviceCommKind::kStaged);
  if (!forced.ok()) return forced.status();
  MESHTUNE_RETURN_IF_ERROR(RequireDevice());
  if (group->size() == 1) {
    return Result(std::make_unique<StagedCommunicator>(group));
  }
  auto mine = CurrentDeviceId();
  if (!mine.ok()) return mine.status();
  const std::vector<std::string> ids = GatherDeviceIds(group, *mine);
  const DeviceCommKind automatic = world_shares_devices
                                       ? DeviceCommKind::kStaged
                                       : ChooseDeviceCommKind(ids);
  const DeviceCommKind kind =
      ParseDeviceCommKind(env_set ? env_value.c_str() : nullptr, automatic)
          .value();
  if (kind == DeviceCommKind::kStaged) {
    return Result(std::make_unique<StagedCommunicator>(group));
  }
  const auto [first, second] = FirstSharedDevice(ids);
  if (first >= 0) {
    // NCCL would fail later with "Duplicate GPU detected" (or hang).
    return Status::InvalidArgument(
        std::string(kCommEnv) + "=nccl but ranks " + std::to_string(first) +
            " and " + std::to_string(second) + " of group '" + group->name() +
            "' share GPU " + ids[first] + "; NCCL needs one GPU per rank",
        "unset MESHTUNE_CUDA_COMM or set it to staged to run ranks that "
        "share a GPU");
  }
  auto nccl = NcclCommunicator::Create(group);
  if (!nccl.ok()) return nccl.status();
  return Result(std::unique_ptr<DeviceCommunicator>(std::move(nccl).value()));
}

}  // namespace meshtune::engine::cuda
