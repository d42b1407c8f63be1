// Derived numbers about a model for reports and `tune models`, taken from the
// cost model so that every number the tool prints comes from one place.
#ifndef MESHTUNE_TUNER_RENDER_MODEL_FACTS_H_
#define MESHTUNE_TUNER_RENDER_MODEL_FACTS_H_

#include <string>

#include "search_spaces/model_spec.h"

namespace meshtune::tuner {

// Total parameters in billions (1e9), every expert included, as the cost
// model counts them (costmodel::ComputeModelStats; vocabulary padded as
// Megatron does for tp = 1, positions for the recipe's seq_length).
double ParameterCountB(const search_spaces::ModelSpec& model);

// That count for people, with one decimal: "174.6 B" at or above 10^9,
// "12.6 M" below it, "850.0 K" below 10^6 (a tiny test model is not
// "0.0 B").
std::string FormatParameterCount(const search_spaces::ModelSpec& model);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_MODEL_FACTS_H_
