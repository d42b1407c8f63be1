#include "tuner/regress/text.h"

#include <algorithm>
#include <cstdio>

#include "tuner/io/text_format.h"

namespace meshtune::tuner::regress_text {

std::string Throughput(double median, double spread) {
  return Fixed(median, 1) + " ± " + Fixed(spread, 1);
}

// A fixed-width table, first column left-aligned, the others right-aligned.
void PrintTable(std::ostream& out,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  const auto columns = [](const std::string& s) {
    size_t w = 0;
    for (unsigned char c : s) w += (c & 0xC0) != 0x80;
    return w;
  };
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], columns(row[c]));
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - columns(row[c]), ' ');
      line += c == 0 ? row[c] + pad : "  " + pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

// "cpu-0123 (Intel Xeon, 16 CPUs)", "cuda-4567 (8x NVIDIA H200, Intel
// Xeon, 192 CPUs)".
std::string Describe(const results::HardwareFingerprint& hw) {
  const std::string gpus =
      hw.gpu_model.empty()
          ? ""
          : std::to_string(hw.gpu_count) + "x " + hw.gpu_model + ", ";
  return hw.id + " (" + gpus + hw.cpu_model + ", " +
         std::to_string(hw.cpu_cores) + " CPUs)";
}

}  // namespace meshtune::tuner::regress_text
