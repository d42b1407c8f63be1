#include "engine/cuda/device_params.h"

#include <algorithm>
#include <string>
#include <utility>

namespace meshtune::engine::cuda {
namespace {

int64_t RoundUp(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

StatusOr<ParamLayout> MakeParamLayout(const ParamStore& store, int dp_size,
                                      int dp_rank, bool distributed) {
  if (store.size() == 0 || store.numel() == 0) {
    return Status::InvalidArgument(
        "device params: the parameter store is empty",
        "register the model's parameters and call ParamStore::Finalize() "
        "first");
  }
  if (dp_size < 1) {
    return Status::InvalidArgument(
        "device params: dp size " + std::to_string(dp_size) + " is not >= 1",
        "pass the dp group's size (1 without data parallelism)");
  }
  if (dp_rank < 0 || dp_rank >= dp_size) {
    return Status::InvalidArgument(
        "device params: dp rank " + std::to_string(dp_rank) +
            " is outside [0, " + std::to_string(dp_size) + ")",
        "pass this rank's rank in the dp group");
  }
  ParamLayout layout;
  layout.numel = store.numel();
  layout.distributed = distributed;
  layout.dp_size = dp_size;
  layout.dp_rank = dp_rank;
  for (const ParamInfo& info : store.infos()) {
    layout.offsets.push_back(layout.padded_numel);
    layout.padded_numel += RoundUp(info.numel, kParamAlignElements);
  }
  if (distributed) {
    // Megatron pads the buffer so it splits evenly over dp; the extra
    // factor keeps every shard start aligned like the tensors.
    layout.padded_numel =
        RoundUp(layout.padded_numel, dp_size * kParamAlignElements);
    const int64_t shard = layout.padded_numel / dp_size;
    layout.shard_begin = dp_rank * shard;
    layout.shard_end = layout.shard_begin + shard;
  } else {
    layout.shard_begin = 0;
    layout.shard_end = layout.padded_numel;
  }
  return layout;
}

std::vector<ShardPiece> ShardPieces(const ParamLayout& layout,
                                    const ParamStore& store) {
  std::vector<ShardPiece> pieces;
  for (int i = 0; i < store.size(); ++i) {
    const int64_t begin = std::max(layout.offsets[i], layout.shard_begin);
    const int64_t end =
        std::min(layout.offsets[i] + store.info(i).numel, layout.shard_end);
    if (begin < end) pieces.push_back({i, begin, end});
  }
  return pieces;
}

StatusOr<std::unique_ptr<DeviceParams>> DeviceParams::Create(
    const ParamStore& store, int dp_size, int dp_rank, bool distributed) {
  auto layout = MakeParamLayout(store, dp_size, dp_rank, distributed);
  if (!layout.ok()) return layout.status();
  std::unique_ptr<DeviceParams> p(new DeviceParams());
  p->layout_ = std::move(layout).value();
  p->pieces_ = ShardPieces(p->layout_, store);
  const size_t n = static_cast<size_t>(p->layout_.padded_numel);
  const size_t shard = static_cast<size_t>(p->layout_.shard_numel());
  for (auto [buffer, bytes] :
       {std::pair{&p->master_, 4 * shard}, std::pair{&p->weights_, 2 * n},
        std::pair{&p->grads_, 4 * n}, std::pair{&p->m_, 4 * shard},
        std::pair{&p->v_, 4 * shard}}) {
    auto allocated = DeviceBuffer::Allocate(bytes);
    if (!allocated.ok()) return allocated.status();
    *buffer = std::move(allocated).value();
    MESHTUNE_RETURN_IF_ERROR(buffer->Zero());
  }
  // Gradients and moments stay at the zero the buffers start with.
  MESHTUNE_RETURN_IF_ERROR(p->UploadWeights(store));
  return StatusOr<std::unique_ptr<DeviceParams>>(std::move(p));
}

Status DeviceParams::ToDevice(const ParamStore& store, const float* host,
                              float* device) const {
  for (int i = 0; i < store.size(); ++i) {
    const ParamInfo& info = store.info(i);
    MESHTUNE_RETURN_IF_ERROR(CopyHostToDevice(device + layout_.offsets[i],
                                              host + info.offset,
                                              sizeof(float) * info.numel));
  }
  return Status::Ok();
}

Status DeviceParams::ToHost(const ParamStore& store, const float* device,
                            float* host) const {
  for (int i = 0; i < store.size(); ++i) {
    const ParamInfo& info = store.info(i);
    MESHTUNE_RETURN_IF_ERROR(CopyDeviceToHost(host + info.offset,
                                              device + layout_.offsets[i],
                                              sizeof(float) * info.numel));
  }
  return Status::Ok();
}

Status DeviceParams::ShardToDevice(const ParamStore& store, const float* host,
                                   float* shard) const {
  for (const ShardPiece& piece : pieces_) {
    const int64_t within = piece.begin - layout_.offsets[piece.tensor];
    MESHTUNE_RETURN_IF_ERROR(
        CopyHostToDevice(shard + (piece.begin - layout_.shard_begin),
                         host + store.info(piece.tensor).offset + within,
                         sizeof(float) * (piece.end - piece.begin)));
  }
  return Status::Ok();
}

Status DeviceParams::CheckDp(const DeviceCommunicator* dp,
                             const char* what) const {
  if (layout_.holds_everything()) return Status::Ok();
  if (dp == nullptr) {
    return Status::InvalidArgument(
        std::string(what) + ": this rank holds 1/" +
            std::to_string(layout_.dp_size) +
            " of the optimizer state (distributed optimizer) and needs the "
            "dp communicator to gather the rest",
        "pass the device communicator over the dp group");
  }
  if (dp->size() != layout_.dp_size || dp->rank() != layout_.dp_rank) {
    return Status::InvalidArgument(
        std::string(what) + ": communicator '" + dp->name() + "' is rank " +
            std::to_string(dp->rank()) + " of " + std::to_string(dp->size()) +
            " but the parameters are sharded as dp rank " +
            std::to_string(layout_.dp_rank) + " of " +
            std::to_string(layout_.dp_size),
        "pass the device communicator over this rank's dp group");
  }
  return Status::Ok();
}

Status DeviceParams::GatherToHost(const ParamStore& store, const float* shard,
                                  DeviceCommunicator* dp, float* host) const {
  if (layout_.holds_everything()) return ToHost(store, shard, host);
  auto full = DeviceBuffer::Allocate(sizeof(float) * layout_.padded_numel);
  if (!full.ok()) return full.status();
  // Rank-major blocks of shard_numel floats are exactly the full layout.
  MESHTUNE_RETURN_IF_ERROR(
      dp->AllGather(shard, full->as<float>(), layout_.shard_numel(), nullptr));
  // The synchronous copies below run on the legacy default stream, after
  // the gather enqueued there.
  return ToHost(store, full->as<float>(), host);
}

Status DeviceParams::ZeroGrads() { return grads_.Zero(); }

Status DeviceParams::DownloadParams(ParamStore* store,
                                    DeviceCommunicator* dp) const {
  MESHTUNE_CHECK(store->numel() == layout_.numel);
  MESHTUNE_RETURN_IF_ERROR(CheckDp(dp, "download params"));
  return GatherToHost(*store, master_.as<float>(), dp,
                      store->flat_params().data());
}

Status DeviceParams::DownloadMoments(const ParamStore& store, float* m,
                                     float* v, DeviceCommunicator* dp) const {
  MESHTUNE_CHECK(store.numel() == layout_.numel);
  MESHTUNE_RETURN_IF_ERROR(CheckDp(dp, "download moments"));
  MESHTUNE_RETURN_IF_ERROR(GatherToHost(store, m_.as<float>(), dp, m));
  return GatherToHost(store, v_.as<float>(), dp, v);
}

Status DeviceParams::UploadWeights(const ParamStore& store) {
  // The bf16 copy needs every weight in fp32 on the device: the master
  // buffer when it is full, else the main-grad buffer (full, fp32, and
  // free between steps) as staging.
  float* full =
      layout_.holds_everything() ? master_.as<float>() : grads_.as<float>();
  MESHTUNE_RETURN_IF_ERROR(grads_.Zero());
  MESHTUNE_RETURN_IF_ERROR(ToDevice(store, store.flat_params().data(), full));
  MESHTUNE_RETURN_IF_ERROR(
      CastToBf16(full, weights_.as<Bf16>(), layout_.padded_numel, nullptr));
  if (!layout_.holds_everything()) {
    MESHTUNE_RETURN_IF_ERROR(
        CopyDeviceToDevice(master_.as<float>(), full + layout_.shard_begin,
                           sizeof(float) * layout_.shard_numel(), nullptr));
  }
  MESHTUNE_RETURN_IF_ERROR(Synchronize("device_params_upload"));
  // Zero the staging only after the cast and the shard copy read it.
  return grads_.Zero();
}

Status DeviceParams::UploadState(const ParamStore& store, const float* m,
                                 const float* v) {
  MESHTUNE_CHECK(store.numel() == layout_.numel);
  MESHTUNE_RETURN_IF_ERROR(UploadWeights(store));
  // Padding past the pieces stays zero from the memsets.
  MESHTUNE_RETURN_IF_ERROR(m_.Zero());
  MESHTUNE_RETURN_IF_ERROR(v_.Zero());
  MESHTUNE_RETURN_IF_ERROR(ShardToDevice(store, m, m_.as<float>()));
  MESHTUNE_RETURN_IF_ERROR(ShardToDevice(store, v, v_.as<float>()));
  return Synchronize("device_params_upload_state");
}

std::vector<AdamWSegment> DeviceParams::AdamSegments(const ParamStore& store,
                                                     float weight_decay) const {
  std::vector<AdamWSegment> segments;
  for (const ShardPiece& piece : pieces_) {
    AdamWSegment s;
    const int64_t local = piece.begin - layout_.shard_begin;
    s.param = master_.as<float>() + local;
    s.grad = grads_.as<float>() + piece.begin;
    s.m = m_.as<float>() + local;
    s.v = v_.as<float>() + local;
    s.param_bf16 = weights_.as<Bf16>() + piece.begin;
    s.count = piece.end - piece.begin;
    s.weight_decay =
        store.info(piece.tensor).weight_decay ? weight_decay : 0.0f;
    segments.push_back(s);
  }
  return segments;
}

std::vector<GradSegment> DeviceParams::NormSegments(
    const ParamStore& store) const {
  std::vector<GradSegment> segments;
  for (const ShardPiece& piece : pieces_) {
    if (store.info(piece.tensor).counts_in_norm) {
      segments.push_back(
          {grads_.as<float>() + piece.begin, piece.end - piece.begin});
    }
  }
  return segments;
}

}  // namespace meshtune::engine::cuda
