#include "engine/cuda/device_params.h"

#include <utility>

namespace meshtune::engine::cuda {

StatusOr<std::unique_ptr<DeviceParams>> DeviceParams::Create(
    const ParamStore& store) {
  std::unique_ptr<DeviceParams> p(new DeviceParams());
  p->numel_ = store.numel();
  const size_t n = static_cast<size_t>(p->numel_);
  for (auto [buffer, bytes] :
       {std::pair{&p->master_, 4 * n}, std::pair{&p->weights_, 2 * n},
        std::pair{&p->grads_, 4 * n}, std::pair{&p->m_, 4 * n},
        std::pair{&p->v_, 4 * n}}) {
    auto allocated = DeviceBuffer::Allocate(bytes);
    if (!allocated.ok()) return allocated.status();
    *buffer = std::move(allocated).value();
  }
  const std::vector<float>& host = store.flat_params();
  MESHTUNE_RETURN_IF_ERROR(p->master_.CopyFromHost(host.data(), 4 * n));
  MESHTUNE_RETURN_IF_ERROR(p->weights_.Zero());
  MESHTUNE_RETURN_IF_ERROR(CastToBf16(
      p->master_.as<float>(), p->weights_.as<Bf16>(), p->numel_, nullptr));
  MESHTUNE_RETURN_IF_ERROR(p->grads_.Zero());
  MESHTUNE_RETURN_IF_ERROR(p->m_.Zero());
  MESHTUNE_RETURN_IF_ERROR(p->v_.Zero());
  MESHTUNE_RETURN_IF_ERROR(Synchronize("device_params_upload"));
  return StatusOr<std::unique_ptr<DeviceParams>>(std::move(p));
}

Status DeviceParams::ZeroGrads() { return grads_.Zero(); }

Status DeviceParams::ScaleGrads(float coeff) {
  return Scale(grads_.as<float>(), numel_, coeff, nullptr);
}

Status DeviceParams::DownloadParams(ParamStore* store) const {
  return master_.CopyToHost(store->flat_params().data(), 4 * numel_);
}

Status DeviceParams::DownloadGrads(ParamStore* store) const {
  return grads_.CopyToHost(store->flat_grads().data(), 4 * numel_);
}

Status DeviceParams::DownloadMoments(float* m, float* v) const {
  MESHTUNE_RETURN_IF_ERROR(m_.CopyToHost(m, 4 * numel_));
  return v_.CopyToHost(v, 4 * numel_);
}

Status DeviceParams::UploadState(const ParamStore& store, const float* m,
                                 const float* v) {
  MESHTUNE_CHECK(store.numel() == numel_);
  MESHTUNE_RETURN_IF_ERROR(
      master_.CopyFromHost(store.flat_params().data(), 4 * numel_));
  MESHTUNE_RETURN_IF_ERROR(m_.CopyFromHost(m, 4 * numel_));
  MESHTUNE_RETURN_IF_ERROR(v_.CopyFromHost(v, 4 * numel_));
  MESHTUNE_RETURN_IF_ERROR(
      CastToBf16(master_.as<float>(), weights_.as<Bf16>(), numel_, nullptr));
  return Synchronize("device_params_upload_state");
}

std::vector<AdamWSegment> DeviceParams::AdamSegments(const ParamStore& store,
                                                     float weight_decay) const {
  std::vector<AdamWSegment> segments;
  for (const ParamInfo& info : store.infos()) {
    AdamWSegment s;
    s.param = master_.as<float>() + info.offset;
    s.grad = grads_.as<float>() + info.offset;
    s.m = m_.as<float>() + info.offset;
    s.v = v_.as<float>() + info.offset;
    s.param_bf16 = weights_.as<Bf16>() + info.offset;
    s.count = info.numel;
    s.weight_decay = info.weight_decay ? weight_decay : 0.0f;
    segments.push_back(s);
  }
  return segments;
}

std::vector<GradSegment> DeviceParams::NormSegments(
    const ParamStore& store) const {
  std::vector<GradSegment> segments;
  for (const ParamInfo& info : store.infos()) {
    if (info.counts_in_norm) {
      segments.push_back({grads_.as<float>() + info.offset, info.numel});
    }
  }
  return segments;
}

}  // namespace meshtune::engine::cuda
