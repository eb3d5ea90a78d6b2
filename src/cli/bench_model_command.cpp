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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

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

int bench_model(const BenchModelOptions& opts) {
  if (opts.n_prompt < 1 || opts.n_gen < 1 || opts.repetitions < 1) {
    throw Error(Error::Kind::kInvalidArgument, "--prompt, --gen and --repetitions must be >= 1");
  }
  if (opts.bandwidth_mib < 1 || opts.bandwidth_mib > 65536) {
    throw Error(Error::Kind::kInvalidArgument, "--bandwidth-mib must be in [1, 65536]");
  }
  auto path = resolve_model(opts.model, opts.cache_dir);
  gguf::GgufFile file = gguf::GgufFile::open(path);
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
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = bench_model(*opts); });
}

}  // namespace llms::cli
