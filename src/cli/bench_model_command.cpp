// `llmserve bench-model`: prompt-processing and generation speed of one model on this machine,
// as JSON, with the floors that bound them measured in the same run.
//
// Decode reads every weight once per token, so its floor is (weight bytes per token) / (read
// bandwidth); the command measures that bandwidth itself (a parallel sum over a large array) and
// reports generation speed as a fraction of it. A shared machine's bandwidth moves from one
// minute to the next, so it is sampled next to every timed phase (before each repetition's
// prompt, between its prompt and its generation, and once after the last generation; never
// during one) and the floor is taken from the highest sample: the fraction is at most the one
// against any single sample. Figures from before this sampling (one sample after the run) are
// not comparable: more samples read a higher best and so a lower fraction.
// Token ids are fixed pseudo-random ones: speed does not depend on them.
#include "bench_model_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "kernels/cpu_features.h"
#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/transformer.h"
#include "model_registry.h"
#include "sampling/sampler.h"
#include "util/error.h"
#include "util/huge_page_buffer.h"
#include "util/thread_pool.h"

namespace llms::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchModelOptions {
  std::string model = "default";
  std::string cache_dir;
  int threads = 0;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int repetitions = 1;
  int bandwidth_mib = 1024;
  std::string kv_cache_dtype = "auto";
  std::string device = "cpu";  // cpu, cuda or cuda:N
  bool enforce_eager = false;
  bool batch_invariant = false;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Read bandwidth of this machine with the pool's threads: each sample is the best of a few
// parallel sums over `bytes` of floats (each pass touches every byte once). The array sits on
// huge pages, as the repacked weights do (util/huge_page_buffer.h): streaming reads run faster
// there, and the floor must be the best this machine can do, not a rate our own buffers beat.
// The array is written once and kept, so a sample costs only its passes.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(ThreadPool& pool, uint64_t bytes)
      : pool_(pool),
        n_(static_cast<int64_t>(bytes / sizeof(float))),
        buffer_(static_cast<size_t>(n_) * sizeof(float)),
        data_(reinterpret_cast<float*>(buffer_.data())) {
    pool_.parallel_for(n_, [this](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) data_[i] = static_cast<float>(i & 7);
    });
  }

  // Bytes per second, the best of kPassesPerSample passes.
  double sample() {
    std::vector<double> partial(pool_.size(), 0.0);
    double best = 0.0;
    for (int pass = 0; pass < kPassesPerSample; ++pass) {
      auto t = Clock::now();
      pool_.parallel_for(n_, [&](int64_t b, int64_t e, int thread) {
        // Eight independent accumulators keep the loop bound by memory, not by add latency.
        float acc[8] = {};
        int64_t i = b;
        for (; i + 8 <= e; i += 8) {
          for (int k = 0; k < 8; ++k) acc[k] += data_[i + k];
        }
        for (; i < e; ++i) acc[0] += data_[i];
        double s = 0;
        for (float a : acc) s += a;
        partial[thread] += s;
      });
      const double secs = seconds_since(t);
      best = std::max(best, static_cast<double>(n_) * sizeof(float) / secs);
    }
    volatile double sink = 0;
    for (double p : partial) sink = sink + p;
    return best;
  }

 private:
  static constexpr int kPassesPerSample = 4;
  ThreadPool& pool_;
  int64_t n_;
  HugePageBuffer buffer_;
  float* data_;
};

// Bytes of weights one decode step reads: every layer matrix, the output projection, and one
// embedding row (negligible but counted).
uint64_t weight_bytes_per_token(const gguf::GgufFile& file) {
  uint64_t total = 0;
  for (const auto& t : file.tensors()) {
    if (t.name == "token_embd.weight") {
      total += t.n_bytes / t.ne[1];
      if (!file.find_tensor("output.weight")) total += t.n_bytes;  // tied output reads it all
    } else {
      total += t.n_bytes;
    }
  }
  return total;
}

// The same measurement on a GPU through the CUDA runner (cuda/cuda_backend.h), against floors
// measured on the device in the same run: its read bandwidth (decode) and its dense bf16 GEMM
// rate (prefill: 2 FLOP per weight per token).
int bench_model_cuda(const BenchModelOptions& opts, const std::filesystem::path& path,
                     const gguf::GgufFile& file, int device) {
  auto runner = cuda::make_runner(
      file, cuda::RunnerOptions{device, 0.9, !opts.enforce_eager, opts.batch_invariant});
  const int32_t block_size = 16;
  const int32_t n_total = opts.n_prompt + opts.n_gen + 1;
  const kv::KvGroupLayout layout = runner->config().windowed_kv_layout();
  const int32_t n_blocks = (n_total + block_size - 1) / block_size * layout.n_groups();
  runner->reserve(opts.n_prompt, 1);
  runner->allocate_kv(block_size, n_blocks, parse_kv_cache_dtype(opts.kv_cache_dtype), layout);
  std::vector<kv::BlockId> table(n_blocks);
  for (int32_t i = 0; i < n_blocks; ++i) table[i] = i;
  std::mt19937 rng(42);
  std::vector<int32_t> prompt(opts.n_prompt);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(runner->n_vocab()));
  auto table_for = [&](int32_t n_context) {
    const int32_t blocks = (n_context + block_size - 1) / block_size * layout.n_groups();
    return std::span<const kv::BlockId>(table).first(static_cast<size_t>(blocks));
  };
  kv::StepBatch batch;
  batch.n_kv_groups = layout.n_groups();
  double best_pp = 0.0;
  double best_tg = 0.0;
  for (int rep = 0; rep < opts.repetitions; ++rep) {
    batch.clear();
    batch.add_sequence(0, prompt, 0, table_for(opts.n_prompt), 1);
    auto t = Clock::now();
    runner->execute(batch);  // returns once the logits are on the host
    best_pp = std::max(best_pp, opts.n_prompt / seconds_since(t));

    int32_t n_cached = 0;
    std::vector<int32_t> one = {prompt[0]};
    batch.clear();
    batch.add_sequence(0, one, n_cached, table_for(n_cached + 1), 1);
    model::LogitsView logits = runner->execute(batch);  // warm-up step, not timed
    ++n_cached;
    t = Clock::now();
    for (int32_t i = 0; i < opts.n_gen; ++i) {
      one[0] = sampling::argmax(logits.row(0).first(static_cast<size_t>(runner->n_vocab())));
      batch.clear();
      batch.add_sequence(0, one, n_cached, table_for(n_cached + 1), 1);
      logits = runner->execute(batch);
      ++n_cached;
    }
    best_tg = std::max(best_tg, opts.n_gen / seconds_since(t));
  }
  const double bandwidth =
      cuda::measure_read_bandwidth(device, static_cast<size_t>(opts.bandwidth_mib) << 20, 5);
  const std::string gemm = cuda::gemm_path();
  const double gemm_flops = gemm == "cublas" ? cuda::measure_bf16_gemm_flops(device, 8192, 3) : 0.0;
  const cuda::Probe probe = cuda::probe();
  const uint64_t bytes_per_token = weight_bytes_per_token(file);
  uint64_t matrix_weights = 0;  // multiply-adds per token: every weight of a matrix once
  for (const auto& t : file.tensors()) {
    if (t.n_dims == 2 && t.name != "token_embd.weight") matrix_weights += t.n_elements;
  }
  if (!file.find_tensor("output.weight")) {
    if (const auto* e = file.find_tensor("token_embd.weight")) matrix_weights += e->n_elements;
  }
  const double floor_tg = bandwidth / static_cast<double>(bytes_per_token);
  const double prefill_flops = 2.0 * static_cast<double>(matrix_weights) * best_pp;
  nlohmann::ordered_json r;
  r["model"] = path.filename().string();
  r["architecture"] = runner->config().architecture;
  r["device"] = fmt::format("cuda:{}", device);
  for (const cuda::DeviceInfo& d : probe.devices) {
    if (d.index == device) r["device_name"] = d.name;
  }
  r["kv_cache_dtype"] = "f16";
  r["cuda_graphs"] = !opts.enforce_eager;
  r["batch_invariant"] = opts.batch_invariant;
  r["prompt_tokens"] = opts.n_prompt;
  r["prompt_tokens_per_s"] = best_pp;
  r["prompt_matmul_flops_per_s"] = prefill_flops;
  r["gemm_path"] = gemm;
  r["bf16_gemm_flops_per_s"] = gemm_flops;
  r["prompt_fraction_of_bf16_gemm"] = gemm_flops > 0.0 ? prefill_flops / gemm_flops : 0.0;
  r["gen_tokens"] = opts.n_gen;
  r["gen_tokens_per_s"] = best_tg;
  r["weight_bytes_per_token"] = bytes_per_token;
  r["read_bandwidth_bytes_per_s"] = bandwidth;
  r["gen_floor_tokens_per_s"] = floor_tg;
  r["gen_fraction_of_bandwidth_floor"] = best_tg / floor_tg;
  r["repetitions"] = opts.repetitions;
  std::puts(r.dump(2).c_str());
  return 0;
}

int bench_model(const BenchModelOptions& opts) {
  if (opts.n_prompt < 1 || opts.n_gen < 1 || opts.repetitions < 1) {
    throw Error(Error::Kind::kInvalidArgument, "--prompt, --gen and --repetitions must be >= 1");
  }
  if (opts.bandwidth_mib < 1 || opts.bandwidth_mib > 65536) {
    throw Error(Error::Kind::kInvalidArgument, "--bandwidth-mib must be in [1, 65536]");
  }
  engine::EngineConfig where;
  parse_device(opts.device, where);
  auto path = resolve_model(opts.model, opts.cache_dir);
  gguf::GgufFile file = gguf::GgufFile::open(path);
  if (where.device == engine::Device::kCuda)
    return bench_model_cuda(opts, path, file, where.cuda_device);
  int threads = opts.threads > 0 ? opts.threads : physical_core_count();
  model::Transformer model(file, threads);
  const int32_t block_size = 16;
  const int32_t n_total = opts.n_prompt + opts.n_gen;
  const int32_t n_blocks = (n_total + block_size - 1) / block_size;
  const kv::KvCacheType kv_type = parse_kv_cache_dtype(opts.kv_cache_dtype);
  model::KvStorage kv(model.config(), block_size, n_blocks, kv_type);
  model.calibrate_key_smoothing(kv);
  std::vector<kv::BlockId> table(n_blocks);
  for (int32_t i = 0; i < n_blocks; ++i) table[i] = i;
  model.reserve(opts.n_prompt, 1);

  std::mt19937 rng(42);
  std::vector<int32_t> prompt(opts.n_prompt);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(model.n_vocab()));
  std::vector<float> logits(model.n_vocab());
  kv::StepBatch batch;

  double best_pp = 0.0, best_tg = 0.0;
  ReadBandwidthProbe probe(model.pool(), static_cast<uint64_t>(opts.bandwidth_mib) << 20);
  std::vector<double> bandwidth_samples;
  auto sample_bandwidth = [&] { bandwidth_samples.push_back(probe.sample()); };
  for (int rep = 0; rep < opts.repetitions; ++rep) {
    sample_bandwidth();
    batch.clear();
    batch.add_sequence(0, prompt, 0, table, true);
    auto t = Clock::now();
    model.forward(batch, kv, logits.data());
    best_pp = std::max(best_pp, opts.n_prompt / seconds_since(t));
    sample_bandwidth();

    // Generation after a short prompt, as llama-bench's tg test does: 128 single-token steps.
    int32_t n_cached = 0;
    std::vector<int32_t> one = {prompt[0]};
    batch.clear();
    batch.add_sequence(0, one, n_cached++, table, true);
    model.forward(batch, kv, logits.data());  // warm-up step, not timed
    t = Clock::now();
    for (int32_t i = 0; i < opts.n_gen; ++i) {
      batch.clear();
      one[0] = sampling::argmax(logits);
      batch.add_sequence(0, one, n_cached++, table, true);
      model.forward(batch, kv, logits.data());
    }
    best_tg = std::max(best_tg, opts.n_gen / seconds_since(t));
  }
  sample_bandwidth();

  const double bandwidth = *std::max_element(bandwidth_samples.begin(), bandwidth_samples.end());
  uint64_t bytes_per_token = weight_bytes_per_token(file);
  double floor_tg = bandwidth / static_cast<double>(bytes_per_token);
  nlohmann::ordered_json r;
  r["model"] = path.filename().string();
  r["architecture"] = model.config().architecture;
  r["threads"] = threads;
  r["kv_cache_dtype"] = std::string(kv::kv_cache_type_name(kv_type));
  r["isa"] = std::string(kernels::isa_name(kernels::best_isa()));
  r["prompt_tokens"] = opts.n_prompt;
  r["prompt_tokens_per_s"] = best_pp;
  r["gen_tokens"] = opts.n_gen;
  r["gen_tokens_per_s"] = best_tg;
  r["weight_bytes_per_token"] = bytes_per_token;
  r["read_bandwidth_bytes_per_s"] = bandwidth;
  r["read_bandwidth_samples_bytes_per_s"] = bandwidth_samples;
  r["gen_floor_tokens_per_s"] = floor_tg;
  r["gen_fraction_of_bandwidth_floor"] = best_tg / floor_tg;
  r["repetitions"] = opts.repetitions;
  std::puts(r.dump(2).c_str());
  return 0;
}

}  // namespace

void add_bench_model_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<BenchModelOptions>();
  auto* cmd = app.add_subcommand("bench-model",
                                 "Prompt and generation speed of a model on this machine (JSON)");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model (default: default)");
  add_threads_option(*cmd, opts->threads);
  cmd->add_option("--prompt", opts->n_prompt, "Prompt tokens (one prefill step)");
  cmd->add_option("--gen", opts->n_gen, "Generated tokens (one decode step each)");
  cmd->add_option("-r,--repetitions", opts->repetitions, "Repetitions; the best is reported");
  cmd->add_option("--bandwidth-mib", opts->bandwidth_mib,
                  "Array the read bandwidth is measured over, MiB (default 1024: far past any "
                  "cache)");
  add_kv_cache_dtype_option(*cmd, opts->kv_cache_dtype);
  cmd->add_option("--device", opts->device,
                  "cpu, cuda or cuda:N (on a GPU the floors are measured on the device)")
      ->capture_default_str();
  cmd->add_flag("--enforce-eager", opts->enforce_eager,
                "With --device cuda: no captured step graphs (every kernel launched alone)");
  cmd->add_flag("--batch-invariant", opts->batch_invariant,
                "With --device cuda: every step through the f32 GEMV (the prefill cost of batch "
                "invariance)");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = bench_model(*opts); });
}

}  // namespace llms::cli
