// `llmserve bench-attention`: one decode step's attention (every layer) for N sequences at a
// context length, over a paged KV cache of each requested element type, as JSON: seconds per
// step, the KV bytes the step reads, the rate it reads them at, and each type's speed and bytes
// relative to f16 measured in the same run (the question: is an 8-bit cache at least as
// fast as f16 at 32 sequences and 2k context, reading half the bytes?).
//
// Only the model's shape is read from the file; no weights are loaded. Keys, values, queries and
// scales are pseudo-random (attention's speed does not depend on them). The types are timed in
// turns, one step each per round, so a shared machine's drift falls on all of them alike; the
// best and the median round are reported.
#include "bench_attention_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "kernels/cpu_features.h"
#include "kv/kv_budget.h"
#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/model_config.h"
#include "model/paged_attention.h"
#include "model_registry.h"
#include "quant/float_convert.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::cli {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct BenchAttentionOptions {
  std::string model = "default";
  std::string cache_dir;
  int threads = 0;
  int32_t n_seqs = 32;
  int32_t ctx = 2048;
  int32_t block_size = 16;
  int rounds = 10;
  std::string kv_types = "f16,int8,fp8";
};

// One head's block of keys and of values, every element from `make`.
template <class T, class Make>
void fill_block(model::KvStorage& kv, size_t layer, int32_t block, uint64_t h, Make make) {
  const auto bs = static_cast<size_t>(kv.block_size());
  T* k = kv.key<T>(layer, block, h);
  T* v = kv.value<T>(layer, block, h);
  for (size_t i = 0; i < bs * kv.head_dim_k(); ++i) k[i] = make();
  for (size_t i = 0; i < bs * kv.head_dim_v(); ++i) v[i] = make();
}

// Fills every block of `kv` with pseudo-random elements (finite ones for fp8) and scales.
void fill(model::KvStorage& kv, const model::ModelConfig& c, ThreadPool& pool) {
  const int64_t n_blocks = kv.n_blocks();
  const auto bs = static_cast<size_t>(kv.block_size());
  for (size_t layer = 0; layer < c.n_layers; ++layer) {
    for (uint64_t h = 0; h < c.n_kv_heads[layer]; ++h) {
      pool.parallel_for(n_blocks, [&](int64_t b0, int64_t b1, int) {
        std::minstd_rand rng(static_cast<uint32_t>(layer * 7919 + h * 104729 + b0 + 1));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (int64_t b = b0; b < b1; ++b) {
          const auto block = static_cast<int32_t>(b);
          switch (kv.type()) {
            case kv::KvCacheType::kF32:
              fill_block<float>(kv, layer, block, h, [&] { return normal(rng); });
              break;
            case kv::KvCacheType::kF16:
              fill_block<uint16_t>(kv, layer, block, h,
                                   [&] { return quant::fp32_to_fp16(normal(rng)); });
              break;
            case kv::KvCacheType::kInt8:
              fill_block<int8_t>(kv, layer, block, h, [&] {
                return static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
              });
              break;
            case kv::KvCacheType::kFp8:
              fill_block<uint8_t>(kv, layer, block, h,
                                  [&] { return quant::fp32_to_fp8_e4m3(normal(rng)); });
              break;
          }
          if (kv.quantized()) {
            for (size_t i = 0; i < bs; ++i) {
              kv.key_scales(layer, block, h)[i] = quant::fp32_to_bf16(0.02f);
              kv.value_scales(layer, block, h)[i] = quant::fp32_to_bf16(0.02f);
            }
          }
        }
      });
    }
  }
  if (kv.needs_key_smoothing()) {
    size_t heads = 0;
    for (uint64_t h : c.n_kv_heads) heads += h;
    kv.set_key_smoothing(std::vector<float>(heads * c.head_dim_k, 1.0f));
  }
}

std::vector<kv::KvCacheType> parse_types(const std::string& list) {
  std::vector<kv::KvCacheType> types;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) types.push_back(parse_kv_cache_dtype(name));
  if (types.empty()) throw Error(Error::Kind::kInvalidArgument, "--kv-types: no type given");
  return types;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_attention(const BenchAttentionOptions& opts) {
  if (opts.n_seqs < 1 || opts.ctx < 2 || opts.rounds < 1 || opts.block_size < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                "--seqs and --rounds must be >= 1, --ctx >= 2, --block-size >= 1");
  }
  const std::vector<kv::KvCacheType> types = parse_types(opts.kv_types);
  const gguf::GgufFile file = gguf::GgufFile::open(resolve_model(opts.model, opts.cache_dir));
  const model::ModelConfig c = model::ModelConfig::from_gguf(file);
  const int threads = opts.threads > 0 ? opts.threads : physical_core_count();
  ThreadPool pool(threads);

  const int32_t bs = opts.block_size;
  const int32_t blocks_per_seq = (opts.ctx + bs - 1) / bs;
  const int64_t n_blocks = static_cast<int64_t>(blocks_per_seq) * opts.n_seqs;
  if (n_blocks > (1 << 30)) throw Error(Error::Kind::kInvalidArgument, "cache too large");
  // One decode token per sequence at the last position: it attends to the whole context.
  std::vector<std::vector<kv::BlockId>> tables(static_cast<size_t>(opts.n_seqs));
  kv::StepBatch batch;
  const std::vector<int32_t> token = {1};
  for (int32_t s = 0; s < opts.n_seqs; ++s) {
    auto& t = tables[static_cast<size_t>(s)];
    for (int32_t b = 0; b < blocks_per_seq; ++b) t.push_back(s * blocks_per_seq + b);
    batch.add_sequence(s, token, opts.ctx - 1, t, 1);
  }
  std::minstd_rand rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random_rows = [&](uint64_t width) {
    std::vector<float> v(static_cast<size_t>(opts.n_seqs) * width);
    for (float& x : v) x = normal(rng);
    return v;
  };
  const std::vector<float> q = random_rows(c.n_heads * c.head_dim_k);
  const std::vector<float> k = random_rows(c.max_kv_heads() * c.head_dim_k);
  const std::vector<float> v = random_rows(c.max_kv_heads() * c.head_dim_v);
  std::vector<float> out(static_cast<size_t>(opts.n_seqs) * c.n_heads * c.head_dim_v);

  struct Run {
    kv::KvCacheType type;
    std::unique_ptr<model::KvStorage> kv;
    model::PagedAttention attention;
    std::vector<double> seconds;
  };
  std::vector<std::unique_ptr<Run>> runs;
  for (kv::KvCacheType type : types) {
    auto run = std::make_unique<Run>();
    run->type = type;
    run->kv = std::make_unique<model::KvStorage>(c, bs, static_cast<int32_t>(n_blocks), type);
    fill(*run->kv, c, pool);
    runs.push_back(std::move(run));
  }
  auto step = [&](Run& r) {
    const auto t0 = Clock::now();
    for (size_t layer = 0; layer < c.n_layers; ++layer) {
      r.attention.run(c, layer, batch, *r.kv, q.data(), nullptr, k.data(), v.data(), out.data(),
                      pool);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (auto& r : runs) step(*r);  // warm-up: buffers sized, code and tables touched
  for (int round = 0; round < opts.rounds; ++round) {
    for (auto& r : runs) r->seconds.push_back(step(*r));
  }

  const kv::KvShape shape = c.kv_shape();
  json per_type = json::array();
  const Run* f16 = nullptr;
  for (const auto& r : runs) {
    if (r->type == kv::KvCacheType::kF16) f16 = r.get();
  }
  for (const auto& r : runs) {
    const double best = *std::min_element(r->seconds.begin(), r->seconds.end());
    // Sliding-window layers read only their window.
    const uint64_t bytes =
        kv::kv_bytes_per_sequence(shape, r->type, opts.ctx) * static_cast<uint64_t>(opts.n_seqs);
    json j = {{"kv_cache_dtype", std::string(kv::kv_cache_type_name(r->type))},
              {"seconds_per_step_best", best},
              {"seconds_per_step_median", median(r->seconds)},
              {"kv_bytes_read_per_step", bytes},
              {"read_bytes_per_s", static_cast<double>(bytes) / best}};
    if (f16 != nullptr) {
      const double f16_best = *std::min_element(f16->seconds.begin(), f16->seconds.end());
      j["speed_vs_f16_best"] = f16_best / best;
      j["speed_vs_f16_median"] = median(f16->seconds) / median(r->seconds);
      j["bytes_vs_f16"] =
          static_cast<double>(bytes) /
          static_cast<double>(kv::kv_bytes_per_sequence(shape, kv::KvCacheType::kF16, opts.ctx) *
                              static_cast<uint64_t>(opts.n_seqs));
    }
    per_type.push_back(j);
  }
  json report = {{"model", opts.model},
                 {"architecture", c.architecture},
                 {"isa", std::string(kernels::isa_name(kernels::best_isa()))},
                 {"threads", threads},
                 {"sequences", opts.n_seqs},
                 {"context", opts.ctx},
                 {"block_size", bs},
                 {"rounds", opts.rounds},
                 {"types", per_type}};
  std::puts(report.dump(2).c_str());
  return 0;
}

}  // namespace

void add_bench_attention_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<BenchAttentionOptions>();
  auto* cmd = app.add_subcommand(
      "bench-attention",
      "Decode attention over a full paged KV cache, per cache type, vs f16 (JSON)");
  cmd->add_option("-m,--model", opts->model,
                  "GGUF file or registered model whose shape is used (default: default)");
  add_threads_option(*cmd, opts->threads);
  cmd->add_option("--seqs", opts->n_seqs, "Decoding sequences")->capture_default_str();
  cmd->add_option("--ctx", opts->ctx, "Context of every sequence")->capture_default_str();
  cmd->add_option("--block-size", opts->block_size, "KV block size")->capture_default_str();
  cmd->add_option("-r,--rounds", opts->rounds, "Timed steps per type")->capture_default_str();
  cmd->add_option("--kv-types", opts->kv_types, "Comma-separated KV cache types")
      ->capture_default_str();
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = bench_attention(*opts); });
}

}  // namespace llms::cli
