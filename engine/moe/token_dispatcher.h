// The expert-parallel token dispatcher of an MoE layer (Megatron-Core
// MoEAlltoAllTokenDispatcher): a rank's routed token rows, grouped by
// global expert, travel by all-to-all over the "ep" group to the rank that
// owns each expert, are all-gathered over "etp" (every expert-tensor-
// parallel rank computes its shard of the expert on all of them), and are
// sorted into one block per local expert; the experts' outputs go the
// reverse way, summed over etp (reduce-scatter) on the way back.
//
// Experts are owned in blocks: ep rank r holds global experts
// [r·E/ep, (r+1)·E/ep) (Megatron's local_expert_indices).
//
// Row orders (h floats per row):
//   permuted[m, h]   this rank's routed rows by global expert (as
//                    engine/cpu/moe_permute.h PermutationOf)
//   received         [src ep rank][local expert] rows after the all-to-all
//   gathered         [etp rank][src ep rank][local expert] after the gather
//   expert_in[M, h]  [local expert][etp rank][src ep rank]: each local
//                    expert's rows contiguous, what its GEMMs read
// The backward of Dispatch is Combine (the all-to-all back, then the
// reduce-scatter of the input gradients, which are partial sums over etp
// since fc1 is split over it), and the backward of Combine is Dispatch.
// Reductions sum in etp rank order, so every layout is deterministic.
#ifndef MESHTUNE_ENGINE_MOE_TOKEN_DISPATCHER_H_
#define MESHTUNE_ENGINE_MOE_TOKEN_DISPATCHER_H_

#include <cstdint>
#include <vector>

#include "engine/comm/communicator.h"

namespace meshtune::engine::moe {

// The row counts of one dispatch, kept for its Combine and the backward.
struct DispatchPlan {
  // [E] rows this rank routed to each global expert (m = Σ).
  std::vector<int64_t> tokens_per_expert;
  // [etp][ep][E/ep]: rows of etp rank q from ep rank src for local expert
  // le, at [(q·ep + src)·E/ep + le] (etp = 1: what this rank received).
  std::vector<int64_t> counts;
  // [E/ep]: rows per local expert (M = Σ).
  std::vector<int64_t> rows_per_local_expert;
  int64_t routed_rows() const;  // m
  int64_t expert_rows() const;  // M
};

class TokenDispatcher {
 public:
  // ep, etp not owned; num_experts divisible by ep->size().
  TokenDispatcher(Communicator* ep, Communicator* etp, int64_t num_experts,
                  int64_t hidden);

  int64_t num_local_experts() const { return local_; }
  // Global id of this rank's first local expert.
  int64_t first_local_expert() const;

  // Counts only: fills `plan` from tokens_per_expert[E] (collective over ep
  // and etp).
  void Plan(const int64_t* tokens_per_expert, DispatchPlan* plan) const;
  // permuted[m, h] -> expert_in[M, h] (resized).
  void Dispatch(const float* permuted, const DispatchPlan& plan,
                std::vector<float>* expert_in) const;
  // expert_out[M, h] (partial sums over etp) -> routed[m, h] (resized), the
  // etp sum of each row back at the rank and position it came from.
  void Combine(const float* expert_out, const DispatchPlan& plan,
               std::vector<float>* routed) const;

 private:
  Communicator* ep_;
  Communicator* etp_;
  int64_t experts_, local_, h_;
};

}  // namespace meshtune::engine::moe

#endif  // MESHTUNE_ENGINE_MOE_TOKEN_DISPATCHER_H_
