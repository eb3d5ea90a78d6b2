// Helpers shared by the quantize module's tests: a tiny model whose rows are whole K blocks,
// token ids for calibration steps, a tensor's values in f32, and quantize options.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "quant/quant.h"
#include "quantize/model_quantizer.h"
#include "util/thread_pool.h"

namespace llms::quantize::fixtures {

// 256 wide with a 512-wide feed-forward, so every row is a whole number of K blocks.
inline model::TinyModelSpec k_friendly_spec(int32_t n_layers = 4) {
  model::TinyModelSpec spec;
  spec.n_layers = n_layers;
  spec.n_embd = 256;
  spec.n_ff = 512;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  return spec;
}

// n token ids of the tiny vocabulary, different for each seed.
inline std::vector<int32_t> tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 31 + seed * 7) % 250 + 3;
  return t;
}

inline std::vector<float> values_of(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  std::vector<float> values(t.n_elements);
  quant::dequantize_row(t.type, file.tensor_data(t).data(), values.data(),
                        static_cast<int64_t>(t.n_elements));
  return values;
}

inline QuantizeOptions options_for(const std::filesystem::path& in,
                                   const std::filesystem::path& out, QuantizeTarget target) {
  QuantizeOptions o;
  o.input = in;
  o.output = out;
  o.target = target;
  o.n_threads = 2;
  return o;
}

// Runs `n_chunks` fresh sequences of `n_tokens` (at most 64) tiny-vocabulary tokens through the
// model with `observer` set: the calibration run the activation collectors are tested with.
// n_logits: rows of each chunk (the last ones) that run the output matmul, as calibration_run's
// logits_rows does for all of them.
inline void observe_chunks(const std::filesystem::path& model_path, int32_t n_chunks,
                           int32_t n_tokens, const model::ActivationObserver& observer,
                           int32_t n_logits = 0) {
  const gguf::GgufFile file = gguf::GgufFile::open(model_path);
  model::CpuRunner runner(file, std::make_shared<ThreadPool>(2));
  runner.allocate_kv(16, 4, kv::KvCacheType::kF16, runner.config().single_kv_layout());
  runner.transformer().set_activation_observer(observer);
  const std::vector<kv::BlockId> table = {0, 1, 2, 3};
  for (int32_t chunk = 0; chunk < n_chunks; ++chunk) {
    kv::StepBatch batch;
    batch.add_sequence(chunk, tokens(n_tokens, chunk), 0, table, n_logits);
    runner.execute(batch);
  }
}

// The logits of the last position of a fixed 40-token prompt, f32 cache: what rescaling tests
// compare before and after.
inline std::vector<float> last_logits(const std::filesystem::path& model_path) {
  const gguf::GgufFile file = gguf::GgufFile::open(model_path);
  model::CpuRunner runner(file, std::make_shared<ThreadPool>(2));
  runner.allocate_kv(16, 4, kv::KvCacheType::kF32, runner.config().single_kv_layout());
  const std::vector<kv::BlockId> table = {0, 1, 2, 3};
  kv::StepBatch batch;
  batch.add_sequence(0, tokens(40, 11), 0, table, 1);
  const model::LogitsView logits = runner.execute(batch);
  const std::span<const float> row = logits.row(0);
  return std::vector<float>(row.begin(), row.end());
}

// ||got - want|| / ||want||.
inline double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0;
  double norm2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm2 += double(want[i]) * want[i];
  }
  return std::sqrt(err / norm2);
}

}  // namespace llms::quantize::fixtures
