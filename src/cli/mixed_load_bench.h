// cli/mixed_load_bench: `bench-engine --mixed`, streams decoding while long prompts arrive, in
// one process so the ratios come from one run on one machine.
//
// The load (the stall-free batching issue's): `streams` closed-loop requests of stream_prompt
// random tokens generating stream_output tokens each (a finished one is replaced at once while
// the arrival window lasts), and long prompts of long_prompt tokens generating long_output,
// arriving as a Poisson process of long_rate per second (seeded) during duration_s. Each
// configuration runs on a fresh engine built from the same options, one after another:
//  - long_only: the long prompts alone, same arrivals, under the configuration measured
//    (--max-itl-ms as given);
//  - for every target in itl_targets (e.g. "off", "auto", "100"): the mixed load.
// Reported per run: the streams' inter-token latencies (gaps between a request's consecutive
// token events, as `bench` measures them), the streams' and long prompts' TTFT, tokens computed
// per second (prompt + generated over the run's wall time), the step-time model at the end;
// and ratios: ITL p99 and max over ITL p50, long-prompt TTFT over long_only's, throughput over
// the first mixed run's (list "off" first to compare with no target).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace llms::cli {

struct MixedLoadOptions {
  int32_t streams = 4;
  int32_t stream_prompt = 32;
  int32_t stream_output = 200;
  double long_rate = 0.25;
  int32_t long_prompt = 1500;
  int32_t long_output = 8;
  double duration_s = 60.0;
  uint64_t seed = 3;
  std::vector<std::string> itl_targets = {"off", "auto"};
};

// `config` is the engine configuration of every run but its step-time target, which each run
// sets (long_only keeps config's own). Throws llms::Error(kInvalidArgument) on a bad target.
nlohmann::json run_mixed_load(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok,
                              const engine::EngineConfig& config, const MixedLoadOptions& options);

}  // namespace llms::cli
