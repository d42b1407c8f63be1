// Specs built in code for the cost-model tests, so they do not depend on the
// preset YAML files. Numbers: the sources cited in search_spaces/clusters/
// (datasheet peaks, measured GEMM ceilings and NCCL bus bandwidths) and NCCL's
// Simple-protocol latencies (docs/costmodel.md §3); 3 GiB reserve as in the
// presets.
#ifndef MESHTUNE_TESTS_COSTMODEL_TEST_SPECS_H_
#define MESHTUNE_TESTS_COSTMODEL_TEST_SPECS_H_

#include <cstdint>
#include <string>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"

namespace meshtune::costmodel::testing {

inline search_spaces::ClusterSpec A100Cluster() {
  search_spaces::ClusterSpec c;
  c.name = "a100-80g";
  c.gpu.display_name = "NVIDIA A100 SXM4 80GB";
  c.gpu.peak_bf16_tflops = 312;
  c.gpu.peak_fp8_tflops = 0;
  c.gpu.hbm_gb = 80;
  c.gpu.hbm_capacity_gib = 80.0;  // nvidia-smi 81920 MiB
  c.gpu.hbm_gbps = 2039;
  c.gpu.gemm_max_efficiency_bf16 = 271.2 / 312;
  c.gpu.hbm_efficiency = 0.9;
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 8;
  c.nvlink_gbps = 300;
  c.nvlink_busbw_gbps = 230;
  c.nvlink_latency_us = 3.4;
  c.nic_gbps = 25;
  c.nic_busbw_gbps = 24;
  c.network_latency_us = 14;
  c.memory_reserve_gib = 3;
  return c;
}

inline search_spaces::ClusterSpec H100Cluster() {
  search_spaces::ClusterSpec c;
  c.name = "h100";
  c.gpu.display_name = "NVIDIA H100 SXM5 80GB";
  c.gpu.peak_bf16_tflops = 989;
  c.gpu.peak_fp8_tflops = 1979;
  c.gpu.peak_fp32_tflops = 67;
  c.gpu.hbm_gb = 80;
  c.gpu.hbm_capacity_gib = 79.65;  // nvidia-smi 81559 MiB
  c.gpu.hbm_gbps = 3350;
  c.gpu.gemm_max_efficiency_bf16 = 794.5 / 989;
  c.gpu.gemm_max_efficiency_fp8 = 1402.6 / 1979;
  c.gpu.hbm_efficiency = 0.9;
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 8;
  c.nvlink_gbps = 450;
  c.nvlink_busbw_gbps = 370;
  c.nvlink_latency_us = 3.4;
  c.nvls_allreduce_busbw_gbps = 480;
  c.nic_gbps = 50;
  c.nic_busbw_gbps = 47;
  c.network_latency_us = 14;
  c.memory_reserve_gib = 3;
  return c;
}

// GPT (LayerNorm, GeLU, learned positions, tied embeddings, f = 4h, MHA).
inline search_spaces::ModelSpec Gpt(int64_t layers, int64_t hidden,
                                    int64_t heads, int64_t vocab = 51200,
                                    int64_t seq = 2048) {
  search_spaces::ModelSpec m;
  m.name = "gpt";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = heads;
  m.kv_channels = hidden / heads;
  m.ffn_hidden_size = 4 * hidden;
  m.vocab_size = vocab;
  m.seq_length = seq;
  return m;
}

// LLaMA-style (RMSNorm, SwiGLU, RoPE, GQA, untied).
inline search_spaces::ModelSpec Llama(int64_t layers, int64_t hidden,
                                      int64_t heads, int64_t groups,
                                      int64_t ffn, int64_t vocab, int64_t seq) {
  search_spaces::ModelSpec m;
  m.name = "llama";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = hidden / heads;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.seq_length = seq;
  m.normalization = search_spaces::Normalization::kRMSNorm;
  m.activation = search_spaces::Activation::kSwiglu;
  m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
  m.untie_embeddings_and_output_weights = true;
  return m;
}

}  // namespace meshtune::costmodel::testing

#endif  // MESHTUNE_TESTS_COSTMODEL_TEST_SPECS_H_
