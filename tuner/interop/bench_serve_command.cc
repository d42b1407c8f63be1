#include "tuner/interop/bench_serve_command.h"

#include <cstdlib>

#include "tuner/interop/launch_script.h"
#include "tuner/io/text_format.h"

namespace meshtune::tuner {

namespace {

std::string Line(const std::string& flag, const std::string& value) {
  return " \\\n  " + flag + (value.empty() ? "" : " " + value);
}

// A rate in the fewest decimals that read back to it ("20", "0.5"), as
// the user wrote it, not %g's "2e+01".
std::string Rate(double rate) {
  for (int decimals = 0; decimals <= 9; ++decimals) {
    const std::string text = Fixed(rate, decimals);
    if (std::strtod(text.c_str(), nullptr) == rate) return text;
  }
  return Fmt("%.17g", rate);
}

}  // namespace

std::string VllmBenchServeCommand(const BenchServeLoad& load) {
  std::string cmd = "vllm bench serve --backend openai";
  cmd += Line("--base-url", "\"${BASE_URL:-http://localhost:8000}\"");
  cmd += Line("--model", ShellQuote(load.model));
  if (load.prefix > 0 && load.prefix_pool > 1) {
    cmd += Line("--dataset-name", "prefix_repetition");
    cmd += Line("--prefix-repetition-prefix-len", std::to_string(load.prefix));
    cmd += Line("--prefix-repetition-suffix-len",
                std::to_string(load.isl - load.prefix));
    cmd += Line("--prefix-repetition-num-prefixes",
                std::to_string(load.prefix_pool));
    cmd += Line("--prefix-repetition-output-len", std::to_string(load.osl));
  } else {
    cmd += Line("--dataset-name", "random");
    if (load.prefix > 0) {
      cmd += Line("--random-prefix-len", std::to_string(load.prefix));
    }
    cmd += Line("--random-input-len", std::to_string(load.isl - load.prefix));
    cmd += Line("--random-output-len", std::to_string(load.osl));
    cmd += Line("--random-range-ratio", "0");
  }
  cmd += Line("--ignore-eos", "");
  if (load.max_concurrency > 0) {
    cmd += Line("--max-concurrency", std::to_string(load.max_concurrency));
  } else {
    cmd += Line("--request-rate", Rate(load.request_rate));
  }
  cmd += Line("--num-prompts", std::to_string(load.num_prompts));
  return cmd;
}

}  // namespace meshtune::tuner
