#include "engine/moe/token_dispatcher.h"

#include <algorithm>

#include "search_spaces/status.h"

namespace meshtune::engine::moe {
namespace {

// Counts travel as floats (the communicator's element type): exact below
// 2^24 rows, far above what one micro-batch routes.
constexpr int64_t kMaxExactCount = int64_t{1} << 24;

int64_t Sum(const std::vector<int64_t>& v, int64_t begin, int64_t end) {
  int64_t s = 0;
  for (int64_t i = begin; i < end; ++i) s += v[i];
  return s;
}

}  // namespace

int64_t DispatchPlan::routed_rows() const {
  return Sum(tokens_per_expert, 0,
             static_cast<int64_t>(tokens_per_expert.size()));
}

int64_t DispatchPlan::expert_rows() const {
  return Sum(rows_per_local_expert, 0,
             static_cast<int64_t>(rows_per_local_expert.size()));
}

TokenDispatcher::TokenDispatcher(Communicator* ep, Communicator* etp,
                                 int64_t num_experts, int64_t hidden)
    : ep_(ep), etp_(etp), experts_(num_experts), h_(hidden) {
  MESHTUNE_CHECK(ep_ != nullptr && etp_ != nullptr);
  MESHTUNE_CHECK(num_experts > 0 && num_experts % ep_->size() == 0);
  local_ = num_experts / ep_->size();
}

int64_t TokenDispatcher::first_local_expert() const {
  return ep_->rank() * local_;
}

void TokenDispatcher::Plan(const int64_t* tokens_per_expert,
                           DispatchPlan* plan) const {
  const int ep = ep_->size(), etp = etp_->size();
  plan->tokens_per_expert.assign(tokens_per_expert,
                                 tokens_per_expert + experts_);
  // Each ep rank learns how many rows every source sends to each of its
  // local experts: E/ep counts per peer.
  std::vector<float> send(experts_), recv(experts_);
  for (int64_t e = 0; e < experts_; ++e) {
    MESHTUNE_CHECK(tokens_per_expert[e] >= 0 &&
                   tokens_per_expert[e] < kMaxExactCount);
    send[e] = static_cast<float>(tokens_per_expert[e]);
  }
  const std::vector<int64_t> per_peer(ep, local_);
  ep_->AllToAllV(send.data(), per_peer, recv.data(), per_peer);
  // Then every etp rank learns the others' (they gather each other's rows).
  std::vector<float> all(static_cast<size_t>(etp) * experts_);
  if (etp > 1) {
    etp_->AllGather(recv.data(), all.data(), experts_);
  } else {
    all = recv;
  }
  plan->counts.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    plan->counts[i] = static_cast<int64_t>(all[i]);
  }
  plan->rows_per_local_expert.assign(local_, 0);
  for (int q = 0; q < etp; ++q) {
    for (int src = 0; src < ep; ++src) {
      for (int64_t le = 0; le < local_; ++le) {
        plan->rows_per_local_expert[le] +=
            plan->counts[(q * ep + src) * local_ + le];
      }
    }
  }
}

void TokenDispatcher::Dispatch(const float* permuted, const DispatchPlan& plan,
                               std::vector<float>* expert_in) const {
  const int ep = ep_->size(), etp = etp_->size(), me = etp_->rank();
  const std::vector<int64_t>& c = plan.counts;
  // All-to-all over ep: rows for rank r are the blocks of its experts.
  std::vector<int64_t> send(ep), recv(ep);
  for (int r = 0; r < ep; ++r) {
    send[r] = Sum(plan.tokens_per_expert, r * local_, (r + 1) * local_) * h_;
    recv[r] = Sum(c, (me * ep + r) * local_, (me * ep + r + 1) * local_) * h_;
  }
  std::vector<float> received(Sum(recv, 0, ep));
  ep_->AllToAllV(permuted, send, received.data(), recv);
  // All-gather over etp (sizes differ per rank: an all-to-all of copies).
  std::vector<float> gathered;
  if (etp > 1) {
    const int64_t mine = static_cast<int64_t>(received.size());
    std::vector<float> copies(mine * etp);
    for (int q = 0; q < etp; ++q) {
      std::copy(received.begin(), received.end(), copies.begin() + q * mine);
    }
    std::vector<int64_t> counts_in(etp, mine), counts_out(etp);
    for (int q = 0; q < etp; ++q) {
      counts_out[q] = Sum(c, q * ep * local_, (q + 1) * ep * local_) * h_;
    }
    gathered.resize(Sum(counts_out, 0, etp));
    etp_->AllToAllV(copies.data(), counts_in, gathered.data(), counts_out);
  } else {
    gathered.swap(received);
  }
  // [q][src][le] -> [le][q][src].
  std::vector<int64_t> at(c.size() + 1, 0);  // block starts, gathered order
  for (size_t i = 0; i < c.size(); ++i) at[i + 1] = at[i] + c[i];
  expert_in->resize(gathered.size());
  int64_t out = 0;
  for (int64_t le = 0; le < local_; ++le) {
    for (int q = 0; q < etp; ++q) {
      for (int src = 0; src < ep; ++src) {
        const int64_t b = (q * ep + src) * local_ + le;
        std::copy_n(gathered.begin() + at[b] * h_, c[b] * h_,
                    expert_in->begin() + out);
        out += c[b] * h_;
      }
    }
  }
}

void TokenDispatcher::Combine(const float* expert_out, const DispatchPlan& plan,
                              std::vector<float>* routed) const {
  const int ep = ep_->size(), etp = etp_->size(), me = etp_->rank();
  const std::vector<int64_t>& c = plan.counts;
  std::vector<int64_t> at(c.size() + 1, 0);
  for (size_t i = 0; i < c.size(); ++i) at[i + 1] = at[i] + c[i];
  // [le][q][src] -> [q][src][le].
  std::vector<float> gathered(at.back() * h_);
  int64_t in = 0;
  for (int64_t le = 0; le < local_; ++le) {
    for (int q = 0; q < etp; ++q) {
      for (int src = 0; src < ep; ++src) {
        const int64_t b = (q * ep + src) * local_ + le;
        std::copy_n(expert_out + in, c[b] * h_, gathered.begin() + at[b] * h_);
        in += c[b] * h_;
      }
    }
  }
  // Reduce-scatter over etp: rank q's block of partial sums goes to q, and
  // the partials of this rank's rows are summed in etp rank order.
  std::vector<float> mine;
  if (etp > 1) {
    const int64_t my_count =
        Sum(c, me * ep * local_, (me + 1) * ep * local_) * h_;
    std::vector<int64_t> counts_in(etp), counts_out(etp, my_count);
    for (int q = 0; q < etp; ++q) {
      counts_in[q] = Sum(c, q * ep * local_, (q + 1) * ep * local_) * h_;
    }
    std::vector<float> partials(my_count * etp);
    etp_->AllToAllV(gathered.data(), counts_in, partials.data(), counts_out);
    mine.assign(partials.begin(), partials.begin() + my_count);
    for (int q = 1; q < etp; ++q) {
      const float* p = partials.data() + q * my_count;
      for (int64_t i = 0; i < my_count; ++i) mine[i] += p[i];
    }
  } else {
    mine.swap(gathered);
  }
  // All-to-all back over ep: each source gets its rows, in its order.
  std::vector<int64_t> send(ep), recv(ep);
  for (int r = 0; r < ep; ++r) {
    send[r] = Sum(c, (me * ep + r) * local_, (me * ep + r + 1) * local_) * h_;
    recv[r] = Sum(plan.tokens_per_expert, r * local_, (r + 1) * local_) * h_;
  }
  routed->resize(Sum(recv, 0, ep));
  ep_->AllToAllV(mine.data(), send, routed->data(), recv);
}

}  // namespace meshtune::engine::moe
