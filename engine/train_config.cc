#include "engine/train_config.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "search_spaces/pipeline_layout.h"

namespace meshtune::engine {
namespace {

std::string ShortFloat(float x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(x));
  return buf;
}

}  // namespace

int64_t TrainConfig::padded_vocab_size() const {
  // Megatron _vocab_size_with_padding: round up to a multiple of
  // make_vocab_size_divisible_by · tp so every tp rank gets equal rows.
  const int64_t multiple = make_vocab_size_divisible_by * parallel.tp;
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

Status TrainConfig::Validate() const {
  const auto& p = parallel;
  const auto& m = model;
  auto bad = [](const std::string& msg, const std::string& hint) {
    return Status::InvalidArgument(msg, hint);
  };
  if (m.is_moe()) {
    return Status::Unimplemented(
        "the training engine does not support MoE models yet (" + m.name +
            " has " + std::to_string(m.num_experts) + " experts)",
        "train a dense model; MoE is planned with expert parallelism");
  }
  // An input error (exit 2), not Unimplemented: the run is refused before
  // it starts and the fix is in the user's hands (the hint).
  if (p.ep != 1) {
    return Status::InvalidArgument(
        "the training engine does not support expert parallelism yet (ep=" +
            std::to_string(p.ep) + ")",
        "use --ep 1");
  }
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.vpp < 1 || p.mbs < 1) {
    return bad("tp, pp, dp, vpp and mbs must be >= 1", "");
  }
  if (p.cp < 1) {
    return bad("cp must be >= 1 (got " + std::to_string(p.cp) + ")",
               "use --cp 1 (no context parallelism) or more");
  }
  if (train_iters < 1) {
    return bad("--steps must be >= 1 (got " + std::to_string(train_iters) + ")",
               "");
  }
  const int64_t s = seq();
  if (s < 1) return bad("seq_length must be >= 1", "");
  if (global_batch_size < 1 || global_batch_size % (p.mbs * p.dp) != 0) {
    return bad(
        "global batch size " + std::to_string(global_batch_size) +
            " is not a multiple of mbs·dp = " + std::to_string(p.mbs * p.dp),
        "pick --gbs as a multiple of " + std::to_string(p.mbs * p.dp));
  }
  // Megatron interleaves only across pipeline ranks (the schedule has no
  // warm-up with one rank, so a chunk's backward would come before its
  // forward); the enumerator rejects it as vpp_requires_pp.
  if (p.vpp > 1 && p.pp < 2) {
    return bad("virtual pipeline stages (vpp = " + std::to_string(p.vpp) +
                   ") need pp >= 2",
               "use --vpp 1, or --pp 2 or more");
  }
  // Even split, or Megatron's embedding/loss accounting (num_layers + 2
  // units), exactly as the tuner enumerates (search_spaces/pipeline_layout.h).
  if (!search_spaces::PipelineLayout::Valid(m.num_layers, p.pp, p.vpp)) {
    return bad(std::to_string(m.num_layers) +
                   " layers do not split over pp·vpp = " +
                   std::to_string(p.pp * p.vpp) +
                   " virtual stages (neither evenly nor with the embedding "
                   "and loss counted as layers)",
               "choose pp and vpp whose product divides num_layers");
  }
  if (p.vpp > 1 && num_microbatches() % p.pp != 0) {
    return bad("the interleaved schedule needs the number of micro-batches (" +
                   std::to_string(num_microbatches()) +
                   ") to be a multiple of pp (" + std::to_string(p.pp) + ")",
               "adjust --gbs or --mbs");
  }
  if (m.num_attention_heads % p.tp != 0 || m.num_query_groups % p.tp != 0) {
    return bad("tp=" + std::to_string(p.tp) +
                   " does not divide the attention heads (" +
                   std::to_string(m.num_attention_heads) +
                   ") and query groups (" + std::to_string(m.num_query_groups) +
                   ")",
               "choose tp dividing num_query_groups");
  }
  if (m.ffn_hidden_size % p.tp != 0) {
    return bad("tp=" + std::to_string(p.tp) +
                   " does not divide ffn_hidden_size " +
                   std::to_string(m.ffn_hidden_size),
               "");
  }
  if (p.sp && p.tp > 1 && s % p.tp != 0) {
    return bad("sequence parallelism needs seq_length (" + std::to_string(s) +
                   ") divisible by tp (" + std::to_string(p.tp) + ")",
               "");
  }
  // Context parallelism cuts the sequence into 2·cp equal chunks, two per
  // cp rank (engine/context_parallel/sequence_chunks.h); under SP each cp
  // rank's s/cp positions are further split over tp (Megatron's
  // get_batch_on_this_cp_rank, then the SP scatter).
  if (p.cp > 1) {
    const int64_t chunks = 2 * p.cp;
    const bool sp = p.sp && p.tp > 1;
    const int64_t multiple = sp ? chunks * p.tp : chunks;
    if (s % multiple != 0) {
      return bad("context parallelism needs seq_length (" + std::to_string(s) +
                     ") divisible by " +
                     (sp ? "2·cp·tp = " + std::to_string(multiple) +
                               " (2·cp chunks, each cp rank's split over tp by "
                               "sequence parallelism)"
                         : "2·cp = " + std::to_string(multiple) +
                               " (the sequence is cut into 2·cp chunks)"),
                 "use --seq-len a multiple of " + std::to_string(multiple) +
                     ", or another --cp");
    }
  }
  if (m.position_embedding_type ==
          search_spaces::PositionEmbedding::kLearnedAbsolute &&
      s > m.seq_length) {
    return bad("seq_length " + std::to_string(s) +
                   " exceeds the learned position table (" +
                   std::to_string(m.seq_length) + " positions)",
               "use --seq-len <= " + std::to_string(m.seq_length));
  }
  if (p.recompute.granularity == search_spaces::RecomputeGranularity::kFull &&
      p.recompute.num_layers < 1) {
    return bad("recompute num_layers must be >= 1", "");
  }
  // !(x >= 0 && x < 1) also rejects NaN.
  if (!(hidden_dropout >= 0.0f && hidden_dropout < 1.0f)) {
    return bad(
        "hidden_dropout must be in [0, 1), got " + ShortFloat(hidden_dropout),
        "use --hidden-dropout 0.1 (Megatron's default) or 0 (off)");
  }
  if (!(attention_dropout >= 0.0f && attention_dropout < 1.0f)) {
    return bad("attention_dropout must be in [0, 1), got " +
                   ShortFloat(attention_dropout),
               "use --attention-dropout 0.1 (Megatron's default) or 0 (off)");
  }
  // !(x > 0) also rejects NaN; infinity means "wait for ever", which is
  // exactly the hang the timeout exists to prevent.
  if (!(distributed_timeout_s > 0) || !std::isfinite(distributed_timeout_s)) {
    return bad("distributed_timeout_s must be a positive number of seconds",
               "use --distributed-timeout-minutes 10 (Megatron's default)");
  }
  return Status::Ok();
}

}  // namespace meshtune::engine
