// Key names were checked against NVIDIA/NeMo
// examples/nlp/language_modeling/conf/megatron_gpt_config.yaml
// (trainer.devices, trainer.num_nodes, trainer.precision,
// model.micro_batch_size, model.global_batch_size,
// model.tensor_model_parallel_size, model.pipeline_model_parallel_size,
// model.encoder_seq_length, model.sequence_parallel,
// model.activations_checkpoint_granularity / _method / _num_layers,
// model.megatron_amp_O2, model.optim.name), NeMo 1 training configs built from
// it (model.virtual_pipeline_model_parallel_size, model.context_parallel_size,
// model.expert_model_parallel_size, model.fp8, model.fp8_e4m3,
// model.fp8_hybrid, model.fp8_params, model.ub_tp_comm_overlap, optim.name
// distributed_fused_adam with overlap_grad_sync / overlap_param_sync /
// grad_sync_dtype) and NeMo 2's precision migration guide
// (docs.nvidia.com/nemo-framework/user-guide/
// latest/nemo-2.0/migration/precision.html: "bf16-mixed", "16-mixed").
#include "tuner/interop/nemo_overrides.h"

#include <algorithm>
#include <sstream>

#include "search_spaces/cuda_graphs.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/yaml_util.h"
#include "tuner/interop/megatron_args.h"

namespace meshtune::tuner {
namespace {

using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::yaml_util::MapReader;

const char* Bool(bool b) { return b ? "true" : "false"; }

// A model name (a model file's, so any bytes) for the header comment: a
// newline in it would end the comment and inject YAML keys, so control
// characters become '?'.
std::string CommentText(std::string text) {
  for (char& ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) ch = '?';
  }
  return text;
}

bool IsNull(const YAML::Node& map, const std::string& key) {
  const YAML::Node value = map[key];
  return !value || value.IsNull();
}

// optim.name values: the two that shard optimizer state over dp (Megatron's
// distributed optimizer) and the plain ones.
bool IsDistributedOptimizer(const std::string& name) {
  return name == "distributed_fused_adam" || name == "mcore_distributed_optim";
}

Status ReadTrainer(const YAML::Node& node, const std::string& source,
                   ParsedNemoOverrides* out) {
  MapReader r(node, source, "NeMo trainer section");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys({"devices", "num_nodes", "precision"}));
  int64_t devices = 0, num_nodes = 0;
  MESHTUNE_RETURN_IF_ERROR(r.Int("devices", true, 1, &devices));
  MESHTUNE_RETURN_IF_ERROR(r.Int("num_nodes", true, 1, &num_nodes));
  std::string precision;
  MESHTUNE_RETURN_IF_ERROR(r.Enum(
      "precision", true, {"bf16-mixed", "bf16", "16-mixed", "16"}, &precision));
  out->gpus_per_node = devices;
  out->training.num_gpus = devices * num_nodes;
  out->training.precision =
      precision.rfind("bf16", 0) == 0 ? Precision::kBf16 : Precision::kFp16;
  return Status::Ok();
}

Status ReadOptim(const YAML::Node& node, const std::string& source,
                 ParsedNemoOverrides* out) {
  MapReader r(node, source, "NeMo optim section");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys(
      {"name", "overlap_grad_sync", "overlap_param_sync", "grad_sync_dtype"}));
  std::string name;
  MESHTUNE_RETURN_IF_ERROR(
      r.Enum("name", true,
             {"distributed_fused_adam", "mcore_distributed_optim", "fused_adam",
              "adam", "adamw"},
             &name));
  out->config.dist_opt = IsDistributedOptimizer(name);
  bool overlap = false;
  MESHTUNE_RETURN_IF_ERROR(r.Bool("overlap_grad_sync", false, &overlap));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("overlap_param_sync", false, &overlap));
  if (r.Has("grad_sync_dtype")) {
    if (!out->config.dist_opt) {
      return Status::InvalidArgument(
          r.WhereKey("grad_sync_dtype") +
              ": grad_sync_dtype applies only to optim.name "
              "distributed_fused_adam",
          "remove grad_sync_dtype or use distributed_fused_adam");
    }
    std::string dtype;
    MESHTUNE_RETURN_IF_ERROR(
        r.Enum("grad_sync_dtype", false, {"bf16", "fp32"}, &dtype));
    out->training.grad_reduce_in_bf16 = dtype == "bf16";
  }
  return Status::Ok();
}

Status ReadRecompute(const YAML::Node& node, const MapReader& r,
                     ParsedNemoOverrides* out) {
  search_spaces::Recompute& rc = out->config.recompute;
  if (IsNull(node, "activations_checkpoint_granularity")) {
    rc.granularity = RecomputeGranularity::kNone;
  } else {
    std::string g;
    MESHTUNE_RETURN_IF_ERROR(r.Enum("activations_checkpoint_granularity", false,
                                    {"selective", "full"}, &g));
    rc.granularity = g == "full" ? RecomputeGranularity::kFull
                                 : RecomputeGranularity::kSelective;
  }
  std::string method;
  if (!IsNull(node, "activations_checkpoint_method")) {
    MESHTUNE_RETURN_IF_ERROR(r.Enum("activations_checkpoint_method", false,
                                    {"uniform", "block"}, &method));
  }
  if (rc.granularity != RecomputeGranularity::kFull) {
    // NeMo reads method and num_layers only for full recomputation.
    if (!method.empty() || !IsNull(node, "activations_checkpoint_num_layers")) {
      out->notes.push_back(
          "activations_checkpoint_method and _num_layers are ignored without "
          "activations_checkpoint_granularity full");
    }
    return Status::Ok();
  }
  if (method.empty()) {
    return Status::InvalidArgument(
        r.WhereKey("activations_checkpoint_granularity") +
            ": activations_checkpoint_granularity full needs "
            "activations_checkpoint_method",
        "set activations_checkpoint_method: uniform (or block) and "
        "activations_checkpoint_num_layers: N");
  }
  rc.method =
      method == "block" ? RecomputeMethod::kBlock : RecomputeMethod::kUniform;
  rc.num_layers = 1;
  if (!IsNull(node, "activations_checkpoint_num_layers")) {
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("activations_checkpoint_num_layers", false, 1, &rc.num_layers));
  }
  return Status::Ok();
}

// The MoE run choices and the layout: Megatron-Core TransformerConfig
// names, which Megatron-Bridge sets under model. (docs/export.md).
Status ReadCoreKeys(const YAML::Node& node, const MapReader& r,
                    const search_spaces::ModelSpec* model,
                    ParsedNemoOverrides* out) {
  search_spaces::ParallelConfig& c = out->config;
  if (!IsNull(node, "expert_tensor_parallel_size")) {
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("expert_tensor_parallel_size", false, 1, &c.etp));
  }
  if (r.Has("moe_token_dispatcher_type")) {
    std::string d;
    MESHTUNE_RETURN_IF_ERROR(r.Enum("moe_token_dispatcher_type", false,
                                    {"allgather", "alltoall", "flex"}, &d));
    out->moe_token_dispatcher_type =
        d == "alltoall" ? search_spaces::TokenDispatcher::kAlltoall
        : d == "flex"   ? search_spaces::TokenDispatcher::kFlex
                        : search_spaces::TokenDispatcher::kAllgather;
  }
  if (r.Has("moe_grouped_gemm")) {
    bool grouped = false;
    MESHTUNE_RETURN_IF_ERROR(r.Bool("moe_grouped_gemm", false, &grouped));
    out->moe_grouped_gemm = grouped;
  }
  if (r.Has("use_transformer_engine_op_fuser")) {
    bool fuser = false;
    MESHTUNE_RETURN_IF_ERROR(
        r.Bool("use_transformer_engine_op_fuser", false, &fuser));
    out->use_transformer_engine_op_fuser = fuser;
  }
  if (r.Has("moe_mlp_glu_interleave_size")) {
    // The fused grouped MLP's weight layout: read for its type only.
    int64_t interleave = 0;
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("moe_mlp_glu_interleave_size", false, 1, &interleave));
  }
  if (!IsNull(node, "moe_expert_capacity_factor")) {
    double factor = 0;
    MESHTUNE_RETURN_IF_ERROR(
        r.Double("moe_expert_capacity_factor", false, &factor));
    if (!(factor > 0)) {
      return Status::InvalidArgument(
          r.WhereKey("moe_expert_capacity_factor") +
              ": moe_expert_capacity_factor must be positive (null = "
              "dropless)",
          "e.g. moe_expert_capacity_factor: 1.0");
    }
    out->moe_expert_capacity_factor = factor;
  }
  if (r.Has("moe_pad_expert_input_to_capacity")) {
    bool pad = false;
    MESHTUNE_RETURN_IF_ERROR(
        r.Bool("moe_pad_expert_input_to_capacity", false, &pad));
    out->moe_pad_expert_input_to_capacity = pad;
  }
  if (r.Has("attention_backend")) {
    MESHTUNE_RETURN_IF_ERROR(
        r.Enum("attention_backend", false,
               {"flash", "fused", "unfused", "local", "auto"},
               &out->attention_backend));
  }
  if (!IsNull(node, "pipeline_model_parallel_layout")) {
    if (model == nullptr) {
      return Status::InvalidArgument(
          r.WhereKey("pipeline_model_parallel_layout") +
              ": pipeline_model_parallel_layout needs the model's layer "
              "count to be read",
          "pass the model to ParseNemoOverrides");
    }
    std::string layout;
    MESHTUNE_RETURN_IF_ERROR(
        r.String("pipeline_model_parallel_layout", false, &layout));
    auto parsed = search_spaces::ParsePipelineLayout(
        layout, model->num_layers, c.pp, model->mtp_num_layers);
    if (!parsed.ok()) {
      return Status::InvalidArgument(
          r.WhereKey("pipeline_model_parallel_layout") + ": " +
              parsed.status().message(),
          parsed.status().hint());
    }
    if (c.vpp != parsed->vpp) {
      return Status::InvalidArgument(
          r.WhereKey("pipeline_model_parallel_layout") + ": the layout has " +
              std::to_string(parsed->vpp) +
              " virtual stages per rank, virtual_pipeline_model_parallel_size "
              "says " +
              std::to_string(c.vpp),
          "make them agree (null means 1)");
    }
    if (!parsed->even) {
      c.layout_first_layers = parsed->first_layers;
      c.layout_last_layers = parsed->last_layers;
    }
  }
  return Status::Ok();
}

Status ReadModel(const YAML::Node& node, const std::string& source,
                 const search_spaces::ModelSpec* model,
                 ParsedNemoOverrides* out) {
  MapReader r(node, source, "NeMo model section");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys({
      "tensor_model_parallel_size",
      "pipeline_model_parallel_size",
      "virtual_pipeline_model_parallel_size",
      "context_parallel_size",
      "expert_model_parallel_size",
      "sequence_parallel",
      "micro_batch_size",
      "global_batch_size",
      "encoder_seq_length",
      "account_for_embedding_in_pipeline_split",
      "account_for_loss_in_pipeline_split",
      "activations_checkpoint_granularity",
      "activations_checkpoint_method",
      "activations_checkpoint_num_layers",
      "megatron_amp_O2",
      "fp8",
      "fp8_e4m3",
      "fp8_hybrid",
      "fp8_params",
      "fp8_dot_product_attention",
      "ub_tp_comm_overlap",
      "cuda_graph_impl",
      "cuda_graph_scope",
      "optim",
      "expert_tensor_parallel_size",
      "pipeline_model_parallel_layout",
      "moe_token_dispatcher_type",
      "moe_grouped_gemm",
      "use_transformer_engine_op_fuser",
      "moe_mlp_glu_interleave_size",
      "moe_expert_capacity_factor",
      "moe_pad_expert_input_to_capacity",
      "overlap_moe_expert_parallel_comm",
      "delay_wgrad_compute",
      "attention_backend",
  }));
  search_spaces::ParallelConfig& c = out->config;
  search_spaces::TrainingSpec& t = out->training;
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("tensor_model_parallel_size", false, 1, &c.tp));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("pipeline_model_parallel_size", false, 1, &c.pp));
  if (!IsNull(node, "virtual_pipeline_model_parallel_size")) {
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("virtual_pipeline_model_parallel_size", false, 1, &c.vpp));
  }
  MESHTUNE_RETURN_IF_ERROR(r.Int("context_parallel_size", false, 1, &c.cp));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("expert_model_parallel_size", false, 1, &c.ep));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("sequence_parallel", false, &c.sp));
  MESHTUNE_RETURN_IF_ERROR(r.Int("micro_batch_size", true, 1, &c.mbs));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("global_batch_size", true, 1, &t.global_batch_size));
  MESHTUNE_RETURN_IF_ERROR(r.Int("encoder_seq_length", true, 1, &t.seq_length));
  // The layout flags follow from num_layers, pp and vpp (not part of this
  // block); they are read for their type only.
  bool ignored = false;
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("account_for_embedding_in_pipeline_split", false, &ignored));
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("account_for_loss_in_pipeline_split", false, &ignored));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("megatron_amp_O2", false, &ignored));
  MESHTUNE_RETURN_IF_ERROR(ReadRecompute(node, r, out));

  if (c.vpp > 1 && c.pp < 2) {
    return Status::InvalidArgument(
        r.WhereKey("virtual_pipeline_model_parallel_size") +
            ": virtual_pipeline_model_parallel_size " + std::to_string(c.vpp) +
            " needs pipeline_model_parallel_size 2 or more",
        "raise pipeline_model_parallel_size or set "
        "virtual_pipeline_model_parallel_size: null");
  }
  if (c.sp && c.tp == 1) {
    c.sp = false;
    out->notes.push_back(
        "sequence_parallel is off with tensor_model_parallel_size 1");
  }

  bool fp8 = false, e4m3 = false, hybrid = false;
  MESHTUNE_RETURN_IF_ERROR(r.Bool("fp8", false, &fp8));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("fp8_e4m3", false, &e4m3));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("fp8_hybrid", false, &hybrid));
  MESHTUNE_RETURN_IF_ERROR(r.Bool("fp8_params", false, &t.fp8_param_gather));
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("fp8_dot_product_attention", false, &t.fp8_dot_product_attention));
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("ub_tp_comm_overlap", false, &t.tp_comm_overlap));
  MESHTUNE_RETURN_IF_ERROR(
      r.Bool("overlap_moe_expert_parallel_comm", false, &t.moe_ep_overlap));
  // Megatron TransformerConfig's CUDA-graph fields, as Megatron-Bridge
  // recipes set them (cuda_graph_scope a list of scope names).
  {
    std::string impl = "none";
    MESHTUNE_RETURN_IF_ERROR(r.Enum(
        "cuda_graph_impl", false, search_spaces::CudaGraphImplNames(), &impl));
    std::vector<std::string> scope;
    MESHTUNE_RETURN_IF_ERROR(r.EnumList(
        "cuda_graph_scope", search_spaces::CudaGraphScopeNames(), &scope));
    auto graphs = search_spaces::ParseCudaGraphs(
        impl, search_spaces::yaml_util::Join(scope, ","));
    if (!graphs.ok()) {
      return Status::InvalidArgument(
          r.WhereKey("cuda_graph_scope") + ": " + graphs.status().message(),
          graphs.status().hint());
    }
    t.cuda_graphs = graphs.value();
  }
  bool delay_wgrad = false;
  MESHTUNE_RETURN_IF_ERROR(r.Bool("delay_wgrad_compute", false, &delay_wgrad));
  if (delay_wgrad && !t.moe_ep_overlap) {
    return Status::InvalidArgument(
        r.WhereKey("delay_wgrad_compute") +
            ": delay_wgrad_compute needs overlap_moe_expert_parallel_comm",
        "set overlap_moe_expert_parallel_comm: true or delay_wgrad_compute: "
        "false");
  }
  if (fp8) {
    if (t.precision != Precision::kBf16) {
      return Status::InvalidArgument(
          r.WhereKey("fp8") +
              ": fp8 with trainer.precision 16: meshtune models fp8 GEMMs "
              "inside a bf16 model",
          "set trainer.precision: bf16-mixed");
    }
    t.precision = Precision::kFp8;
  } else if (e4m3 || hybrid) {
    return Status::InvalidArgument(
        r.WhereKey(e4m3 ? "fp8_e4m3" : "fp8_hybrid") + ": " +
            (e4m3 ? "fp8_e4m3" : "fp8_hybrid") + " without fp8: true",
        "set fp8: true, or set the format keys to false");
  }
  if (t.fp8_param_gather && !search_spaces::IsFp8(t.precision)) {
    return Status::InvalidArgument(
        r.WhereKey("fp8_params") + ": fp8_params needs fp8: true",
        "set fp8: true or fp8_params: false");
  }
  if (t.fp8_dot_product_attention && !search_spaces::IsFp8(t.precision)) {
    return Status::InvalidArgument(
        r.WhereKey("fp8_dot_product_attention") +
            ": fp8_dot_product_attention needs fp8: true",
        "set fp8: true or fp8_dot_product_attention: false");
  }
  if (t.tp_comm_overlap && !c.sp) {
    return Status::InvalidArgument(
        r.WhereKey("ub_tp_comm_overlap") +
            ": ub_tp_comm_overlap needs sequence_parallel with "
            "tensor_model_parallel_size 2 or more",
        "set sequence_parallel: true or ub_tp_comm_overlap: false");
  }
  if (r.Has("optim")) {
    MESHTUNE_RETURN_IF_ERROR(ReadOptim(node["optim"], source, out));
  }
  return ReadCoreKeys(node, r, model, out);
}

}  // namespace

StatusOr<std::string> NemoOverrides(const search_spaces::ModelSpec& model,
                                    const search_spaces::TrainingSpec& t,
                                    const search_spaces::ParallelConfig& c,
                                    int64_t gpus_per_node,
                                    bool flash_attention) {
  const int64_t gpus = t.num_gpus;
  if (gpus <= 0 || gpus_per_node <= 0) {
    return Status::InvalidArgument(
        "NeMo overrides need the GPU count and GPUs per node, got " +
            std::to_string(gpus) + " and " + std::to_string(gpus_per_node),
        "give --gpus and --gpus-per-node");
  }
  if (gpus > gpus_per_node && gpus % gpus_per_node != 0) {
    return Status::InvalidArgument(
        std::to_string(gpus) + " GPUs is not a whole number of " +
            std::to_string(gpus_per_node) + "-GPU nodes",
        "NeMo's trainer runs devices x num_nodes GPUs; use a multiple of " +
            std::to_string(gpus_per_node));
  }
  const int64_t devices = std::min(gpus, gpus_per_node);
  std::ostringstream y;
  y << "# NeMo megatron_gpt overrides from meshtune for "
    << CommentText(model.name) << ": " << search_spaces::ToString(c) << "\n";
  y << "# merge into the model's NeMo config; docs/export.md maps each key\n";
  y << "trainer:\n";
  y << "  devices: " << devices << "\n";
  y << "  num_nodes: " << gpus / devices << "\n";
  // fp8 GEMMs run inside a bf16 model (Transformer Engine recipe).
  y << "  precision: "
    << (t.precision == Precision::kFp16 ? "16-mixed" : "bf16-mixed") << "\n";
  y << "model:\n";
  y << "  tensor_model_parallel_size: " << c.tp << "\n";
  y << "  pipeline_model_parallel_size: " << c.pp << "\n";
  y << "  virtual_pipeline_model_parallel_size: "
    << (c.vpp > 1 ? std::to_string(c.vpp) : "null") << "\n";
  y << "  context_parallel_size: " << c.cp << "\n";
  y << "  expert_model_parallel_size: " << c.ep << "\n";
  y << "  sequence_parallel: " << Bool(c.sp) << "\n";
  y << "  micro_batch_size: " << c.mbs << "\n";
  y << "  global_batch_size: " << t.global_batch_size << "\n";
  y << "  encoder_seq_length: " << t.seq_length << "\n";
  const search_spaces::PipelineLayout layout(model.num_layers, c);
  if (layout.uneven()) {
    // Megatron-Core's pipeline_model_parallel_layout (quoted: '|' and '*').
    y << "  pipeline_model_parallel_layout: '"
      << layout.MegatronString(model.mtp_num_layers) << "'\n";
  } else if (search_spaces::PipelineLayout::AccountsEmbeddingAndLoss(
                 model.num_layers, c.pp, c.vpp)) {
    // num_layers + 2 units split evenly (search_spaces/pipeline_layout.h).
    y << "  account_for_embedding_in_pipeline_split: true\n";
    y << "  account_for_loss_in_pipeline_split: true\n";
  }
  switch (c.recompute.granularity) {
    case RecomputeGranularity::kNone:
      y << "  activations_checkpoint_granularity: null\n";
      y << "  activations_checkpoint_method: null\n";
      y << "  activations_checkpoint_num_layers: null\n";
      break;
    case RecomputeGranularity::kSelective:
      y << "  activations_checkpoint_granularity: selective\n";
      y << "  activations_checkpoint_method: null\n";
      y << "  activations_checkpoint_num_layers: null\n";
      break;
    case RecomputeGranularity::kFull:
      y << "  activations_checkpoint_granularity: full\n";
      y << "  activations_checkpoint_method: "
        << search_spaces::ToString(c.recompute.method) << "\n";
      y << "  activations_checkpoint_num_layers: " << c.recompute.num_layers
        << "\n";
      break;
  }
  // fp32 main parameters and gradients, as the cost model's memory assumes.
  y << "  megatron_amp_O2: true\n";
  const bool fp8 = search_spaces::IsFp8(t.precision);
  y << "  fp8: " << Bool(fp8) << "\n";
  // "hybrid" = E4M3 forward, E5M2 gradients, as --fp8-format hybrid.
  y << "  fp8_hybrid: " << Bool(fp8) << "\n";
  y << "  fp8_params: " << Bool(fp8 && t.fp8_param_gather) << "\n";
  y << "  fp8_dot_product_attention: "
    << Bool(fp8 && t.fp8_dot_product_attention) << "\n";
  // Userbuffers overlap needs sequence parallelism (as --tp-comm-overlap).
  y << "  ub_tp_comm_overlap: " << Bool(t.tp_comm_overlap && c.sp && c.tp > 1)
    << "\n";
  if (model.use_transformer_engine_op_fuser) {
    y << "  use_transformer_engine_op_fuser: true\n";
  }
  if (model.is_moe()) {
    // The MoE run choices the cost model priced (model_spec.h).
    y << "  expert_tensor_parallel_size: " << c.expert_tp() << "\n";
    y << "  moe_token_dispatcher_type: "
      << search_spaces::ToString(model.moe_token_dispatcher_type) << "\n";
    y << "  moe_grouped_gemm: " << Bool(model.moe_grouped_gemm) << "\n";
    if (model.use_transformer_engine_op_fuser && model.gated_mlp()) {
      y << "  moe_mlp_glu_interleave_size: 32\n";
    }
    if (model.moe_expert_capacity_factor > 0) {
      y << "  moe_expert_capacity_factor: "
        << FormatMegatronNumber(model.moe_expert_capacity_factor) << "\n";
      y << "  moe_pad_expert_input_to_capacity: "
        << Bool(model.moe_pad_expert_input_to_capacity) << "\n";
    } else {
      y << "  moe_expert_capacity_factor: null\n";
    }
    // Megatron-Bridge's moe_a2a_overlap sets both (comm_overlap config).
    const bool ep_overlap = t.moe_ep_overlap && c.ep > 1;
    y << "  overlap_moe_expert_parallel_comm: " << Bool(ep_overlap) << "\n";
    y << "  delay_wgrad_compute: " << Bool(ep_overlap) << "\n";
  }
  if (t.cuda_graphs.enabled()) {
    y << "  cuda_graph_impl: " << search_spaces::ToString(t.cuda_graphs.impl)
      << "\n";
    // Absent = Megatron's default scope (whole layers).
    if (t.cuda_graphs.scope != 0) {
      y << "  cuda_graph_scope: ["
        << search_spaces::CudaGraphScopeString(t.cuda_graphs.scope, ',')
        << "]\n";
    }
  }
  y << "  attention_backend: " << AttentionBackend(model, flash_attention)
    << "\n";
  y << "  optim:\n";
  if (c.dist_opt) {
    y << "    name: distributed_fused_adam\n";
    // Megatron's --overlap-grad-reduce / --overlap-param-gather.
    y << "    overlap_grad_sync: true\n";
    y << "    overlap_param_sync: true\n";
    if (t.grad_reduce_in_bf16) y << "    grad_sync_dtype: bf16\n";
  } else {
    y << "    name: fused_adam\n";
    if (t.grad_reduce_in_bf16) {
      y << "    # not exported: grad_reduce_in_bf16 (grad_sync_dtype needs "
           "distributed_fused_adam)\n";
    }
  }
  return y.str();
}

StatusOr<ParsedNemoOverrides> ParseNemoOverrides(
    const std::string& yaml_text, const std::string& source,
    const search_spaces::ModelSpec* model) {
  auto root = search_spaces::yaml_util::Load(yaml_text, source);
  if (!root.ok()) return root.status();
  MapReader r(*root, source, "NeMo override block");
  MESHTUNE_RETURN_IF_ERROR(r.CheckIsMap());
  MESHTUNE_RETURN_IF_ERROR(r.CheckKeys({"trainer", "model"}));
  if (!r.Has("trainer")) return r.Missing("trainer", "{devices: 8, ...}");
  if (!r.Has("model")) return r.Missing("model", "{micro_batch_size: 1, ...}");
  ParsedNemoOverrides out;
  MESHTUNE_RETURN_IF_ERROR(ReadTrainer((*root)["trainer"], source, &out));
  MESHTUNE_RETURN_IF_ERROR(ReadModel((*root)["model"], source, model, &out));

  search_spaces::ParallelConfig& c = out.config;
  const int64_t model_parallel = c.tp * c.pp * c.cp;
  if (out.training.num_gpus % model_parallel != 0) {
    return Status::InvalidArgument(
        r.WhereKey("trainer") + ": trainer.devices x trainer.num_nodes = " +
            std::to_string(out.training.num_gpus) +
            " GPUs is not a multiple of tp·pp·cp = " +
            std::to_string(model_parallel),
        "use a multiple of " + std::to_string(model_parallel) +
            " GPUs or smaller parallel sizes");
  }
  c.dp = out.training.num_gpus / model_parallel;
  return out;
}

}  // namespace meshtune::tuner
