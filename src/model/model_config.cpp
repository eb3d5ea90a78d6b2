#include "model/model_config.h"

#include <algorithm>
#include <cstring>

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

// RoPE scaling as llama.cpp's converter writes it: `<arch>.rope.scaling.*` keys, and Llama 3's
// scaling as the per-pair divisors of the tensor rope_freqs.weight.
void read_gguf_rope(const gguf::GgufFile& file, const KeyReader& keys, ModelConfig& c) {
  c.rope_scaling_type = file.get_string(keys.key("rope.scaling.type")).value_or("none");
  if (c.rope_scaling_type.empty()) c.rope_scaling_type = "none";
  c.rope_scaling_factor = keys.optional_float("rope.scaling.factor", 1.0);
  // llama.cpp falls back to the training context when the original one is not stored.
  c.rope_original_context =
      keys.optional_uint("rope.scaling.original_context_length", c.n_ctx_train);
  c.rope_yarn_beta_fast = keys.optional_float("rope.scaling.yarn_beta_fast", 32.0);
  c.rope_yarn_beta_slow = keys.optional_float("rope.scaling.yarn_beta_slow", 1.0);
  c.rope_dimension_count = keys.optional_uint("rope.dimension_count", 0);
  if (c.rope_dimension_count != 0 && c.rope_dimension_count != c.head_dim_k) {
    c.unsupported.push_back("partial rotary embedding ('" + keys.key("rope.dimension_count") +
                            "' = " + std::to_string(c.rope_dimension_count) + " of a head width " +
                            std::to_string(c.head_dim_k) + ")");
  }
  // Knobs of llama.cpp's YaRN whose exact composition with the default temperature we do not
  // implement: refused unless they hold their neutral value.
  struct Neutral {
    const char* suffix;
    double value;
  };
  for (const Neutral& n :
       {Neutral{"rope.scaling.attn_factor", 1.0}, Neutral{"rope.scaling.yarn_attn_factor", 1.0},
        Neutral{"rope.scaling.yarn_ext_factor", 1.0},
        Neutral{"rope.scaling.yarn_log_multiplier", 0.0}}) {
    auto v = file.get_float(keys.key(n.suffix));
    if (v && *v != n.value) {
      c.unsupported.push_back("'" + keys.key(n.suffix) + "' = " + std::to_string(*v));
    }
  }
  if (const gguf::TensorInfo* t = file.find_tensor("rope_freqs.weight")) {
    if (t->type != gguf::GgmlType::kF32 || t->n_dims != 1) {
      throw_invalid_file("tensor 'rope_freqs.weight' must be a 1-D F32 vector");
    }
    auto bytes = file.tensor_data(*t);
    if (bytes.size() != t->n_elements * sizeof(float) || t->n_elements > 65536) {
      throw_invalid_file("tensor 'rope_freqs.weight' has a bad size");
    }
    c.rope_freq_divisors.resize(t->n_elements);
    std::memcpy(c.rope_freq_divisors.data(), bytes.data(), bytes.size());
  }
}

// Keys whose presence changes the computation in ways the one forward pass does not follow.
void note_unsupported_gguf_keys(const gguf::GgufFile& file, const KeyReader& keys, ModelConfig& c) {
  if (auto n = file.get_uint(keys.key("expert_count")); n && *n > 0) {
    c.unsupported.push_back("mixture of experts ('" + keys.key("expert_count") +
                            "' = " + std::to_string(*n) + ")");
  }
  for (const char* suffix : {"attention.logit_softcapping", "final_logit_softcapping"}) {
    if (auto v = file.get_float(keys.key(suffix)); v && *v != 0.0) {
      c.unsupported.push_back("logit soft-capping ('" + keys.key(suffix) + "')");
    }
  }
  for (const char* suffix : {"attention.scale", "rope.dimension_sections"}) {
    if (file.find(keys.key(suffix)) != nullptr) {
      c.unsupported.push_back("'" + keys.key(suffix) + "'");
    }
  }
  // llama.cpp scales Gemma 3 27B's (62 layers) attention by 1/sqrt(n_embd / n_head) rather
  // than 1/sqrt(head_dim); we scale by the head width only.
  if (c.architecture == "gemma3" && c.n_layers == 62 && c.n_embd / c.n_heads != c.head_dim_k) {
    c.unsupported.push_back("Gemma 3 27B's attention scale 1/sqrt(n_embd / n_head)");
  }
}

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
  c.rms_norm_eps = keys.optional_float("attention.layer_norm_rms_epsilon", 1e-6);
  read_gguf_rope(file, keys, c);
  note_unsupported_gguf_keys(file, keys, c);

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

kv::KvGroupLayout ModelConfig::windowed_kv_layout() const {
  std::vector<int64_t> windows(n_layers, 0);
  std::vector<int64_t> sinks(n_layers, 0);
  for (uint64_t i = 0; i < n_layers; ++i) {
    windows[i] = static_cast<int64_t>(attention_window(i));
    sinks[i] = static_cast<int64_t>(attention_sinks_of(i));
  }
  return kv::KvGroupLayout::from_windows(windows, sinks);
}

void ModelConfig::set_streaming_attention(int64_t window, int64_t sinks) {
  auto refuse = [](const std::string& what) { throw Error(Error::Kind::kInvalidArgument, what); };
  if (window < 0) refuse("streaming_window must be >= 0 (0: off), got " + std::to_string(window));
  if (sinks < 0) refuse("attention_sinks must be >= 0, got " + std::to_string(sinks));
  if (window == 0 && sinks > 0) {
    refuse("attention_sinks " + std::to_string(sinks) + " needs a streaming_window");
  }
  if (n_ctx_train > 0 &&
      static_cast<uint64_t>(window) + static_cast<uint64_t>(sinks) > n_ctx_train) {
    refuse("streaming_window " + std::to_string(window) + " + attention_sinks " +
           std::to_string(sinks) + " exceed the model's context length " +
           std::to_string(n_ctx_train) + " (the cache's positions must stay within it)");
  }
  streaming_window = static_cast<uint64_t>(window);
  attention_sinks = static_cast<uint64_t>(sinks);
}

kv::KvGroupLayout ModelConfig::single_kv_layout() const {
  return kv::KvGroupLayout::single(static_cast<int32_t>(n_layers));
}

uint64_t ModelConfig::max_kv_heads() const {
  return n_kv_heads.empty() ? 0 : *std::max_element(n_kv_heads.begin(), n_kv_heads.end());
}

}  // namespace llms::model

namespace llms::model {

namespace {

// Reads config.json keys, from `text_config` first when the model nests its language model there
// (Gemma 3's multimodal configs do).
class HfKeys {
 public:
  explicit HfKeys(const gguf::HfModelDir& dir) : dir_(dir) {
    has_text_config_ = dir.find("text_config") != nullptr;
  }

  std::string path(std::string_view key) const {
    std::string nested = "text_config." + std::string(key);
    if (has_text_config_ && dir_.find(nested) != nullptr) return nested;
    return std::string(key);
  }

  uint64_t required_positive(std::string_view key) const {
    std::string k = path(key);
    auto v = dir_.get_uint(k);
    if (!v) throw_invalid_file("config.json lacks required key '" + k + "'");
    if (*v == 0) throw_invalid_file("config.json key '" + k + "' is 0; it must be positive");
    return *v;
  }

  std::optional<uint64_t> uint(std::string_view key) const { return dir_.get_uint(path(key)); }
  std::optional<double> number(std::string_view key) const { return dir_.get_float(path(key)); }
  std::optional<std::string> string(std::string_view key) const {
    return dir_.get_string(path(key));
  }
  std::optional<bool> boolean(std::string_view key) const { return dir_.get_bool(path(key)); }
  std::optional<std::vector<std::string>> strings(std::string_view key) const {
    return dir_.get_strings(path(key));
  }

 private:
  const gguf::HfModelDir& dir_;
  bool has_text_config_ = false;
};

std::string gguf_architecture(const std::string& model_type) {
  if (model_type == "gemma3_text") return "gemma3";
  if (model_type == "mistral") return "llama";
  return model_type;
}

// RoPE: transformers 5 writes `rope_parameters` (rope_theta inside it; per layer type for
// models like Gemma 3, whose full-attention entry is the scaled one), earlier versions
// `rope_theta` and `rope_scaling` ("type" in the oldest files). The defaults are
// modeling_rope_utils'.
void read_hf_rope(const gguf::HfModelDir& dir, const HfKeys& keys, ModelConfig& c) {
  std::string prefix = "rope_scaling";
  if (dir.find(keys.path("rope_parameters")) != nullptr) {
    prefix = dir.find(keys.path("rope_parameters.full_attention")) != nullptr
                 ? "rope_parameters.full_attention"
                 : "rope_parameters";
  }
  auto at = [&](const char* key) { return keys.path(prefix + "." + key); };
  c.rope_freq_base =
      keys.number("rope_theta").value_or(dir.get_float(at("rope_theta")).value_or(10000.0));
  auto type = dir.get_string(at("rope_type"));
  if (!type) type = dir.get_string(at("type"));
  c.rope_scaling_type = !type || *type == "default" ? "none" : *type;
  c.rope_original_context =
      dir.get_uint(at("original_max_position_embeddings")).value_or(c.n_ctx_train);
  auto factor = dir.get_float(at("factor"));
  if (!factor && c.rope_scaling_type == "yarn" && c.rope_original_context > 0) {
    factor = static_cast<double>(c.n_ctx_train) / static_cast<double>(c.rope_original_context);
  }
  c.rope_scaling_factor = factor.value_or(1.0);
  c.rope_llama3_low_freq_factor = dir.get_float(at("low_freq_factor")).value_or(1.0);
  c.rope_llama3_high_freq_factor = dir.get_float(at("high_freq_factor")).value_or(4.0);
  // transformers reads these with `or`: 0 means the default too.
  c.rope_yarn_beta_fast = dir.get_float(at("beta_fast")).value_or(0.0);
  if (c.rope_yarn_beta_fast == 0.0) c.rope_yarn_beta_fast = 32.0;
  c.rope_yarn_beta_slow = dir.get_float(at("beta_slow")).value_or(0.0);
  if (c.rope_yarn_beta_slow == 0.0) c.rope_yarn_beta_slow = 1.0;
  c.rope_yarn_truncate = dir.get_bool(at("truncate")).value_or(true);
  c.rope_yarn_attention_factor = dir.get_float(at("attention_factor"));
  c.rope_yarn_mscale = dir.get_float(at("mscale")).value_or(0.0);
  c.rope_yarn_mscale_all_dim = dir.get_float(at("mscale_all_dim")).value_or(0.0);
  auto partial = keys.number("partial_rotary_factor");
  if (!partial) partial = dir.get_float(at("partial_rotary_factor"));
  if (partial && *partial != 1.0) {
    c.unsupported.push_back("partial rotary embedding (partial_rotary_factor " +
                            std::to_string(*partial) + ")");
  }
}

void note_unsupported_hf_keys(const HfKeys& keys, ModelConfig& c) {
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (auto v = keys.number(key); v && *v != 0.0) {
      c.unsupported.push_back(std::string("logit soft-capping ('") + key + "')");
    }
  }
  if (auto n = keys.uint("num_local_experts"); n && *n > 0) {
    c.unsupported.push_back("mixture of experts (num_local_experts " + std::to_string(*n) + ")");
  }
  if (auto scalar = keys.number("query_pre_attn_scalar");
      scalar && *scalar != static_cast<double>(c.head_dim_k)) {
    c.unsupported.push_back("attention scale 1/sqrt(query_pre_attn_scalar " +
                            std::to_string(*scalar) + ") other than 1/sqrt(head_dim)");
  }
}

}  // namespace

ModelConfig ModelConfig::from_hf(const gguf::HfModelDir& dir) {
  HfKeys keys(dir);
  ModelConfig c;
  auto model_type = keys.string("model_type");
  if (!model_type || model_type->empty()) throw_invalid_file("config.json lacks 'model_type'");
  c.architecture = gguf_architecture(*model_type);
  c.name = dir.architecture().value_or(*model_type);
  c.n_layers = keys.required_positive("num_hidden_layers");
  if (c.n_layers > 4096) throw_invalid_file("config.json 'num_hidden_layers' is absurd");
  c.n_embd = keys.required_positive("hidden_size");
  c.n_heads = keys.required_positive("num_attention_heads");
  c.n_ff = keys.uint("intermediate_size").value_or(0);
  uint64_t n_kv = keys.uint("num_key_value_heads").value_or(c.n_heads);
  if (n_kv == 0 || n_kv > c.n_heads) {
    throw_invalid_file("config.json 'num_key_value_heads' (" + std::to_string(n_kv) +
                       ") must be between 1 and num_attention_heads (" + std::to_string(c.n_heads) +
                       ")");
  }
  c.n_kv_heads.assign(c.n_layers, n_kv);
  auto head_dim = keys.uint("head_dim");
  if (!head_dim) {
    if (c.n_embd % c.n_heads != 0) {
      throw_invalid_file("config.json hidden_size is not a multiple of num_attention_heads");
    }
    head_dim = c.n_embd / c.n_heads;
  }
  if (*head_dim == 0) throw_invalid_file("config.json 'head_dim' is 0");
  c.head_dim_k = c.head_dim_v = *head_dim;
  c.n_ctx_train = keys.uint("max_position_embeddings").value_or(0);
  c.n_vocab = keys.uint("vocab_size").value_or(0);
  c.rms_norm_eps = keys.number("rms_norm_eps").value_or(1e-6);
  read_hf_rope(dir, keys, c);
  note_unsupported_hf_keys(keys, c);

  c.is_sliding.assign(c.n_layers, false);
  bool uses_sliding = keys.boolean("use_sliding_window").value_or(c.architecture == "gemma3");
  c.sliding_window = uses_sliding ? keys.uint("sliding_window").value_or(0) : 0;
  if (c.sliding_window > 0) {
    if (auto layer_types = keys.strings("layer_types")) {
      if (layer_types->size() != c.n_layers) {
        throw_invalid_file("config.json 'layer_types' must name one type per layer");
      }
      for (uint64_t i = 0; i < c.n_layers; ++i) {
        c.is_sliding[i] = (*layer_types)[i] == "sliding_attention";
      }
    } else if (c.architecture == "gemma3") {
      uint64_t pattern = keys.uint("sliding_window_pattern").value_or(kGemma3SlidingPattern);
      for (uint64_t i = 0; i < c.n_layers; ++i) c.is_sliding[i] = pattern && (i + 1) % pattern;
    } else {
      c.is_sliding.assign(c.n_layers, true);
    }
  }
  bool tied = keys.boolean("tie_word_embeddings").value_or(false);
  c.has_output_weight = !tied && dir.weights().find_tensor("lm_head.weight") != nullptr;
  return c;
}

}  // namespace llms::model
