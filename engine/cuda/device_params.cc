#include "engine/cuda/device_params.h"

#include <utility>

namespace meshtune::engine::cuda {

StatusOr<std::unique_ptr<DeviceParams>> DeviceParams::Create(
    const ParamStore& store) {
  std::unique_ptr<DeviceParams> p(new DeviceParams());
  p->numel_ = store.numel();
  for (const ParamInfo& info : store.infos()) {
    p->offsets_.push_back(p->padded_numel_);
    p->padded_numel_ +=
        (info.numel + kAlignElements - 1) / kAlignElements * kAlignElements;
  }
  const size_t n = static_cast<size_t>(p->padded_numel_);
  for (auto [buffer, bytes] :
       {std::pair{&p->master_, 4 * n}, std::pair{&p->weights_, 2 * n},
        std::pair{&p->grads_, 4 * n}, std::pair{&p->m_, 4 * n},
        std::pair{&p->v_, 4 * n}}) {
    auto allocated = DeviceBuffer::Allocate(bytes);
    if (!allocated.ok()) return allocated.status();
    *buffer = std::move(allocated).value();
    MESHTUNE_RETURN_IF_ERROR(buffer->Zero());
  }
  MESHTUNE_RETURN_IF_ERROR(
      p->ToDevice(store, store.flat_params().data(), p->master_));
  MESHTUNE_RETURN_IF_ERROR(CastToBf16(p->master_.as<float>(),
                                      p->weights_.as<Bf16>(), p->padded_numel_,
                                      nullptr));
  MESHTUNE_RETURN_IF_ERROR(Synchronize("device_params_upload"));
  return StatusOr<std::unique_ptr<DeviceParams>>(std::move(p));
}

Status DeviceParams::ToDevice(const ParamStore& store, const float* host,
                              const DeviceBuffer& device) const {
  for (int i = 0; i < store.size(); ++i) {
    const ParamInfo& info = store.info(i);
    MESHTUNE_RETURN_IF_ERROR(CopyHostToDevice(device.as<float>() + offsets_[i],
                                              host + info.offset,
                                              sizeof(float) * info.numel));
  }
  return Status::Ok();
}

Status DeviceParams::ToHost(const ParamStore& store, const DeviceBuffer& device,
                            float* host) const {
  for (int i = 0; i < store.size(); ++i) {
    const ParamInfo& info = store.info(i);
    MESHTUNE_RETURN_IF_ERROR(CopyDeviceToHost(host + info.offset,
                                              device.as<float>() + offsets_[i],
                                              sizeof(float) * info.numel));
  }
  return Status::Ok();
}

Status DeviceParams::ZeroGrads() { return grads_.Zero(); }

Status DeviceParams::ScaleGrads(float coeff) {
  return Scale(grads_.as<float>(), padded_numel_, coeff, nullptr);
}

Status DeviceParams::DownloadParams(ParamStore* store) const {
  return ToHost(*store, master_, store->flat_params().data());
}

Status DeviceParams::DownloadMoments(const ParamStore& store, float* m,
                                     float* v) const {
  MESHTUNE_RETURN_IF_ERROR(ToHost(store, m_, m));
  return ToHost(store, v_, v);
}

Status DeviceParams::UploadState(const ParamStore& store, const float* m,
                                 const float* v) {
  MESHTUNE_CHECK(store.numel() == numel_);
  MESHTUNE_RETURN_IF_ERROR(
      ToDevice(store, store.flat_params().data(), master_));
  MESHTUNE_RETURN_IF_ERROR(ToDevice(store, m, m_));
  MESHTUNE_RETURN_IF_ERROR(ToDevice(store, v, v_));
  MESHTUNE_RETURN_IF_ERROR(CastToBf16(master_.as<float>(), weights_.as<Bf16>(),
                                      padded_numel_, nullptr));
  return Synchronize("device_params_upload_state");
}

std::vector<AdamWSegment> DeviceParams::AdamSegments(const ParamStore& store,
                                                     float weight_decay) const {
  std::vector<AdamWSegment> segments;
  for (const ParamInfo& info : store.infos()) {
    AdamWSegment s;
    const int64_t offset = offsets_[segments.size()];
    s.param = master_.as<float>() + offset;
    s.grad = grads_.as<float>() + offset;
    s.m = m_.as<float>() + offset;
    s.v = v_.as<float>() + offset;
    s.param_bf16 = weights_.as<Bf16>() + offset;
    s.count = info.numel;
    s.weight_decay = info.weight_decay ? weight_decay : 0.0f;
    segments.push_back(s);
  }
  return segments;
}

std::vector<GradSegment> DeviceParams::NormSegments(
    const ParamStore& store) const {
  std::vector<GradSegment> segments;
  for (int i = 0; i < store.size(); ++i) {
    const ParamInfo& info = store.info(i);
    if (info.counts_in_norm) {
      segments.push_back({grads_.as<float>() + offsets_[i], info.numel});
    }
  }
  return segments;
}

}  // namespace meshtune::engine::cuda
