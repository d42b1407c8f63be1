// In-process communicator for unit tests: `size` ranks are threads of one
// process sharing memory. Same semantics as the MPI one (communicator.h),
// including deterministic rank-order sums, buffered sends and Split.
#ifndef MESHTUNE_ENGINE_COMM_LOCAL_COMMUNICATOR_H_
#define MESHTUNE_ENGINE_COMM_LOCAL_COMMUNICATOR_H_

#include <functional>
#include <memory>
#include <vector>

#include "engine/comm/communicator.h"

namespace meshtune::engine {

// One communicator per rank, all named "world"; hand communicator r to the
// thread that plays rank r.
std::vector<std::unique_ptr<Communicator>> MakeLocalWorld(int size);

// Runs fn(world_r) on `size` threads (one per rank) and joins them. If any
// rank throws, the exception is rethrown here after all threads ended. A
// rank that waits longer than its communicator's timeout_s() for a peer
// (one that returned early or is stuck elsewhere) throws CommTimeoutError
// naming the group ranks that did not arrive; the others are then woken.
void RunLocalRanks(int size, const std::function<void(Communicator&)>& fn,
                   CommLog* log = nullptr);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_COMM_LOCAL_COMMUNICATOR_H_
