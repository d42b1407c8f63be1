// MPI communicator (see mpi_communicator.h). The only engine file that
// includes <mpi.h>; without MESHTUNE_ENGINE_HAVE_MPI it compiles to the
// "built without MPI" answers.
//
// Determinism: MPI_Allreduce may combine contributions in an order that
// depends on the algorithm, the message size and even the rank (Open MPI's
// coll/tuned picks among ring, recursive doubling and Rabenseifner), which
// would let tensor-parallel replicas drift apart bit by bit. So reductions
// are done by hand in the reduce-scatter + all-gather shape of a ring
// all-reduce (Thakur, Rabenseifner & Gropp, "Optimization of Collective
// Communication Operations in MPICH", IJHPCA 2005):
//   1. MPI_Alltoallv hands rank r block r of every member's buffer;
//   2. rank r sums its block locally in rank order 0..size-1;
//   3. MPI_Allgatherv sends every reduced block to every member.
// Each element is therefore summed exactly once, in rank order, by its
// owner; every member ends with the same bits. Traffic per rank is
// 2·(size-1)/size of the buffer, as for a ring all-reduce, and the scratch
// space is one block per member (about one buffer), which suits the ~100 MB
// gradient buffers of the CPU engine.
//
// Counts: MPI takes int counts, so every call works on chunks of at most
// chunk_elements_ (default 2^26 floats, 256 MB; each chunk is an independent
// collective, which changes nothing in the per-element sums).
// MESHTUNE_MPI_CHUNK_ELEMENTS overrides it so the MPI test can run the
// multi-chunk paths with tiny messages; every rank must see the same value.
//
// Timeouts (communicator.h): every call is nonblocking (MPI_I*) and waited
// for by polling MPI_Test against the communicator's deadline, spinning for
// the first millisecond (collectives of the CPU engine are short) and then
// sleeping with a backoff of up to 1 ms, so a rank waiting for a stopped
// peer does not burn a core. While waiting, a rank also answers "are you
// there?" pings on a control communicator (a duplicate of the world). At
// the deadline the waiter pings the peers it waits for, gives them a grace
// period to answer, prints one line naming the ones that did not (the
// stopped, hung or dead ranks) and aborts the job (MPI_Abort), so mpirun
// ends every rank. MPI_Comm_split has no nonblocking form; a timed barrier
// before it catches a missing member.
#include "engine/comm/mpi_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef MESHTUNE_ENGINE_HAVE_MPI
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <list>
#include <thread>
#include <utility>
#include <vector>
#endif

namespace meshtune::engine {

bool LaunchedUnderMpi() {
  // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH/Hydra and Slurm's PMI
  // set PMI_SIZE; PMIx launchers (srun --mpi=pmix, prterun) set PMIX_RANK.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

#ifndef MESHTUNE_ENGINE_HAVE_MPI

bool MpiAvailable() { return false; }

StatusOr<std::unique_ptr<Communicator>> MakeMpiWorld() {
  return Status::Unimplemented("this tune was built without MPI",
                               "install libopenmpi-dev and rebuild");
}

void FinalizeMpi() {}

void AbortAllRanks(const std::string& message, int exit_code) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(exit_code);
}

#else  // MESHTUNE_ENGINE_HAVE_MPI

namespace {

constexpr int64_t kDefaultChunkElements = int64_t{1} << 26;
// Half of INT_MAX, so displacements inside a chunk (up to the chunk plus one
// element per member) still fit an int.
constexpr int64_t kMaxChunkElements = int64_t{1} << 30;
constexpr int kP2pTag = 0;
// Tags of the liveness protocol on g_control.
constexpr int kPingTag = 1;
constexpr int kPongTag = 2;
// Polling: spin this long, then sleep from kFirstPause doubling to
// kMaxPause between MPI_Test calls.
constexpr std::chrono::microseconds kSpin{1000};
constexpr std::chrono::microseconds kFirstPause{20};
constexpr std::chrono::microseconds kMaxPause{1000};
// How long a timed-out rank waits for its peers to answer a ping.
constexpr double kMaxPingGraceS = 2.0;

using Clock = std::chrono::steady_clock;

// The control communicator (MPI_Comm_dup of the world, made with it): its
// messages never mix with the engine's traffic.
MPI_Comm g_control = MPI_COMM_NULL;

bool MpiInitialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

bool MpiFinalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}

int WorldRank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Installed on every communicator: a failed MPI call names the rank and
// MPI's error, then takes every rank down so none waits forever.
void AbortOnMpiError(MPI_Comm* /*comm*/, int* code, ...) {
  char text[MPI_MAX_ERROR_STRING] = "unknown MPI error";
  int length = 0;
  MPI_Error_string(*code, text, &length);
  std::fprintf(stderr, "tune: error: MPI call failed on rank %d: %s\n",
               WorldRank(), text);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Aborts every rank after a broken protocol (mismatched counts).
[[noreturn]] void FailProtocol(const std::string& message) {
  std::fprintf(stderr, "tune: error: rank %d: %s\n", WorldRank(),
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

// Answers every ping that has arrived: this rank is alive and waiting.
void AnswerPings() {
  if (g_control == MPI_COMM_NULL) return;
  static const int kAlive = 1;  // static: the Isend outlives this call
  for (;;) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, g_control, &flag, &status);
    if (!flag) return;
    int ping = 0;
    MPI_Recv(&ping, 1, MPI_INT, status.MPI_SOURCE, kPingTag, g_control,
             MPI_STATUS_IGNORE);
    MPI_Request request;
    MPI_Isend(&kAlive, 1, MPI_INT, status.MPI_SOURCE, kPongTag, g_control,
              &request);
    MPI_Request_free(&request);  // completes on its own
  }
}

// Pings the world ranks `peers` and returns those that do not answer
// within `grace_s` (a rank answers while it waits in any call).
std::vector<int> SilentRanks(const std::vector<int>& peers, double grace_s) {
  if (g_control == MPI_COMM_NULL) return peers;
  static const int kPing = 0;
  for (int peer : peers) {
    MPI_Request request;
    MPI_Isend(&kPing, 1, MPI_INT, peer, kPingTag, g_control, &request);
    MPI_Request_free(&request);
  }
  std::vector<bool> answered(peers.size(), false);
  size_t remaining = peers.size();
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(grace_s));
  while (remaining > 0 && Clock::now() < deadline) {
    AnswerPings();  // peers that time out too may be pinging this rank
    for (size_t i = 0; i < peers.size(); ++i) {
      if (answered[i]) continue;
      int flag = 0;
      MPI_Iprobe(peers[i], kPongTag, g_control, &flag, MPI_STATUS_IGNORE);
      if (!flag) continue;
      int pong = 0;
      MPI_Recv(&pong, 1, MPI_INT, peers[i], kPongTag, g_control,
               MPI_STATUS_IGNORE);
      answered[i] = true;
      --remaining;
    }
    std::this_thread::sleep_for(kMaxPause);
  }
  std::vector<int> silent;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!answered[i]) silent.push_back(peers[i]);
  }
  return silent;
}

// Same NaN-propagating max as the local communicator.
template <typename T>
T MaxPropagatingNan(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? b : a;
}

template <typename T>
MPI_Datatype MpiType();
template <>
MPI_Datatype MpiType<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype MpiType<double>() {
  return MPI_DOUBLE;
}

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` when `owned` (split communicators).
  MpiCommunicator(MPI_Comm comm, bool owned, int64_t chunk_elements,
                  std::string name)
      : Communicator(RankOf(comm), SizeOf(comm), std::move(name)),
        comm_(comm),
        owned_(owned),
        chunk_elements_(chunk_elements),
        world_ranks_(WorldRanksOf(comm)) {}

  ~MpiCommunicator() override {
    if (MpiFinalized()) return;  // nothing can be completed or freed now
    // Buffered sends must finish before their buffers go; the receivers
    // have matched them by the time a correct program tears down (a
    // receiver that never comes times out like any wait).
    for (PendingSend& p : pending_) {
      for (MPI_Request& request : p.requests) {
        Wait(&request, nullptr, CommKind::kSend, {p.peer});
      }
    }
    if (owned_) MPI_Comm_free(&comm_);
  }

 protected:
  void DoAllReduceSum(float* data, int64_t count) override {
    Reap();
    Reduce(data, count, [](float a, float b) { return a + b; });
  }
  void DoAllReduceSum(double* data, int64_t count) override {
    Reap();
    Reduce(data, count, [](double a, double b) { return a + b; });
  }
  void DoAllReduceMax(float* data, int64_t count) override {
    // Also by hand rather than MPI_MAX: MPI's max need not propagate NaN
    // consistently, and this keeps max and sum on one code path.
    Reap();
    Reduce(data, count, MaxPropagatingNan<float>);
  }

  void DoAllGather(const float* in, float* out, int64_t count) override {
    Reap();
    const int n = size();
    if (n == 1) {
      if (in != out) std::memmove(out, in, sizeof(float) * count);
      return;
    }
    if (count <= chunk_elements_) {
      const bool in_place = in == out + static_cast<int64_t>(rank()) * count;
      MPI_Request request;
      MPI_Iallgather(in_place ? MPI_IN_PLACE : in, static_cast<int>(count),
                     MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT, comm_,
                     &request);
      WaitAll(&request, CommKind::kAllGather);
      return;
    }
    // Chunks of every member's part land rank-major in scratch, then move
    // to their place in `out`. `in` is read before `out` is written for each
    // chunk, so an in-place `in` (this rank's part of `out`) stays correct.
    std::vector<float> gathered;
    for (int64_t offset = 0; offset < count; offset += chunk_elements_) {
      const int64_t len = std::min(chunk_elements_, count - offset);
      gathered.resize(static_cast<size_t>(len) * n);
      MPI_Request request;
      MPI_Iallgather(in + offset, static_cast<int>(len), MPI_FLOAT,
                     gathered.data(), static_cast<int>(len), MPI_FLOAT, comm_,
                     &request);
      WaitAll(&request, CommKind::kAllGather);
      for (int r = 0; r < n; ++r) {
        std::memcpy(out + r * count + offset, gathered.data() + r * len,
                    sizeof(float) * len);
      }
    }
  }

  void DoReduceScatterSum(const float* in, float* out, int64_t count) override {
    Reap();
    const int n = size();
    if (n == 1) {
      std::memcpy(out, in, sizeof(float) * count);
      return;
    }
    // Each chunk carries `len` elements of every member's block, so the
    // scratch (n·len) stays within one chunk.
    const int64_t len_max = std::max<int64_t>(1, chunk_elements_ / n);
    std::vector<float> packed;    // [n, len]: block r's slice for rank r
    std::vector<float> received;  // [n, len]: rank r's slice of my block
    for (int64_t offset = 0; offset < count; offset += len_max) {
      const int64_t len = std::min(len_max, count - offset);
      const float* send = in;
      if (len != count) {
        packed.resize(static_cast<size_t>(len) * n);
        for (int r = 0; r < n; ++r) {
          std::memcpy(packed.data() + r * len, in + r * count + offset,
                      sizeof(float) * len);
        }
        send = packed.data();
      }
      received.resize(static_cast<size_t>(len) * n);
      MPI_Request request;
      MPI_Ialltoall(send, static_cast<int>(len), MPI_FLOAT, received.data(),
                    static_cast<int>(len), MPI_FLOAT, comm_, &request);
      WaitAll(&request, CommKind::kReduceScatter);
      SumRankMajor(received.data(), n, len, out + offset,
                   [](float a, float b) { return a + b; });
    }
  }

  void DoBroadcast(float* data, int64_t count, int root) override {
    Reap();
    for (int64_t offset = 0; offset < count; offset += chunk_elements_) {
      const int64_t len = std::min(chunk_elements_, count - offset);
      MPI_Request request;
      MPI_Ibcast(data + offset, static_cast<int>(len), MPI_FLOAT, root, comm_,
                 &request);
      WaitAll(&request, CommKind::kBroadcast);
    }
  }

  void DoSend(const float* data, int64_t count, int peer) override {
    Reap();
    // Own a copy so the caller may reuse `data` at once (buffered send);
    // MPI_Isend never blocks, whatever protocol the message size picks.
    // Limit: Open MPI's ob1 numbers messages per peer with 16 bits, and with
    // more than 65535 sends to one peer still unmatched we saw a later
    // message overtake (found with 7-element chunks); the engine's
    // schedules keep a handful in flight.
    PendingSend& p = pending_.emplace_back();
    p.peer = peer;
    p.buffer.assign(data, data + count);
    // One Isend per chunk; a zero-count message is still one (empty) send.
    int64_t offset = 0;
    do {
      const int64_t len = std::min(chunk_elements_, count - offset);
      MPI_Request request;
      MPI_Isend(p.buffer.data() + offset, static_cast<int>(len), MPI_FLOAT,
                peer, kP2pTag, comm_, &request);
      p.requests.push_back(request);
      offset += len;
    } while (offset < count);
  }

  void DoRecv(float* data, int64_t count, int peer) override {
    Reap();
    // Chunked exactly like DoSend; messages between a pair with one tag are
    // non-overtaking (MPI 3.1 §3.5), so chunks arrive in order.
    int64_t offset = 0;
    do {
      const int64_t len = std::min(chunk_elements_, count - offset);
      MPI_Status status;
      // A longer message fails in the wait (MPI_ERR_TRUNCATE, reported by
      // the error handler); a shorter one is caught here.
      MPI_Request request;
      MPI_Irecv(data + offset, static_cast<int>(len), MPI_FLOAT, peer, kP2pTag,
                comm_, &request);
      Wait(&request, &status, CommKind::kRecv, {peer});
      int received = 0;
      MPI_Get_count(&status, MPI_FLOAT, &received);
      if (received != len) {
        FailProtocol("communicator '" + name() + "' rank " +
                     std::to_string(this->rank()) + " expected " +
                     std::to_string(count) + " floats from peer " +
                     std::to_string(peer) +
                     " but the message is shorter; the two ranks disagree "
                     "about the send/recv schedule");
      }
      offset += len;
    } while (offset < count);
  }

  void DoBarrier() override {
    // Pending sends are not waited for: a large (rendezvous) Isend completes
    // only when its receive is posted, which may come after the barrier, and
    // the buffered-send contract (communicator.h) allows exactly that.
    Reap();
    TimedBarrier(CommKind::kBarrier);
  }

  std::unique_ptr<Communicator> DoSplit(int color, int key,
                                        const std::string& name) override {
    Reap();
    MESHTUNE_CHECK(color >= 0);  // MPI_UNDEFINED is not part of our API
    // MPI_Comm_split blocks without a deadline; once every member passed
    // this barrier it completes.
    TimedBarrier(CommKind::kBarrier);
    MPI_Comm child = MPI_COMM_NULL;
    // Ties in `key` keep the old rank order (MPI 3.1 §6.4.2), as the local
    // communicator does.
    MPI_Comm_split(comm_, color, key, &child);
    return std::make_unique<MpiCommunicator>(child, /*owned=*/true,
                                             chunk_elements_, name);
  }

 private:
  struct PendingSend {
    int peer = 0;
    std::vector<float> buffer;
    std::vector<MPI_Request> requests;
  };

  // World rank of each member, for messages and pings.
  static std::vector<int> WorldRanksOf(MPI_Comm comm) {
    MPI_Group group, world;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    const int n = SizeOf(comm);
    std::vector<int> ranks(n), world_ranks(n);
    for (int r = 0; r < n; ++r) ranks[r] = r;
    MPI_Group_translate_ranks(group, n, ranks.data(), world,
                              world_ranks.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    return world_ranks;
  }

  // Waits for `request` (filling `status` when not null) until the
  // deadline; then names which of the group ranks `peers` did not answer
  // and aborts the job.
  void Wait(MPI_Request* request, MPI_Status* status, CommKind kind,
            const std::vector<int>& peers) {
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline =
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(timeout_s()));
    std::chrono::microseconds pause = kFirstPause;
    for (;;) {
      int done = 0;
      MPI_Test(request, &done, status == nullptr ? MPI_STATUS_IGNORE : status);
      if (done) return;
      AnswerPings();
      const Clock::time_point now = Clock::now();
      if (now >= deadline) TimedOut(kind, peers);
      if (now - start >= kSpin) {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, kMaxPause);
      }
    }
  }

  // A collective waits for every other member.
  void WaitAll(MPI_Request* request, CommKind kind) {
    std::vector<int> others;
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) others.push_back(r);
    }
    Wait(request, nullptr, kind, others);
  }

  void TimedBarrier(CommKind kind) {
    MPI_Request request;
    MPI_Ibarrier(comm_, &request);
    WaitAll(&request, kind);
  }

  [[noreturn]] void TimedOut(CommKind kind, const std::vector<int>& peers) {
    std::vector<int> world_peers;
    for (int r : peers) world_peers.push_back(world_ranks_[r]);
    const std::vector<int> silent =
        SilentRanks(world_peers, std::min(timeout_s(), kMaxPingGraceS));
    FailProtocol(TimeoutMessage(ToString(kind), name(), timeout_s(), silent));
  }

  static int RankOf(MPI_Comm comm) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return rank;
  }
  static int SizeOf(MPI_Comm comm) {
    int size = 0;
    MPI_Comm_size(comm, &size);
    return size;
  }

  // Frees the buffers of sends that completed.
  void Reap() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      MPI_Testall(static_cast<int>(it->requests.size()), it->requests.data(),
                  &done, MPI_STATUSES_IGNORE);
      it = done ? pending_.erase(it) : std::next(it);
    }
  }

  // out[i] = fn(...fn(in[0·len + i], in[1·len + i])..., in[(n-1)·len + i]).
  template <typename T, typename Fn>
  static void SumRankMajor(const T* in, int n, int64_t len, T* out, Fn fn) {
    for (int64_t i = 0; i < len; ++i) {
      T acc = in[i];
      for (int r = 1; r < n; ++r) acc = fn(acc, in[r * len + i]);
      out[i] = acc;
    }
  }

  // In-place deterministic all-reduce (see the top of this file), chunk by
  // chunk.
  template <typename T, typename Fn>
  void Reduce(T* data, int64_t count, Fn fn) {
    const int n = size();
    const int me = rank();
    std::vector<int> counts(n), displs(n), recv_counts(n), recv_displs(n);
    std::vector<T> received;
    for (int64_t offset = 0; offset < count; offset += chunk_elements_) {
      const int64_t len = std::min(chunk_elements_, count - offset);
      T* chunk = data + offset;
      // Block r of the chunk: [len·r/n, len·(r+1)/n), sizes differing by at
      // most one.
      for (int r = 0; r < n; ++r) {
        const int64_t lo = len * r / n;
        const int64_t hi = len * (r + 1) / n;
        displs[r] = static_cast<int>(lo);
        counts[r] = static_cast<int>(hi - lo);
      }
      const int mine = counts[me];
      for (int r = 0; r < n; ++r) {
        recv_counts[r] = mine;
        recv_displs[r] = r * mine;
      }
      received.resize(static_cast<size_t>(mine) * n);
      MPI_Request request;
      MPI_Ialltoallv(chunk, counts.data(), displs.data(), MpiType<T>(),
                     received.data(), recv_counts.data(), recv_displs.data(),
                     MpiType<T>(), comm_, &request);
      WaitAll(&request, CommKind::kAllReduce);
      SumRankMajor(received.data(), n, mine, chunk + displs[me], fn);
      MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, chunk, counts.data(),
                      displs.data(), MpiType<T>(), comm_, &request);
      WaitAll(&request, CommKind::kAllReduce);
    }
  }

  MPI_Comm comm_;
  bool owned_;
  int64_t chunk_elements_;          // most elements per MPI call (<= 2^30)
  std::vector<int> world_ranks_;    // [group rank] = world rank
  std::list<PendingSend> pending_;  // Isends not known to be complete
};

// Reads MESHTUNE_MPI_CHUNK_ELEMENTS (see the top of this file).
StatusOr<int64_t> ChunkElementsFromEnv() {
  const char* text = std::getenv("MESHTUNE_MPI_CHUNK_ELEMENTS");
  if (text == nullptr) return kDefaultChunkElements;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > kMaxChunkElements) {
    return Status::InvalidArgument(
        std::string("MESHTUNE_MPI_CHUNK_ELEMENTS='") + text +
            "' is not a whole number in [1, 2^30]",
        "unset MESHTUNE_MPI_CHUNK_ELEMENTS or give a positive element count");
  }
  return static_cast<int64_t>(value);
}

}  // namespace

bool MpiAvailable() { return true; }

StatusOr<std::unique_ptr<Communicator>> MakeMpiWorld() {
  StatusOr<int64_t> chunk_elements = ChunkElementsFromEnv();
  if (!chunk_elements.ok()) return chunk_elements.status();
  if (MpiFinalized()) {
    return Status::Internal(
        "MakeMpiWorld called after MPI_Finalize; MPI cannot be restarted");
  }
  if (!MpiInitialized()) {
    // Funneled: only the main thread calls MPI; OpenMP threads inside the
    // CPU ops never do.
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS) {
      return Status::IoError("MPI_Init_thread failed",
                             "run under mpirun, or check the MPI install");
    }
    if (provided < MPI_THREAD_FUNNELED) {
      return Status::Unimplemented(
          "this MPI library does not provide MPI_THREAD_FUNNELED",
          "use an MPI built with thread support (Open MPI does by default)");
    }
  }
  // Split communicators inherit the handler from the world (MPI 3.1 §8.3),
  // so it is set once; MPI keeps it alive while a communicator uses it.
  MPI_Errhandler handler;
  MPI_Comm_create_errhandler(AbortOnMpiError, &handler);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler);
  MPI_Errhandler_free(&handler);
  if (g_control == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &g_control);
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(
      MPI_COMM_WORLD, /*owned=*/false, *chunk_elements, "world"));
}

void FinalizeMpi() {
  if (!MpiInitialized() || MpiFinalized()) return;
  if (g_control != MPI_COMM_NULL) MPI_Comm_free(&g_control);
  MPI_Finalize();
}

void AbortAllRanks(const std::string& message, int exit_code) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  if (MpiInitialized() && !MpiFinalized()) {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::exit(exit_code);
}

#endif  // MESHTUNE_ENGINE_HAVE_MPI

}  // namespace meshtune::engine
