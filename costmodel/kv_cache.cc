#include "costmodel/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace meshtune::costmodel {

using search_spaces::KvCacheDtype;
using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::ModelSpec;
using search_spaces::ServingConfig;

bool EngineKeepsWindow(search_spaces::ServingEngine engine) {
  return !search_spaces::IsTensorRtLlm(engine);
}

int64_t ServedWindow(const ModelSpec& m, const ServingConfig& c,
                     int64_t layer) {
  return EngineKeepsWindow(c.engine) && m.IsWindowLayer(layer + 1)
             ? m.window_size + 1
             : 0;
}

namespace {

double HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0
             ? static_cast<double>(m.kv_channels)
             : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

// Bytes on one GPU for layer `layer` (0-based) of kind `kind`: `per_token`
// grows with the context, `fixed` does not.
struct LayerCache {
  double per_token = 0;
  double fixed = 0;
  int64_t window = -1;  // tokens kept; -1 = all
};

LayerCache CacheOfLayer(const ModelSpec& m, const ServingConfig& c,
                        int64_t layer, const LayerKind& kind) {
  const double b = search_spaces::BytesPerElement(c.kv_cache);
  LayerCache lc;
  switch (kind.mixer) {
    case Mixer::kAttention: {
      const int64_t groups =
          m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads;
      const double local = std::max<int64_t>(1, groups / c.tp);
      lc.per_token = 2.0 * local * HeadDim(m) * b;
      if (const int64_t window = ServedWindow(m, c, layer); window > 0) {
        lc.window = window;
      }
      break;
    }
    case Mixer::kMla:
      lc.per_token =
          static_cast<double>(m.kv_lora_rank + m.qk_pos_emb_head_dim) * b;
      break;
    case Mixer::kMamba: {
      const double heads = static_cast<double>(m.mamba_heads());
      const double d_inner = heads * m.mamba_head_dim;
      const double state = static_cast<double>(m.mamba_state_dim);
      const double ssm = heads * m.mamba_head_dim * state;
      const double conv = (d_inner + 2.0 * m.mamba_num_groups * state) *
                          static_cast<double>(m.mamba_conv_kernel - 1);
      lc.fixed = (ssm + conv) * 2.0 / static_cast<double>(c.tp);
      break;
    }
    case Mixer::kNone:
      break;
  }
  return lc;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> ServingPipelineStages(int64_t layers,
                                                               int64_t pp) {
  std::vector<std::pair<int64_t, int64_t>> stages;
  int64_t begin = 0;
  for (int64_t s = 0; s < pp; ++s) {
    const int64_t n = layers / pp + (s < layers % pp ? 1 : 0);
    stages.emplace_back(begin, begin + n);
    begin += n;
  }
  return stages;
}

int64_t KvBlockTokens(const ModelSpec& model, const ServingConfig& config) {
  switch (config.engine) {
    case search_spaces::ServingEngine::kTensorRtLlm:
    case search_spaces::ServingEngine::kTensorRtLlmCpp:
      return 32;
    case search_spaces::ServingEngine::kVllm:
      return model.multi_latent_attention ? 64 : 16;
    case search_spaces::ServingEngine::kSglang:
      return 1;
  }
  return 1;
}

double KvCacheBytesOfLayer(const ModelSpec& model, const ServingConfig& config,
                           int64_t layer, const LayerKind& kind,
                           int64_t context_tokens, int64_t block_tokens) {
  const LayerCache lc = CacheOfLayer(model, config, layer, kind);
  const double ctx = static_cast<double>(std::max<int64_t>(0, context_tokens));
  double kept =
      lc.window >= 0 ? std::min(ctx, static_cast<double>(lc.window)) : ctx;
  if (block_tokens > 1) {
    const double block = static_cast<double>(block_tokens);
    kept = std::ceil(kept / block) * block;
  }
  return lc.per_token * kept + lc.fixed;
}

namespace {

// The largest sum of `per_layer(model, i, kind)` over the layers of one
// stage. The last stage also holds the drafter's layers (speculative
// decoding): the served MTP depths (search_spaces::ServedMtpDepths), each
// layer at the index of the model's last, whose spec Megatron's MTP block
// reuses, or an EAGLE-3 head's one layer (search_spaces::Eagle3HeadModel).
template <typename PerLayer>
double MostLoadedStage(const ModelSpec& model, const ServingConfig& config,
                       PerLayer per_layer) {
  double head = 0;
  if (search_spaces::ServedEagle3Head(model, config)) {
    const ModelSpec h =
        search_spaces::Eagle3HeadModel(model, config.draft_head);
    head = per_layer(h, 0, h.DecoderLayers().front());
  }
  const std::vector<LayerKind> kinds = model.DecoderLayers();
  const int64_t n = static_cast<int64_t>(kinds.size());
  double most = 0;
  for (const auto& [begin, end] :
       ServingPipelineStages(n, std::max<int64_t>(1, config.pp))) {
    double bytes = 0;
    for (int64_t i = begin; i < end; ++i) {
      bytes += per_layer(model, i, kinds[i]);
    }
    if (end == n) {
      const int64_t depths = search_spaces::ServedMtpDepths(model, config);
      for (int64_t d = 0; d < depths; ++d) {
        for (const LayerKind& kind : model.MtpDepthLayers()) {
          bytes += per_layer(model, n - 1, kind);
        }
      }
      bytes += head;
    }
    most = std::max(most, bytes);
  }
  return most;
}

}  // namespace

std::vector<int64_t> KeptAttentionWindows(const ModelSpec& m,
                                          int64_t max_context) {
  if (m.window_size < 0) return {};
  const int64_t period = std::max<int64_t>(1, m.window_attn_skip_freq);
  std::vector<int64_t> out;
  for (int64_t layer = 0; layer < period; ++layer) {
    out.push_back(m.IsWindowLayer(layer + 1) ? m.window_size + 1 : max_context);
  }
  return out;
}

double KvCacheBytesPerSequence(const ModelSpec& model,
                               const ServingConfig& config,
                               int64_t context_tokens) {
  const int64_t block = KvBlockTokens(model, config);
  return MostLoadedStage(
      model, config, [&](const ModelSpec& m, int64_t i, const LayerKind& kind) {
        return KvCacheBytesOfLayer(m, config, i, kind, context_tokens, block);
      });
}

double KvCacheBytesPerToken(const ModelSpec& model,
                            const ServingConfig& config) {
  return MostLoadedStage(
      model, config, [&](const ModelSpec& m, int64_t i, const LayerKind& kind) {
        const LayerCache lc = CacheOfLayer(m, config, i, kind);
        return lc.window < 0 ? lc.per_token : 0.0;
      });
}

}  // namespace meshtune::costmodel
