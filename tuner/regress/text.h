// Text helpers of `tune regress`'s output (tuner/commands/regress.cc):
// times, numbers, the verdict and result tables, hardware descriptions.
#ifndef MESHTUNE_TUNER_REGRESS_TEXT_H_
#define MESHTUNE_TUNER_REGRESS_TEXT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "results/store.h"
#include "tuner/io/text_format.h"

namespace meshtune::tuner::regress_text {

// `v` with `digits` decimals, and UTC times (tuner/io/text_format.h).
using ::meshtune::tuner::Fixed;
using ::meshtune::tuner::UtcMinuteText;

// "1234.5 ± 6.7": a median throughput and its spread.
std::string Throughput(double median, double spread);

// A fixed-width table, first column left-aligned, the others right-aligned;
// widths count UTF-8 characters, trailing blanks are dropped.
void PrintTable(std::ostream& out,
                const std::vector<std::vector<std::string>>& rows);

// "cpu-0123 (Intel Xeon, 16 CPUs)", "cuda-4567 (8x NVIDIA H200, Intel
// Xeon, 192 CPUs)".
std::string Describe(const results::HardwareFingerprint& hw);

}  // namespace meshtune::tuner::regress_text

#endif  // MESHTUNE_TUNER_REGRESS_TEXT_H_
