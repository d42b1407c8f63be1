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

namespace {

Status CheckGroupRank(const char* group, int size, int rank) {
  if (size < 1) {
    return Status::InvalidArgument(
        std::string("device params: ") + group + " size " +
            std::to_string(size) + " is not >= 1",
        std::string("pass the ") + group +
            " group's size (1 without data parallelism)");
  }
  if (rank < 0 || rank >= size) {
    return Status::InvalidArgument(
        std::string("device params: ") + group + " rank " +
            std::to_string(rank) + " is outside [0, " + std::to_string(size) +
            ")",
        std::string("pass this rank's rank in the ") + group + " group");
  }
  return Status::Ok();
}

// Pads `r` (its begin and end set, unpadded) and picks this rank's shard:
// Megatron pads the buffer so it splits evenly over the group; the extra
// factor keeps every shard start aligned like the tensors.
void ShardRegion(bool distributed, ParamRegion* r) {
  if (distributed) {
    r->end = r->begin +
             RoundUp(r->end - r->begin, int64_t{r->size} * kParamAlignElements);
    const int64_t shard = (r->end - r->begin) / r->size;
    r->shard_begin = r->begin + r->rank * shard;
    r->shard_end = r->shard_begin + shard;
  } else {
    r->shard_begin = r->begin;
    r->shard_end = r->end;
  }
}

}  // namespace

StatusOr<ParamLayout> MakeParamLayout(const ParamStore& store, int dp_size,
                                      int dp_rank, bool distributed,
                                      const ExpertSharding* experts) {
  if (store.size() == 0 || store.numel() == 0) {
    return Status::InvalidArgument(
        "device params: the parameter store is empty",
        "register the model's parameters and call ParamStore::Finalize() "
        "first");
  }
  MESHTUNE_RETURN_IF_ERROR(CheckGroupRank("dp", dp_size, dp_rank));
  if (experts != nullptr) {
    MESHTUNE_RETURN_IF_ERROR(
        CheckGroupRank("edp", experts->edp_size, experts->edp_rank));
    if (store.dense_numel() == store.numel()) {
      return Status::InvalidArgument(
          "device params: an expert region was asked for but the store has "
          "no expert parameters",
          "pass no ExpertSharding for a model without routed experts");
    }
  }
  ParamLayout layout;
  layout.numel = store.numel();
  layout.distributed = distributed;
  layout.dp_size = dp_size;
  layout.dp_rank = dp_rank;
  layout.offsets.assign(store.size(), 0);
  // Dense tensors (all of them without an expert region) in store order,
  // then the expert tensors.
  ParamRegion dense;
  dense.size = dp_size;
  dense.rank = dp_rank;
  for (int pass = 0; pass < (experts != nullptr ? 2 : 1); ++pass) {
    ParamRegion r = dense;
    if (pass == 1) {
      r.expert = true;
      r.size = experts->edp_size;
      r.rank = experts->edp_rank;
    }
    r.begin = layout.padded_numel;
    int64_t at = r.begin;
    for (int i = 0; i < store.size(); ++i) {
      const bool expert = store.info(i).expert;
      if (experts != nullptr && expert != (pass == 1)) continue;
      layout.offsets[i] = at;
      at += RoundUp(store.info(i).numel, kParamAlignElements);
    }
    r.end = at;
    ShardRegion(distributed, &r);
    r.state_offset = layout.shard_numel();
    layout.padded_numel = r.end;
    layout.regions.push_back(r);
  }
  layout.shard_begin = layout.regions[0].shard_begin;
  layout.shard_end = layout.regions[0].shard_end;
  return layout;
}

std::vector<ShardPiece> ShardPieces(const ParamLayout& layout,
                                    const ParamStore& store) {
  std::vector<ShardPiece> pieces;
  for (int k = 0; k < static_cast<int>(layout.regions.size()); ++k) {
    const ParamRegion& r = layout.regions[k];
    for (int i = 0; i < store.size(); ++i) {
      const int64_t offset = layout.offsets[i];
      if (offset < r.begin || offset >= r.end) continue;
      const int64_t begin = std::max(offset, r.shard_begin);
      const int64_t end = std::min(offset + store.info(i).numel, r.shard_end);
      if (begin < end) {
        pieces.push_back(
            {i, begin, end, k, r.state_offset + (begin - r.shard_begin)});
      }
    }
  }
  return pieces;
}

StatusOr<std::unique_ptr<DeviceParams>> DeviceParams::Create(
    const ParamStore& store, int dp_size, int dp_rank, bool distributed,
    const ExpertSharding* experts) {
  auto layout = MakeParamLayout(store, dp_size, dp_rank, distributed, experts);
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
    MESHTUNE_RETURN_IF_ERROR(CopyHostToDevice(
        shard + piece.state, host + store.info(piece.tensor).offset + within,
        sizeof(float) * (piece.end - piece.begin)));
  }
  return Status::Ok();
}

Status DeviceParams::CheckGroups(const DeviceCommunicator* dp,
                                 const DeviceCommunicator* edp,
                                 const char* what) const {
  for (const ParamRegion& r : layout_.regions) {
    if (r.shard_numel() == r.numel()) continue;
    const DeviceCommunicator* comm = r.expert ? edp : dp;
    const char* group = r.expert ? "edp" : "dp";
    if (comm == nullptr) {
      return Status::InvalidArgument(
          std::string(what) + ": this rank holds 1/" + std::to_string(r.size) +
              " of the " + (r.expert ? "expert " : "") +
              "optimizer state (distributed optimizer) and needs the " + group +
              " communicator to gather the rest",
          std::string("pass the device communicator over the ") + group +
              " group");
    }
    if (comm->size() != r.size || comm->rank() != r.rank) {
      return Status::InvalidArgument(
          std::string(what) + ": communicator '" + comm->name() + "' is rank " +
              std::to_string(comm->rank()) + " of " +
              std::to_string(comm->size()) + " but the parameters are " +
              "sharded as " + group + " rank " + std::to_string(r.rank) +
              " of " + std::to_string(r.size),
          std::string("pass the device communicator over this rank's ") +
              group + " group");
    }
  }
  return Status::Ok();
}

Status DeviceParams::GatherToHost(const ParamStore& store, const float* shard,
                                  DeviceCommunicator* dp,
                                  DeviceCommunicator* edp, float* host) const {
  // Holding everything, the shard-sized array is the full layout (each
  // region's state starts at its begin).
  if (layout_.holds_everything()) return ToHost(store, shard, host);
  auto full = DeviceBuffer::Allocate(sizeof(float) * layout_.padded_numel);
  if (!full.ok()) return full.status();
  for (const ParamRegion& r : layout_.regions) {
    const float* mine = shard + r.state_offset;
    float* region = full->as<float>() + r.begin;
    if (r.shard_numel() == r.numel()) {
      MESHTUNE_RETURN_IF_ERROR(
          CopyDeviceToDevice(region, mine, sizeof(float) * r.numel(), nullptr));
      continue;
    }
    // Rank-major blocks of the region's shards are exactly its layout.
    DeviceCommunicator* comm = r.expert ? edp : dp;
    MESHTUNE_RETURN_IF_ERROR(
        comm->AllGather(mine, region, r.shard_numel(), nullptr));
  }
  // The synchronous copies below run on the legacy default stream, after
  // the gathers enqueued there.
  return ToHost(store, full->as<float>(), host);
}

Status DeviceParams::ZeroGrads() { return grads_.Zero(); }

Status DeviceParams::DownloadParams(ParamStore* store, DeviceCommunicator* dp,
                                    DeviceCommunicator* edp) const {
  MESHTUNE_CHECK(store->numel() == layout_.numel);
  MESHTUNE_RETURN_IF_ERROR(CheckGroups(dp, edp, "download params"));
  return GatherToHost(*store, master_.as<float>(), dp, edp,
                      store->flat_params().data());
}

Status DeviceParams::DownloadMoments(const ParamStore& store, float* m,
                                     float* v, DeviceCommunicator* dp,
                                     DeviceCommunicator* edp) const {
  MESHTUNE_CHECK(store.numel() == layout_.numel);
  MESHTUNE_RETURN_IF_ERROR(CheckGroups(dp, edp, "download moments"));
  MESHTUNE_RETURN_IF_ERROR(GatherToHost(store, m_.as<float>(), dp, edp, m));
  return GatherToHost(store, v_.as<float>(), dp, edp, v);
}

Status DeviceParams::UploadWeights(const ParamStore& store) {
  // The bf16 copy needs every weight in fp32 on the device: the master
  // buffer when it is full, else the main-grad buffer (full, fp32, and
  // free between steps) as staging.
  // (Every shard is its whole region when this rank holds everything, and
  // the regions follow each other: the master buffer is the full layout.)
  float* full =
      layout_.holds_everything() ? master_.as<float>() : grads_.as<float>();
  MESHTUNE_RETURN_IF_ERROR(grads_.Zero());
  MESHTUNE_RETURN_IF_ERROR(ToDevice(store, store.flat_params().data(), full));
  MESHTUNE_RETURN_IF_ERROR(
      CastToBf16(full, weights_.as<Bf16>(), layout_.padded_numel, nullptr));
  if (!layout_.holds_everything()) {
    for (const ParamRegion& r : layout_.regions) {
      MESHTUNE_RETURN_IF_ERROR(CopyDeviceToDevice(
          master_.as<float>() + r.state_offset, full + r.shard_begin,
          sizeof(float) * r.shard_numel(), nullptr));
    }
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
    const int64_t local = piece.state;
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
  return NormSegments(store, -1);
}

// region -1: every region's pieces.
std::vector<GradSegment> DeviceParams::NormSegments(const ParamStore& store,
                                                    int region) const {
  std::vector<GradSegment> segments;
  for (const ShardPiece& piece : pieces_) {
    if (region >= 0 && piece.region != region) continue;
    if (store.info(piece.tensor).counts_in_norm) {
      segments.push_back(
          {grads_.as<float>() + piece.begin, piece.end - piece.begin});
    }
  }
  return segments;
}

}  // namespace meshtune::engine::cuda
