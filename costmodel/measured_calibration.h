// MeasuredCalibration: the cost model's hardware numbers from measurements
// (`tune profile`), with the datasheet curves where nothing was measured.
//
// The tables are plain values so costmodel does not depend on the results
// store; the tuner reads them from SQLite and fills a MeasuredTables.
//  - GEMMs: a measured shape answers for itself; any other shape runs at the
//    throughput (FLOP/s) of the nearest measured shape of the same precision
//    (distance in log m, log n, log k): its shape class. Scaling the datasheet
//    curve instead would carry a GPU's size dependence onto a CPU.
//  - Attention: measured (batch_heads, seq_len, head_dim) rows of the
//    engine's own causal kernel, forward and backward. Any other shape runs
//    at the FLOP rate of the nearest measured shape (distance in log
//    batch_heads, log q_len, log kv_len, log head_dim; a measured row has
//    q_len = kv_len = seq_len): its shape class, like the GEMMs. Without a
//    measured row of the direction, the datasheet answers.
//  - Elementwise ops (ElementwiseOp): per (op, direction) the rows' time
//    per element at the measured element count nearest in log space,
//    times the elements asked for (time ∝ elements away from a measured
//    count). Ops not measured take the default: datasheet bytes through
//    MemoryTime_s below.
//  - Collectives: per (op, group size) a curve of time over message size,
//    interpolated linearly in (log bytes, log time) and extended beyond the
//    measured range at the end points' bandwidth (time ∝ bytes). Other group
//    sizes or placements fall back to the datasheet.
//  - Memory-bound work: the best measured streaming bandwidth.
// Name() is "measured:<hardware id>".
#ifndef MESHTUNE_COSTMODEL_MEASURED_CALIBRATION_H_
#define MESHTUNE_COSTMODEL_MEASURED_CALIBRATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/datasheet_calibration.h"
#include "search_spaces/cluster_spec.h"

namespace meshtune::costmodel {

struct MeasuredGemm {
  int64_t m = 0, n = 0, k = 0;
  search_spaces::Precision precision = search_spaces::Precision::kBf16;
  double time_s = 0;  // median
};

struct MeasuredCollective {
  Collective op = Collective::kAllReduce;
  int64_t group_size = 1;
  int64_t nodes = 1;
  double bytes = 0;   // nccl-tests convention (see Calibration)
  double time_s = 0;  // median
};

// One timed elementwise kernel: `elements` counted as ElementwiseOp says.
struct MeasuredElementwise {
  ElementwiseOp op = ElementwiseOp::kNorm;
  bool backward = false;
  double elements = 0;
  double time_s = 0;  // median
};

// One timed causal self-attention kernel over `batch_heads` heads of
// `seq_len` queries and keys of dimension `head_dim`.
struct MeasuredAttention {
  int64_t batch_heads = 0, seq_len = 0, head_dim = 0;
  bool backward = false;
  double time_s = 0;  // median
};

struct MeasuredTables {
  std::string hardware_id;
  std::vector<MeasuredGemm> gemms;
  std::vector<MeasuredCollective> collectives;
  std::vector<MeasuredElementwise> elementwise;
  std::vector<MeasuredAttention> attention;
  double stream_gbps = 0;  // best measured streaming bandwidth; 0 = none
  bool empty() const {
    return gemms.empty() && collectives.empty() && elementwise.empty() &&
           attention.empty() && stream_gbps <= 0;
  }
};

class MeasuredCalibration : public Calibration {
 public:
  // REQUIRES: !tables.hardware_id.empty(). `cluster` supplies the datasheet
  // fallback; neither argument need outlive this object.
  MeasuredCalibration(const search_spaces::ClusterSpec& cluster,
                      MeasuredTables tables);

  std::string Name() const override {
    return "measured:" + tables_.hardware_id;
  }
  double GemmTime_s(int64_t m, int64_t n, int64_t k,
                    search_spaces::Precision precision,
                    const ModelOptions& options) const override;
  // The measured dense GEMM times the datasheet's GroupedGemmSlowdown (the
  // microbenchmarks time single cuBLASLt GEMMs, not GroupedLinear).
  double GroupedGemmTime_s(int64_t m, int64_t n, int64_t k,
                           search_spaces::Precision precision, bool fused,
                           const ModelOptions& options) const override {
    return GemmTime_s(m, n, k, precision, options) *
           datasheet_.GroupedGemmSlowdown(fused, options);
  }
  double AttentionForwardTime_s(int64_t batch_heads, int64_t q_len,
                                int64_t kv_len, int64_t head_dim, bool causal,
                                const ModelOptions& options) const override;
  double AttentionBackwardTime_s(int64_t batch_heads, int64_t q_len,
                                 int64_t kv_len, int64_t head_dim, bool causal,
                                 const ModelOptions& options) const override;
  bool UsesFlashAttention() const override {
    return datasheet_.UsesFlashAttention();
  }
  double Fp8BackwardGemmSlowdown(const ModelOptions& options) const override {
    return datasheet_.Fp8BackwardGemmSlowdown(options);
  }
  // No scan microbenchmark yet: the datasheet's.
  double ScanTime_s(double flops, const ModelOptions& options) const override {
    return datasheet_.ScanTime_s(flops, options);
  }
  double MemoryTime_s(double bytes, const ModelOptions& options) const override;
  double ElementwiseTime_s(ElementwiseOp op, double elements, bool backward,
                           const ModelOptions& options) const override;
  double CollectiveTime_s(Collective op, double bytes, const CommGroup& group,
                          const ModelOptions& options) const override;

  // The measured GEMM of `precision` nearest to (m, n, k) in log space, or
  // null when none was measured in that precision.
  const MeasuredGemm* NearestGemm(int64_t m, int64_t n, int64_t k,
                                  search_spaces::Precision precision) const;
  // The measured attention row of the direction nearest to the shape in log
  // space, or null when none was measured.
  const MeasuredAttention* NearestAttention(int64_t batch_heads, int64_t q_len,
                                            int64_t kv_len, int64_t head_dim,
                                            bool backward) const;

 private:
  DatasheetCalibration datasheet_;
  MeasuredTables tables_;
  // log m, log n, log k of tables_.gemms[i], computed once: the nearest-shape
  // lookup runs for every GEMM of every candidate of a search.
  struct LogShape {
    double m, n, k;
  };
  std::vector<LogShape> gemm_logs_;
  // Collective curves, each sorted by bytes.
  struct Curve {
    Collective op;
    int64_t group_size;
    int64_t nodes;
    std::vector<std::pair<double, double>> points;  // (bytes, time_s)
  };
  std::vector<Curve> curves_;
  // Per (op, direction), index 2·op + backward: (elements, time_s) sorted by
  // elements, repeated counts keeping the fastest.
  std::vector<std::pair<double, double>> elementwise_[2 * kNumElementwiseOps];
  double AttentionTime_s(int64_t batch_heads, int64_t q_len, int64_t kv_len,
                         int64_t head_dim, bool causal, bool backward,
                         const ModelOptions& options) const;
};

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_MEASURED_CALIBRATION_H_
