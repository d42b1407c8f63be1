#include "tuner/machine/calibration_source.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <tuple>

#include "costmodel/datasheet_calibration.h"
#include "profiler/cpu_backend.h"
#include "search_spaces/collective.h"
#include "search_spaces/presets/presets.h"
#include "tuner/inputs/local_cluster.h"
#include "tuner/machine/learned_factors.h"
#include "tuner/store/results_db.h"

namespace meshtune::tuner {
namespace {

using costmodel::Collective;
using search_spaces::Precision;

// Adds an "elem:<op>:fwd|bwd" row (element count in m) to `out`; rows of
// an op this build does not know are skipped (a newer profiler's rows).
void ElementwiseRow(const results::Measurement& r,
                    std::vector<costmodel::MeasuredElementwise>* out) {
  const size_t last = r.op.rfind(':');
  if (last == std::string::npos || last < 5 || r.m <= 0) return;
  const std::string direction = r.op.substr(last + 1);
  if (direction != "fwd" && direction != "bwd") return;
  costmodel::ElementwiseOp op;
  if (!costmodel::ParseElementwiseOp(r.op.substr(5, last - 5), &op)) return;
  out->push_back(
      {op, direction == "bwd", static_cast<double>(r.m), r.median_s});
}

}  // namespace

costmodel::MeasuredTables TablesFromMeasurements(
    const std::string& hardware_id,
    const std::vector<results::Measurement>& rows) {
  costmodel::MeasuredTables t;
  t.hardware_id = hardware_id;
  bool has_16bit_gemm = false;
  for (const results::Measurement& r : rows) {
    if (r.op == "gemm" && (r.dtype == "bf16" || r.dtype == "fp16")) {
      has_16bit_gemm = true;
    }
  }
  for (const results::Measurement& r : rows) {
    if (r.median_s <= 0) continue;
    if (r.op == "gemm" && r.m > 0 && r.n > 0 && r.k > 0) {
      Precision p;
      if (r.dtype == "bf16") {
        p = Precision::kBf16;
      } else if (r.dtype == "fp16") {
        p = Precision::kFp16;
      } else if (r.dtype == "fp8") {
        p = Precision::kFp8;
      } else if (r.dtype == "fp32" && !has_16bit_gemm) {
        p = Precision::kBf16;  // the CPU engine trains in fp32
      } else {
        continue;
      }
      t.gemms.push_back({r.m, r.n, r.k, p, r.median_s});
      if (p == Precision::kBf16 && !has_16bit_gemm) {
        t.gemms.push_back({r.m, r.n, r.k, Precision::kFp16, r.median_s});
      }
    } else if (r.op == "attn:fwd" || r.op == "attn:bwd") {
      // The engine's causal attention: batch_heads, seq_len, head_dim in
      // the m, n, k columns (profiler/engine_ops.h).
      if (r.m > 0 && r.n > 0 && r.k > 0) {
        t.attention.push_back({r.m, r.n, r.k, r.op == "attn:bwd", r.median_s});
      }
    } else if (r.op.rfind("elem:", 0) == 0) {
      // "elem:<op>:fwd|bwd" with the element count in m.
      ElementwiseRow(r, &t.elementwise);
    } else if (r.op == "stream" && r.bytes > 0) {
      t.stream_gbps = std::max(t.stream_gbps, r.bytes / r.median_s / 1e9);
    } else {
      // Rows of an op this build does not know are skipped (a newer
      // profiler's rows).
      const StatusOr<Collective> op = search_spaces::ParseCollective(r.op);
      if (op.ok() && r.bytes > 0) {
        t.collectives.push_back(
            {op.value(), r.group_size, r.nodes, r.bytes, r.median_s});
      }
    }
  }
  return t;
}

std::string MatchingHardwareId(
    const std::vector<results::HardwareFingerprint>& machines,
    const search_spaces::ClusterSpec& cluster, const std::string& local_id) {
  if (cluster.name == kLocalCluster) {
    for (const auto& hw : machines) {
      if (hw.id == local_id) return hw.id;
    }
    return "";
  }
  // The newest matching machine wins: ListHardware is in insertion order.
  std::string id;
  for (const auto& hw : machines) {
    if (hw.backend == "cuda" && !hw.gpu_model.empty() &&
        search_spaces::ClusterPresetForGpu(hw.gpu_model) == cluster.name) {
      id = hw.id;
    }
  }
  return id;
}

StatusOr<std::unique_ptr<costmodel::Calibration>> ChooseCalibration(
    const results::Store* store, const search_spaces::ClusterSpec& cluster,
    const std::string& local_id) {
  auto base = ChooseBaseCalibration(store, cluster, local_id);
  if (!base.ok() || store == nullptr) return base;
  std::string machine = local_id;
  if (cluster.name != kLocalCluster) {
    auto machines = store->ListHardware();
    if (!machines.ok()) return machines.status();
    machine = MatchingHardwareId(machines.value(), cluster, local_id);
  }
  return ApplyStoredFactors(*store, std::move(base).value(), machine);
}

StatusOr<std::unique_ptr<costmodel::Calibration>> ChooseBaseCalibration(
    const results::Store* store, const search_spaces::ClusterSpec& cluster,
    const std::string& local_id) {
  if (store != nullptr) {
    auto machines = store->ListHardware();
    if (!machines.ok()) return machines.status();
    const std::string id =
        MatchingHardwareId(machines.value(), cluster, local_id);
    if (!id.empty()) {
      auto rows = store->GetMeasurements(id);
      if (!rows.ok()) return rows.status();
      costmodel::MeasuredTables tables =
          TablesFromMeasurements(id, rows.value());
      if (!tables.empty()) {
        return std::unique_ptr<costmodel::Calibration>(
            std::make_unique<costmodel::MeasuredCalibration>(
                cluster, std::move(tables)));
      }
    }
  }
  return std::unique_ptr<costmodel::Calibration>(
      std::make_unique<costmodel::DatasheetCalibration>(cluster));
}

std::string LocalHardwareId() {
  return profiler::CpuFingerprint(profiler::ReadCpuInfo()).id;
}

StatusOr<std::unique_ptr<costmodel::Calibration>> CalibrationFor(
    const search_spaces::ClusterSpec& cluster, const std::string& db_flag,
    bool no_db) {
  std::unique_ptr<results::Store> store;
  const std::string path = ResolveDbPath(db_flag);
  if (!no_db && std::ifstream(path).good()) {
    results::OpenOptions options;
    options.read_only = true;
    auto opened = results::Store::Open(path, options);
    if (opened.ok()) {
      store = std::move(opened).value();
    } else if (!db_flag.empty()) {
      return opened.status();  // named explicitly: it must open
    }  // the implicit default never breaks a command: datasheet numbers
  }
  return ChooseCalibration(store.get(), cluster);
}

StatusOr<std::unique_ptr<costmodel::Calibration>> ChooseCalibration(
    const results::Store* store, const search_spaces::ClusterSpec& cluster) {
  return ChooseCalibration(
      store, cluster, cluster.name == kLocalCluster ? LocalHardwareId() : "");
}

results::HardwareFingerprint GpuMachineFingerprint(const std::string& gpu_model,
                                                   int64_t gpu_count) {
  const profiler::CpuInfo info = profiler::ReadCpuInfo();
  results::HardwareFingerprint hw;
  hw.backend = "cuda";
  hw.cpu_model = info.model;
  hw.cpu_cores = info.logical_cpus;
  hw.memory_gib = info.memory_gib;
  hw.gpu_model = gpu_model;
  hw.gpu_count = gpu_count;
  hw.id = results::ComputeHardwareId(hw);
  return hw;
}

std::string GpuMachineHardwareId(
    const std::vector<results::HardwareFingerprint>& machines,
    const search_spaces::ClusterSpec& cluster,
    const results::HardwareFingerprint& self) {
  const std::string stored = MatchingHardwareId(machines, cluster, "");
  return stored.empty() ? self.id : stored;
}

StatusOr<std::string> FileGpuMachine(results::Store* store,
                                     const search_spaces::ClusterSpec& cluster,
                                     const std::string& gpu_model,
                                     int64_t gpu_count) {
  const results::HardwareFingerprint self =
      GpuMachineFingerprint(gpu_model, gpu_count);
  auto machines = store->ListHardware();
  if (!machines.ok()) return machines.status();
  const std::string id = GpuMachineHardwareId(*machines, cluster, self);
  if (id == self.id) {
    MESHTUNE_RETURN_IF_ERROR(store->PutHardware(self, ToolProvenance()));
  }
  return id;
}

}  // namespace meshtune::tuner
