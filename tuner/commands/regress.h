// `tune regress`: the throughput and numerics regression gate
// (docs/regress.md).
//   tune regress list                                 built-in benchmarks
//   tune regress run --benchmark B [--repeats N]      measure, record a result
//   tune regress results [--benchmark B]              stored results
//   tune regress check --benchmark B --baseline REF [--threshold PCT]
//       [--loss-rtol X] [--metric cpu|wall] [--allow-other-hardware]
//   tune regress baseline set --name REF --benchmark B [--result ID]
//   tune regress baseline list [--benchmark B]
//   tune regress baseline export --name REF [--benchmark B] --file F
//   tune regress baseline import --file F [--name REF]
// Every form but `list` takes --db PATH (default $TUNE_DB, else ./tune.db).
// Exit codes: 0 ok / pass, 1 regression (throughput or numerics) or runtime
// failure, 2 usage and input errors (unknown benchmark, missing baseline, no
// result yet, baseline from other hardware without --allow-other-hardware).
#ifndef MESHTUNE_TUNER_COMMANDS_REGRESS_H_
#define MESHTUNE_TUNER_COMMANDS_REGRESS_H_

#include <memory>

#include "tuner/commands/command.h"

namespace meshtune::tuner {

std::unique_ptr<Command> AddRegressCommand(CLI::App* app);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_COMMANDS_REGRESS_H_
