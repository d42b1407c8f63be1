// One source of truth for communication: the tensor-parallel collectives the
// engine issues per layer, recorded by the CommLog, are exactly the list the
// cost model prices (search_spaces::TransformerLayerTpCommOps), with the
// engine's fp32 bytes.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "search_spaces/comm_ops.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine {
namespace {

using search_spaces::Collective;
using search_spaces::RecomputeGranularity;
using search_spaces::TpCommOp;

CommKind ToEngine(Collective k) {
  switch (k) {
    case Collective::kAllReduce:
      return CommKind::kAllReduce;
    case Collective::kAllGather:
      return CommKind::kAllGather;
    case Collective::kReduceScatter:
      return CommKind::kReduceScatter;
    case Collective::kAllToAll:  // not a TP collective
    case Collective::kSendRecv:
      break;
  }
  return CommKind::kBarrier;
}

// (layer, phase, kind, bytes) -> count.
using Key = std::tuple<int64_t, std::string, CommKind, int64_t>;

// With cp > 1 the tp list is the cost model's for s/cp tokens per
// sequence, and the ring attention's sends and receives are on "cp":
// per layer, micro-batch and rank, cp−1 K/V hops forward (and in a full
// recompute), cp−1 K/V and cp dK/dV hops backward, each message the K/V of
// the rank's rows for its tp rank's groups (engine/context_parallel/
// ring_attention.h).
void ExpectEngineMatchesCostModel(bool sp, bool full, bool llama, int cp = 1) {
  SCOPED_TRACE(std::string(sp ? "sp " : "") + (full ? "full " : "") +
               (llama ? "llama" : "gpt") + " cp" + std::to_string(cp));
  TrainConfig c = testing::TinyConfig(llama);
  c.parallel.tp = 2;
  c.parallel.cp = cp;
  c.parallel.sp = sp;
  c.parallel.mbs = 2;
  c.global_batch_size = 4;  // 2 micro-batches
  c.train_iters = 1;
  if (full) c.parallel.recompute.granularity = RecomputeGranularity::kFull;
  CommLog log;
  testing::TrainLocally(c, &log);

  std::map<Key, int64_t> engine, expected;
  std::map<Key, int64_t> ring, expected_ring;  // the "cp" group's p2p
  for (const CommRecord& r : log.records()) {
    if (r.group == "cp" && r.label.rfind("layer", 0) == 0) {
      const size_t dot = r.label.find('.');
      const int64_t layer = std::stoll(r.label.substr(5, dot - 5));
      ++ring[{layer, r.label.substr(dot + 1), r.kind, r.bytes}];
      continue;
    }
    if (r.group != "tp" || r.label.rfind("layer", 0) != 0) continue;
    const size_t dot = r.label.find('.');
    const int64_t layer = std::stoll(r.label.substr(5, dot - 5));
    ++engine[{layer, r.label.substr(dot + 1), r.kind, r.bytes}];
  }
  const int64_t m = c.num_microbatches();
  const char* names[] = {"fwd", "recompute", "bwd"};
  for (int64_t layer = 0; layer < c.model.num_layers; ++layer) {
    for (const TpCommOp& op : search_spaces::TransformerLayerTpCommOps(
             c.parallel, c.seq() / cp, c.model.hidden_size, full)) {
      // Every one of the tp·cp ranks records its call, once per
      // micro-batch.
      expected[{layer, names[static_cast<int>(op.phase)], ToEngine(op.kind),
                4 * op.elements}] += c.parallel.tp * cp * m;
    }
    if (cp > 1) {
      const int64_t ranks = c.parallel.tp * cp;
      const int64_t kv_bytes = 4 * (c.seq() / cp) * c.parallel.mbs * 2 *
                               (c.model.num_query_groups / c.parallel.tp) *
                               c.model.kv_channels;
      for (const CommKind kind : {CommKind::kSend, CommKind::kRecv}) {
        expected_ring[{layer, "fwd", kind, kv_bytes}] += ranks * m * (cp - 1);
        if (full) {
          expected_ring[{layer, "recompute", kind, kv_bytes}] +=
              ranks * m * (cp - 1);
        }
        expected_ring[{layer, "bwd", kind, kv_bytes}] +=
            ranks * m * (2 * cp - 1);
      }
    }
  }
  EXPECT_EQ(engine, expected);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(ring, expected_ring);
}

TEST(CommOpsTest, TensorParallelLayerCollectivesMatchTheCostModel) {
  ExpectEngineMatchesCostModel(false, false, false);
  ExpectEngineMatchesCostModel(false, false, true);
}

TEST(CommOpsTest, SequenceParallelLayerCollectivesMatchTheCostModel) {
  ExpectEngineMatchesCostModel(true, false, false);
  ExpectEngineMatchesCostModel(true, false, true);
}

TEST(CommOpsTest, ContextParallelKeepsTheTpListAndAddsTheRing) {
  ExpectEngineMatchesCostModel(false, false, false, 2);
  ExpectEngineMatchesCostModel(true, false, true, 2);
  ExpectEngineMatchesCostModel(true, true, true, 2);
}

TEST(CommOpsTest, FullRecomputeRepeatsTheForwardCollectives) {
  ExpectEngineMatchesCostModel(false, true, false);
  ExpectEngineMatchesCostModel(true, true, true);
}

}  // namespace
}  // namespace meshtune::engine
