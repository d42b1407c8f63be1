// `tune serve --validate` (docs/serving.md §8): serving plans run for real on
// this machine's engine (engine/inference/generator.h through
// tuner/generate/generation.h; the CPU ranks of the `local` preset, or its
// GPUs with --backend cuda), their measured time to first token (TTFT) and
// time per output token (TPOT) beside the serving cost model's predictions
// on that preset, and how well the predictions rank them.
//
// Plans: one replica of every tensor-parallel size dividing --gpus (and the
// model's heads, query groups and FFN) times every batch of `batches`; each
// generates `osl` tokens for `batch` synthetic prompts of `isl` tokens. The
// engine's batch is static (one prefill of all prompts, then osl − 1 decode
// steps), so the predictions are of that schedule, not of continuous
// batching:
//   TTFT = costmodel::PrefillTime_s(batch·isl tokens, batch sequences)
//   TPOT = costmodel::DecodeStep(batch, context isl + osl/2) without its
//          serving-framework step overhead (the engine has no scheduler).
// The model prices 16-bit weights and KV cache; the engine computes in fp32
// (the CPU calibration's GEMM rates are fp32 measurements), so the ranking,
// not the absolute error, is the check.
//
// Runs: a warm-up generation per plan, then `repeats` rounds, each plan
// once per round in RoundOrder (a slow minute of a shared machine spreads
// over the plans); a plan's measured TTFT and TPOT are the medians of its
// rounds, their spreads its noise. The statistics are tune validate's
// (tuner/validate/analysis.h AnalyzeOutcomes), once for TTFT and once for
// TPOT, with the plans in predicted order of each.
#ifndef MESHTUNE_TUNER_VALIDATE_SERVING_H_
#define MESHTUNE_TUNER_VALIDATE_SERVING_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "nlohmann/json.hpp"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/status.h"
#include "tuner/validate/analysis.h"

namespace meshtune::tuner {

struct ServeValidationRequest {
  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;  // the `local` preset for the ranks
  const costmodel::Calibration* calibration = nullptr;  // not owned
  int64_t gpus = 1;  // largest tp tried: the ranks this machine gives
  int64_t isl = 0, osl = 0;
  // Prompt tokens cached before each timed prefill (tune serve --prefix):
  // the engine runs them untimed, the model prices the rest
  // (costmodel::PromptsPrefillTime_s). 0 <= prefix < isl.
  int64_t prefix = 0;
  std::vector<int64_t> batches = {1, 2, 4, 8, 16};
  int64_t repeats = 3;
  // "cpu": ranks on this machine's cores, one core each (the `local`
  // preset); "cuda": one GPU per rank (cluster = the GPU's preset).
  std::string backend = "cpu";
};

struct ServePlanOutcome {
  int64_t tp = 1, batch = 1;
  double predicted_ttft_s = 0, predicted_tpot_s = 0;
  std::optional<double> measured_ttft_s, measured_tpot_s;  // medians
  std::optional<double> ttft_spread_pct, tpot_spread_pct;  // with repeats >= 2
  std::string error;  // why the plan did not run ("" when it ran)
};

struct ServeValidation {
  std::vector<ServePlanOutcome> plans;  // tp, then batch
  ValidationStats ttft, tpot;           // AnalyzeOutcomes in predicted order
  double predicted_ttft_ratio = 0, predicted_tpot_ratio = 0;  // max / min
};

// InvalidArgument (exit 2): isl or osl < 1, repeats < 1, no batch, a batch
// < 1, no tp dividing both --gpus and the model. The first plan's failure
// (prompt + output beyond the model's seq_length, a model the backend does
// not run, one that does not fit this machine) is returned as it is; a
// later plan that fails to run is recorded with its error and left out of
// the statistics. `progress` gets one line per plan and round.
StatusOr<ServeValidation> ValidateServing(const ServeValidationRequest& request,
                                          std::ostream& progress);

void PrintServeValidation(std::ostream& out,
                          const ServeValidationRequest& request,
                          const ServeValidation& result);
nlohmann::json ServeValidationJson(const ServeValidationRequest& request,
                                   const ServeValidation& result);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_VALIDATE_SERVING_H_
