// Where an estimate's hardware numbers come from: measurements of a matching
// machine in the results store (`tune profile`), else the datasheet.
//
// A cluster preset is matched to stored machines by what they are: the
// `local` preset to this machine's own fingerprint; a GPU preset (h200, ...)
// to a "cuda" fingerprint whose GPU model names the same GPU.
#ifndef MESHTUNE_TUNER_MACHINE_CALIBRATION_SOURCE_H_
#define MESHTUNE_TUNER_MACHINE_CALIBRATION_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/measured_calibration.h"
#include "results/store.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

// Stored rows of one machine as the cost model's tables: GEMM medians by
// shape and precision, collective medians by (op, group size, nodes) and
// size, and the best streaming bandwidth. fp32 GEMMs (the CPU backend's)
// stand for the training precision when no 16-bit GEMM was measured.
costmodel::MeasuredTables TablesFromMeasurements(
    const std::string& hardware_id,
    const std::vector<results::Measurement>& rows);

// The id of the stored machine that calibrates `cluster` ("" if none).
std::string MatchingHardwareId(
    const std::vector<results::HardwareFingerprint>& machines,
    const search_spaces::ClusterSpec& cluster, const std::string& local_id);

// The calibration for `cluster` before learning: measured when `store` (may
// be null) holds measurements of a matching machine, else the datasheet.
// Store errors are returned, not hidden.
StatusOr<std::unique_ptr<costmodel::Calibration>> ChooseBaseCalibration(
    const results::Store* store, const search_spaces::ClusterSpec& cluster,
    const std::string& local_id);

// ChooseBaseCalibration, then wrapped with the efficiency factors `tune
// validate` learned for the machine (tuner/machine/learned_factors.h), if any:
// the `local` preset uses this machine's (`local_id`) factors, a GPU preset
// those of the matching stored machine.
StatusOr<std::unique_ptr<costmodel::Calibration>> ChooseCalibration(
    const results::Store* store, const search_spaces::ClusterSpec& cluster,
    const std::string& local_id);

// ChooseCalibration with this machine's fingerprint for the `local` preset
// (none for GPU presets): what a command searching on `cluster` uses.
StatusOr<std::unique_ptr<costmodel::Calibration>> ChooseCalibration(
    const results::Store* store, const search_spaces::ClusterSpec& cluster);

// This machine's fingerprint id (the cpu backend's), for matching `local`.
std::string LocalHardwareId();

// The calibration for a command's inputs: opens the results database named
// by `db_flag` ($TUNE_DB, ./tune.db when empty) read-only if it exists, and
// picks measured or datasheet numbers for `cluster`. `no_db` skips it. A
// database named with --db that cannot be read is an error; the implicit
// default ($TUNE_DB, ./tune.db) never is (same policy as results_db.h), and a
// missing file means the datasheet.
StatusOr<std::unique_ptr<costmodel::Calibration>> CalibrationFor(
    const search_spaces::ClusterSpec& cluster, const std::string& db_flag,
    bool no_db);

// This machine as a GPU machine: backend "cuda", its CPU and host memory,
// and `gpu_count` GPUs named `gpu_model` (engine/backends/registry.h
// CudaDeviceName). What GPU runs are filed under when no `tune profile
// --backend cuda` of the GPU is stored (the profiler's fingerprint also names
// driver and library versions, which only the profiler reads).
results::HardwareFingerprint GpuMachineFingerprint(const std::string& gpu_model,
                                                   int64_t gpu_count);

// The id of the GPU machine behind `cluster` (a GPU preset) among the stored
// `machines`: the one that calibrates `cluster` (MatchingHardwareId, the
// newest `tune profile --backend cuda` of that GPU), else `self`'s id. Runs,
// validations and fitted factors filed under it go with that machine's
// measurements, so ChooseCalibration applies the factors `tune validate
// --backend cuda` learns there.
std::string GpuMachineHardwareId(
    const std::vector<results::HardwareFingerprint>& machines,
    const search_spaces::ClusterSpec& cluster,
    const results::HardwareFingerprint& self);

// Where a CUDA run or validation on this machine (`gpu_count` GPUs named
// `gpu_model`) is filed in `store`: GpuMachineHardwareId over the stored
// machines, storing this machine's GpuMachineFingerprint first when that is
// the answer (so rows can reference it).
StatusOr<std::string> FileGpuMachine(results::Store* store,
                                     const search_spaces::ClusterSpec& cluster,
                                     const std::string& gpu_model,
                                     int64_t gpu_count);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_MACHINE_CALIBRATION_SOURCE_H_
