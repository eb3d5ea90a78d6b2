#include "model/tiny_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "quant/float_convert.h"
#include "quant/quant.h"
#include "tokenizer/byte_alphabet.h"
#include "util/error.h"

namespace llms::model {

namespace {

using gguf::GgmlType;

[[noreturn]] void bad_spec(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, "tiny model: " + message);
}

// The 256 byte tokens of GPT-2's byte-level alphabet in the order GPT-2-style vocabularies list
// them: bytes that stand for themselves first, then the shifted ones.
std::vector<std::string> byte_level_alphabet() {
  std::vector<std::string> printable, shifted;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = tokenizer::byte_level_char(static_cast<uint8_t>(b));
    (c == static_cast<char32_t>(b) ? printable : shifted)
        .push_back(tokenizer::byte_level_utf8(static_cast<uint8_t>(b)));
  }
  printable.insert(printable.end(), shifted.begin(), shifted.end());
  return printable;
}

TinyVocabulary byte_level_vocabulary() {
  TinyVocabulary v;
  v.tokens = byte_level_alphabet();
  // "Ġ" is the byte-level symbol for a space. Each merge's result becomes the next token.
  const char* merges[][2] = {{"Ġ", "t"},   {"h", "e"}, {"i", "n"}, {"Ġ", "a"},   {"e", "r"},
                             {"Ġt", "he"}, {"o", "n"}, {"Ġ", "s"}, {"r", "e"},   {"a", "t"},
                             {"Ġ", "o"},   {"e", "n"}, {"Ġ", "w"}, {"l", "l"},   {"Ġ", "c"},
                             {"Ġ", "Ġ"},   {"Ġ", "i"}, {"o", "r"}, {"Ġw", "or"}, {"Ġ", "h"}};
  for (const auto& m : merges) {
    v.merges.push_back(std::string(m[0]) + " " + m[1]);
    v.tokens.push_back(std::string(m[0]) + m[1]);
  }
  v.token_types.assign(v.tokens.size(), 1);
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(special);
    v.token_types.push_back(3);
  }
  int32_t n = static_cast<int32_t>(v.tokens.size());
  v.bos_id = n - 3;  // <|endoftext|>, as Qwen2 files declare it
  v.pad_id = n - 3;
  v.eos_id = n - 1;  // <|im_end|>
  return v;
}

TinyVocabulary sentence_piece_vocabulary() {
  TinyVocabulary v;
  auto add = [&v](std::string token, int32_t type, float score) {
    v.tokens.push_back(std::move(token));
    v.token_types.push_back(type);
    v.scores.push_back(score);
  };
  add("<pad>", 3, -1000.0f);
  add("<eos>", 3, -1000.0f);
  add("<bos>", 3, -1000.0f);
  add("<unk>", 2, -1000.0f);
  add("<start_of_turn>", 3, -1000.0f);
  add("<end_of_turn>", 3, -1000.0f);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 6, 0.0f);
  }
  // Pieces with decreasing scores (higher score = preferred), "▁" marking a word start.
  const char* pieces[] = {"▁",  "▁t", "he", "▁the", "in", "▁a", "er", "on",   "▁s", "re",
                          "at", "▁o", "en", "▁w",   "ll", "▁c", "or", "▁wor", "ld", "▁world"};
  float score = -1.0f;
  for (const char* p : pieces) add(p, 1, score--);
  for (char c = '!'; c <= '~'; ++c) add(std::string(1, c), 1, score--);
  v.bos_id = 2;
  v.eos_id = 1;
  v.unk_id = 3;
  v.pad_id = 0;
  return v;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void check_divides(uint64_t block, uint64_t n, const char* what, GgmlType type) {
  if (n % block != 0) {
    bad_spec(std::string(what) + " = " + std::to_string(n) + " is not a multiple of the " +
             std::string(gguf::ggml_type_name(type)) + " block size " + std::to_string(block));
  }
}

struct Shape {
  uint32_t head_dim;
  uint32_t q_width;
  uint32_t kv_width;
};

Shape validate(const TinyModelSpec& s) {
  const std::string& a = s.architecture;
  if (a != "llama" && a != "qwen2" && a != "qwen3" && a != "gemma3") {
    bad_spec("architecture '" + a + "' is not one of llama, qwen2, qwen3, gemma3");
  }
  if (s.n_layers == 0 || s.n_embd == 0 || s.n_ff == 0 || s.n_heads == 0 || s.n_kv_heads == 0) {
    bad_spec("n_layers, n_embd, n_ff, n_heads and n_kv_heads must be positive");
  }
  if (s.n_heads % s.n_kv_heads != 0) bad_spec("n_heads must be a multiple of n_kv_heads");
  uint32_t head_dim = s.head_dim;
  if (head_dim == 0) {
    if (s.n_embd % s.n_heads != 0) bad_spec("n_embd must be a multiple of n_heads");
    head_dim = s.n_embd / s.n_heads;
  }
  if (head_dim % 2 != 0) bad_spec("head_dim must be even (RoPE rotates pairs)");
  if (!quant::can_quantize(s.weight_type) && s.weight_type != GgmlType::kF32) {
    bad_spec("weight type " + std::string(gguf::ggml_type_name(s.weight_type)) +
             " cannot be produced by the quant module");
  }
  if (s.embedding_type && !quant::can_quantize(*s.embedding_type) &&
      *s.embedding_type != GgmlType::kF32) {
    bad_spec("embedding type " + std::string(gguf::ggml_type_name(*s.embedding_type)) +
             " cannot be produced by the quant module");
  }
  if (s.embedding_type) {
    check_divides(gguf::ggml_type_info(*s.embedding_type).block_size, s.n_embd, "n_embd",
                  *s.embedding_type);
  }
  uint64_t block = gguf::ggml_type_info(s.weight_type).block_size;
  check_divides(block, s.n_embd, "n_embd", s.weight_type);
  check_divides(block, s.n_ff, "n_ff", s.weight_type);
  check_divides(block, uint64_t{s.n_heads} * head_dim, "n_heads x head_dim", s.weight_type);
  return Shape{head_dim, s.n_heads * head_dim, s.n_kv_heads * head_dim};
}

class TensorEmitter {
 public:
  TensorEmitter(const TinyModelSpec& spec, gguf::GgufWriter& writer) : spec_(spec), w_(writer) {}

  void matrix(const std::string& name, uint64_t ne0, uint64_t ne1) {
    matrix(name, ne0, ne1, spec_.weight_type);
  }

  void matrix(const std::string& name, uint64_t ne0, uint64_t ne1, GgmlType type) {
    std::vector<uint64_t> ne = {ne0, ne1};
    if (spec_.fast_weights) {
      w_.add_tensor(
          name, type, ne,
          fast_weight_bytes(type, ne0 * ne1, spec_.seed ^ fnv1a(name), spec_.weight_stddev));
      return;
    }
    std::vector<float> values = tiny_tensor_values(spec_, name, ne0 * ne1);
    emit(name, type, ne, values);
  }

  // Norm weights hover around 1, biases around 0.
  void vector(const std::string& name, uint64_t n, float center) {
    std::vector<float> values = tiny_tensor_values(spec_, name, n);
    for (float& v : values) v += center;
    std::vector<uint64_t> ne = {n};
    emit(name, GgmlType::kF32, ne, values);
  }

 private:
  void emit(const std::string& name, GgmlType type, const std::vector<uint64_t>& ne,
            const std::vector<float>& values) {
    std::vector<uint8_t> bytes;
    if (type == GgmlType::kF32) {
      bytes.resize(values.size() * sizeof(float));
      std::memcpy(bytes.data(), values.data(), bytes.size());
    } else {
      bytes.resize(quant::quantized_row_bytes(type, static_cast<int64_t>(values.size())));
      quant::quantize_row(type, values.data(), bytes.data(), static_cast<int64_t>(values.size()));
    }
    w_.add_tensor(name, type, ne, std::move(bytes));
  }

  const TinyModelSpec& spec_;
  gguf::GgufWriter& w_;
};

void write_tokenizer(const TinyModelSpec& spec, const TinyVocabulary& v, gguf::GgufWriter& w) {
  bool bpe = spec.tokenizer == TinyTokenizerKind::kByteLevelBpe;
  w.set_string("tokenizer.ggml.model", bpe ? "gpt2" : "llama");
  w.set_string("tokenizer.ggml.pre", bpe ? "qwen2" : "default");
  w.set_strings("tokenizer.ggml.tokens", v.tokens);
  w.set_i32s("tokenizer.ggml.token_type", v.token_types);
  if (bpe) {
    w.set_strings("tokenizer.ggml.merges", v.merges);
  } else {
    w.set_f32s("tokenizer.ggml.scores", v.scores);
    w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
  }
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
  w.set_bool("tokenizer.ggml.add_bos_token", !bpe);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  if (!spec.chat_template.empty()) w.set_string("tokenizer.chat_template", spec.chat_template);
}

}  // namespace

TinyVocabulary make_tiny_vocabulary(TinyTokenizerKind kind) {
  return kind == TinyTokenizerKind::kByteLevelBpe ? byte_level_vocabulary()
                                                  : sentence_piece_vocabulary();
}

namespace {

// Where a block keeps its f16 scales (d, then dmin or m where the format has one), as bytes
// from the block's start (quant/blocks.h); d_per_stddev: the d that gives decoded values an RMS
// of about `stddev` when codes (and a K-quant's sub-block scales) are uniform random: 1 / the
// RMS of code x scale. min_per_d: the second scale as a multiple of d (Q4_1 / Q5_1 centre their
// codes with a negative m; a K-quant's dmin equals d).
struct BlockScales {
  int d_offset = -1;    // -1: a plain type (F32, F16, BF16)
  int min_offset = -1;  // -1: none
  float d_per_stddev = 0.0f;
  float min_per_d = 0.0f;
};

BlockScales block_scales(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return {0, -1, 1.0f / 4.6f, 0.0f};
    case GgmlType::kQ4_1:
      return {0, 2, 1.0f / 4.6f, -7.5f};
    case GgmlType::kQ5_0:
      return {0, -1, 1.0f / 9.2f, 0.0f};
    case GgmlType::kQ5_1:
      return {0, 2, 1.0f / 9.2f, -15.5f};
    case GgmlType::kQ8_0:
      return {0, -1, 1.0f / 74.0f, 0.0f};
    case GgmlType::kQ2_K:
      return {80, 82, 1.0f / 19.0f, 1.0f};
    case GgmlType::kQ3_K:
      return {108, -1, 1.0f / 42.0f, 0.0f};
    case GgmlType::kQ4_K:
      return {0, 2, 1.0f / 311.0f, 1.0f};
    case GgmlType::kQ5_K:
      return {0, 2, 1.0f / 648.0f, 1.0f};
    case GgmlType::kQ6_K:
      return {208, -1, 1.0f / 1370.0f, 0.0f};
    default:
      return {};
  }
}

// A small fast generator (SplitMix64): the bytes need no statistical quality, only speed and
// determinism.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float unit() {
    return static_cast<float>(static_cast<int64_t>(next() >> 11) - (int64_t{1} << 52)) * 0x1.0p-52f;
  }
};

}  // namespace

std::vector<uint8_t> fast_weight_bytes(GgmlType type, uint64_t n_elements, uint64_t seed,
                                       float stddev, unsigned n_threads) {
  const gguf::GgmlTypeInfo& info = gguf::ggml_type_info(type);
  if (n_elements % info.block_size != 0) bad_spec("fast weights: not a whole number of blocks");
  const bool plain = type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
  if (!plain && block_scales(type).d_offset < 0) {
    bad_spec("fast weights: no fast fill for " + std::string(gguf::ggml_type_name(type)));
  }
  const uint64_t n_blocks = n_elements / info.block_size;
  std::vector<uint8_t> bytes(n_blocks * info.type_size);
  const BlockScales scales = block_scales(type);
  const float d = stddev * scales.d_per_stddev;
  const uint16_t d_bits = quant::fp32_to_fp16(d);
  const uint16_t min_bits = quant::fp32_to_fp16(d * scales.min_per_d);
  // Chunks of blocks, each seeded by its index: the bytes do not depend on the thread count.
  constexpr uint64_t kChunkBlocks = 4096;
  const uint64_t n_chunks = (n_blocks + kChunkBlocks - 1) / kChunkBlocks;
  std::atomic<uint64_t> next_chunk{0};
  auto work = [&] {
    for (uint64_t c = next_chunk++; c < n_chunks; c = next_chunk++) {
      SplitMix rng{seed * 0x2545f4914f6cdd1dull + c};
      const uint64_t first = c * kChunkBlocks;
      const uint64_t last = std::min(n_blocks, first + kChunkBlocks);
      uint8_t* p = bytes.data() + first * info.type_size;
      uint8_t* end = bytes.data() + last * info.type_size;
      if (scales.d_offset < 0) {
        // Plain types: random values, not random bits (which could be NaN or infinity).
        for (; p < end; p += info.type_size) {
          const float v = rng.unit() * stddev * 1.7320508f;  // uniform with that deviation
          if (type == GgmlType::kF32) {
            std::memcpy(p, &v, sizeof v);
          } else {
            const uint16_t h =
                type == GgmlType::kF16 ? quant::fp32_to_fp16(v) : quant::fp32_to_bf16(v);
            std::memcpy(p, &h, sizeof h);
          }
        }
        continue;
      }
      for (uint8_t* q = p; q < end; q += 8) {
        const uint64_t r = rng.next();
        std::memcpy(q, &r, static_cast<size_t>(std::min<ptrdiff_t>(8, end - q)));
      }
      for (; p < end; p += info.type_size) {
        std::memcpy(p + scales.d_offset, &d_bits, sizeof d_bits);
        if (scales.min_offset >= 0) std::memcpy(p + scales.min_offset, &min_bits, sizeof min_bits);
      }
    }
  };
  if (n_threads == 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  n_threads = static_cast<unsigned>(std::min<uint64_t>({n_threads, n_chunks, 256}));
  std::vector<std::thread> threads;
  try {
    for (unsigned t = 1; t < n_threads; ++t) threads.emplace_back(work);
  } catch (...) {
    // No more threads to be had: the ones started and this one finish the chunks.
  }
  work();
  for (std::thread& t : threads) t.join();
  return bytes;
}

std::vector<float> tiny_tensor_values(const TinyModelSpec& spec, const std::string& tensor_name,
                                      uint64_t n_elements) {
  // Seeded per tensor name, so a tensor's values do not depend on which tensors precede it.
  std::mt19937_64 rng(spec.seed ^ fnv1a(tensor_name));
  std::vector<float> values(n_elements);
  // Box-Muller on the raw generator: unlike std::normal_distribution its output is the same
  // with every standard library.
  constexpr double kTwoPi = 6.283185307179586;
  for (uint64_t i = 0; i < n_elements; i += 2) {
    double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;          // [0, 1)
    double r = std::sqrt(-2.0 * std::log(u1)) * spec.weight_stddev;
    values[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n_elements) values[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
  return values;
}

gguf::GgufWriter build_tiny_model(const TinyModelSpec& spec) {
  Shape shape = validate(spec);
  const std::string& arch = spec.architecture;
  bool is_gemma = arch == "gemma3";
  TinyVocabulary vocab = make_tiny_vocabulary(spec.tokenizer);
  if (spec.n_vocab != 0 && spec.n_vocab < vocab.tokens.size()) {
    bad_spec("n_vocab " + std::to_string(spec.n_vocab) + " is below the tokenizer's " +
             std::to_string(vocab.tokens.size()) + " tokens");
  }
  while (vocab.tokens.size() < spec.n_vocab) {
    vocab.tokens.push_back("<|unused_" + std::to_string(vocab.tokens.size()) + "|>");
    vocab.token_types.push_back(5);
    if (!vocab.scores.empty()) vocab.scores.push_back(-1e9f);
  }
  const uint64_t n_vocab = vocab.tokens.size();
  const GgmlType embedding_type = spec.embedding_type.value_or(spec.weight_type);

  gguf::GgufWriter w;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "llmserve tiny " + arch);
  w.set_u32(arch + ".block_count", spec.n_layers);
  w.set_u32(arch + ".context_length", spec.n_ctx);
  w.set_u32(arch + ".embedding_length", spec.n_embd);
  w.set_u32(arch + ".feed_forward_length", spec.n_ff);
  w.set_u32(arch + ".attention.head_count", spec.n_heads);
  w.set_u32(arch + ".attention.head_count_kv", spec.n_kv_heads);
  w.set_f32(arch + ".rope.freq_base", spec.rope_freq_base);
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  if (spec.head_dim != 0 || is_gemma) {
    w.set_u32(arch + ".attention.key_length", shape.head_dim);
    w.set_u32(arch + ".attention.value_length", shape.head_dim);
  }
  if (is_gemma) {
    w.set_u32(arch + ".attention.sliding_window", spec.sliding_window ? spec.sliding_window : 64);
  }
  write_tokenizer(spec, vocab, w);

  TensorEmitter t(spec, w);
  t.matrix("token_embd.weight", spec.n_embd, n_vocab, embedding_type);
  t.vector("output_norm.weight", spec.n_embd, 1.0f);
  if (!spec.tie_embeddings && !is_gemma) t.matrix("output.weight", spec.n_embd, n_vocab);
  for (uint32_t i = 0; i < spec.n_layers; ++i) {
    std::string p = "blk." + std::to_string(i) + ".";
    t.vector(p + "attn_norm.weight", spec.n_embd, 1.0f);
    t.matrix(p + "attn_q.weight", spec.n_embd, shape.q_width);
    t.matrix(p + "attn_k.weight", spec.n_embd, shape.kv_width);
    t.matrix(p + "attn_v.weight", spec.n_embd, shape.kv_width);
    t.matrix(p + "attn_output.weight", shape.q_width, spec.n_embd);
    if (arch == "qwen2") {
      t.vector(p + "attn_q.bias", shape.q_width, 0.0f);
      t.vector(p + "attn_k.bias", shape.kv_width, 0.0f);
      t.vector(p + "attn_v.bias", shape.kv_width, 0.0f);
    }
    if (arch == "qwen3" || is_gemma) {
      t.vector(p + "attn_q_norm.weight", shape.head_dim, 1.0f);
      t.vector(p + "attn_k_norm.weight", shape.head_dim, 1.0f);
    }
    if (is_gemma) {
      t.vector(p + "post_attention_norm.weight", spec.n_embd, 1.0f);
      t.vector(p + "post_ffw_norm.weight", spec.n_embd, 1.0f);
    }
    t.vector(p + "ffn_norm.weight", spec.n_embd, 1.0f);
    t.matrix(p + "ffn_gate.weight", spec.n_embd, spec.n_ff);
    t.matrix(p + "ffn_up.weight", spec.n_embd, spec.n_ff);
    t.matrix(p + "ffn_down.weight", spec.n_ff, spec.n_embd);
  }
  return w;
}

void write_tiny_model(const TinyModelSpec& spec, const std::filesystem::path& path) {
  build_tiny_model(spec).write(path);
}

}  // namespace llms::model
