// The CUDA generator (engine/inference/generator.h): the CPU generator's
// layout and steps on the GPU in Megatron's bf16 recipe (bf16 weights,
// activations and KV cache; fp32 accumulation, norm statistics and
// softmax), one GPU per tp rank (ranks sharing a GPU talk through staged
// device communicators, as the trainer's do). The weights live in the host
// ParamStore (training's initialization or a checkpoint, fp32) and are
// uploaded as bf16, each tensor aligned to 256 bytes for cuBLASLt.
//
// Per layer and step: norm, QKV GEMM (cuBLASLt), RoPE at the cache
// position, KvCacheAppend and AttentionCachedForward
// (engine/cuda/kernels/attention_cached.cu), the row-parallel projection
// and tp all-reduce (its bias added by tp rank 0 alone, so the sum holds it
// once), the residual add, norm, the MLP (GELU or SwiGLU) likewise, or an
// MoE layer's block (engine/cuda/moe/moe_block.h, the trainer's: routing on
// the host from the GPU's router logits, the rows over ep and etp, one GEMM
// per local expert, the shared expert) on sequence-parallel rows when tp >
// 1, gathered over tp, as the CPU generator runs it. The logits are
// gathered over tp and copied to the host, where the shared loop samples.
//
// Not built yet: the prefill's attention runs the cached kernel, not the
// flash kernel.
#ifndef MESHTUNE_ENGINE_CUDA_GENERATOR_H_
#define MESHTUNE_ENGINE_CUDA_GENERATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/inference/generator.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// Why the CUDA generator cannot run `config` (InferenceConfig's), OK if it
// can: head_dim above 256. Needs no device.
Status CheckCudaGenerator(const TrainConfig& config);

// Collective over `world` (one rank per GPU; ranks beyond the GPUs share
// them). Errors: CheckGenerator's and CheckCudaGenerator's, no device, and
// allocation failures.
StatusOr<std::unique_ptr<inference::Generator>> CreateCudaGenerator(
    const TrainConfig& config, Communicator* world, int64_t batch,
    int64_t capacity);

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_GENERATOR_H_
