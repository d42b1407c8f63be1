// The serving benchmark client's command that checks a `tune serve` plan
// (docs/serving.md §6, tuner/serve/serve_benchmark.h): vLLM's
// `vllm bench serve`, whose OpenAI-completions client drives vLLM's,
// SGLang's and TensorRT-LLM's servers alike.
//
// Written (vLLM's documented CLI, docs.vllm.ai cli/bench/serve):
//   vllm bench serve --backend openai
//     --base-url "${BASE_URL:-http://localhost:8000}"   (the deployment's
//       endpoint: a port-forwarded Service by default, or set BASE_URL)
//     --model MODEL (the served name, which is the checkpoint)
//     --dataset-name random --random-input-len isl --random-output-len osl
//       (with a cached prefix P: --random-prefix-len P --random-input-len
//       isl − P, one P-token prefix before every prompt's random tokens,
//       which the engine's prefix cache keeps after the first)
//     --random-range-ratio 0 (every request exactly those lengths)
//       or, with a pool of K > 1 prefixes, --dataset-name prefix_repetition
//       --prefix-repetition-prefix-len P --prefix-repetition-suffix-len
//       isl − P --prefix-repetition-num-prefixes K
//       --prefix-repetition-output-len osl (num_prompts / K prompts of each
//       prefix, shuffled; vLLM 0.10.1 and later)
//     --ignore-eos (every answer runs to osl)
//     --max-concurrency C (a closed loop: at most C in flight, all C at
//       once to start, the client's default infinite rate) or
//     --request-rate R (an open loop: Poisson arrivals, the client's
//       default burstiness 1)
//     --num-prompts N
// The model is quoted for the shell, never interpreted.
#ifndef MESHTUNE_TUNER_INTEROP_BENCH_SERVE_COMMAND_H_
#define MESHTUNE_TUNER_INTEROP_BENCH_SERVE_COMMAND_H_

#include <cstdint>
#include <string>

namespace meshtune::tuner {

struct BenchServeLoad {
  std::string model;
  int64_t isl = 1;
  int64_t osl = 1;
  int64_t prefix = 0;  // tokens of isl every prompt shares, 0 <= prefix < isl
  int64_t prefix_pool = 1;      // distinct prefixes (ServingWorkload)
  int64_t max_concurrency = 0;  // closed loop; 0 = open loop at the rate
  double request_rate = 0;      // requests/s
  int64_t num_prompts = 1;
};

std::string VllmBenchServeCommand(const BenchServeLoad& load);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_BENCH_SERVE_COMMAND_H_
