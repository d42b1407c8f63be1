// meshtune_engine_mpi_comm_test: the MPI communicator under mpirun (ctest
// engine.mpi_communicator_4_ranks). Checks every collective against values
// computed locally in rank order, that results are bit-identical on all
// ranks (compared through raw MPI, independent of the code under test),
// Split, a ring of buffered sends (small and rendezvous-sized, all sent
// before any receive), the process groups, and the CommLog hookup.
//
// Works for any number of ranks >= 2. On failure it prints what differed and
// aborts every rank (exit status nonzero); on success rank 0 prints
// "communicator mpi test: ok". Run it with MESHTUNE_MPI_CHUNK_ELEMENTS=1000
// to exercise the multi-chunk paths.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/mpi_communicator.h"
#include "engine/process_groups.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/rank_grid.h"

namespace {

using meshtune::engine::Communicator;

void Require(bool ok, const std::string& what) {
  if (ok) return;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "communicator mpi test: FAILED on rank %d: %s\n", rank,
               what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Every rank's bytes of `v` equal rank 0's (raw MPI_Bcast + memcmp).
template <typename T>
void RequireBitIdentical(const std::vector<T>& v, const std::string& what) {
  std::vector<T> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * sizeof(T)), MPI_BYTE, 0,
            MPI_COMM_WORLD);
  Require(std::memcmp(root.data(), v.data(), sizeof(T) * v.size()) == 0,
          what + ": result differs from rank 0's bits");
}

// A value whose float sum depends on the order of addition.
float Wiggle(int rank, int64_t i) {
  return std::sin(0.37f * static_cast<float>(i + 1) * (rank + 3)) *
         std::pow(10.0f, static_cast<float>(rank % 3));
}

void CheckAllReduce(Communicator& world) {
  const int n = world.size();
  const int r = world.rank();
  // Sizes around the block split (< n, not divisible by n) and one large
  // enough for the rendezvous protocol.
  for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{2 * n + 1},
                        int64_t{1000}, int64_t{300001}}) {
    const std::string what =
        "AllReduceSum(float, " + std::to_string(count) + ")";
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = Wiggle(r, i);
    world.AllReduceSum(data.data(), count);
    for (int64_t i = 0; i < count; ++i) {
      float want = Wiggle(0, i);
      for (int q = 1; q < n; ++q) want += Wiggle(q, i);
      Require(data[i] == want, what + ": element " + std::to_string(i) +
                                   " is not the rank-order sum");
    }
    RequireBitIdentical(data, what);
  }
  // Where order matters outright: ((1e8 + 1) + ...) − 1e8 = 0 in rank order.
  std::vector<float> x = {r == 0 ? 1e8f : (r == n - 1 ? -1e8f : 1.0f)};
  world.AllReduceSum(x.data(), 1);
  Require(x[0] == 0.0f, "AllReduceSum(1e8, 1, ..., -1e8) is not 0");

  // Third element: 1e17 on rank 0 and -1e17/(n-1) elsewhere, order-sensitive
  // in float64 too; checked for identical bits only.
  std::vector<double> d = {1.0 + r, 0.125 * r, r == 0 ? 1e17 : -1e17 / (n - 1)};
  world.AllReduceSum(d.data(), 3);
  Require(d[0] == n + n * (n - 1) / 2.0 && d[1] == 0.0625 * n * (n - 1),
          "AllReduceSum(double) wrong");
  RequireBitIdentical(d, "AllReduceSum(double)");

  std::vector<float> m = {static_cast<float>(r), -static_cast<float>(r),
                          r == 1 ? std::nanf("") : 0.0f};
  world.AllReduceMax(m.data(), 3);
  Require(m[0] == n - 1.0f && m[1] == 0.0f && std::isnan(m[2]),
          "AllReduceMax wrong (max or NaN propagation)");
}

// Rank r sends (r + j) % 3 · 7001 floats to rank j (large ones span several
// MPI chunks; empty blocks are skipped on both sides).
void CheckAllToAllV(Communicator& world) {
  const int n = world.size();
  const int r = world.rank();
  auto count = [](int from, int to) { return int64_t{(from + to) % 3} * 7001; };
  std::vector<int64_t> send(n), recv(n);
  std::vector<float> in;
  int64_t total = 0;
  for (int j = 0; j < n; ++j) {
    send[j] = count(r, j);
    recv[j] = count(j, r);
    total += recv[j];
    for (int64_t i = 0; i < send[j]; ++i) in.push_back(Wiggle(r, j + i));
  }
  std::vector<float> out(total, -1.0f);
  world.AllToAllV(in.data(), send, out.data(), recv);
  int64_t at = 0;
  for (int j = 0; j < n; ++j) {
    for (int64_t i = 0; i < recv[j]; ++i) {
      Require(out[at++] == Wiggle(j, r + i), "AllToAllV block wrong");
    }
  }
}

void CheckAllGatherReduceScatterBroadcast(Communicator& world) {
  const int n = world.size();
  const int r = world.rank();
  for (int64_t count : {int64_t{1}, int64_t{5}, int64_t{20001}}) {
    std::vector<float> in(count), out(n * count, -1.0f);
    for (int64_t i = 0; i < count; ++i) in[i] = 1000.0f * r + i;
    world.AllGather(in.data(), out.data(), count);
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < count; ++i) {
        Require(out[q * count + i] == 1000.0f * q + i,
                "AllGather(" + std::to_string(count) + ") wrong");
      }
    }
    // In place: this rank's part already sits in the output.
    std::vector<float> buf(n * count, -1.0f);
    std::memcpy(buf.data() + r * count, in.data(), sizeof(float) * count);
    world.AllGather(buf.data() + r * count, buf.data(), count);
    Require(buf == out, "in-place AllGather differs");

    std::vector<float> full(n * count), mine(count);
    for (int64_t j = 0; j < n * count; ++j) full[j] = Wiggle(r, j);
    world.ReduceScatterSum(full.data(), mine.data(), count);
    for (int64_t i = 0; i < count; ++i) {
      float want = Wiggle(0, r * count + i);
      for (int q = 1; q < n; ++q) want += Wiggle(q, r * count + i);
      Require(mine[i] == want, "ReduceScatterSum(" + std::to_string(count) +
                                   ") is not the rank-order sum");
    }
    // The scattered blocks must equal the same slice of an all-reduce.
    std::vector<float> reduced(full);
    world.AllReduceSum(reduced.data(), n * count);
    Require(std::memcmp(reduced.data() + r * count, mine.data(),
                        sizeof(float) * count) == 0,
            "ReduceScatterSum and AllReduceSum disagree");
  }
  for (int root = 0; root < n; ++root) {
    std::vector<float> b(1001, static_cast<float>(r));
    world.Broadcast(b.data(), 1001, root);
    Require(b == std::vector<float>(1001, static_cast<float>(root)),
            "Broadcast from root " + std::to_string(root) + " wrong");
  }
}

void CheckSendRecvRing(Communicator& world) {
  const int n = world.size();
  const int r = world.rank();
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  // All sends first: buffered sends must not wait for the receiver, also
  // for a 4 MB message (rendezvous protocol in Open MPI).
  const int64_t big = (1 << 20) + 3;
  std::vector<float> small = {1.0f * r, 2.0f * r};
  std::vector<float> large(big, 0.5f * r);
  world.Send(small.data(), 2, next);
  world.Send(large.data(), big, next);
  world.Send(nullptr, 0, next);
  small.assign(2, -1.0f);  // the sends own copies
  large.assign(big, -1.0f);
  world.Barrier();  // does not wait for the sends to be received
  std::vector<float> got_small(2), got_large(big);
  world.Recv(got_small.data(), 2, prev);
  world.Recv(got_large.data(), big, prev);
  world.Recv(nullptr, 0, prev);
  Require(got_small == std::vector<float>{1.0f * prev, 2.0f * prev},
          "ring Recv (small) wrong or out of order");
  Require(got_large == std::vector<float>(big, 0.5f * prev),
          "ring Recv (4 MB) wrong");
}

void CheckSplit(Communicator& world) {
  const int n = world.size();
  const int r = world.rank();
  // Colors by parity, keys reversing the old order.
  std::unique_ptr<Communicator> half = world.Split(r % 2, -r, "half");
  int members = 0;
  for (int q = r % 2; q < n; q += 2) ++members;
  Require(half->size() == members && half->name() == "half",
          "Split size or name wrong");
  Require(half->rank() == (members - 1) - r / 2, "Split rank ignores key");
  float sum = static_cast<float>(r);
  half->AllReduceSum(&sum, 1);
  float want = 0;
  for (int q = r % 2; q < n; q += 2) want += q;
  Require(sum == want, "AllReduceSum within a split group wrong");
  if (half->size() > 1) {
    // Point-to-point inside the child uses child ranks.
    const int to = (half->rank() + 1) % half->size();
    const int from = (half->rank() + half->size() - 1) % half->size();
    float out = static_cast<float>(r), in = -1;
    half->Send(&out, 1, to);
    half->Recv(&in, 1, from);
    const int from_world = (r % 2) + 2 * ((half->size() - 1) - from);
    Require(in == static_cast<float>(from_world), "Send within split wrong");
  }
  half->Barrier();
}

void CheckProcessGroups(Communicator& world) {
  if (world.size() % 2 != 0) return;
  meshtune::search_spaces::ParallelConfig config;
  config.tp = 2;
  config.dp = world.size() / 2;
  meshtune::engine::ProcessGroups g =
      meshtune::engine::MakeProcessGroups(&world, config);
  const meshtune::search_spaces::RankGrid grid(config, world.size(),
                                               world.size());
  const auto coord = grid.CoordOf(world.rank());
  Require(g.tp_rank() == coord.tp && g.dp_rank() == coord.dp &&
              g.pp_rank() == 0 && g.embd == nullptr,
          "process group ranks differ from RankGrid coordinates");
  float x = static_cast<float>(world.rank());
  g.tp->AllReduceSum(&x, 1);
  const std::vector<int64_t> tp =
      grid.GroupOf(meshtune::search_spaces::GroupKind::kTp, world.rank());
  Require(x == static_cast<float>(tp[0] + tp[1]), "tp group sum wrong");
}

void CheckLog(Communicator& world) {
  meshtune::engine::CommLog log;
  log.set_label("mpi");
  world.set_log(&log);
  float x[4] = {1, 2, 3, 4};
  world.AllReduceSum(x, 4);
  world.set_log(nullptr);
  const std::vector<meshtune::engine::CommRecord> records = log.records();
  Require(records.size() == 1 &&
              records[0].kind == meshtune::engine::CommKind::kAllReduce &&
              records[0].bytes == 16 && records[0].group == "world" &&
              records[0].label == "mpi",
          "CommLog record wrong");
}

}  // namespace

int main() {
  auto world_or = meshtune::engine::MakeMpiWorld();
  if (!world_or.ok()) {
    std::fprintf(stderr, "communicator mpi test: %s\n",
                 world_or.status().message().c_str());
    return 1;
  }
  {
    std::unique_ptr<Communicator> world = std::move(world_or.value());
    Require(world->size() >= 2, "run with at least 2 ranks (mpirun -np 4)");
    Require(meshtune::engine::MpiAvailable(), "MpiAvailable() is false");
    Require(meshtune::engine::LaunchedUnderMpi(),
            "LaunchedUnderMpi() is false under mpirun");
    CheckAllReduce(*world);
    CheckAllGatherReduceScatterBroadcast(*world);
    CheckAllToAllV(*world);
    CheckSendRecvRing(*world);
    CheckSplit(*world);
    CheckProcessGroups(*world);
    CheckLog(*world);
    world->Barrier();
    if (world->rank() == 0) {
      std::printf("communicator mpi test: ok (%d ranks)\n", world->size());
      std::fflush(stdout);
    }
  }  // communicators go before MPI_Finalize
  meshtune::engine::FinalizeMpi();
  return 0;
}
