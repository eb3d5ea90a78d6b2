#include "model/model_config.h"

#include <algorithm>

#include "util/error.h"

namespace llms::model {

namespace {

class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

  uint64_t required_positive(std::string_view suffix) const {
    std::string k = key(suffix);
    auto v = file_.get_uint(k);
    if (!v) throw_invalid_file("model file lacks required key '" + k + "'");
    if (*v == 0) throw_invalid_file("key '" + k + "' is 0; it must be positive");
    return *v;
  }

  uint64_t optional_uint(std::string_view suffix, uint64_t fallback) const {
    return file_.get_uint(key(suffix)).value_or(fallback);
  }

  double optional_float(std::string_view suffix, double fallback) const {
    return file_.get_float(key(suffix)).value_or(fallback);
  }

 private:
  const gguf::GgufFile& file_;
  std::string arch_;
};

// Gemma 3 alternates five sliding-window layers with one global layer; the GGUF file does not
// store the pattern, so it is a fact of the architecture.
constexpr uint64_t kGemma3SlidingPattern = 6;

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& file) {
  ModelConfig c;
  auto arch = file.get_string("general.architecture");
  if (!arch || arch->empty()) throw_invalid_file("model file lacks 'general.architecture'");
  c.architecture = *arch;
  c.name = file.get_string("general.name").value_or("");
  KeyReader keys(file, c.architecture);

  c.n_layers = keys.required_positive("block_count");
  c.n_embd = keys.required_positive("embedding_length");
  c.n_heads = keys.required_positive("attention.head_count");
  c.n_ff = keys.optional_uint("feed_forward_length", 0);
  c.n_ctx_train = keys.optional_uint("context_length", 0);
  if (c.n_layers > 4096) throw_invalid_file("key '" + keys.key("block_count") + "' is absurd");

  // head_count_kv is one number or one per layer; absent means no GQA.
  std::string kv_key = keys.key("attention.head_count_kv");
  const gguf::Value* kv = file.find(kv_key);
  if (kv != nullptr && kv->type() == gguf::ValueType::kArray) {
    auto per_layer = kv->to_ints();
    if (!per_layer || per_layer->size() != c.n_layers) {
      throw_invalid_file("key '" + kv_key + "' must hold one integer per layer (" +
                         std::to_string(c.n_layers) + ")");
    }
    for (int64_t h : *per_layer) {
      if (h < 0) throw_invalid_file("key '" + kv_key + "' has a negative head count");
      c.n_kv_heads.push_back(static_cast<uint64_t>(h));
    }
  } else {
    uint64_t n = kv ? *file.get_uint(kv_key) : c.n_heads;
    if (n == 0) throw_invalid_file("key '" + kv_key + "' is 0; it must be positive");
    c.n_kv_heads.assign(c.n_layers, n);
  }
  for (uint64_t h : c.n_kv_heads) {
    if (h > c.n_heads) {
      throw_invalid_file("key '" + kv_key + "' (" + std::to_string(h) +
                         ") exceeds the query head count " + std::to_string(c.n_heads));
    }
  }
  if (c.n_embd % c.n_heads != 0 && !file.find(keys.key("attention.key_length"))) {
    throw_invalid_file("embedding_length " + std::to_string(c.n_embd) +
                       " is not a multiple of head_count " + std::to_string(c.n_heads));
  }
  c.head_dim_k = keys.optional_uint("attention.key_length", c.n_embd / c.n_heads);
  c.head_dim_v = keys.optional_uint("attention.value_length", c.head_dim_k);
  if (c.head_dim_k == 0 || c.head_dim_v == 0) throw_invalid_file("attention head width is 0");

  c.rope_freq_base = keys.optional_float("rope.freq_base", 10000.0);
  c.rope_scaling_type = file.get_string(keys.key("rope.scaling.type")).value_or("none");
  c.rope_scaling_factor = keys.optional_float("rope.scaling.factor", 1.0);
  c.rms_norm_eps = keys.optional_float("attention.layer_norm_rms_epsilon", 1e-6);

  c.sliding_window = keys.optional_uint("attention.sliding_window", 0);
  c.is_sliding.assign(c.n_layers, false);
  if (c.sliding_window > 0 && c.architecture == "gemma3") {
    for (uint64_t i = 0; i < c.n_layers; ++i) {
      c.is_sliding[i] = (i + 1) % kGemma3SlidingPattern != 0;
    }
  }

  if (auto tokens = file.find("tokenizer.ggml.tokens")) {
    c.n_vocab = tokens->size();
  } else if (auto embd = file.find_tensor("token_embd.weight")) {
    c.n_vocab = embd->ne[1];
  }
  c.has_output_weight = file.find_tensor("output.weight") != nullptr;
  return c;
}

kv::KvShape ModelConfig::kv_shape() const {
  kv::KvShape shape;
  for (uint64_t i = 0; i < n_layers; ++i) {
    shape.layers.push_back(
        kv::KvLayer{n_kv_heads[i], head_dim_k, head_dim_v, is_sliding[i] ? sliding_window : 0});
  }
  return shape;
}

uint64_t ModelConfig::max_kv_heads() const {
  return n_kv_heads.empty() ? 0 : *std::max_element(n_kv_heads.begin(), n_kv_heads.end());
}

}  // namespace llms::model
