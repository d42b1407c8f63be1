#include "engine/cuda/moe/token_dispatcher.h"

#include <vector>

#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr size_t kBf = sizeof(Bf16);

// Copies rows of `blocks` (row counts, in the source order) from `src` to
// `dst`, the destination block of source block i being order[i]: the
// [q][src][le] <-> [le][q][src] reorders of both directions.
Status CopyBlocks(const Bf16* src, Bf16* dst,
                  const std::vector<int64_t>& rows_of_block,
                  const std::vector<int64_t>& dst_block_of, int64_t h) {
  const size_t n = rows_of_block.size();
  std::vector<int64_t> src_at(n + 1, 0), dst_rows(n, 0), dst_at(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    src_at[i + 1] = src_at[i] + rows_of_block[i];
    dst_rows[dst_block_of[i]] = rows_of_block[i];
  }
  for (size_t i = 0; i < n; ++i) dst_at[i + 1] = dst_at[i] + dst_rows[i];
  for (size_t i = 0; i < n; ++i) {
    if (rows_of_block[i] == 0) continue;
    MESHTUNE_RETURN_IF_ERROR(CopyDeviceToDevice(
        dst + dst_at[dst_block_of[i]] * h, src + src_at[i] * h,
        static_cast<size_t>(rows_of_block[i] * h) * kBf, nullptr));
  }
  return Status::Ok();
}

}  // namespace

Status ReserveBuffer(DeviceBuffer* buffer, size_t bytes) {
  if (buffer->size_bytes() >= bytes) return Status::Ok();
  *buffer = DeviceBuffer();  // free first: the new one may be large
  MESHTUNE_ASSIGN_BUFFER(*buffer, bytes + bytes / 4);
  return Status::Ok();
}

DeviceTokenDispatcher::DeviceTokenDispatcher(DeviceCommunicator* ep,
                                             DeviceCommunicator* etp,
                                             int ep_size, int etp_size,
                                             int etp_rank, int64_t num_experts,
                                             int64_t hidden)
    : ep_(ep),
      etp_(etp),
      ep_size_(ep_size),
      etp_size_(etp_size),
      etp_rank_(etp_rank),
      local_(num_experts / ep_size),
      h_(hidden) {
  MESHTUNE_CHECK(ep_size >= 1 && num_experts % ep_size == 0);
  MESHTUNE_CHECK(ep_size == 1 || (ep != nullptr && ep->size() == ep_size));
  MESHTUNE_CHECK(etp_size == 1 || (etp != nullptr && etp->size() == etp_size));
}

int64_t DeviceTokenDispatcher::CountRows(const moe::DispatchPlan& plan,
                                         int64_t begin, int64_t end) const {
  int64_t rows = 0;
  for (int64_t i = begin; i < end; ++i) rows += plan.counts[i];
  return rows;
}

int64_t DeviceTokenDispatcher::RoutedRows(const moe::DispatchPlan& plan,
                                          int r) const {
  int64_t rows = 0;
  for (int64_t e = r * local_; e < (r + 1) * local_; ++e) {
    rows += plan.tokens_per_expert[e];
  }
  return rows;
}

// Blocks of plan.counts are indexed (q·ep + src)·local + le; expert_in
// orders them (le·etp + q)·ep + src.
Status DeviceTokenDispatcher::Dispatch(const Bf16* permuted,
                                       const moe::DispatchPlan& plan,
                                       Bf16* expert_in) {
  const int ep = ep_size_, etp = etp_size_, me = etp_rank_;
  // All-to-all over ep: rows for rank r are the blocks of its experts.
  const Bf16* received = permuted;
  int64_t mine = plan.routed_rows();
  if (ep > 1) {
    std::vector<int64_t> send(ep), recv(ep);
    mine = 0;
    for (int r = 0; r < ep; ++r) {
      send[r] = RoutedRows(plan, r) * h_;
      recv[r] =
          CountRows(plan, (me * ep + r) * local_, (me * ep + r + 1) * local_) *
          h_;
      mine += recv[r] / h_;
    }
    MESHTUNE_RETURN_IF_ERROR(
        ReserveBuffer(&received_, static_cast<size_t>(mine * h_) * kBf));
    MESHTUNE_RETURN_IF_ERROR(
        ep_->AllToAllV(permuted, send, received_.as<Bf16>(), recv, nullptr));
    received = received_.as<Bf16>();
  }
  // All-gather over etp: every etp rank sends its rows to every other.
  const Bf16* gathered = received;
  if (etp > 1) {
    MESHTUNE_RETURN_IF_ERROR(
        ReserveBuffer(&copies_, static_cast<size_t>(mine * h_ * etp) * kBf));
    for (int q = 0; q < etp; ++q) {
      if (mine == 0) break;
      MESHTUNE_RETURN_IF_ERROR(
          CopyDeviceToDevice(copies_.as<Bf16>() + q * mine * h_, received,
                             static_cast<size_t>(mine * h_) * kBf, nullptr));
    }
    std::vector<int64_t> send(etp, mine * h_), recv(etp);
    for (int q = 0; q < etp; ++q) {
      recv[q] = CountRows(plan, q * ep * local_, (q + 1) * ep * local_) * h_;
    }
    MESHTUNE_RETURN_IF_ERROR(ReserveBuffer(
        &gathered_, static_cast<size_t>(plan.expert_rows() * h_) * kBf));
    MESHTUNE_RETURN_IF_ERROR(etp_->AllToAllV(
        copies_.as<Bf16>(), send, gathered_.as<Bf16>(), recv, nullptr));
    gathered = gathered_.as<Bf16>();
  }
  // [q][src][le] -> [le][q][src].
  std::vector<int64_t> dst_block(plan.counts.size());
  for (int q = 0; q < etp; ++q) {
    for (int src = 0; src < ep; ++src) {
      for (int64_t le = 0; le < local_; ++le) {
        dst_block[(q * ep + src) * local_ + le] = (le * etp + q) * ep + src;
      }
    }
  }
  return CopyBlocks(gathered, expert_in, plan.counts, dst_block, h_);
}

Status DeviceTokenDispatcher::Combine(const Bf16* expert_out,
                                      const moe::DispatchPlan& plan,
                                      Bf16* routed) {
  const int ep = ep_size_, etp = etp_size_, me = etp_rank_;
  // [le][q][src] -> [q][src][le]: the source blocks in expert_in's order.
  const size_t blocks = plan.counts.size();
  std::vector<int64_t> rows(blocks), dst_block(blocks);
  for (int64_t le = 0; le < local_; ++le) {
    for (int q = 0; q < etp; ++q) {
      for (int src = 0; src < ep; ++src) {
        const int64_t b = (q * ep + src) * local_ + le;
        const int64_t i = (le * etp + q) * ep + src;
        rows[i] = plan.counts[b];
        dst_block[i] = b;
      }
    }
  }
  const int64_t total = plan.expert_rows();
  MESHTUNE_RETURN_IF_ERROR(
      ReserveBuffer(&gathered_, static_cast<size_t>(total * h_) * kBf));
  MESHTUNE_RETURN_IF_ERROR(
      CopyBlocks(expert_out, gathered_.as<Bf16>(), rows, dst_block, h_));
  // Reduce-scatter over etp: rank q's block of partial sums goes to q and
  // the partials of this rank's rows are summed in etp rank order.
  const Bf16* mine_rows = gathered_.as<Bf16>();
  const int64_t mine =
      CountRows(plan, me * ep * local_, (me + 1) * ep * local_);
  if (etp > 1) {
    std::vector<int64_t> send(etp), recv(etp, mine * h_);
    for (int q = 0; q < etp; ++q) {
      send[q] = CountRows(plan, q * ep * local_, (q + 1) * ep * local_) * h_;
    }
    MESHTUNE_RETURN_IF_ERROR(
        ReserveBuffer(&copies_, static_cast<size_t>(mine * h_ * etp) * kBf));
    Bf16* partials = copies_.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(
        etp_->AllToAllV(gathered_.as<Bf16>(), send, partials, recv, nullptr));
    for (int q = 1; q < etp; ++q) {
      MESHTUNE_RETURN_IF_ERROR(
          Add(partials + q * mine * h_, partials, mine * h_, nullptr));
    }
    mine_rows = partials;
  }
  // All-to-all back over ep: each source gets its rows, in its order.
  if (ep > 1) {
    std::vector<int64_t> send(ep), recv(ep);
    for (int r = 0; r < ep; ++r) {
      send[r] =
          CountRows(plan, (me * ep + r) * local_, (me * ep + r + 1) * local_) *
          h_;
      recv[r] = RoutedRows(plan, r) * h_;
    }
    return ep_->AllToAllV(mine_rows, send, routed, recv, nullptr);
  }
  if (mine == 0) return Status::Ok();
  return CopyDeviceToDevice(routed, mine_rows,
                            static_cast<size_t>(mine * h_) * kBf, nullptr);
}

}  // namespace meshtune::engine::cuda
