// The in-process communicator (engine/comm/local_communicator.h) against
// hand-computed values: every collective for group sizes 1-4, rank-order
// sums (where float addition order changes the answer), bit-identical
// results across ranks, buffered sends, Split, the CommLog, failure of
// one rank not hanging the others, and the timeout that names a rank which
// never joins (issue 16 D8).
//
// Each rank writes what it observed into a per-rank slot; the checks run on
// the main thread after RunLocalRanks joined.
#include "engine/comm/communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/comm/local_communicator.h"

namespace meshtune::engine {
namespace {

// True when every rank's vector has the same bits as rank 0's.
template <typename T>
bool BitIdentical(const std::vector<std::vector<T>>& per_rank) {
  for (const std::vector<T>& v : per_rank) {
    if (v.size() != per_rank[0].size() ||
        std::memcmp(v.data(), per_rank[0].data(), sizeof(T) * v.size()) != 0) {
      return false;
    }
  }
  return true;
}

class CommunicatorSizes : public ::testing::TestWithParam<int> {};

TEST_P(CommunicatorSizes, AllReduceSumFloatMatchesHandSum) {
  const int n = GetParam();
  std::vector<std::vector<float>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    std::vector<float> data = {10.0f * (r + 1), 0.5f * r, -1.0f * r, 7.0f};
    world.AllReduceSum(data.data(), static_cast<int64_t>(data.size()));
    got[r] = data;
  });
  // Σ_r 10(r+1) = 5n(n+1); Σ_r r/2 = n(n-1)/4; Σ_r −r = −n(n−1)/2.
  const std::vector<float> want = {5.0f * n * (n + 1), 0.25f * n * (n - 1),
                                   -0.5f * n * (n - 1), 7.0f * n};
  for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], want) << "rank " << r;
}

TEST_P(CommunicatorSizes, AllReduceSumDoubleMatchesHandSum) {
  const int n = GetParam();
  std::vector<std::vector<double>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    std::vector<double> data = {1.0 + r, 0.125 * r};
    world.AllReduceSum(data.data(), 2);
    got[r] = data;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r], (std::vector<double>{n + n * (n - 1) / 2.0,
                                           0.0625 * n * (n - 1)}));
  }
}

TEST_P(CommunicatorSizes, AllReduceMaxTakesTheLargestAndPropagatesNan) {
  const int n = GetParam();
  std::vector<std::vector<float>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    std::vector<float> data = {static_cast<float>(r), -static_cast<float>(r),
                               r == n - 1 ? std::nanf("") : 1.0f};
    world.AllReduceMax(data.data(), 3);
    got[r] = data;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r][0], n - 1.0f);
    EXPECT_EQ(got[r][1], 0.0f);
    EXPECT_TRUE(std::isnan(got[r][2])) << "rank " << r;
  }
}

TEST_P(CommunicatorSizes, AllGatherIsRankMajor) {
  const int n = GetParam();
  const int64_t count = 3;
  std::vector<std::vector<float>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    const std::vector<float> in = {100.0f * r, 100.0f * r + 1, 100.0f * r + 2};
    std::vector<float> out(n * count, -1.0f);
    world.AllGather(in.data(), out.data(), count);
    got[r] = out;
  });
  std::vector<float> want;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < count; ++i) want.push_back(100.0f * r + i);
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], want) << "rank " << r;
}

// Rank r sends (r + j) % 3 floats valued 1000·r + 10·j + i to rank j (empty
// blocks included); rank j receives them rank-major.
TEST_P(CommunicatorSizes, AllToAllVDeliversEachBlockToItsRank) {
  const int n = GetParam();
  auto count = [](int from, int to) { return int64_t{(from + to) % 3}; };
  std::vector<std::vector<float>> got(n);
  CommLog log;
  RunLocalRanks(
      n,
      [&](Communicator& world) {
        const int r = world.rank();
        std::vector<int64_t> send(n), recv(n);
        std::vector<float> in;
        for (int j = 0; j < n; ++j) {
          send[j] = count(r, j);
          recv[j] = count(j, r);
          for (int64_t i = 0; i < send[j]; ++i) {
            in.push_back(1000.0f * r + 10.0f * j + static_cast<float>(i));
          }
        }
        int64_t total = 0;
        for (int64_t c : recv) total += c;
        std::vector<float> out(total, -1.0f);
        world.AllToAllV(in.data(), send, out.data(), recv);
        got[r] = out;
      },
      &log);
  for (int r = 0; r < n; ++r) {
    std::vector<float> want;
    for (int j = 0; j < n; ++j) {
      for (int64_t i = 0; i < count(j, r); ++i) {
        want.push_back(1000.0f * j + 10.0f * r + static_cast<float>(i));
      }
    }
    EXPECT_EQ(got[r], want) << "rank " << r;
  }
  // One record per rank, the bytes it sent (itself included); a group of
  // one moves nothing and records nothing.
  int64_t records = 0;
  for (const CommRecord& rec : log.records()) {
    if (rec.kind != CommKind::kAllToAll) continue;
    ++records;
    EXPECT_EQ(std::string(ToString(rec.kind)), "all_to_all");
  }
  EXPECT_EQ(records, n > 1 ? n : 0);
}

TEST_P(CommunicatorSizes, AllGatherInPlaceKeepsOwnPart) {
  const int n = GetParam();
  std::vector<std::vector<float>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    std::vector<float> buf(n * 2, -1.0f);
    buf[2 * r] = 3.0f * r;
    buf[2 * r + 1] = 3.0f * r + 1;
    world.AllGather(buf.data() + 2 * r, buf.data(), 2);
    got[r] = buf;
  });
  for (int r = 0; r < n; ++r) {
    for (int s = 0; s < n; ++s) {
      EXPECT_EQ(got[r][2 * s], 3.0f * s);
      EXPECT_EQ(got[r][2 * s + 1], 3.0f * s + 1);
    }
  }
}

TEST_P(CommunicatorSizes, ReduceScatterSumsThisRanksBlock) {
  const int n = GetParam();
  const int64_t count = 2;
  std::vector<std::vector<float>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    std::vector<float> in(n * count);
    for (int64_t j = 0; j < n * count; ++j) in[j] = 1000.0f * r + j;
    std::vector<float> out(count, -1.0f);
    world.ReduceScatterSum(in.data(), out.data(), count);
    got[r] = out;
  });
  // out[i] on rank q = Σ_r (1000 r + q·count + i)
  //                  = 500 n(n−1) + n (q·count + i).
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(got[q][i], 500.0f * n * (n - 1) + n * (q * count + i))
          << "rank " << q << " element " << i;
    }
  }
}

TEST_P(CommunicatorSizes, BroadcastCopiesRootToEveryRank) {
  const int n = GetParam();
  for (int root = 0; root < n; ++root) {
    std::vector<std::vector<float>> got(n);
    RunLocalRanks(n, [&](Communicator& world) {
      const int r = world.rank();
      std::vector<float> data = {1.0f * r, 2.0f * r + 1};
      world.Broadcast(data.data(), 2, root);
      got[r] = data;
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(got[r], (std::vector<float>{1.0f * root, 2.0f * root + 1}))
          << "root " << root << " rank " << r;
    }
  }
}

TEST_P(CommunicatorSizes, BarrierWaitsForEveryRank) {
  const int n = GetParam();
  std::atomic<int> arrived{0};
  std::vector<int> seen(n, -1);
  RunLocalRanks(n, [&](Communicator& world) {
    arrived.fetch_add(1);
    world.Barrier();
    seen[world.rank()] = arrived.load();
    world.Barrier();  // back to back: the generation counter resets
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(seen[r], n) << "rank " << r;
}

TEST_P(CommunicatorSizes, RingOfBufferedSendsDeliversInOrder) {
  const int n = GetParam();
  std::vector<std::vector<float>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    // Two messages of different lengths, both sent before any receive.
    const std::vector<float> first = {1.0f * r};
    const std::vector<float> second = {10.0f * r, 10.0f * r + 1};
    world.Send(first.data(), 1, next);
    world.Send(second.data(), 2, next);
    std::vector<float> a(1), b(2);
    world.Recv(a.data(), 1, prev);
    world.Recv(b.data(), 2, prev);
    got[r] = {a[0], b[0], b[1]};
  });
  for (int r = 0; r < n; ++r) {
    const float p = static_cast<float>((r + n - 1) % n);
    EXPECT_EQ(got[r], (std::vector<float>{p, 10 * p, 10 * p + 1}));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes1To4, CommunicatorSizes,
                         ::testing::Values(1, 2, 3, 4));

TEST(LocalCommunicator, SumsInRankOrderNotExactly) {
  // In float, 1e8 + 1 rounds back to 1e8 (the spacing there is 8), so the
  // rank-order sum ((1e8 + 1) + 1) − 1e8 is 0, while the exact sum is 2 and
  // the order (1e8 − 1e8) + 1 + 1 would give 2. Every rank must get 0.
  const std::vector<float> values = {1e8f, 1.0f, 1.0f, -1e8f};
  std::vector<std::vector<float>> got(4);
  RunLocalRanks(4, [&](Communicator& world) {
    std::vector<float> data = {values[world.rank()]};
    world.AllReduceSum(data.data(), 1);
    got[world.rank()] = data;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r][0], 0.0f) << "rank " << r;
  EXPECT_EQ((values[0] + values[3]) + values[1] + values[2], 2.0f);

  // Same in float64 with 1e17 (spacing 16).
  std::vector<std::vector<double>> got64(3);
  RunLocalRanks(3, [&](Communicator& world) {
    const double mine[] = {1e17, 1.0, -1e17};
    std::vector<double> data = {mine[world.rank()]};
    world.AllReduceSum(data.data(), 1);
    got64[world.rank()] = data;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got64[r][0], 0.0);
}

TEST(LocalCommunicator, ResultsAreBitIdenticalAcrossRanks) {
  // Values whose sum depends on order in almost every element.
  const int n = 4;
  const int64_t count = 257;
  std::vector<std::vector<float>> sums(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i) {
      data[i] = std::sin(0.37f * (i + 1) * (r + 3)) * std::pow(10.0f, r % 3);
    }
    world.AllReduceSum(data.data(), count);
    sums[r] = data;
  });
  EXPECT_TRUE(BitIdentical(sums));
  // Recompute rank 0's element 5 in rank order on this thread.
  float want = 0;
  for (int r = 0; r < n; ++r) {
    const float x = std::sin(0.37f * 6 * (r + 3)) * std::pow(10.0f, r % 3);
    want = r == 0 ? x : want + x;
  }
  EXPECT_EQ(sums[0][5], want);
}

TEST(LocalCommunicator, BothRanksSendingFirstDoesNotDeadlock) {
  std::vector<std::vector<float>> got(2);
  RunLocalRanks(2, [&](Communicator& world) {
    const int r = world.rank();
    const int peer = 1 - r;
    std::vector<float> big(4096, 1.0f + r);
    world.Send(big.data(), 4096, peer);  // returns before the peer receives
    big.assign(4096, -5.0f);             // the sent copy is unaffected
    std::vector<float> in(4096);
    world.Recv(in.data(), 4096, peer);
    got[r] = in;
  });
  EXPECT_EQ(got[0], std::vector<float>(4096, 2.0f));
  EXPECT_EQ(got[1], std::vector<float>(4096, 1.0f));
}

TEST(LocalCommunicator, SendToSelfIsBuffered) {
  std::vector<float> got(2);
  RunLocalRanks(1, [&](Communicator& world) {
    const float out[] = {4.0f, 5.0f};
    world.Send(out, 2, 0);
    world.Recv(got.data(), 2, 0);
  });
  EXPECT_EQ(got, (std::vector<float>{4.0f, 5.0f}));
}

TEST(LocalCommunicator, SplitGroupsByColorAndRanksByKey) {
  // Colors 0,1,0,1; keys reverse the old order within a color.
  const int n = 4;
  std::vector<std::tuple<int, int, std::string, float>> got(n);
  RunLocalRanks(n, [&](Communicator& world) {
    const int r = world.rank();
    std::unique_ptr<Communicator> half = world.Split(r % 2, -r, "half");
    float sum = static_cast<float>(r);
    half->AllReduceSum(&sum, 1);
    got[r] = {half->rank(), half->size(), half->name(), sum};
  });
  EXPECT_EQ(got[0], std::make_tuple(1, 2, std::string("half"), 2.0f));
  EXPECT_EQ(got[2], std::make_tuple(0, 2, std::string("half"), 2.0f));
  EXPECT_EQ(got[1], std::make_tuple(1, 2, std::string("half"), 4.0f));
  EXPECT_EQ(got[3], std::make_tuple(0, 2, std::string("half"), 4.0f));
}

TEST(LocalCommunicator, SplitTiesInKeyKeepOldOrderAndNest) {
  // Colors {0,0,1}: sizes 2 and 1; equal keys keep the old rank order. Then
  // split the pair again into singletons and gather within the pair.
  std::vector<std::vector<int>> got(3);
  RunLocalRanks(3, [&](Communicator& world) {
    const int r = world.rank();
    std::unique_ptr<Communicator> g = world.Split(r < 2 ? 0 : 1, 7, "g");
    std::unique_ptr<Communicator> single = g->Split(g->rank(), 0, "single");
    const float mine = static_cast<float>(r);
    std::vector<float> all(g->size());
    g->AllGather(&mine, all.data(), 1);
    std::vector<int> row = {g->rank(), g->size(), single->size()};
    for (float x : all) row.push_back(static_cast<int>(x));
    got[r] = row;
  });
  EXPECT_EQ(got[0], (std::vector<int>{0, 2, 1, 0, 1}));
  EXPECT_EQ(got[1], (std::vector<int>{1, 2, 1, 0, 1}));
  EXPECT_EQ(got[2], (std::vector<int>{0, 1, 1, 2}));
}

TEST(LocalCommunicator, LogLabelsArePerRankThread) {
  // Ranks in different phases at once (context-parallel groups, pipeline
  // stages) label their own calls.
  CommLog log;
  RunLocalRanks(
      2,
      [&](Communicator& world) {
        log.set_label("rank" + std::to_string(world.rank()));
        world.Barrier();  // both labels are set before either records
        float x = 1.0f;
        world.AllReduceSum(&x, 1);
      },
      &log);
  std::multiset<std::string> labels;
  for (const CommRecord& r : log.records()) {
    if (r.kind == CommKind::kAllReduce) labels.insert(r.label);
  }
  EXPECT_EQ(labels, (std::multiset<std::string>{"rank0", "rank1"}));
}

TEST(LocalCommunicator, LogRecordsKindGroupBytesAndLabel) {
  CommLog log;
  log.set_label("step1");
  RunLocalRanks(
      2,
      [&](Communicator& world) {
        const int r = world.rank();
        std::vector<float> f(3, 1.0f), out(6);
        std::vector<double> d(3, 1.0);
        world.AllReduceSum(f.data(), 3);                  // 12 bytes
        world.AllReduceSum(d.data(), 3);                  // 24 bytes
        world.AllReduceMax(f.data(), 3);                  // 12 bytes
        world.AllGather(f.data(), out.data(), 3);         // gathered: 24 bytes
        world.ReduceScatterSum(out.data(), f.data(), 3);  // input: 24 bytes
        world.Broadcast(f.data(), 3, 0);                  // 12 bytes
        if (r == 0) world.Send(f.data(), 2, 1);           // 8 bytes
        if (r == 1) world.Recv(f.data(), 2, 0);           // 8 bytes
        world.Barrier();                                  // 0 bytes
        // Size-1 groups move nothing and are not recorded.
        std::unique_ptr<Communicator> alone = world.Split(r, 0, "alone");
        alone->AllReduceSum(f.data(), 3);
        alone->AllGather(f.data(), out.data(), 3);
        // Children inherit the log.
        std::unique_ptr<Communicator> pair = world.Split(0, r, "pair");
        pair->AllReduceSum(f.data(), 1);
      },
      &log);
  std::map<std::tuple<std::string, std::string, int64_t>, int> counts;
  for (const CommRecord& rec : log.records()) {
    EXPECT_EQ(rec.group_size, 2);
    EXPECT_EQ(rec.label, "step1");
    ++counts[{ToString(rec.kind), rec.group, rec.bytes}];
  }
  const std::map<std::tuple<std::string, std::string, int64_t>, int> want = {
      {{"all_reduce", "world", 12}, 4}, {{"all_reduce", "world", 24}, 2},
      {{"all_gather", "world", 24}, 2}, {{"reduce_scatter", "world", 24}, 2},
      {{"broadcast", "world", 12}, 2},  {{"send", "world", 8}, 1},
      {{"recv", "world", 8}, 1},        {{"barrier", "world", 0}, 2},
      {{"all_reduce", "pair", 4}, 2},
  };
  EXPECT_EQ(counts, want);
}

TEST(LocalCommunicator, FailingRankDoesNotHangTheOthers) {
  // Rank 1 throws; rank 0 then waits in an all-reduce of a split group
  // with rank 1, rank 2 in a Recv from rank 1 and rank 3 in a world barrier.
  // All must return, and the original error is rethrown.
  try {
    RunLocalRanks(4, [](Communicator& world) {
      const int r = world.rank();
      std::unique_ptr<Communicator> pair = world.Split(r / 2, r, "pair");
      if (r == 1) throw std::runtime_error("rank 1 failed on purpose");
      float x = 1.0f;
      if (r == 0) pair->AllReduceSum(&x, 1);
      if (r == 2) world.Recv(&x, 1, 1);
      if (r == 3) world.Barrier();
    });
    FAIL() << "RunLocalRanks did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1 failed on purpose");
  }
}

TEST(LocalCommunicatorDeathTest, RecvOfTheWrongLengthAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(RunLocalRanks(2,
                             [](Communicator& world) {
                               float buf[3] = {1, 2, 3};
                               if (world.rank() == 0) world.Send(buf, 3, 1);
                               if (world.rank() == 1) world.Recv(buf, 2, 0);
                             }),
               "check failed");
}

TEST(LocalCommunicatorDeathTest, CollectiveWithMismatchedCountsAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(RunLocalRanks(2,
                             [](Communicator& world) {
                               float buf[2] = {1, 2};
                               world.AllReduceSum(buf, 1 + world.rank());
                             }),
               "check failed");
}

// Issue 16 D8: a peer that never joins used to block the others for ever.
// Runs the ranks on a helper thread so that a hang fails the test after
// `limit_s` instead of hanging the test binary; returns what the ranks
// threw ("" if nothing).
std::string RunRanksWithin(int size, std::function<void(Communicator&)> fn,
                           double limit_s) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::string error;
  };
  auto state = std::make_shared<State>();
  std::thread([state, size, fn] {
    std::string error;
    try {
      RunLocalRanks(size, fn);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(state->mu);
    state->error = error;
    state->done = true;
    state->cv.notify_all();
  }).detach();  // a hung rank cannot be joined; the thread dies with us
  std::unique_lock<std::mutex> lock(state->mu);
  if (!state->cv.wait_for(lock, std::chrono::duration<double>(limit_s),
                          [&] { return state->done; })) {
    ADD_FAILURE() << "the ranks still wait after " << limit_s << " s";
    return "hung";
  }
  return state->error;
}

TEST(LocalCommunicatorTimeout, AllReduceNamesTheRankThatNeverJoins) {
  const auto start = std::chrono::steady_clock::now();
  const std::string error = RunRanksWithin(
      2,
      [](Communicator& world) {
        world.set_timeout_s(0.2);
        if (world.rank() == 1) return;  // never joins
        float x = 1;
        world.AllReduceSum(&x, 1);
      },
      30);
  EXPECT_EQ(error,
            "all_reduce on group 'world' timed out after 0.2 s: rank 1 did "
            "not answer (stopped, hung or dead); the job is aborted (raise "
            "--distributed-timeout-minutes if it is only slow)");
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(200));
}

TEST(LocalCommunicatorTimeout, BarrierNamesEveryMissingRank) {
  const std::string error = RunRanksWithin(
      4,
      [](Communicator& world) {
        world.set_timeout_s(0.2);
        if (world.rank() >= 2) return;
        world.Barrier();
      },
      30);
  EXPECT_EQ(error,
            "barrier on group 'world' timed out after 0.2 s: ranks 2, 3 did "
            "not answer (stopped, hung or dead); the job is aborted (raise "
            "--distributed-timeout-minutes if it is only slow)");
}

TEST(LocalCommunicatorTimeout, RecvNamesTheSilentSender) {
  const std::string error = RunRanksWithin(
      2,
      [](Communicator& world) {
        world.set_timeout_s(0.2);
        if (world.rank() == 0) return;  // never sends
        float x = 0;
        world.Recv(&x, 1, 0);
      },
      30);
  EXPECT_EQ(error,
            "recv on group 'world' timed out after 0.2 s: rank 0 did not "
            "answer (stopped, hung or dead); the job is aborted (raise "
            "--distributed-timeout-minutes if it is only slow)");
}

TEST(LocalCommunicatorTimeout, SplitGroupsInheritTheTimeoutAndUseIt) {
  std::atomic<int> seen_ms{0};
  const std::string error = RunRanksWithin(
      2,
      [&](Communicator& world) {
        world.set_timeout_s(0.25);
        std::unique_ptr<Communicator> dp = world.Split(0, world.rank(), "dp");
        if (world.rank() == 0) {
          seen_ms = static_cast<int>(dp->timeout_s() * 1000 + 0.5);
          return;
        }
        dp->Barrier();
      },
      30);
  EXPECT_EQ(seen_ms.load(), 250);
  EXPECT_EQ(error,
            "barrier on group 'dp' timed out after 0.25 s: rank 0 did not "
            "answer (stopped, hung or dead); the job is aborted (raise "
            "--distributed-timeout-minutes if it is only slow)");
}

TEST(LocalCommunicatorTimeout, CallsThatCompleteInTimeAreUnaffected) {
  const std::string error = RunRanksWithin(
      3,
      [](Communicator& world) {
        world.set_timeout_s(5);
        for (int i = 0; i < 100; ++i) {
          float x = static_cast<float>(world.rank());
          world.AllReduceSum(&x, 1);
          if (x != 3.0f) throw std::runtime_error("wrong sum");
        }
      },
      30);
  EXPECT_EQ(error, "");
}

TEST(TimeoutMessage, SaysWhenEveryMemberAnswered) {
  EXPECT_EQ(TimeoutMessage("all_gather", "tp", 600, {}),
            "all_gather on group 'tp' timed out after 600 s: every member "
            "answered but the call did not complete (the ranks wait for "
            "different calls, or on a rank outside this group); the job is "
            "aborted");
}

}  // namespace
}  // namespace meshtune::engine
