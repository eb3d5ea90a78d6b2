#include "engine_options.h"

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <string>

#include "cuda/cuda_backend.h"
#include "util/byte_size.h"
#include "util/error.h"

namespace llms::cli {

engine::EngineConfig EngineOptions::to_config() const {
  engine::EngineConfig c;
  set_device(device, c);
  c.block_size = block_size;
  if (!kv_cache_memory.empty()) {
    auto bytes = parse_byte_size(kv_cache_memory);
    if (!bytes) {
      throw Error(
          Error::Kind::kInvalidArgument,
          fmt::format("--kv-cache-memory: '{}' is not a byte size such as 2GiB", kv_cache_memory));
    }
    if (*bytes == 0 || *bytes > (uint64_t{1} << 46)) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("--kv-cache-memory: '{}' is outside [1 B, 64TiB]", kv_cache_memory));
    }
    c.kv_cache_memory = static_cast<int64_t>(*bytes);
  }
  c.kv_cache_dtype = parse_kv_cache_dtype(kv_cache_dtype);
  c.kv_memory_fraction = kv_memory_fraction;
  c.enable_prefix_caching = enable_prefix_caching;
  c.hybrid_kv_cache = !disable_hybrid_kv_cache_manager;
  c.streaming_window = streaming_window;
  c.attention_sinks = attention_sinks;
  c.h2o_budget = h2o_budget;
  c.h2o_recent = h2o_recent;
  c.n_threads = threads;
  c.scheduler.max_num_seqs = max_num_seqs;
  c.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  c.scheduler.max_model_len = max_model_len;
  c.scheduler.long_prefill_token_threshold = long_prefill_token_threshold;
  if (max_long_partial_prefills < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--max-long-partial-prefills: must be >= 1, got {}",
                            max_long_partial_prefills));
  }
  c.scheduler.max_long_partial_prefills = max_long_partial_prefills;
  c.scheduler.max_step_seconds = parse_max_itl(max_itl_ms);
  if (scheduling_policy == "fcfs") {
    c.scheduler.policy = sched::Policy::kFcfs;
  } else if (scheduling_policy == "priority") {
    c.scheduler.policy = sched::Policy::kPriority;
  } else {
    throw Error(
        Error::Kind::kInvalidArgument,
        fmt::format("--scheduling-policy: '{}' is not fcfs or priority", scheduling_policy));
  }
  c.speculative = speculative.to_config();
  c.on_warning = [](const std::string& message) { fmt::print(stderr, "warning: {}\n", message); };
  return c;
}

void parse_device(const std::string& value, engine::EngineConfig& config) {
  if (value == "cpu") {
    config.device = engine::Device::kCpu;
    return;
  }
  if (value == "auto") {
    config.device = cuda::probe().devices.empty() ? engine::Device::kCpu : engine::Device::kCuda;
    config.cuda_device = 0;
    return;
  }
  if (value == "cuda") {
    config.device = engine::Device::kCuda;
    config.cuda_device = 0;
    return;
  }
  if (value.starts_with("cuda:")) {
    const std::string index = value.substr(5);
    if (!index.empty() && index.size() <= 3 &&
        index.find_first_not_of("0123456789") == std::string::npos) {
      config.device = engine::Device::kCuda;
      config.cuda_device = std::stoi(index);
      return;
    }
  }
  throw Error(Error::Kind::kInvalidArgument,
              fmt::format("--device: '{}' is not cpu, cuda, cuda:N or auto", value));
}

double parse_max_itl(const std::string& value) {
  if (value == "auto") return -1.0;
  if (value == "off") return 0.0;
  double ms = 0.0;
  size_t used = 0;
  try {
    ms = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !(ms > 0.0) || ms > kMaxItlMs) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--max-itl-ms: '{}' is not a time in (0, {}] milliseconds, auto or off",
                            value, kMaxItlMs));
  }
  return ms / 1e3;
}

void add_kv_cache_dtype_option(CLI::App& cmd, std::string& value) {
  cmd.add_option("--kv-cache-dtype", value,
                 "KV cache element type: auto (f16), f16, f32, int8 or fp8 (e4m3; the 8-bit types "
                 "with a scale per token and KV head)")
      ->capture_default_str();
}

kv::KvCacheType parse_kv_cache_dtype(const std::string& name) {
  if (name == "auto" || name == "float16" || name == "half") return kv::KvCacheType::kF16;
  if (name == "float32" || name == "float") return kv::KvCacheType::kF32;
  if (auto type = kv::kv_cache_type_from_name(name)) return *type;
  throw Error(Error::Kind::kInvalidArgument, fmt::format("--kv-cache-dtype: '{}' is not auto, {}",
                                                         name, kv::kv_cache_type_names()));
}

void add_engine_options(CLI::App& cmd, EngineOptions& o) {
  add_device_options(cmd, o.device);
  cmd.add_option("--block-size", o.block_size,
                 "KV block size in tokens (multiples of 8 take the SIMD attention path)")
      ->capture_default_str();
  cmd.add_option("--kv-cache-memory", o.kv_cache_memory, "KV pool size in bytes (e.g. 2GiB)");
  add_kv_cache_dtype_option(cmd, o.kv_cache_dtype);
  cmd.add_option("--kv-memory-fraction", o.kv_memory_fraction,
                 "Without --kv-cache-memory: this fraction of available memory")
      ->capture_default_str();
  cmd.add_option("--max-num-seqs", o.max_num_seqs, "Sequences per step")->capture_default_str();
  cmd.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "Tokens per step")
      ->capture_default_str();
  cmd.add_option("--max-model-len", o.max_model_len, "Context length (default: the model's)");
  cmd.add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold,
                 "Largest prefill chunk per sequence per step (0: the token budget)");
  cmd.add_option("--max-itl-ms", o.max_itl_ms,
                 "Stall-free batching: a step that carries decode tokens takes only the prompt "
                 "tokens its measured cost fits in this many ms (auto: 2x a one-sequence decode "
                 "step, and at least 4x the step's own decode work; off: the token budget only)")
      ->capture_default_str();
  cmd.add_option("--max-long-partial-prefills", o.max_long_partial_prefills,
                 "Long prompts (over a quarter of the token budget) that prefill at once, "
                 "sharing the budget evenly")
      ->capture_default_str();
  cmd.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o.enable_prefix_caching,
               "Automatic prefix caching (on by default)");
  cmd.add_flag("--disable-hybrid-kv-cache-manager", o.disable_hybrid_kv_cache_manager,
               "Keep every layer's KV for the whole context (by default sliding-window layers "
               "give back the blocks that fall out of their window)");
  add_streaming_options(cmd, o.streaming_window, o.attention_sinks);
  add_h2o_options(cmd, o.h2o_budget, o.h2o_recent);
  cmd.add_option("--scheduling-policy", o.scheduling_policy, "fcfs or priority")
      ->capture_default_str();
  add_threads_option(cmd, o.threads);
  add_speculative_options(cmd, o.speculative);
}

void add_device_options(CLI::App& cmd, DeviceOptions& o) {
  cmd.add_option("--device", o.device,
                 "Where the model runs: cpu, cuda (the first GPU), cuda:N, or auto (cuda where "
                 "there is a GPU)")
      ->capture_default_str();
  cmd.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "With --device cuda: the share of the GPU's memory to use (weights, buffers and "
                 "the KV pool, which gets the rest)")
      ->capture_default_str();
  cmd.add_flag("--enforce-eager", o.enforce_eager,
               "With --device cuda: launch every kernel one by one (no captured step graphs)");
  cmd.add_flag("--batch-invariant", o.batch_invariant,
               "With --device cuda: a sequence's tokens do not depend on what shares its step "
               "(f32 GEMV for every step instead of the bf16 GEMM for prompts: slower prefill); "
               "the CPU always works this way");
}

void set_device(const DeviceOptions& o, engine::EngineConfig& config) {
  parse_device(o.device, config);
  if (!(o.gpu_memory_utilization > 0.0) || o.gpu_memory_utilization > 1.0) {
    throw Error(
        Error::Kind::kInvalidArgument,
        fmt::format("--gpu-memory-utilization: {} is not in (0, 1]", o.gpu_memory_utilization));
  }
  config.gpu_memory_utilization = o.gpu_memory_utilization;
  config.enforce_eager = o.enforce_eager;
  config.batch_invariant = o.batch_invariant;
}

void add_streaming_options(CLI::App& cmd, int64_t& window, int64_t& sinks) {
  cmd.add_option("--streaming-window", window,
                 "StreamingLLM: full-attention layers attend to the last N tokens (and the "
                 "sinks), so a stream may run past the model's context (off: 0)")
      ->capture_default_str();
  cmd.add_option("--attention-sinks", sinks,
                 "StreamingLLM: first tokens every query keeps attending to (with "
                 "--streaming-window; the paper uses 4)")
      ->capture_default_str();
}

void add_h2o_options(CLI::App& cmd, int64_t& budget, int64_t& recent) {
  cmd.add_option("--h2o-budget", budget,
                 "H2O-style eviction: each sequence holds at most N tokens' KV blocks: its recent "
                 "ones and those that drew the most attention (off: 0)")
      ->capture_default_str();
  cmd.add_option("--h2o-recent", recent,
                 "H2O-style eviction: the last N tokens, never evicted (with --h2o-budget)")
      ->capture_default_str();
}

void add_threads_option(CLI::App& cmd, int& threads) {
  cmd.add_option("-t,--threads", threads, "Compute threads (default 0: one per physical core)")
      ->check(CLI::Range(0, kMaxThreads));
}

void print_kv_pool(const engine::Engine& engine, std::FILE* out) {
  const engine::KvPoolInfo& p = engine.kv_pool();
  if (p.device != "cpu") fmt::print(out, "KV cache on {} (device memory)\n", p.device);
  if (p.n_window_groups > 0) {
    const std::string sinks =
        p.attention_sinks > 0 ? fmt::format(" and the first {}", p.attention_sinks) : "";
    fmt::print(out,
               "KV cache: {} blocks x {} tokens in {} cache groups ({} of them windowed layers "
               "that keep the last {} tokens{}) ({}); up to {} sequences at the full context ({} "
               "tokens), {} at 2k tokens\n",
               p.n_blocks, p.block_size, p.n_groups, p.n_window_groups, p.sliding_window, sinks,
               format_bytes(static_cast<uint64_t>(p.bytes)), p.max_seqs_at_model_len,
               p.max_model_len, p.max_seqs_at_2k);
    return;
  }
  fmt::print(out,
             "KV cache: {} blocks x {} tokens = {} tokens ({}); up to {} sequences at the full "
             "context ({} tokens), {} at 2k tokens\n",
             p.n_blocks, p.block_size, static_cast<int64_t>(p.n_blocks) * p.block_size,
             format_bytes(static_cast<uint64_t>(p.bytes)), p.max_seqs_at_model_len, p.max_model_len,
             p.max_seqs_at_2k);
}

}  // namespace llms::cli
