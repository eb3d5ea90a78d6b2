// Helpers shared by the quantize module's tests: a tiny model whose rows are whole K blocks,
// token ids for calibration steps, a tensor's values in f32, and quantize options.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/tiny_model.h"
#include "quant/quant.h"
#include "quantize/model_quantizer.h"

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

}  // namespace llms::quantize::fixtures
