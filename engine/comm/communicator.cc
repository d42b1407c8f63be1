#include "engine/comm/communicator.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "search_spaces/status.h"

namespace meshtune::engine {

const char* ToString(CommKind kind) {
  switch (kind) {
    case CommKind::kAllReduce:
      return "all_reduce";
    case CommKind::kAllGather:
      return "all_gather";
    case CommKind::kReduceScatter:
      return "reduce_scatter";
    case CommKind::kBroadcast:
      return "broadcast";
    case CommKind::kSend:
      return "send";
    case CommKind::kRecv:
      return "recv";
    case CommKind::kBarrier:
      return "barrier";
    case CommKind::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

void CommLog::Add(CommRecord r) {
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(std::move(r));
}
void CommLog::set_label(std::string label) {
  std::lock_guard<std::mutex> lock(mu_);
  thread_labels_[std::this_thread::get_id()] = label;
  label_ = std::move(label);
}
std::string CommLog::label() const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = thread_labels_.find(std::this_thread::get_id());
  return it != thread_labels_.end() ? it->second : label_;
}
std::vector<CommRecord> CommLog::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}
void CommLog::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  records_.clear();
}

std::string TimeoutMessage(const std::string& call, const std::string& group,
                           double timeout_s, const std::vector<int>& silent) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeout_s);
  std::string text =
      call + " on group '" + group + "' timed out after " + seconds + " s: ";
  if (silent.empty()) {
    // Every peer is alive and waiting too, so they wait for different
    // calls (a schedule mismatch) or on a rank of another group.
    return text +
           "every member answered but the call did not complete (the ranks "
           "wait for different calls, or on a rank outside this group); the "
           "job is aborted";
  }
  text += silent.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < silent.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(silent[i]);
  }
  return text +
         " did not answer (stopped, hung or dead); the job is aborted (raise "
         "--distributed-timeout-minutes if it is only slow)";
}

void Communicator::set_timeout_s(double timeout_s) {
  MESHTUNE_CHECK(timeout_s > 0);
  timeout_s_ = timeout_s;
}

void Communicator::Record(CommKind kind, int64_t bytes) {
  if (log_ == nullptr || size_ == 1) return;  // size-1 groups move nothing
  log_->Add(CommRecord{kind, name_, size_, bytes, log_->label()});
}

void Communicator::AllReduceSum(float* data, int64_t count) {
  Record(CommKind::kAllReduce, count * 4);
  if (size_ > 1) DoAllReduceSum(data, count);
}
void Communicator::AllReduceSum(double* data, int64_t count) {
  Record(CommKind::kAllReduce, count * 8);
  if (size_ > 1) DoAllReduceSum(data, count);
}
void Communicator::AllReduceMax(float* data, int64_t count) {
  Record(CommKind::kAllReduce, count * 4);
  if (size_ > 1) DoAllReduceMax(data, count);
}
void Communicator::AllGather(const float* in, float* out, int64_t count) {
  Record(CommKind::kAllGather, count * size_ * 4);
  DoAllGather(in, out, count);
}
void Communicator::ReduceScatterSum(const float* in, float* out,
                                    int64_t count) {
  Record(CommKind::kReduceScatter, count * size_ * 4);
  DoReduceScatterSum(in, out, count);
}
void Communicator::Broadcast(float* data, int64_t count, int root) {
  Record(CommKind::kBroadcast, count * 4);
  if (size_ > 1) DoBroadcast(data, count, root);
}
void Communicator::Send(const float* data, int64_t count, int peer) {
  Record(CommKind::kSend, count * 4);
  DoSend(data, count, peer);
}
void Communicator::Recv(float* data, int64_t count, int peer) {
  Record(CommKind::kRecv, count * 4);
  DoRecv(data, count, peer);
}
void Communicator::AllToAllV(const float* in,
                             const std::vector<int64_t>& send_counts,
                             float* out,
                             const std::vector<int64_t>& recv_counts) {
  MESHTUNE_CHECK(static_cast<int>(send_counts.size()) == size_ &&
                 static_cast<int>(recv_counts.size()) == size_);
  int64_t sent = 0;
  for (int64_t c : send_counts) sent += c;
  Record(CommKind::kAllToAll, sent * 4);
  DoAllToAllV(in, send_counts, out, recv_counts);
}

void Communicator::DoAllToAllV(const float* in,
                               const std::vector<int64_t>& send_counts,
                               float* out,
                               const std::vector<int64_t>& recv_counts) {
  std::vector<int64_t> send_at(size_ + 1, 0), recv_at(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) {
    MESHTUNE_CHECK(send_counts[r] >= 0 && recv_counts[r] >= 0);
    send_at[r + 1] = send_at[r] + send_counts[r];
    recv_at[r + 1] = recv_at[r] + recv_counts[r];
  }
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && send_counts[r] > 0) {
      DoSend(in + send_at[r], send_counts[r], r);
    }
  }
  MESHTUNE_CHECK(send_counts[rank_] == recv_counts[rank_]);
  std::copy_n(in + send_at[rank_], send_counts[rank_], out + recv_at[rank_]);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && recv_counts[r] > 0) {
      DoRecv(out + recv_at[r], recv_counts[r], r);
    }
  }
}

void Communicator::Barrier() {
  Record(CommKind::kBarrier, 0);
  if (size_ > 1) DoBarrier();
}
std::unique_ptr<Communicator> Communicator::Split(int color, int key,
                                                  const std::string& name) {
  std::unique_ptr<Communicator> child = DoSplit(color, key, name);
  child->set_log(log_);
  child->set_timeout_s(timeout_s_);
  return child;
}

}  // namespace meshtune::engine
