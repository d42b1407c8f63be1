// KV cache: what a sequence keeps on a GPU between decode steps (issue 22,
// docs/serving.md §2).
//
// Per layer of the replica's most loaded pipeline stage, on one GPU:
//   attention (GQA/MHA)  2 · g_local · d_h · b per token, for the layer's
//                        window (min(context, window_size) tokens on a
//                        sliding-window layer, where the engine keeps only
//                        the window: EngineKeepsWindow); g_local = g / tp,
//                        or 1 when tp > g (a KV head is then stored on each
//                        of the tp / g ranks that share it, as vLLM and
//                        TensorRT-LLM do);
//   MLA                  (kv_lora_rank + qk_pos_emb_head_dim) · b per token
//                        (DeepSeek-V2 §2.1.2: the compressed latent and the
//                        shared RoPE key), the same on every tp rank;
//   Mamba-2              a fixed state per sequence, split over tp: the SSM
//                        state heads · head_dim · state_dim and the conv
//                        state (d_inner + 2 · groups · state_dim) ·
//                        (conv_kernel − 1), both 16-bit (vLLM's default
//                        mamba cache dtype is the model's);
// b = BytesPerElement(kv_cache dtype). Attention data parallelism does not
// split a sequence: each attention-DP rank holds whole sequences.
#ifndef MESHTUNE_COSTMODEL_KV_CACHE_H_
#define MESHTUNE_COSTMODEL_KV_CACHE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/serving_spec.h"

namespace meshtune::costmodel {

// The layers [begin, end) of each of `pp` serving pipeline stages, in
// order: the first (layers mod pp) stages hold one layer more (vLLM's and
// TensorRT-LLM's default split). The one rule for the KV cache and the
// serving model.
std::vector<std::pair<int64_t, int64_t>> ServingPipelineStages(int64_t layers,
                                                               int64_t pp);

// Whether `engine` keeps only a sliding-window layer's window in its KV
// cache (the header's "window" above) rather than the whole context.
//   - vLLM and SGLang: yes, from the checkpoint's config (vLLM's
//     ModelConfig.get_sliding_window reads the HF config's sliding_window;
//     SGLang's model classes declare theirs through
//     get_attention_sliding_window_size, as its GPT-OSS and Gemma ones do;
//     that its Mistral v0.1 keeps the window too is assumed, unmeasured);
//   - TensorRT-LLM, both flows: no. Its cache is sized and kept for the full
//     context unless kv_cache_config.max_attention_window is set (the
//     runtime's --max_attention_window_size, which TensorRT-LLM's own Mistral
//     examples pass by hand: "Equivalent to LLaMA at this stage"), and
//     neither trtllm-bench nor the commands tune serve writes set it. Its
//     v0.17 perf tables agree: Mistral 7B (4096-token window) runs within 3 %
//     of LLaMA-3.1 8B (the same 32 layers of 8 KV heads of 128, no window) at
//     20 000 + 2 000 tokens on all five GPUs, where a kept window would hold
//     a fifth of the cache (docs/serving.md §5).
bool EngineKeepsWindow(search_spaces::ServingEngine engine);

// The keys a query of layer `layer` sees under `config`'s engine: the
// window and the current token, window_size + 1, on a sliding-window layer
// of an engine that keeps the window (EngineKeepsWindow); 0 = the whole
// context.
int64_t ServedWindow(const search_spaces::ModelSpec& model,
                     const search_spaces::ServingConfig& config, int64_t layer);

// The tokens each layer keeps, as TensorRT-LLM's
// kv_cache_config.max_attention_window takes them (a list it repeats over
// the layers): one entry per layer of the window pattern, window_size + 1
// on a sliding-window layer and `max_context` on a full-attention one; empty
// for a model without windows. Mistral 7B: {4097}; GPT-OSS (window 127
// every other layer): {128, max_context}. What tune serve writes into its
// trtllm-serve options so that TensorRT-LLM keeps the windows the plan was
// priced with (vLLM's and SGLang's own; EngineKeepsWindow).
std::vector<int64_t> KeptAttentionWindows(const search_spaces::ModelSpec& model,
                                          int64_t max_context);

// Tokens of one page of the engine's paged KV cache, which a sequence
// fills block by block (the last one partly):
//   - TensorRT-LLM: kv_cache_config.tokens_per_block, 32 by default;
//   - vLLM: --block-size, 16 by default on CUDA, raised to the attention
//     backend's page for MLA (FlashMLA's 64, which vLLM picks for
//     DeepSeek's MLA on Hopper and Blackwell);
//   - SGLang: --page-size, 1 by default (token-granular pages).
int64_t KvBlockTokens(const search_spaces::ModelSpec& model,
                      const search_spaces::ServingConfig& config);

// Bytes of cache one sequence of `context_tokens` tokens holds on one GPU of
// the most loaded pipeline stage (stages are the layers split in order, the
// first ones one layer larger when pp does not divide them), in whole pages
// of KvBlockTokens per layer: what the sequence takes of the cache's
// capacity. Only meaningful on a spec that passed Validate() and a config
// that passed ValidateServingConfig().
double KvCacheBytesPerSequence(const search_spaces::ModelSpec& model,
                               const search_spaces::ServingConfig& config,
                               int64_t context_tokens);

// Bytes of cache one sequence of `context_tokens` tokens holds on one GPU for
// decoder layer `layer` (0-based) of kind `kind`, its kept tokens rounded up
// to whole pages of `block_tokens` (1: the tokens themselves, what a decode
// step reads).
double KvCacheBytesOfLayer(const search_spaces::ModelSpec& model,
                           const search_spaces::ServingConfig& config,
                           int64_t layer, const search_spaces::LayerKind& kind,
                           int64_t context_tokens, int64_t block_tokens = 1);

// The growth per token of a long sequence (full-attention and MLA layers;
// windowed and Mamba layers stop growing): bytes per token on one GPU of
// the most loaded stage.
double KvCacheBytesPerToken(const search_spaces::ModelSpec& model,
                            const search_spaces::ServingConfig& config);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_KV_CACHE_H_
