// DeviceCommunicator (engine/cuda/comm/device_communicator.h): the kind parser
// and chooser and the factory's input errors run everywhere (no device
// needed); the collectives run on a device, with thread ranks over the
// in-process host communicator: 2 and 3 ranks sharing one GPU (staged, on
// the legacy default stream and on a stream of their own) and, with two or
// more GPUs, one GPU per rank (NCCL, and staged when forced). Values are
// small integers, exact in bf16 and in every summation order, so every
// result is compared exactly. Suites named *HostOnlyTest need no device and
// carry no `gpu` ctest label (tests/CMakeLists.txt).
#include "engine/cuda/comm/device_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cuda/comm/staged_communicator.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "gtest/gtest.h"

namespace meshtune::engine::cuda {
namespace {

constexpr char kEnv[] = "MESHTUNE_CUDA_COMM";

// Sets (or unsets, for nullptr) MESHTUNE_CUDA_COMM for one test and restores
// what was there.
class ScopedCommEnv {
 public:
  explicit ScopedCommEnv(const char* value) {
    if (const char* old = std::getenv(kEnv)) old_ = old;
    if (value == nullptr) {
      unsetenv(kEnv);
    } else {
      setenv(kEnv, value, 1);
    }
  }
  ~ScopedCommEnv() {
    if (old_) {
      setenv(kEnv, old_->c_str(), 1);
    } else {
      unsetenv(kEnv);
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(DeviceCommKindHostOnlyTest, ParseAcceptsEveryKind) {
  for (DeviceCommKind automatic :
       {DeviceCommKind::kNccl, DeviceCommKind::kStaged}) {
    for (const char* value : {static_cast<const char*>(nullptr), "", "auto"}) {
      auto kind = ParseDeviceCommKind(value, automatic);
      ASSERT_TRUE(kind.ok()) << (value ? value : "(unset)");
      EXPECT_EQ(*kind, automatic) << (value ? value : "(unset)");
    }
    auto nccl = ParseDeviceCommKind("nccl", automatic);
    ASSERT_TRUE(nccl.ok());
    EXPECT_EQ(*nccl, DeviceCommKind::kNccl);
    auto staged = ParseDeviceCommKind("staged", automatic);
    ASSERT_TRUE(staged.ok());
    EXPECT_EQ(*staged, DeviceCommKind::kStaged);
  }
}

TEST(DeviceCommKindHostOnlyTest, ParseRejectsAnyOtherValue) {
  for (const char* value : {"foo", "NCCL", "staged ", "mpi"}) {
    auto kind = ParseDeviceCommKind(value, DeviceCommKind::kNccl);
    ASSERT_FALSE(kind.ok()) << value;
    EXPECT_EQ(kind.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(kind.status().message(), std::string("MESHTUNE_CUDA_COMM=") +
                                           value +
                                           " is not a communicator kind");
    EXPECT_EQ(kind.status().hint(),
              "set it to nccl, staged or auto, or unset it");
  }
}

TEST(DeviceCommKindHostOnlyTest, ChoosesNcclWhenEveryDeviceIsDistinct) {
  EXPECT_EQ(ChooseDeviceCommKind({"a:0000:01:00.0", "a:0000:02:00.0"}),
            DeviceCommKind::kNccl);
  // The same bus id on two hosts is two GPUs.
  EXPECT_EQ(ChooseDeviceCommKind(
                {"a:0000:01:00.0", "b:0000:01:00.0", "a:0000:41:00.0"}),
            DeviceCommKind::kNccl);
}

TEST(DeviceCommKindHostOnlyTest, ChoosesStagedWhenTwoMembersShareADevice) {
  EXPECT_EQ(ChooseDeviceCommKind({"a:0000:01:00.0", "a:0000:01:00.0"}),
            DeviceCommKind::kStaged);
  EXPECT_EQ(ChooseDeviceCommKind(
                {"a:0000:01:00.0", "a:0000:02:00.0", "a:0000:01:00.0"}),
            DeviceCommKind::kStaged);
}

TEST(DeviceCommKindHostOnlyTest, ChoosesStagedForOneMember) {
  EXPECT_EQ(ChooseDeviceCommKind({"a:0000:01:00.0"}), DeviceCommKind::kStaged);
  EXPECT_EQ(ChooseDeviceCommKind({}), DeviceCommKind::kStaged);
}

// Checked before the device and before any traffic, so it fails the same
// way on every machine.
TEST(CreateDeviceCommunicatorHostOnlyTest, BadEnvironmentValueIsAnError) {
  ScopedCommEnv env("foo");
  auto world = MakeLocalWorld(1);
  auto comm = CreateDeviceCommunicator(world[0].get());
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(comm.status().message(),
            "MESHTUNE_CUDA_COMM=foo is not a communicator kind");
  EXPECT_EQ(comm.status().hint(),
            "set it to nccl, staged or auto, or unset it");
}

TEST(CreateDeviceCommunicatorHostOnlyTest, NoDeviceIsAStatus) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a device is present";
  ScopedCommEnv env(nullptr);
  auto world = MakeLocalWorld(1);
  auto comm = CreateDeviceCommunicator(world[0].get());
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(comm.status().message(),
            "no CUDA device: cudaGetDeviceCount found none");
  EXPECT_EQ(comm.status().hint(),
            "run on a machine with an NVIDIA GPU and driver, or use the CPU "
            "backend (--backend cpu)");
}

// Peers are checked before any device work, so this needs no device.
TEST(StagedCommunicatorHostOnlyTest, SendToItselfOrOutsideTheGroupIsAnError) {
  auto world = MakeLocalWorld(1);
  StagedCommunicator comm(world[0].get());
  EXPECT_STREQ(comm.kind(), "staged");
  Status self = comm.Send(static_cast<const Bf16*>(nullptr), 4, 0, nullptr);
  ASSERT_FALSE(self.ok());
  EXPECT_EQ(self.message(), "staged send of rank 0 to itself in group 'world'");
  EXPECT_EQ(self.hint(),
            "point-to-point transfers need two different ranks of the group; "
            "keep the data on the device instead");
  Status outside = comm.Recv(static_cast<Bf16*>(nullptr), 4, 1, nullptr);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.message(),
            "staged recv with peer 1 outside group 'world' of 1 ranks");
  EXPECT_EQ(outside.hint(), "peer is a rank of this group: 0 to 0");
}

// Two thread ranks without a device: neither can name its GPU, both say
// so, and neither waits for the other (the call is collective).
TEST(WorldSharesDevicesHostOnlyTest, NoDeviceFailsEveryRankWithoutAHang) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a device is present";
  auto world = MakeLocalWorld(2);
  std::vector<StatusOr<bool>> results(2, StatusOr<bool>(false));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back(
        [&, r] { results[r] = WorldSharesDevices(world[r].get()); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_FALSE(results[r].ok()) << "rank " << r;
}

TEST(AllToAllCountsHostOnlyTest, NamesTheGroupAndTheBadCount) {
  EXPECT_TRUE(CheckAllToAllCounts({1, 0}, {0, 2}, 2, "ep").ok());
  const Status few = CheckAllToAllCounts({1}, {0, 2}, 2, "ep");
  EXPECT_EQ(few.message(),
            "all_to_all on group 'ep' of 2 ranks got 1 send and 2 receive "
            "counts");
  const Status negative = CheckAllToAllCounts({1, -1}, {0, 2}, 2, "etp");
  EXPECT_EQ(negative.message(),
            "all_to_all on group 'etp': negative count for rank 1");
}

TEST(WorldSharesDevicesHostOnlyTest, OneRankNeedsNoDevice) {
  auto world = MakeLocalWorld(1);
  auto shared = WorldSharesDevices(world[0].get());
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_FALSE(*shared);
}

// ---- On a device. ----

constexpr int64_t kCount = 257;  // odd, so block offsets are not aligned

template <typename T>
StatusOr<DeviceBuffer> UploadAs(const std::vector<float>& values) {
  if constexpr (std::is_same_v<T, Bf16>) {
    return Upload(ToBf16(values));
  } else {
    return Upload(values);
  }
}

template <typename T>
StatusOr<std::vector<float>> DownloadAs(const DeviceBuffer& buffer,
                                        size_t count) {
  if constexpr (std::is_same_v<T, Bf16>) {
    auto host = Download<Bf16>(buffer, count);
    if (!host.ok()) return host.status();
    return ToFloat(*host);
  } else {
    return Download<float>(buffer, count);
  }
}

// One collective call on device buffers: `in` is uploaded, `out` (when
// out_count > 0) starts as -1 everywhere, `op` runs on them, and the
// buffer `op` writes (out, or in when out_count is 0: in place) from
// element want_offset on must equal `want` exactly. Returns "" or what
// differs.
template <typename T>
struct Case {
  std::string what;
  std::vector<float> in;
  int64_t out_count;
  std::function<Status(T* in, T* out)> op;
  std::vector<float> want;
  int64_t want_offset = 0;
};

template <typename T>
std::string Run(const Case<T>& c, Stream stream) {
  auto in = UploadAs<T>(c.in);
  if (!in.ok()) return c.what + ": " + in.status().message();
  auto out = UploadAs<T>(std::vector<float>(c.out_count, -1.0f));
  if (!out.ok()) return c.what + ": " + out.status().message();
  // Upload's cudaMemcpy from pageable memory may return before its copy
  // lands; wait for it, as `stream` need not be ordered after it.
  Status st = SynchronizeStream(nullptr, "device communicator test upload");
  if (!st.ok()) return c.what + ": " + st.message();
  st = c.op(in->template as<T>(), out->template as<T>());
  if (!st.ok()) return c.what + ": " + st.message();
  // Download copies on the legacy default stream: wait for `stream` first.
  st = SynchronizeStream(stream, "device communicator test");
  if (!st.ok()) return c.what + ": " + st.message();
  auto got = DownloadAs<T>(c.out_count > 0 ? *out : *in,
                           c.want_offset + c.want.size());
  if (!got.ok()) return c.what + ": " + got.status().message();
  for (size_t i = 0; i < c.want.size(); ++i) {
    const float value = (*got)[c.want_offset + i];
    if (value != c.want[i]) {
      return c.what + ": element " + std::to_string(c.want_offset + i) +
             " is " + std::to_string(value) + ", want " +
             std::to_string(c.want[i]);
    }
  }
  return "";
}

// Every collective of T (float or Bf16) on `comm`; "" or the first failure.
template <typename T>
std::string CheckCollectives(DeviceCommunicator& comm, Stream stream) {
  const int n = comm.size(), r = comm.rank();
  const int64_t count = kCount;
  const std::string type = std::is_same_v<T, Bf16> ? " bf16" : " float";
  std::vector<Case<T>> cases;

  // All-reduce: rank q holds q + 1 + i % 7; the sum is n(n+1)/2 + n·(i % 7).
  std::vector<float> mine(count), sum(count);
  for (int64_t i = 0; i < count; ++i) {
    mine[i] = r + 1.0f + i % 7;
    sum[i] = n * (n + 1) / 2.0f + n * static_cast<float>(i % 7);
  }
  cases.push_back(
      {"all_reduce_sum" + type, mine, 0,
       [&](T* in, T*) { return comm.AllReduceSum(in, count, stream); }, sum});

  // All-gather: block q holds 10·q + i % 7.
  std::vector<float> block(count), gathered(count * n);
  for (int64_t i = 0; i < count; ++i) block[i] = 10.0f * r + i % 7;
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < count; ++i) {
      gathered[q * count + i] = 10.0f * q + i % 7;
    }
  }
  cases.push_back(
      {"all_gather" + type, block, count * n,
       [&](T* in, T* out) { return comm.AllGather(in, out, count, stream); },
       gathered});
  // In place: this rank's block already sits in the output, the rest is -1.
  std::vector<float> partial(count * n, -1.0f);
  std::copy(block.begin(), block.end(), partial.begin() + r * count);
  cases.push_back({"in-place all_gather" + type, partial, 0,
                   [&](T* in, T*) {
                     return comm.AllGather(in + r * count, in, count, stream);
                   },
                   gathered});

  // Reduce-scatter: rank q's block b holds q + b + i % 5; this rank's sum is
  // n(n-1)/2 + n·(r + i % 5).
  std::vector<float> blocks(count * n), scattered(count);
  for (int b = 0; b < n; ++b) {
    for (int64_t i = 0; i < count; ++i) {
      blocks[b * count + i] = static_cast<float>(r + b + i % 5);
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    scattered[i] = n * (n - 1) / 2.0f + n * static_cast<float>(r + i % 5);
  }
  cases.push_back({"reduce_scatter" + type, blocks, count,
                   [&](T* in, T* out) {
                     return comm.ReduceScatterSum(in, out, count, stream);
                   },
                   scattered});
  // In place: the result lands on this rank's block of the input.
  cases.push_back({"in-place reduce_scatter" + type, blocks, 0,
                   [&](T* in, T*) {
                     return comm.ReduceScatterSum(in, in + r * count, count,
                                                  stream);
                   },
                   scattered, r * count});

  // Every case runs even after a failure: the other ranks make the same
  // calls, and a rank that stopped early would leave them waiting.
  std::string first_failure;
  for (const Case<T>& c : cases) {
    std::string failure = Run(c, stream);
    if (first_failure.empty()) first_failure = failure;
  }
  return first_failure;
}

// All-reduce max (float only): rank q holds (i·(q + 1)) % 11.
std::string CheckAllReduceMax(DeviceCommunicator& comm, Stream stream) {
  std::vector<float> mine(kCount), max(kCount, 0.0f);
  for (int64_t i = 0; i < kCount; ++i) {
    mine[i] = static_cast<float>(i * (comm.rank() + 1) % 11);
    for (int q = 0; q < comm.size(); ++q) {
      max[i] = std::max(max[i], static_cast<float>(i * (q + 1) % 11));
    }
  }
  return Run<float>(
      {"all_reduce_max", mine, 0,
       [&](float* in, float*) { return comm.AllReduceMax(in, kCount, stream); },
       max},
      stream);
}

// Ranks 0 and 1 swap bf16 messages both ways inside one group bracket,
// sends first (as the interface asks); other ranks take no part. Rank q
// sends 100 + q + i % 3 (count + q elements, so a mixed-up pair shows).
std::string CheckSendRecv(DeviceCommunicator& comm, Stream stream) {
  const int r = comm.rank();
  if (r > 1) return "";
  const int peer = 1 - r;
  auto message = [](int sender) {
    std::vector<float> m(kCount + sender);
    for (size_t i = 0; i < m.size(); ++i) m[i] = 100.0f + sender + i % 3;
    return m;
  };
  auto send = Upload(ToBf16(message(r)));
  auto recv = Upload(std::vector<Bf16>(kCount + peer));
  if (!send.ok() || !recv.ok()) return "send/recv: upload failed";
  Status st = SynchronizeStream(nullptr, "device communicator test upload");
  if (!st.ok()) return "send/recv: " + st.message();
  st = GroupStart();
  if (!st.ok()) return "send/recv: " + st.message();
  st = comm.Send(send->as<Bf16>(), kCount + r, peer, stream);
  if (st.ok()) st = comm.Recv(recv->as<Bf16>(), kCount + peer, peer, stream);
  const Status end = GroupEnd();  // closes the bracket even after a failure
  if (!st.ok()) return "send/recv: " + st.message();
  if (!end.ok()) return "send/recv: " + end.message();
  st = SynchronizeStream(stream, "device communicator test");
  if (!st.ok()) return "send/recv: " + st.message();
  auto got = Download<Bf16>(*recv, kCount + peer);
  if (!got.ok()) return "send/recv: " + got.status().message();
  if (ToFloat(*got) != message(peer)) {
    return "send/recv: rank " + std::to_string(r) + " received the wrong data";
  }
  return "";
}

// The fp32 overloads (the ring attention's dK/dV): values bf16 cannot hold
// must arrive bit for bit.
std::string CheckSendRecvFloat(DeviceCommunicator& comm, Stream stream) {
  const int r = comm.rank();
  if (r > 1) return "";
  const int peer = 1 - r;
  auto message = [](int sender) {
    std::vector<float> m(kCount + sender);
    for (size_t i = 0; i < m.size(); ++i) {
      m[i] = 1.0f + sender * 0x1p-20f + static_cast<float>(i) * 0x1p-23f;
    }
    return m;
  };
  auto send = Upload(message(r));
  auto recv = Upload(std::vector<float>(kCount + peer));
  if (!send.ok() || !recv.ok()) return "send/recv fp32: upload failed";
  Status st = SynchronizeStream(nullptr, "device communicator test upload");
  if (!st.ok()) return "send/recv fp32: " + st.message();
  st = GroupStart();
  if (!st.ok()) return "send/recv fp32: " + st.message();
  st = comm.Send(send->as<float>(), kCount + r, peer, stream);
  if (st.ok()) st = comm.Recv(recv->as<float>(), kCount + peer, peer, stream);
  const Status end = GroupEnd();  // closes the bracket even after a failure
  if (!st.ok()) return "send/recv fp32: " + st.message();
  if (!end.ok()) return "send/recv fp32: " + end.message();
  st = SynchronizeStream(stream, "device communicator test");
  if (!st.ok()) return "send/recv fp32: " + st.message();
  auto got = Download<float>(*recv, kCount + peer);
  if (!got.ok()) return "send/recv fp32: " + got.status().message();
  if (*got != message(peer)) {
    return "send/recv fp32: rank " + std::to_string(r) +
           " received the wrong data";
  }
  return "";
}

// All-to-all with uneven counts: rank q sends q + p + 1 elements to rank
// p (none when that is 2: rank 0 to rank 1 sends nothing, so an empty pair
// is covered), valued 64·q + 8·p + i % 7 (exact in bf16).
std::string CheckAllToAllV(DeviceCommunicator& comm, Stream stream) {
  const int n = comm.size(), r = comm.rank();
  auto count = [](int from, int to) -> int64_t {
    return from + to + 1 == 2 ? 0 : from + to + 1;
  };
  std::vector<int64_t> send(n), recv(n);
  std::vector<float> in, want;
  for (int p = 0; p < n; ++p) {
    send[p] = count(r, p);
    recv[p] = count(p, r);
    for (int64_t i = 0; i < send[p]; ++i)
      in.push_back(64.0f * r + 8 * p + i % 7);
    for (int64_t i = 0; i < recv[p]; ++i)
      want.push_back(64.0f * p + 8 * r + i % 7);
  }
  return Run<Bf16>({"all_to_all_v bf16", in, static_cast<int64_t>(want.size()),
                    [&](Bf16* a, Bf16* b) {
                      return comm.AllToAllV(a, send, b, recv, stream);
                    },
                    want},
                   stream);
}

enum class StreamKind { kLegacyDefault, kNonBlocking };

// Readable parameters in test names and in ctest's list.
void PrintTo(StreamKind kind, std::ostream* os) {
  *os << (kind == StreamKind::kLegacyDefault ? "legacy default stream"
                                             : "non-blocking stream");
}

// `n` thread ranks over MakeLocalWorld(n), rank r on GPU device_of(r) with
// MESHTUNE_CUDA_COMM = env: each creates its communicator (which must be of
// `want_kind`), runs every check on its stream, and reports "" or the
// first failure.
std::vector<std::string> RunRanks(int n,
                                  const std::function<int(int)>& device_of,
                                  const char* env, const char* want_kind,
                                  StreamKind stream_kind) {
  ScopedCommEnv scoped(env);
  auto world = MakeLocalWorld(n);
  std::vector<std::string> failures(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::string& failure = failures[r];
      Status st = SetDevice(device_of(r));
      if (!st.ok()) {
        failure = st.message();
        return;
      }
      auto comm = CreateDeviceCommunicator(world[r].get());
      if (!comm.ok()) {
        failure = "create: " + comm.status().message();
        return;
      }
      DeviceCommunicator& c = **comm;
      if (std::string(c.kind()) != want_kind) {
        failure = std::string("kind ") + c.kind() + ", want " + want_kind;
        return;
      }
      Stream stream = nullptr;
      if (stream_kind == StreamKind::kNonBlocking) {
        auto created = CreateNonBlockingStream();
        if (!created.ok()) {
          failure = created.status().message();
          return;
        }
        stream = *created;
      }
      using Check = std::string (*)(DeviceCommunicator&, Stream);
      for (Check check : {&CheckCollectives<float>, &CheckCollectives<Bf16>,
                          &CheckAllReduceMax, &CheckSendRecv,
                          &CheckSendRecvFloat, &CheckAllToAllV}) {
        // Every check runs (see CheckCollectives); the first failure stays.
        std::string this_failure = check(c, stream);
        if (failure.empty()) failure = this_failure;
      }
      DestroyStream(stream);
    });
  }
  for (auto& t : threads) t.join();
  return failures;
}

class StagedOnOneGpuTest
    : public ::testing::TestWithParam<std::tuple<int, StreamKind>> {};

TEST_P(StagedOnOneGpuTest, EveryCollectiveIsExact) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const auto [n, stream_kind] = GetParam();
  const auto failures = RunRanks(
      n, [](int) { return 0; }, nullptr, "staged", stream_kind);
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    RanksAndStreams, StagedOnOneGpuTest,
    ::testing::Combine(::testing::Values(2, 3),
                       ::testing::Values(StreamKind::kLegacyDefault,
                                         StreamKind::kNonBlocking)),
    [](const auto& info) {
      return std::to_string(std::get<0>(info.param)) + "Ranks" +
             (std::get<1>(info.param) == StreamKind::kLegacyDefault
                  ? "LegacyDefaultStream"
                  : "NonBlockingStream");
    });

// A group of one: all-reduces change nothing, all-gather and reduce-scatter
// copy (or, in place, leave the data where it is).
TEST(StagedCommunicatorTest, GroupOfOneCopiesOnTheDevice) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  ScopedCommEnv env("nccl");  // a group of one is staged whatever is asked
  auto world = MakeLocalWorld(1);
  ASSERT_TRUE(SetDevice(0).ok());
  auto comm = CreateDeviceCommunicator(world[0].get());
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  EXPECT_STREQ((*comm)->kind(), "staged");
  EXPECT_EQ(CheckCollectives<float>(**comm, nullptr), "");
  EXPECT_EQ(CheckCollectives<Bf16>(**comm, nullptr), "");
  EXPECT_EQ(CheckAllReduceMax(**comm, nullptr), "");
  EXPECT_EQ(CheckAllToAllV(**comm, nullptr), "");
}

TEST(CreateDeviceCommunicatorTest, ForcedNcclOnASharedGpuIsAnError) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  ScopedCommEnv env("nccl");
  auto world = MakeLocalWorld(2);
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      results[r] = SetDevice(0);
      if (!results[r].ok()) return;
      auto comm = CreateDeviceCommunicator(world[r].get());
      results[r] = comm.ok() ? Status::Ok() : comm.status();
    });
  }
  for (auto& t : threads) t.join();
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string prefix =
      "MESHTUNE_CUDA_COMM=nccl but ranks 0 and 1 of group 'world' share GPU " +
      std::string(host) + ":";
  const std::string suffix = "; NCCL needs one GPU per rank";
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(results[r].ok()) << "rank " << r;
    const std::string& message = results[r].message();
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
    ASSERT_GE(message.size(), suffix.size()) << message;
    EXPECT_EQ(message.substr(message.size() - suffix.size()), suffix);
    EXPECT_EQ(results[r].hint(),
              "unset MESHTUNE_CUDA_COMM or set it to staged to run ranks "
              "that share a GPU");
  }
}

// Thread ranks on one GPU share it: the whole world is staged.
TEST(WorldSharesDevicesTest, ThreadRanksOnOneGpuShareIt) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto world = MakeLocalWorld(2);
  std::vector<StatusOr<bool>> results(2, StatusOr<bool>(false));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const Status set = SetDevice(0);
      results[r] =
          set.ok() ? WorldSharesDevices(world[r].get()) : StatusOr<bool>(set);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status().message();
    EXPECT_TRUE(*results[r]) << "rank " << r;
  }
}

// A rank whose device-to-host copy fails (a null device pointer here) still
// enters the host collective, so its peer returns with NaNs instead of
// waiting forever; the failing rank returns the copy's error. The same for
// a staged Send whose Recv is waiting.
TEST(StagedCommunicatorTest, FailedCopyStillEntersTheCollective) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto world = MakeLocalWorld(2);
  std::vector<Status> reduce(2), p2p(2);
  std::vector<std::vector<float>> reduced(2), received(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      if (!SetDevice(0).ok()) return;
      StagedCommunicator comm(world[r].get());
      auto buffer = Upload(std::vector<float>(kCount, 1.0f));
      if (!buffer.ok()) return;
      float* data = r == 0 ? nullptr : buffer->as<float>();
      reduce[r] = comm.AllReduceSum(data, kCount, nullptr);
      if (r == 1) reduced[r] = Download<float>(*buffer, kCount).value();
      auto bf16 = Upload(ToBf16(std::vector<float>(kCount, 2.0f)));
      if (!bf16.ok()) return;
      if (r == 0) {
        p2p[r] =
            comm.Send(static_cast<const Bf16*>(nullptr), kCount, 1, nullptr);
      } else {
        p2p[r] = comm.Recv(bf16->as<Bf16>(), kCount, 0, nullptr);
        received[r] = ToFloat(Download<Bf16>(*bf16, kCount).value());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(reduce[0].ok());
  EXPECT_TRUE(reduce[1].ok()) << reduce[1].message();
  ASSERT_EQ(reduced[1].size(), static_cast<size_t>(kCount));
  EXPECT_TRUE(std::isnan(reduced[1][0]));
  EXPECT_FALSE(p2p[0].ok());
  EXPECT_TRUE(p2p[1].ok()) << p2p[1].message();
  ASSERT_EQ(received[1].size(), static_cast<size_t>(kCount));
  EXPECT_TRUE(std::isnan(received[1][kCount - 1]));
}

// One GPU per rank: NCCL by default, staged when asked for.
TEST(DeviceCommunicatorTest, OneGpuPerRankRunsNcclOrStagedWhenAsked) {
  const int n = std::min(DeviceCount(), 3);
  if (n < 2) GTEST_SKIP() << "needs two CUDA devices";
  const auto own_gpu = [](int r) { return r; };
  for (StreamKind stream_kind :
       {StreamKind::kLegacyDefault, StreamKind::kNonBlocking}) {
    auto nccl = RunRanks(n, own_gpu, nullptr, "nccl", stream_kind);
    for (int r = 0; r < n; ++r) EXPECT_EQ(nccl[r], "") << "nccl rank " << r;
    auto staged = RunRanks(n, own_gpu, "staged", "staged", stream_kind);
    for (int r = 0; r < n; ++r) EXPECT_EQ(staged[r], "") << "staged rank " << r;
  }
}

}  // namespace
}  // namespace meshtune::engine::cuda
