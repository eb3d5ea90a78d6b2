// model/hf_conversion: see the header.
#include "model/hf_conversion.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/rope.h"
#include "quant/quant.h"
#include "tokenizer/hf_vocab.h"
#include "util/error.h"

namespace llms::model {

namespace {

using gguf::GgmlType;
using gguf::SafetensorsTensor;

[[noreturn]] void unsupported(const std::string& message) {
  throw Error(Error::Kind::kUnsupported, message);
}
[[noreturn]] void invalid(const std::string& message) {
  throw Error(Error::Kind::kInvalidFile, message);
}

// Hugging Face's names within a layer ("model.layers.N." stripped) and GGUF's.
struct LayerName {
  const char* hf;
  const char* gguf;
  bool required;
};
constexpr LayerName kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight", true},
    {"self_attn.q_proj.weight", "attn_q.weight", true},
    {"self_attn.k_proj.weight", "attn_k.weight", true},
    {"self_attn.v_proj.weight", "attn_v.weight", true},
    {"self_attn.o_proj.weight", "attn_output.weight", true},
    {"self_attn.q_proj.bias", "attn_q.bias", false},
    {"self_attn.k_proj.bias", "attn_k.bias", false},
    {"self_attn.v_proj.bias", "attn_v.bias", false},
    {"self_attn.o_proj.bias", "attn_output.bias", false},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", false},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", false},
    {"post_attention_layernorm.weight", "ffn_norm.weight", true},
    {"mlp.gate_proj.weight", "ffn_gate.weight", true},
    {"mlp.up_proj.weight", "ffn_up.weight", true},
    {"mlp.down_proj.weight", "ffn_down.weight", true},
};

std::optional<GgmlType> ggml_type_of(gguf::Dtype dtype) {
  switch (dtype) {
    case gguf::Dtype::kF32:
      return GgmlType::kF32;
    case gguf::Dtype::kF16:
      return GgmlType::kF16;
    case gguf::Dtype::kBF16:
      return GgmlType::kBF16;
    default:
      return std::nullopt;
  }
}

// One output tensor: where it comes from and how it is changed on the way.
struct Planned {
  std::string name;
  const SafetensorsTensor* source = nullptr;
  uint64_t permute_heads = 0;  // > 0: rows reordered into adjacent pairs, this many heads
};

// Sort key: token_embd, then the layers in order, then output_norm, output.
struct Slot {
  int group;  // 0 front, 1 layers, 2 back
  uint64_t layer;
  size_t position;  // within the layer: kLayerNames order; front/back: fixed
  bool operator<(const Slot& o) const {
    return std::tie(group, layer, position) < std::tie(o.group, o.layer, o.position);
  }
};

class Planner {
 public:
  Planner(const gguf::HfModelDir& dir, const ModelConfig& config, bool tied)
      : dir_(dir), config_(config), tied_(tied), permute_(config.architecture == "llama") {}

  std::map<Slot, Planned> plan() {
    std::map<Slot, Planned> out;
    std::vector<std::vector<bool>> seen(config_.n_layers,
                                        std::vector<bool>(std::size(kLayerNames), false));
    for (const auto& entry : dir_.weights().tensors()) {
      const SafetensorsTensor& t = *entry.tensor;
      std::string name = t.name;
      if (name.ends_with(".rotary_emb.inv_freq")) continue;  // recomputed from config.json
      if (name == "lm_head.weight") {
        if (tied_) continue;  // a tied model that saved its output matrix anyway
        out[{2, 0, 1}] = {"output.weight", &t, 0};
        continue;
      }
      if (name == "model.embed_tokens.weight") {
        out[{0, 0, 0}] = {"token_embd.weight", &t, 0};
        continue;
      }
      if (name == "model.norm.weight") {
        out[{2, 0, 0}] = {"output_norm.weight", &t, 0};
        continue;
      }
      // "model.layers.<N>.<rest>", N in decimal without leading zeros.
      constexpr std::string_view kPrefix = "model.layers.";
      if (!name.starts_with(kPrefix)) refuse_name(name);
      const size_t digits_end = name.find('.', kPrefix.size());
      if (digits_end == std::string::npos) refuse_name(name);
      const std::string_view digits(name.data() + kPrefix.size(), digits_end - kPrefix.size());
      uint64_t layer = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), layer);
      if (ec != std::errc() || end != digits.data() + digits.size() ||
          (digits.size() > 1 && digits[0] == '0')) {
        refuse_name(name);
      }
      if (layer >= config_.n_layers) {
        invalid("safetensors tensor '" + name + "' is in layer " + std::string(digits) +
                " but config.json 'num_hidden_layers' is " + std::to_string(config_.n_layers));
      }
      const std::string rest = name.substr(digits_end + 1);
      size_t position = std::size(kLayerNames);
      for (size_t i = 0; i < std::size(kLayerNames); ++i) {
        if (rest == kLayerNames[i].hf) position = i;
      }
      if (position == std::size(kLayerNames)) refuse_name(name);
      if (seen[layer][position]) {
        invalid("safetensors tensor '" + name + "' is a second model.layers." +
                std::to_string(layer) + "." + rest);
      }
      seen[layer][position] = true;
      uint64_t heads = 0;
      if (permute_ &&
          (rest.starts_with("self_attn.q_proj.") || rest.starts_with("self_attn.k_proj."))) {
        heads = rest.starts_with("self_attn.q_proj.") ? config_.n_heads : config_.n_kv_heads[layer];
      }
      out[{1, layer, position}] = {
          "blk." + std::to_string(layer) + "." + kLayerNames[position].gguf, &t, heads};
    }
    if (!out.contains({0, 0, 0})) invalid("the safetensors lack model.embed_tokens.weight");
    if (!out.contains({2, 0, 0})) invalid("the safetensors lack model.norm.weight");
    if (!tied_ && !out.contains({2, 0, 1})) {
      invalid(
          "config.json says tie_word_embeddings is false but the safetensors lack "
          "lm_head.weight");
    }
    for (uint64_t layer = 0; layer < config_.n_layers; ++layer) {
      for (size_t i = 0; i < std::size(kLayerNames); ++i) {
        if (kLayerNames[i].required && !seen[layer][i]) {
          invalid("the safetensors lack model.layers." + std::to_string(layer) + "." +
                  kLayerNames[i].hf);
        }
      }
    }
    return out;
  }

 private:
  [[noreturn]] static void refuse_name(const std::string& name) {
    unsupported("safetensors tensor '" + name +
                "' has no GGUF name (llama, mistral, qwen2 and qwen3 causal LMs are converted)");
  }

  const gguf::HfModelDir& dir_;
  const ModelConfig& config_;
  bool tied_;
  bool permute_;
};

// The shape a tensor must have, from config.json; nullopt: not checked.
std::optional<std::vector<uint64_t>> expected_shape(const std::string& gguf_name,
                                                    const ModelConfig& c, uint64_t layer) {
  const uint64_t q = c.n_heads * c.head_dim_k;
  const uint64_t kv = c.n_kv_heads[layer] * c.head_dim_k;
  const uint64_t v = c.n_kv_heads[layer] * c.head_dim_v;
  auto ends = [&](const char* suffix) { return gguf_name.ends_with(suffix); };
  if (gguf_name == "token_embd.weight" || gguf_name == "output.weight") {
    return std::vector<uint64_t>{c.n_vocab, c.n_embd};
  }
  if (gguf_name == "output_norm.weight" || ends(".attn_norm.weight") || ends(".ffn_norm.weight")) {
    return std::vector<uint64_t>{c.n_embd};
  }
  if (ends(".attn_q.weight")) return std::vector<uint64_t>{q, c.n_embd};
  if (ends(".attn_k.weight")) return std::vector<uint64_t>{kv, c.n_embd};
  if (ends(".attn_v.weight")) return std::vector<uint64_t>{v, c.n_embd};
  if (ends(".attn_output.weight")) return std::vector<uint64_t>{c.n_embd, c.n_heads * c.head_dim_v};
  if (ends(".attn_q.bias")) return std::vector<uint64_t>{q};
  if (ends(".attn_k.bias")) return std::vector<uint64_t>{kv};
  if (ends(".attn_v.bias")) return std::vector<uint64_t>{v};
  if (ends(".attn_output.bias")) return std::vector<uint64_t>{c.n_embd};
  if (ends(".attn_q_norm.weight") || ends(".attn_k_norm.weight")) {
    return std::vector<uint64_t>{c.head_dim_k};
  }
  if (ends(".ffn_gate.weight") || ends(".ffn_up.weight")) {
    return std::vector<uint64_t>{c.n_ff, c.n_embd};
  }
  if (ends(".ffn_down.weight")) return std::vector<uint64_t>{c.n_embd, c.n_ff};
  return std::nullopt;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Hugging Face's llama rotates the two halves of each head; GGUF's adjacent pairs. Within a head
// of d rows, GGUF row 2i + j is Hugging Face row j * d/2 + i.
std::vector<uint8_t> permute_rows(std::span<const uint8_t> bytes, uint64_t n_rows,
                                  uint64_t row_bytes, uint64_t n_heads) {
  std::vector<uint8_t> out(bytes.size());
  const uint64_t d = n_rows / n_heads;
  for (uint64_t h = 0; h < n_heads; ++h) {
    for (uint64_t i = 0; i < d / 2; ++i) {
      for (uint64_t j = 0; j < 2; ++j) {
        const uint64_t to = h * d + 2 * i + j;
        const uint64_t from = h * d + j * (d / 2) + i;
        std::memcpy(out.data() + to * row_bytes, bytes.data() + from * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

void check_rope(const ModelConfig& c) {
  if (!is_supported_rope_scaling(c.rope_scaling_type)) {
    unsupported("config.json: RoPE scaling '" + c.rope_scaling_type + "' is not converted");
  }
  // Frequencies that the forward pass would refuse, or that are not numbers, refuse the model
  // now rather than when the converted file is loaded.
  for (bool scaled : {false, true}) {
    for (double f : rope_frequencies(c, c.rope_freq_base, scaled).inv_freq) {
      if (!(std::isfinite(f) && f > 0.0)) {
        invalid("config.json: the RoPE parameters give a frequency that is not a positive number");
      }
    }
  }
  if (c.rope_scaling_type == "yarn") {
    if (c.rope_yarn_attention_factor || c.rope_yarn_mscale != 0.0 ||
        c.rope_yarn_mscale_all_dim != 0.0 || !c.rope_yarn_truncate) {
      unsupported(
          "config.json: YaRN's attention_factor, mscale, mscale_all_dim and truncate have no "
          "GGUF key this project reads; only their defaults are converted");
    }
  }
}

void add_metadata(const gguf::HfModelDir& dir, const ModelConfig& c, GgmlType file_type,
                  gguf::GgufWriter& w) {
  const std::string& a = c.architecture;
  auto key = [&](const char* suffix) { return a + "." + suffix; };
  w.set_string("general.architecture", a);
  std::string name = std::filesystem::absolute(dir.path()).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::absolute(dir.path()).parent_path().filename().string();
  w.set_string("general.name", name);
  // LLAMA_FTYPE: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32.
  w.set_u32("general.file_type", file_type == GgmlType::kF32   ? 0
                                 : file_type == GgmlType::kF16 ? 1
                                                               : 32);
  w.set_u32(key("block_count"), static_cast<uint32_t>(c.n_layers));
  w.set_u32(key("context_length"), static_cast<uint32_t>(c.n_ctx_train));
  w.set_u32(key("embedding_length"), static_cast<uint32_t>(c.n_embd));
  w.set_u32(key("feed_forward_length"), static_cast<uint32_t>(c.n_ff));
  w.set_u32(key("attention.head_count"), static_cast<uint32_t>(c.n_heads));
  w.set_u32(key("attention.head_count_kv"), static_cast<uint32_t>(c.n_kv_heads[0]));
  w.set_u32(key("attention.key_length"), static_cast<uint32_t>(c.head_dim_k));
  w.set_u32(key("attention.value_length"), static_cast<uint32_t>(c.head_dim_v));
  w.set_u32(key("rope.dimension_count"), static_cast<uint32_t>(c.head_dim_k));
  w.set_f32(key("rope.freq_base"), static_cast<float>(c.rope_freq_base));
  w.set_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps));
  if (c.rope_scaling_type == "linear" || c.rope_scaling_type == "yarn") {
    w.set_string(key("rope.scaling.type"), c.rope_scaling_type);
    w.set_f32(key("rope.scaling.factor"), static_cast<float>(c.rope_scaling_factor));
  }
  if (c.rope_scaling_type == "yarn") {
    w.set_u32(key("rope.scaling.original_context_length"),
              static_cast<uint32_t>(c.rope_original_context));
    w.set_f32(key("rope.scaling.yarn_beta_fast"), static_cast<float>(c.rope_yarn_beta_fast));
    w.set_f32(key("rope.scaling.yarn_beta_slow"), static_cast<float>(c.rope_yarn_beta_slow));
  }
}

// The hyper-parameters GGUF stores as u32 (and the products the shape checks form) must fit.
void check_fits_u32(const ModelConfig& c) {
  constexpr uint64_t kMax = UINT32_MAX;
  auto fits = [&](const char* what, uint64_t v) {
    if (v > kMax) {
      invalid("config.json: " + std::string(what) + " = " + std::to_string(v) +
              " does not fit GGUF's 32-bit key");
    }
  };
  fits("num_hidden_layers", c.n_layers);
  fits("hidden_size", c.n_embd);
  fits("intermediate_size", c.n_ff);
  fits("num_attention_heads", c.n_heads);
  fits("head_dim", c.head_dim_k);
  fits("max_position_embeddings", c.n_ctx_train);
  fits("vocab_size", c.n_vocab);
  fits("original_max_position_embeddings", c.rope_original_context);
  fits("num_attention_heads x head_dim", c.n_heads * c.head_dim_k);  // both < 2^32: no wrap
  for (uint64_t kv : c.n_kv_heads) fits("num_key_value_heads", kv);
}

// Llama 3 scaling as llama.cpp stores it: pair i's frequency divided by divisors[i].
std::vector<float> llama3_divisors(const ModelConfig& c) {
  RopeFrequencies plain = rope_frequencies(
      [&] {
        ModelConfig unscaled = c;
        unscaled.rope_scaling_type = "none";
        return unscaled;
      }(),
      c.rope_freq_base, false);
  RopeFrequencies scaled = rope_frequencies(c, c.rope_freq_base, true);
  std::vector<float> out(plain.inv_freq.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(plain.inv_freq[i] / scaled.inv_freq[i]);
  }
  return out;
}

}  // namespace

HfConversionReport add_hf_model(const gguf::HfModelDir& dir, gguf::GgufWriter& w) {
  ModelConfig c = ModelConfig::from_hf(dir);
  const std::string model_type = dir.model_type().value_or("");
  if (c.architecture != "llama" && c.architecture != "qwen2" && c.architecture != "qwen3") {
    unsupported("config.json: model_type '" + model_type +
                "' is not converted to GGUF (llama, mistral, qwen2, qwen3 are)");
  }
  if (!c.unsupported.empty()) {
    unsupported("config.json asks for what the forward pass does not run: " + c.unsupported[0]);
  }
  // The vocabulary size: config.json's, else the embedding's rows.
  if (c.n_vocab == 0) {
    if (const SafetensorsTensor* e = dir.weights().find_tensor("model.embed_tokens.weight");
        e != nullptr && e->shape.size() == 2) {
      c.n_vocab = e->shape[0];
    }
  }
  if (c.n_vocab == 0) invalid("config.json lacks 'vocab_size' and there is no embedding to count");
  check_fits_u32(c);
  // The GGUF key of a sliding window tells only Gemma 3's layer pattern to our reader (and
  // llama.cpp ignores it for these architectures): running every layer in full would be wrong.
  if (c.sliding_window > 0) {
    unsupported(
        "config.json: sliding-window attention ('use_sliding_window') is not converted "
        "for " +
        c.architecture);
  }
  check_rope(c);
  if (c.n_ff == 0) invalid("config.json lacks 'intermediate_size'");

  // As ModelConfig::from_hf reads it (transformers' Llama and Qwen configs default to untied).
  const bool tied = dir.get_bool("tie_word_embeddings").value_or(false);
  std::map<Slot, Planned> plan = Planner(dir, c, tied).plan();

  // Check every tensor before adding any, and find the file's dominant matrix type.
  std::map<GgmlType, size_t> matrix_types;
  for (const auto& [slot, p] : plan) {
    const SafetensorsTensor& t = *p.source;
    const auto type = ggml_type_of(t.dtype);
    if (!type) {
      unsupported("safetensors tensor '" + t.name + "' is " +
                  std::string(gguf::dtype_name(t.dtype)) +
                  "; only F32, F16 and BF16 weights are converted");
    }
    if (auto want = expected_shape(p.name, c, slot.layer); want && t.shape != *want) {
      invalid("safetensors tensor '" + t.name + "' has shape " + shape_text(t.shape) +
              " but config.json gives " + shape_text(*want));
    }
    if (t.shape.size() == 2) ++matrix_types[*type];
    if (p.permute_heads > 0 && (t.shape[0] % (2 * p.permute_heads)) != 0) {
      invalid("safetensors tensor '" + t.name + "' has " + std::to_string(t.shape[0]) +
              " rows, not an even number per head");
    }
  }
  GgmlType file_type = GgmlType::kF32;
  size_t most = 0;
  for (const auto& [type, n] : matrix_types) {
    if (n > most) most = n, file_type = type;
  }

  // The tokenizer is read before anything is written, so a missing one refuses the whole model.
  tokenizer::HfVocab vocab = tokenizer::vocab_from_hf(dir, c.n_vocab);

  add_metadata(dir, c, file_type, w);
  tokenizer::write_vocab(vocab, w);

  HfConversionReport report;
  report.architecture = c.architecture;
  bool rope_freqs_added = false;
  for (const auto& [slot, p] : plan) {
    if (slot.group == 1 && !rope_freqs_added && c.rope_scaling_type == "llama3") {
      std::vector<float> divisors = llama3_divisors(c);
      std::vector<uint64_t> ne = {divisors.size()};
      std::vector<uint8_t> bytes(divisors.size() * sizeof(float));
      std::memcpy(bytes.data(), divisors.data(), bytes.size());
      w.add_tensor("rope_freqs.weight", GgmlType::kF32, ne, std::move(bytes));
      rope_freqs_added = true;
      ++report.n_tensors;
    }
    const SafetensorsTensor& t = *p.source;
    const GgmlType type = *ggml_type_of(t.dtype);
    std::span<const uint8_t> bytes = dir.weights().tensor_data(t);
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());
    if (t.shape.size() == 1) {
      std::vector<float> values(t.n_elements);
      quant::dequantize_row(type, bytes.data(), values.data(), static_cast<int64_t>(t.n_elements));
      std::vector<uint8_t> f32(values.size() * sizeof(float));
      std::memcpy(f32.data(), values.data(), f32.size());
      if (p.permute_heads > 0) {
        f32 = permute_rows(f32, t.shape[0], sizeof(float), p.permute_heads);
      }
      w.add_tensor(p.name, GgmlType::kF32, ne, std::move(f32));
    } else if (p.permute_heads > 0) {
      w.add_tensor(p.name, type, ne,
                   permute_rows(bytes, t.shape[0], bytes.size() / t.shape[0], p.permute_heads));
    } else {
      w.add_tensor_view(p.name, type, ne, bytes);
    }
    if (p.permute_heads > 0) ++report.n_permuted;
    ++report.n_tensors;
  }
  report.file_bytes = w.file_size();
  return report;
}

}  // namespace llms::model
