// One transformer layer of a GPT or LLaMA-style decoder on one tensor-
// parallel rank, with Megatron-Core's parallel semantics: column-parallel
// QKV and fc1, row-parallel attention projection and fc2 (bias added after
// the reduction), sequence-parallel norms/residuals when sp is on. The
// collectives it issues are exactly search_spaces::TransformerLayerTpCommOps;
// under context parallelism core attention adds the ring's sends and
// receives on the "cp" group (engine/context_parallel/ring_attention.h).
//
// Pre-norm block (both families):
//   x2 = x + Proj(Attn(QKV(Norm1(x))))
//   y  = x2 + FC2(Act(FC1(Norm2(x2))))
// GPT: LayerNorm with bias, biased linears, GELU. LLaMA: RMSNorm, no biases,
// SwiGLU, RoPE on q and k, grouped-query attention.
#ifndef MESHTUNE_ENGINE_TRANSFORMER_LAYER_H_
#define MESHTUNE_ENGINE_TRANSFORMER_LAYER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/cpu/dropout_mask.h"
#include "engine/moe/moe_block.h"
#include "engine/param_store.h"
#include "engine/train_config.h"

namespace meshtune::engine {

// Sizes of one layer on one rank for one micro-batch.
struct LayerShape {
  // s: sequence positions this rank holds: the full sequence length, or
  // seq/cp, its two chunks, under context parallelism
  // (engine/context_parallel/sequence_chunks.h); b: micro-batch size.
  int64_t s = 0, b = 0;
  int64_t h = 0;                                // hidden size
  int64_t heads = 0, groups = 0, head_dim = 0;  // per tp rank
  int64_t ffn = 0;                              // ffn_hidden_size / tp
  bool swiglu = false, rmsnorm = false, rope = false, bias = true;
  float eps = 1e-5f, rope_base = 10000.0f;
  int tp = 1;
  bool sp = false;
  int cp = 1;  // context-parallel size; the global sequence is s·cp
  // Dropout (Megatron --hidden-dropout on the attention and MLP outputs
  // before each residual add, --attention-dropout on the softmax output);
  // masks are keyed by `seed` (engine/cpu/dropout_mask.h).
  float hidden_dropout = 0.0f, attention_dropout = 0.0f;
  uint64_t seed = 0;

  int64_t rows() const { return s * b; }  // n: full activation rows
  // Rows of the sequence-sharded regions (norms, residual): n/tp under SP.
  int64_t local_rows() const { return sp ? s * b / tp : s * b; }
  int64_t qkv_width() const { return (heads + 2 * groups) * head_dim; }
  int64_t fc1_width() const { return swiglu ? 2 * ffn : ffn; }
};
LayerShape MakeLayerShape(const TrainConfig& config);
// The MoE layers' sizes and options on one rank (engine/moe/moe_block.h).
moe::MoeShape MakeMoeShape(const TrainConfig& config);

// Indices into the ParamStore (−1 when the family has no such tensor).
// An MoE layer (ModelSpec::IsMoeLayer) has the router, its ep rank's
// experts and the shared expert instead of fc1/fc2.
struct LayerParams {
  int ln1_w = -1, ln1_b = -1, qkv_w = -1, qkv_b = -1, proj_w = -1, proj_b = -1,
      ln2_w = -1, ln2_b = -1, fc1_w = -1, fc1_b = -1, fc2_w = -1, fc2_b = -1;
  bool moe = false;
  int router = -1, shared_fc1 = -1, shared_fc2 = -1;
  // Megatron's router.expert_bias buffer [E] (aux-loss-free balancing): a
  // replicated entry of the store that no gradient reaches (so AdamW leaves
  // it, and checkpoints carry it); UpdateExpertBias sets it. -1 = none.
  int expert_bias = -1;
  std::vector<int> expert_fc1, expert_fc2;  // per local expert
};

// Registers layer `global_layer`'s tensors (Megatron-Core names
// "decoder.layers.<i>.self_attention.linear_qkv.weight", ...). MoE layers
// (TEGroupedMLP names; e the global expert id, only ep rank `ep_rank`'s
// E/ep experts registered, each split over etp as a column/row-parallel
// pair):
//   mlp.router.weight [E, h] replicated over tp
//   mlp.experts.linear_fc1.weight<e> [f·g, h], linear_fc2.weight<e> [h, f]
//   mlp.shared_experts.linear_fc1.weight [s·g, h], linear_fc2.weight [h, s]
LayerParams AddLayerParams(ParamStore& store, const TrainConfig& config,
                           int64_t global_layer, int tp_rank, int ep_rank = 0,
                           int etp_rank = 0);
// Initializes them (normal(std), output projections scaled by
// 1/√(2·num_layers) as Megatron's scaled_init_method_normal; norms 1,
// biases 0; the MoE fc2s as output projections).
void InitLayerParams(ParamStore& store, const LayerParams& p,
                     const TrainConfig& config);

// The MoE weights of an MoE layer's parameters `p` in `store` (pointers
// into it), for moe::MoeBlock.
moe::MoeWeights MoeWeightsOf(const ParamStore& store, const LayerParams& p);

// Activations one layer saves for its backward (fp32). Shapes: n = s·b,
// nl = local_rows().
struct LayerCache {
  int64_t first_sample = 0;               // dropout masks' sample index
  std::vector<float> x;                   // [nl, h] layer input
  std::vector<float> ln1_mean, ln1_rstd;  // [nl]
  std::vector<float> ln1;    // [nl, h] norm1 output (gathered in bwd)
  std::vector<float> qkv;    // [n, qkv_width] after RoPE
  std::vector<float> probs;  // [b, heads, s, s]; empty if selective
  std::vector<float> attn;   // [n, heads·d]
  // [2, b, heads, s/2] log-sum-exp of the ring attention (cp > 1; empty if
  // selective: the backward reruns the ring).
  std::vector<float> lse;
  std::vector<float> x2;                  // [nl, h] residual after attention
  std::vector<float> ln2_mean, ln2_rstd;  // [nl]
  std::vector<float> ln2;                 // [nl, h]
  std::vector<float> fc1;                 // [n, fc1_width]
  std::vector<float> act;                 // [n, ffn]
  moe::MoeCache moe;                      // MoE layers only
  void Clear() { *this = LayerCache(); }
};

class TransformerLayer {
 public:
  // `tp` is the tensor-parallel communicator; store, tp not owned.
  // selective: core attention is recomputed in backward (probs not kept).
  // global_layer keys the layer's dropout masks. `cp`: the context-parallel
  // group (not owned), required when shape.cp > 1: core attention is then
  // ring attention over it (engine/context_parallel/ring_attention.h). MoE
  // layers (params.moe) need `moe`, the block that runs their MLP (owned).
  TransformerLayer(const LayerShape& shape, const LayerParams& params,
                   ParamStore* store, Communicator* tp, bool selective,
                   int64_t global_layer, Communicator* cp = nullptr,
                   std::unique_ptr<moe::MoeBlock> moe = nullptr);

  // x [nl, h] -> y [nl, h]; fills `cache`. first_sample: global dataset
  // index of the micro-batch's first sample (dropout masks; see
  // engine/cpu/dropout_mask.h).
  void Forward(const float* x, float* y, LayerCache* cache,
               int64_t first_sample = 0);
  // dy [nl, h] -> dx [nl, h]; accumulates parameter gradients; frees
  // `cache`.
  void Backward(const float* dy, float* dx, LayerCache* cache);
  // MoE layers with the expert bias, once per step: the tokens this rank
  // routed to each expert since the last call (counted in Backward, so a
  // recomputed forward counts once; after capacity dropping, as Megatron's
  // local_tokens_per_expert) are summed over `sum_over` (tp, then dp·cp:
  // Megatron's tensor-and-data-parallel group with cp) and the bias takes
  // cpu::UpdateExpertBias's step of `rate`; the counts restart. Collective
  // over those groups; nothing for other layers.
  void UpdateExpertBias(const std::vector<Communicator*>& sum_over, float rate);

 private:
  void Norm(const float* x, int w, int b, float* out, float* mean,
            float* rstd) const;
  void NormBackward(const float* dout, const float* x, int w, int b,
                    const float* mean, const float* rstd, float* dx);
  // [nl, h] -> [n, h]: all-gathers into `out` under SP and returns it;
  // otherwise returns `in` (already full).
  const float* GatherSequence(const float* in, std::vector<float>* out);
  // Partial sums [n, h] over tp -> [nl, h]: reduce-scatter under SP,
  // all-reduce otherwise (row-parallel outputs, column-parallel input
  // grads).
  void ReduceOverTp(std::vector<float>* partial, std::vector<float>* out);
  // Row-parallel output [n, h] partial sums -> [nl, h] reduced, + bias.
  void ReduceRowParallel(std::vector<float>* partial, int bias,
                         std::vector<float>* out);
  // Hidden dropout at `site` on local rows [nl, h] in place (forward on an
  // output, backward on its gradient).
  void HiddenDropout(float* x, cpu::DropoutSite site,
                     int64_t first_sample) const;
  // The gradient before a hidden dropout from the one after it: `d`
  // itself without dropout, else the masked copy in `scratch`.
  const float* DropoutGrad(const float* d, cpu::DropoutSite site,
                           int64_t first_sample,
                           std::vector<float>* scratch) const;
  cpu::DropoutSpec AttentionDropout(int64_t first_sample) const;
  // The dense MLP on the norm output c->ln2 [nl, h]: forward to the
  // reduced (reduce-scattered under SP) output [nl, h] + fc2 bias, using
  // `partial` [n, h] as scratch; backward from the gradient of that output
  // to the norm output's gradient dln2 [nl, h].
  void DenseMlpForward(LayerCache* c, std::vector<float>* partial,
                       std::vector<float>* mlp_out);
  void DenseMlpBackward(const float* dmlp, LayerCache* c,
                        std::vector<float>* dln2);
  // The MoE block's view of this layer's gradients (its tensors:
  // MoeWeightsOf).
  moe::MoeGrads MoeGradsOf();
  // RoPE on qkv [n, qkv_width] in place (forward, or its inverse on the
  // gradient) at the global positions of the local rows.
  void Rope(float* qkv, bool forward) const;
  // Core attention under context parallelism: ring attention of c->qkv
  // into c->attn and c->lse with the attention dropout `drop`; the
  // backward writes dqkv [n, qkv_width].
  void RingForward(LayerCache* c, const cpu::DropoutSpec& drop);
  void RingBackward(const float* dattn, LayerCache* c,
                    const cpu::DropoutSpec& drop, float* dqkv);

  LayerShape sh_;
  LayerParams p_;
  ParamStore* store_;
  Communicator* tp_;
  bool selective_;
  int64_t global_layer_;
  Communicator* cp_;
  std::unique_ptr<moe::MoeBlock> moe_;
  std::vector<double> routed_tokens_;  // [E] since the last bias update
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_TRANSFORMER_LAYER_H_
