// Compact configuration strings for `tune compare` (and the short form
// `tune scale` prints): one parallel configuration on one line.
//
// Syntax: tokens separated by commas and/or spaces, each one of
//   tp=N pp=N vpp=N cp=N ep=N etp=N dp=N mbs=N
//                                           (also without '=': tp4 pp8)
//   layout=F/L (or layoutF/L)               an uneven pipeline: F decoder
//                                           layers on the first virtual
//                                           stage, L on the last
//                                           (ParallelConfig::layout_*)
//   sp | no-sp                              sequence parallelism
//   dist-opt | dist_opt | no-dist-opt       distributed optimizer
//   recompute=MODE or a bare MODE           none, selective, full, full:N,
//                                           full:uniform:N, full:block:N
// so "tp=4,pp=8,vpp=3,mbs=1,sp,recompute=selective,dist-opt", "tp8 pp4 sp" and
// the search report's "tp8 pp8 vpp3 cp1 ep1 dp16 sp mbs1 selective dist_opt"
// (with its "etp1" and "layout2/0" where it prints them) all parse. Axes not
// given default as in `tune estimate` (1, off, none); dp is derived from the
// GPU count and, when given, must agree with it.
#ifndef MESHTUNE_TUNER_INPUTS_COMPARE_CONFIG_H_
#define MESHTUNE_TUNER_INPUTS_COMPARE_CONFIG_H_

#include <cstdint>
#include <string>

#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

// Parses `text` for `num_gpus` GPUs. `flag` names the source in messages
// ("--config 2"). Errors name the offending token and the accepted forms.
StatusOr<search_spaces::ParallelConfig> ParseConfigString(
    const std::string& text, int64_t num_gpus, const std::string& flag);

// "tp4 pp8 vpp3 dp32 mbs1 sp selective dist-opt": the axes that matter, with
// vpp, cp and ep left out when 1, etp when it is tp and the layout when
// even. Parses back with ParseConfigString.
std::string FormatCompactConfig(const search_spaces::ParallelConfig& c);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INPUTS_COMPARE_CONFIG_H_
