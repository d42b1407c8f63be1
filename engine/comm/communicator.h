// Communicator: the collectives and point-to-point transfers the engine
// issues, behind one small interface (docs/design.md §8). Implementations:
// MPI (engine/comm/mpi_communicator.h, real runs) and in-process threads
// (engine/comm/local_communicator.h, fast unit tests only). The NCCL one
// arrives with the CUDA backend.
//
// Semantics (all float32 element counts, blocking unless noted):
// - Collectives are deterministic: every member receives bit-identical
//   results, reductions sum in rank order 0, 1, ..., size−1. That keeps the
//   replicated weights of tensor-parallel ranks identical step after step.
// - Send is buffered: it returns once the data is copied and never waits for
//   the receiver, so any pipeline schedule whose receives match its sends in
//   order cannot deadlock. Messages between one pair arrive in send order.
// - Every call is recorded in the CommLog when one is attached (bytes in the
//   nccl-tests convention: all-reduce and broadcast the buffer, all-gather
//   the gathered output, reduce-scatter the full input, send/recv the
//   message, all-to-all the floats this rank sends, itself included). The
//   engine test compares that log with the list the cost model
//   assumes (search_spaces/comm_ops.h).
//
// - Every blocking call waits at most timeout_s() (Megatron's
//   --distributed-timeout-minutes, default 10 minutes) for its peers. A
//   peer that is stopped (SIGSTOP), hung or dead must not freeze the job
//   for ever: the MPI communicator then prints one line naming the group
//   and the rank(s) that did not answer and aborts every rank; the local
//   one throws CommTimeoutError with that line. Waits sleep with a short
//   backoff instead of spinning a core.
//
// Public methods are non-virtual wrappers (record, then Do*); a
// communicator is used by one thread at a time.
#ifndef MESHTUNE_ENGINE_COMM_COMMUNICATOR_H_
#define MESHTUNE_ENGINE_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace meshtune::engine {

// Megatron's --distributed-timeout-minutes default (10 minutes), in seconds.
inline constexpr double kDefaultDistributedTimeoutS = 600.0;

enum class CommKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kAllToAll,
};
const char* ToString(CommKind kind);

// One recorded call.
struct CommRecord {
  CommKind kind;
  std::string group;  // communicator name ("tp", "dp", "pp", "world", ...)
  int64_t group_size;
  int64_t bytes;      // nccl-tests convention (see above)
  std::string label;  // what the engine was doing ("layer0.fwd", ...)
};

// Shared, thread-safe list of calls. The engine sets `label` around each
// phase; tests read `records()`. Labels are per thread, since in-process
// ranks are threads and ranks that are not in lock-step (the cp groups of
// context parallelism, pipeline stages) are in different phases at once: a
// call is labelled with its thread's last set_label, or, on a thread that
// never set one, with the last label set on any thread.
class CommLog {
 public:
  void Add(CommRecord r);
  void set_label(std::string label);
  std::string label() const;
  std::vector<CommRecord> records() const;
  void Clear();

 private:
  mutable std::mutex mu_;
  std::string label_;  // the last one set on any thread
  std::map<std::thread::id, std::string> thread_labels_;
  std::vector<CommRecord> records_;
};

// Thrown by the local communicator when a call waited longer than its
// timeout; what() is the TimeoutMessage line.
class CommTimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The one line both communicators report on a timeout, e.g.
//   "all_reduce on group 'dp' timed out after 2 s: rank 1 did not answer
//   (stopped, hung or dead); the job is aborted (raise
//   --distributed-timeout-minutes if that rank is only slow)"
// `silent` names the ranks that did not answer (world ranks under MPI,
// group ranks in-process; "" when every member answered).
// `call` is ToString(kind) or "split".
std::string TimeoutMessage(const std::string& call, const std::string& group,
                           double timeout_s, const std::vector<int>& silent);

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }

  // In place: data[count] = Σ_ranks data[count] (sum in rank order).
  void AllReduceSum(float* data, int64_t count);
  // In place, float64 (loss sums, squared gradient norms).
  void AllReduceSum(double* data, int64_t count);
  void AllReduceMax(float* data, int64_t count);
  // out[size·count], rank-major: out[r·count .. (r+1)·count) = in of rank r.
  void AllGather(const float* in, float* out, int64_t count);
  // in[size·count]; out[count] = Σ_ranks in[rank()·count ..]. `in` and `out`
  // must not overlap.
  void ReduceScatterSum(const float* in, float* out, int64_t count);
  void Broadcast(float* data, int64_t count, int root);
  // Buffered send (see above) and blocking receive; `peer` is a rank of
  // this communicator.
  void Send(const float* data, int64_t count, int peer);
  void Recv(float* data, int64_t count, int peer);
  void Barrier();
  // Variable all-to-all (MPI_Alltoallv): this rank sends send_counts[j]
  // floats to rank j, taken from `in` in rank order (rank 0's block first),
  // and receives recv_counts[j] floats from rank j into `out`, rank-major.
  // recv_counts[j] must equal what rank j sends here; both vectors have
  // size() entries. The expert-parallel token dispatch and combine.
  void AllToAllV(const float* in, const std::vector<int64_t>& send_counts,
                 float* out, const std::vector<int64_t>& recv_counts);

  // A new communicator over the members that pass the same `color`, ranked
  // by `key` (MPI_Comm_split). Collective: every member calls it. The child
  // shares this communicator's log.
  std::unique_ptr<Communicator> Split(int color, int key,
                                      const std::string& name);

  // Attach a log (not owned; may be null). Children made later inherit it.
  void set_log(CommLog* log) { log_ = log; }
  CommLog* log() const { return log_; }

  // How long one call may wait for its peers (> 0; see above). Children
  // made later by Split inherit it. Every member of a group should use the
  // same value.
  void set_timeout_s(double timeout_s);
  double timeout_s() const { return timeout_s_; }

 protected:
  Communicator(int rank, int size, std::string name)
      : rank_(rank), size_(size), name_(std::move(name)) {}

  virtual void DoAllReduceSum(float* data, int64_t count) = 0;
  virtual void DoAllReduceSum(double* data, int64_t count) = 0;
  virtual void DoAllReduceMax(float* data, int64_t count) = 0;
  virtual void DoAllGather(const float* in, float* out, int64_t count) = 0;
  virtual void DoReduceScatterSum(const float* in, float* out,
                                  int64_t count) = 0;
  virtual void DoBroadcast(float* data, int64_t count, int root) = 0;
  virtual void DoSend(const float* data, int64_t count, int peer) = 0;
  virtual void DoRecv(float* data, int64_t count, int peer) = 0;
  virtual void DoBarrier() = 0;
  // Default: a buffered Send to every other rank, then a Recv from each,
  // in rank order (no deadlock, since sends never wait); the own block is
  // copied. Empty blocks are skipped on both sides, as the counts agree.
  virtual void DoAllToAllV(const float* in,
                           const std::vector<int64_t>& send_counts, float* out,
                           const std::vector<int64_t>& recv_counts);
  virtual std::unique_ptr<Communicator> DoSplit(int color, int key,
                                                const std::string& name) = 0;

 private:
  void Record(CommKind kind, int64_t bytes);
  int rank_;
  int size_;
  std::string name_;
  CommLog* log_ = nullptr;
  double timeout_s_ = kDefaultDistributedTimeoutS;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_COMM_COMMUNICATOR_H_
