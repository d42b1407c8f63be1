#include "tuner/machine/learned_factors.h"

#include <map>
#include <utility>
#include <vector>

#include "costmodel/cost_model.h"
#include "search_spaces/presets/presets.h"
#include "tuner/inputs/inputs.h"

namespace meshtune::tuner {

StatusOr<std::optional<costmodel::FitResult>> FitMachineFactors(
    const results::Store& store, const search_spaces::ClusterSpec& cluster,
    const costmodel::Calibration& base, const std::string& hardware_id) {
  auto searches = store.ListSearches();
  if (!searches.ok()) return searches.status();
  std::map<int64_t, results::SearchRecord> by_id;
  for (const results::SearchRecord& s : *searches) by_id[s.id] = s;
  auto runs = store.GetTrainingRuns();
  if (!runs.ok()) return runs.status();
  std::map<int64_t, std::string> run_hardware;
  for (const results::TrainingRun& r : *runs)
    run_hardware[r.id] = r.hardware_id;
  auto joined = store.GetPredictedVsMeasured();
  if (!joined.ok()) return joined.status();

  std::vector<costmodel::FitSample> samples;
  std::map<std::string, std::optional<search_spaces::ModelSpec>> models;
  // Candidates by id, read once per search that has linked runs.
  std::map<int64_t, results::CandidateRecord> candidates;
  std::map<int64_t, bool> searched;
  for (const results::PredictedVsMeasured& p : *joined) {
    auto hw = run_hardware.find(p.training_run_id);
    if (hw == run_hardware.end() || hw->second != hardware_id) continue;
    auto search = by_id.find(p.search_id);
    if (search == by_id.end() || search->second.gpu != cluster.name) continue;
    if (p.measured_step_time_s <= 0) continue;
    const results::SearchRecord& s = search->second;
    auto model_it = models.find(s.model);
    if (model_it == models.end()) {
      auto m = search_spaces::ResolveModel(s.model);
      model_it =
          models
              .emplace(s.model,
                       m.ok() ? std::optional<search_spaces::ModelSpec>(*m)
                              : std::nullopt)
              .first;
    }
    if (!model_it->second.has_value()) continue;
    auto precision = ParsePrecision(s.precision);
    if (!precision.ok()) continue;
    if (!searched[s.id]) {
      auto stored = store.GetCandidates(s.id);
      if (!stored.ok()) return stored.status();
      for (const results::CandidateRecord& c : *stored) candidates[c.id] = c;
      searched[s.id] = true;
    }
    auto found = candidates.find(p.candidate_id);
    if (found == candidates.end()) continue;
    const results::CandidateRecord* cand = &found->second;
    search_spaces::TrainingSpec training;
    training.num_gpus = s.gpus;
    training.global_batch_size = s.gbs;
    training.seq_length = s.seq_length;
    training.precision = *precision;
    // The runs are meshtune's engine, which launches from C++.
    training.python_launches = false;
    costmodel::FitSample sample;
    sample.measured_step_s = p.measured_step_time_s;
    sample.predict_step_s = [model = *model_it->second, cluster, training,
                             config = cand->config](
                                const costmodel::Calibration& cal) {
      return costmodel::EstimateConfig(model, cluster, training, config, cal)
          .step_time_s;
    };
    samples.push_back(std::move(sample));
  }
  if (samples.empty()) return std::optional<costmodel::FitResult>();
  return std::optional<costmodel::FitResult>(
      costmodel::FitEfficiencyFactors(base, samples));
}

StatusOr<std::unique_ptr<costmodel::Calibration>> ApplyStoredFactors(
    const results::Store& store, std::unique_ptr<costmodel::Calibration> base,
    const std::string& hardware_id) {
  if (hardware_id.empty()) return base;
  auto stored = store.GetFittedFactors(hardware_id, base->Name());
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return base;
  const results::FittedFactorsRecord& f = **stored;
  costmodel::EfficiencyFactors factors;
  factors.compute = f.compute;
  factors.memory = f.memory;
  factors.collective = f.collective;
  if (factors.IsIdentity()) return base;
  return std::unique_ptr<costmodel::Calibration>(
      std::make_unique<costmodel::FittedCalibration>(
          std::move(base), factors, std::to_string(f.runs) + " runs"));
}

}  // namespace meshtune::tuner
