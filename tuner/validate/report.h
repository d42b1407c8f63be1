// What `tune validate` prints (docs/validate.md): the table of candidates
// with predicted and measured step times, the statistics, the recommended
// plan and what was learned; or the same as one JSON object.
#ifndef MESHTUNE_TUNER_VALIDATE_REPORT_H_
#define MESHTUNE_TUNER_VALIDATE_REPORT_H_

#include <ostream>
#include <string>

#include "tuner/validate/workflow.h"

namespace meshtune::tuner {

// `train_flags`: what `tune train --from-search ID --rank R` needs besides
// the rank to run a candidate the way it ran here ("" for the CPU engine,
// " --backend cuda --gpu PRESET" for the CUDA engine).
void PrintValidationTable(std::ostream& out, const ValidationRequest& request,
                          const ValidationResult& v,
                          const std::string& train_flags);

void PrintValidationJson(std::ostream& out, const ValidationRequest& request,
                         const ValidationResult& v);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_VALIDATE_REPORT_H_
