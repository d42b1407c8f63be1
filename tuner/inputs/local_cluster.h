// The `local` cluster preset: the machine tune runs on, described as a
// cluster so that `--gpu local` searches, estimates and trains on it like any
// GPU preset. Its numbers are nominal (from /proc); `tune profile --backend
// cpu` measures them and the calibration (tuner/machine/calibration_source.h)
// replaces them.
#ifndef MESHTUNE_TUNER_INPUTS_LOCAL_CLUSTER_H_
#define MESHTUNE_TUNER_INPUTS_LOCAL_CLUSTER_H_

#include <cstdint>

#include "profiler/cpu_backend.h"
#include "search_spaces/cluster_spec.h"

namespace meshtune::tuner {

// Name of the cluster preset that describes the machine tune runs on.
inline constexpr char kLocalCluster[] = "local";

// The `local` preset: this machine as one node whose "GPUs" are its CPU
// cores (the CPU training engine runs one rank per core). Peak and memory
// per rank come from /proc; bandwidths are nominal until `tune profile`
// measures them (then MeasuredCalibration replaces them).
search_spaces::ClusterSpec LocalCluster(const profiler::CpuInfo& info);

// Every rank of a `local` run is a process on this one machine, talking
// through shared memory however many there are: with more ranks than
// cores the node (and its shared-memory "NVLink" domain) grows to `ranks`
// instead of the ranks spilling onto a network that does not exist; the
// cores stay `host_cores` and are shared (costmodel::CoreSharing_s), and
// each rank's memory is its share of the host's.
void LocalNodeForRanks(int64_t ranks, search_spaces::ClusterSpec* cluster);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INPUTS_LOCAL_CLUSTER_H_
