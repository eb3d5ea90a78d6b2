// cli/engine_options: the engine flags shared by batch, serve and bench-engine, named like
// vLLM's where they mean the same.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "engine/engine.h"
#include "speculative_options.h"

namespace llms::cli {

// --device, --gpu-memory-utilization ((0, 1], as vLLM's), --enforce-eager and --batch-invariant,
// for the engine's commands and `run`; set_device() parses them into `config`, throwing
// llms::Error(kInvalidArgument) naming the flag.
struct DeviceOptions {
  std::string device = "cpu";  // cpu, cuda, cuda:N or auto
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  bool batch_invariant = false;
};

struct EngineOptions {
  DeviceOptions device;
  int32_t block_size = 16;
  std::string kv_cache_memory;  // bytes with an optional unit ("2GiB"); empty: a fraction
  std::string kv_cache_dtype = "auto";
  double kv_memory_fraction = 0.25;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int64_t max_model_len = 0;
  int32_t long_prefill_token_threshold = 0;
  int32_t max_long_partial_prefills = 4;
  std::string max_itl_ms = "auto";  // milliseconds, auto or off
  bool enable_prefix_caching = true;
  bool disable_hybrid_kv_cache_manager = false;
  int64_t streaming_window = 0;
  int64_t attention_sinks = 0;
  int64_t h2o_budget = 0;
  int64_t h2o_recent = 0;
  std::string scheduling_policy = "fcfs";
  int threads = 0;
  SpeculativeOptions speculative;

  // Throws llms::Error(kInvalidArgument) naming the flag that is wrong.
  engine::EngineConfig to_config() const;
};

void add_engine_options(CLI::App& cmd, EngineOptions& opts);

// --device: cpu, cuda (the first GPU), cuda:N or auto (cuda where this build and machine have a
// GPU, else cpu). Sets config.device and config.cuda_device; throws llms::Error(kInvalidArgument)
// naming the flag for anything else. cuda without a GPU is refused later, by the engine, with
// the reason (cuda/cuda_backend.h).
void parse_device(const std::string& value, engine::EngineConfig& config);
void add_device_options(CLI::App& cmd, DeviceOptions& options);
void set_device(const DeviceOptions& options, engine::EngineConfig& config);

// --kv-cache-dtype: auto (f16), f16, f32, int8 or fp8 (and the aliases float16, half, float32,
// float, fp16, fp32, fp8_e4m3), for the commands that hold a KV cache (the engine's and `run` /
// `bench-model` / `perplexity`). parse throws llms::Error(kInvalidArgument) naming the flag.
void add_kv_cache_dtype_option(CLI::App& cmd, std::string& value);
kv::KvCacheType parse_kv_cache_dtype(const std::string& name);

// -t/--threads for every command that computes: 0 (the default) means one per physical core;
// more than kMaxThreads is refused by the parser (a pool that large only thrashes, and the
// system refuses threads long before a mistyped 100000).
inline constexpr int kMaxThreads = 1024;
void add_threads_option(CLI::App& cmd, int& threads);
// --streaming-window and --attention-sinks (StreamingLLM; engine::EngineConfig).
void add_streaming_options(CLI::App& cmd, int64_t& window, int64_t& sinks);
// --h2o-budget and --h2o-recent (H2O-style eviction; engine::EngineConfig).
void add_h2o_options(CLI::App& cmd, int64_t& budget, int64_t& recent);

// --max-itl-ms: "auto" (-1: derived from the measured decode step), "off" (0) or milliseconds in
// (0, kMaxItlMs], returned in seconds. Throws llms::Error(kInvalidArgument) naming the flag.
inline constexpr double kMaxItlMs = 60000.0;
double parse_max_itl(const std::string& value);

// "KV cache: N blocks x 16 tokens = T tokens (B); up to S sequences at L tokens, S2 at 2k".
void print_kv_pool(const engine::Engine& engine, std::FILE* out);

}  // namespace llms::cli
