// In-process communicator: ranks are threads sharing one LocalGroup per
// communicator (see local_communicator.h).
//
// Every collective follows one pattern: each rank posts a pointer to its
// buffer in the group's slot table, a barrier publishes the table, every rank
// reads what it needs (summing in rank order 0..size-1, so all ranks compute
// bit-identical results), and a second barrier keeps every posted buffer
// alive and unmodified until all readers are done. The barrier is
// generation-counted, so it can be reused back to back.
//
// Failure: when a rank throws inside RunLocalRanks, the whole family of
// groups (the world and everything split from it) is poisoned; ranks waiting
// in a barrier or a Recv wake up and throw LocalPeerFailed instead of hanging.
// A rank that never arrives (a thread stuck elsewhere) is caught by the
// communicator's timeout: the waiter throws CommTimeoutError naming the
// group ranks that did not arrive, which poisons the rest in turn.
#include "engine/comm/local_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "search_spaces/status.h"

namespace meshtune::engine {
namespace {

// Thrown in the ranks that were waiting when another rank failed.
class LocalPeerFailed : public std::runtime_error {
 public:
  LocalPeerFailed()
      : std::runtime_error(
            "local communicator: another rank failed; abandoning this call") {}
};

class LocalGroup;

using Clock = std::chrono::steady_clock;

// What a waiting rank reports if its peers do not come in time.
struct Wait {
  const char* call;          // "all_reduce", ..., "split"
  const std::string* group;  // the communicator's name
  double timeout_s;
  Clock::time_point deadline;
};

// Shared by a world and every group split from it: the poison flag and the
// groups to wake when it is set.
struct LocalFamily {
  std::atomic<bool> poisoned{false};
  std::mutex mu;
  std::vector<std::weak_ptr<LocalGroup>> groups;  // guarded by mu

  void Register(const std::shared_ptr<LocalGroup>& g) {
    std::lock_guard<std::mutex> lock(mu);
    // Drop groups whose communicators are gone, so repeated splits (one
    // ProcessGroups per test case) do not grow the list.
    groups.erase(std::remove_if(groups.begin(), groups.end(),
                                [](const std::weak_ptr<LocalGroup>& w) {
                                  return w.expired();
                                }),
                 groups.end());
    groups.push_back(g);
  }
  void Poison();
};

// Which call a rank posted; members of one group must agree.
enum class Op {
  kAllReduceSum,
  kAllReduceMax,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kBarrier,
  kSplit
};

// What one rank posts for a collective.
struct Slot {
  Op op = Op::kBarrier;
  const void* data = nullptr;  // the rank's input buffer
  int64_t count = 0;           // elements
  int root = 0;                // Broadcast only
  int color = 0;               // Split only
  int key = 0;                 // Split only
};

// The shared state of one communicator's members.
class LocalGroup {
 public:
  LocalGroup(int size, std::shared_ptr<LocalFamily> family)
      : size_(size),
        family_(std::move(family)),
        slots_(size),
        arrived_ranks_(size, false),
        children_(size),
        queues_(static_cast<size_t>(size) * size) {}

  int size() const { return size_; }
  const std::shared_ptr<LocalFamily>& family() const { return family_; }

  // Posts `slot` for `rank`. Only this rank writes its slot, and only
  // between the closing barrier of one collective and the opening barrier of
  // the next, when nobody reads the table.
  void Post(int rank, const Slot& slot) { slots_[rank] = slot; }
  const Slot& slot(int rank) const { return slots_[rank]; }

  // Generation-counted barrier; throws LocalPeerFailed when poisoned and
  // CommTimeoutError (naming the ranks still missing) at the deadline.
  void Barrier(int rank, const Wait& wait) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t generation = generation_;
    arrived_ranks_[rank] = true;
    if (++arrived_ == size_) {
      arrived_ = 0;
      std::fill(arrived_ranks_.begin(), arrived_ranks_.end(), false);
      ++generation_;
      cv_.notify_all();
      return;
    }
    const bool woke = cv_.wait_until(lock, wait.deadline, [&] {
      return generation_ != generation || family_->poisoned.load();
    });
    if (generation_ != generation) return;
    if (woke) throw LocalPeerFailed();
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!arrived_ranks_[r]) missing.push_back(r);
    }
    throw CommTimeoutError(
        TimeoutMessage(wait.call, *wait.group, wait.timeout_s, missing));
  }

  // Point-to-point: one FIFO per (src, dst).
  void Push(int src, int dst, std::vector<float> message) {
    std::lock_guard<std::mutex> lock(mu_);
    queues_[Index(src, dst)].push_back(std::move(message));
    cv_.notify_all();
  }
  std::vector<float> Pop(int src, int dst, const Wait& wait) {
    std::unique_lock<std::mutex> lock(mu_);
    std::deque<std::vector<float>>& q = queues_[Index(src, dst)];
    const bool woke = cv_.wait_until(lock, wait.deadline, [&] {
      return !q.empty() || family_->poisoned.load();
    });
    if (!woke) {
      throw CommTimeoutError(
          TimeoutMessage(wait.call, *wait.group, wait.timeout_s, {src}));
    }
    if (q.empty()) throw LocalPeerFailed();
    std::vector<float> message = std::move(q.front());
    q.pop_front();
    return message;
  }

  // Split results: the leader of each color publishes the child group here.
  void set_child(int rank, std::shared_ptr<LocalGroup> child) {
    children_[rank] = std::move(child);
  }
  const std::shared_ptr<LocalGroup>& child(int rank) const {
    return children_[rank];
  }

  // Wakes every waiter so it can see the poison flag.
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

 private:
  size_t Index(int src, int dst) const {
    return static_cast<size_t>(src) * size_ + dst;
  }

  const int size_;
  const std::shared_ptr<LocalFamily> family_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;                  // guarded by mu_
  int64_t generation_ = 0;           // guarded by mu_
  std::vector<Slot> slots_;          // published by Barrier()
  std::vector<bool> arrived_ranks_;  // this generation's; guarded by mu_
  std::vector<std::shared_ptr<LocalGroup>> children_;
  std::vector<std::deque<std::vector<float>>> queues_;  // guarded by mu_
};

void LocalFamily::Poison() {
  poisoned.store(true);
  std::vector<std::shared_ptr<LocalGroup>> live;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::weak_ptr<LocalGroup>& g : groups) {
      if (std::shared_ptr<LocalGroup> p = g.lock()) live.push_back(p);
    }
  }
  // Taking each group's mutex before notifying means a waiter either saw the
  // flag already or is parked and receives this notification.
  for (const std::shared_ptr<LocalGroup>& g : live) g->Wake();
}

// Max that propagates NaN (a NaN anywhere makes the result NaN), so an
// overflow check sees it whatever rank holds it. Shared semantics with the
// MPI communicator.
template <typename T>
T MaxPropagatingNan(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? b : a;
}

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(int rank, std::shared_ptr<LocalGroup> group,
                    std::string name)
      : Communicator(rank, group->size(), std::move(name)),
        group_(std::move(group)) {}

  void Poison() { group_->family()->Poison(); }

 protected:
  void DoAllReduceSum(float* data, int64_t count) override {
    Reduce(Op::kAllReduceSum, data, count,
           [](float a, float b) { return a + b; });
  }
  void DoAllReduceSum(double* data, int64_t count) override {
    Reduce(Op::kAllReduceSum, data, count,
           [](double a, double b) { return a + b; });
  }
  void DoAllReduceMax(float* data, int64_t count) override {
    Reduce(Op::kAllReduceMax, data, count, MaxPropagatingNan<float>);
  }

  void DoAllGather(const float* in, float* out, int64_t count) override {
    const Wait wait = StartWait(CommKind::kAllGather);
    Open(Op::kAllGather, in, count, wait);
    for (int r = 0; r < size(); ++r) {
      const float* src = static_cast<const float*>(group_->slot(r).data);
      float* dst = out + static_cast<int64_t>(r) * count;
      if (src != dst) std::memcpy(dst, src, sizeof(float) * count);
    }
    group_->Barrier(rank(), wait);
  }

  void DoReduceScatterSum(const float* in, float* out, int64_t count) override {
    const Wait wait = StartWait(CommKind::kReduceScatter);
    Open(Op::kReduceScatter, in, count, wait);
    const int64_t offset = static_cast<int64_t>(rank()) * count;
    for (int64_t i = 0; i < count; ++i) {
      float acc = In<float>(0)[offset + i];
      for (int r = 1; r < size(); ++r) acc += In<float>(r)[offset + i];
      out[i] = acc;
    }
    group_->Barrier(rank(), wait);
  }

  void DoBroadcast(float* data, int64_t count, int root) override {
    MESHTUNE_CHECK(root >= 0 && root < size());
    const Wait wait = StartWait(CommKind::kBroadcast);
    Open(Op::kBroadcast, data, count, wait, root);
    if (rank() != root) {
      std::memcpy(data, In<float>(root), sizeof(float) * count);
    }
    group_->Barrier(rank(), wait);
  }

  void DoSend(const float* data, int64_t count, int peer) override {
    MESHTUNE_CHECK(peer >= 0 && peer < size() && count >= 0);
    group_->Push(rank(), peer, std::vector<float>(data, data + count));
  }

  void DoRecv(float* data, int64_t count, int peer) override {
    MESHTUNE_CHECK(peer >= 0 && peer < size() && count >= 0);
    const std::vector<float> message =
        group_->Pop(peer, rank(), StartWait(CommKind::kRecv));
    // A count mismatch means the two ranks disagree about the schedule.
    MESHTUNE_CHECK(static_cast<int64_t>(message.size()) == count);
    std::copy(message.begin(), message.end(), data);
  }

  void DoBarrier() override {
    const Wait wait = StartWait(CommKind::kBarrier);
    Open(Op::kBarrier, nullptr, 0, wait);
    group_->Barrier(rank(), wait);
  }

  std::unique_ptr<Communicator> DoSplit(int color, int key,
                                        const std::string& name) override {
    // Negative colors are MPI_UNDEFINED territory in MPI_Comm_split; both
    // implementations reject them so tests catch it without MPI.
    MESHTUNE_CHECK(color >= 0);
    Slot slot;
    slot.op = Op::kSplit;
    slot.color = color;
    slot.key = key;
    const Wait wait = StartWait("split");
    group_->Post(rank(), slot);
    group_->Barrier(rank(), wait);
    // Members of this rank's color, ordered by (key, old rank).
    std::vector<std::pair<int, int>> members;  // (key, old rank)
    for (int r = 0; r < size(); ++r) {
      const Slot& s = group_->slot(r);
      MESHTUNE_CHECK(s.op == Op::kSplit);
      if (s.color == color) members.emplace_back(s.key, r);
    }
    std::sort(members.begin(), members.end());
    int new_rank = 0;
    while (members[new_rank].second != rank()) ++new_rank;
    // The lowest old rank of each color creates the child's shared state.
    int leader = rank();
    for (const auto& m : members) leader = std::min(leader, m.second);
    if (leader == rank()) {
      auto child = std::make_shared<LocalGroup>(
          static_cast<int>(members.size()), group_->family());
      group_->family()->Register(child);
      group_->set_child(rank(), std::move(child));
    }
    group_->Barrier(rank(), wait);
    // The children table is rewritten only after the next Split's opening
    // barrier, which this rank has not reached yet, so reading is safe.
    return std::make_unique<LocalCommunicator>(new_rank, group_->child(leader),
                                               name);
  }

 private:
  // The deadline of a call starting now (both barriers of one collective
  // share it).
  Wait StartWait(const char* call) const {
    return Wait{call, &name(), timeout_s(),
                Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(timeout_s()))};
  }
  Wait StartWait(CommKind kind) const { return StartWait(ToString(kind)); }

  // Posts (op, data, count, root), publishes the table and checks that
  // every member called the same collective with the same count and root.
  void Open(Op op, const void* data, int64_t count, const Wait& wait,
            int root = 0) {
    Slot slot;
    slot.op = op;
    slot.data = data;
    slot.count = count;
    slot.root = root;
    group_->Post(rank(), slot);
    group_->Barrier(rank(), wait);
    for (int r = 0; r < size(); ++r) {
      MESHTUNE_CHECK(group_->slot(r).op == op);
      MESHTUNE_CHECK(group_->slot(r).count == count);
      MESHTUNE_CHECK(group_->slot(r).root == root);
    }
  }

  template <typename T>
  const T* In(int r) const {
    return static_cast<const T*>(group_->slot(r).data);
  }

  // In place: data[i] = op(...op(op(x0[i], x1[i]), x2[i])...) in rank order.
  // The result goes to a scratch buffer first because the other ranks are
  // still reading `data` until the closing barrier.
  template <typename T, typename Fn>
  void Reduce(Op op, T* data, int64_t count, Fn fn) {
    const Wait wait = StartWait(CommKind::kAllReduce);
    Open(op, data, count, wait);
    std::vector<T> result(count);
    for (int64_t i = 0; i < count; ++i) {
      T acc = In<T>(0)[i];
      for (int r = 1; r < size(); ++r) acc = fn(acc, In<T>(r)[i]);
      result[i] = acc;
    }
    group_->Barrier(rank(), wait);
    std::copy(result.begin(), result.end(), data);
  }

  std::shared_ptr<LocalGroup> group_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> MakeLocalWorld(int size) {
  MESHTUNE_CHECK(size >= 1);
  auto family = std::make_shared<LocalFamily>();
  auto group = std::make_shared<LocalGroup>(size, family);
  family->Register(group);
  std::vector<std::unique_ptr<Communicator>> world;
  world.reserve(size);
  for (int r = 0; r < size; ++r) {
    world.push_back(std::make_unique<LocalCommunicator>(r, group, "world"));
  }
  return world;
}

void RunLocalRanks(int size, const std::function<void(Communicator&)>& fn,
                   CommLog* log) {
  std::vector<std::unique_ptr<Communicator>> world = MakeLocalWorld(size);
  std::mutex mu;
  std::exception_ptr first_error;  // guarded by mu
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int r = 0; r < size; ++r) {
    world[r]->set_log(log);
    threads.emplace_back([&, r] {
      try {
        fn(*world[r]);
      } catch (...) {
        {
          // Recorded before poisoning, so the failure that caused the
          // poison is the one rethrown, not a LocalPeerFailed it induced.
          std::lock_guard<std::mutex> lock(mu);
          if (!first_error) first_error = std::current_exception();
        }
        static_cast<LocalCommunicator&>(*world[r]).Poison();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace meshtune::engine
