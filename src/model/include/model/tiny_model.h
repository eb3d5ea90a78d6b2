// model/tiny_model: writes small GGUF model files with random weights and a real tokenizer.
//
// Tests must not need a download, so the project makes its own models: chosen shapes, any weight
// type the quant module can produce, the tensor names and metadata keys each architecture's
// loader expects, and a small but complete tokenizer (byte-level BPE like Qwen's, or a
// SentencePiece-style vocabulary with byte fallback like Gemma's). Same spec and seed, same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_writer.h"

namespace llms::model {

enum class TinyTokenizerKind {
  kByteLevelBpe,      // tokenizer.ggml.model "gpt2", pre "qwen2": 256 byte tokens, merges, specials
  kSentencePieceLike  // tokenizer.ggml.model "llama": <0xNN> byte fallback, scored pieces, specials
};

struct TinyModelSpec {
  std::string architecture = "qwen2";  // llama, qwen2, qwen3, gemma3
  uint32_t n_layers = 2;
  uint32_t n_embd = 64;
  uint32_t n_ff = 128;
  uint32_t n_heads = 4;
  uint32_t n_kv_heads = 2;
  uint32_t head_dim = 0;  // 0: n_embd / n_heads
  uint32_t n_ctx = 512;
  uint32_t sliding_window = 0;  // gemma3 only; 0 = the architecture's default (here 64)
  float rope_freq_base = 10000.0f;
  // Type of every 2-D weight matrix (embedding included); norms and biases are always F32.
  gguf::GgmlType weight_type = gguf::GgmlType::kF32;
  // Type of token_embd (and of output when tied); unset: weight_type. Benchmarks use it to match
  // the mixes quantizers write (e.g. llama.cpp's Q4_0 files keep a Q8_0 embedding).
  std::optional<gguf::GgmlType> embedding_type;
  // Vocabulary rows; 0 or the tokenizer's own size: no padding. Larger sizes append unused tokens
  // (type 5, never produced by the tokenizer) so a model can have a real model's vocabulary shape.
  uint32_t n_vocab = 0;
  bool tie_embeddings = false;  // gemma3 always ties
  uint64_t seed = 1;
  float weight_stddev = 0.05f;
  TinyTokenizerKind tokenizer = TinyTokenizerKind::kByteLevelBpe;
  std::string chat_template;  // written as tokenizer.chat_template when not empty
  // Speed runs of real shapes (a 7B in seconds, not the reference quantizer's hour): every
  // matrix is random block bytes with fixed scales (values of about weight_stddev, no NaN or
  // infinity), made on every core; the model computes nothing meaningful. Same spec and seed,
  // same bytes, whatever the core count.
  bool fast_weights = false;
};

// The bytes of n_elements values of `type` (a whole number of its blocks) as fast_weights makes
// them: random quantized codes, each block's scales fixed so values stay near `stddev`, made on
// n_threads threads (0: every core). Throws llms::Error(kInvalidArgument) for a type it has no
// fill for (Q8_1, Q8_K).
std::vector<uint8_t> fast_weight_bytes(gguf::GgmlType type, uint64_t n_elements, uint64_t seed,
                                       float stddev, unsigned n_threads = 0);

// The tokenizer vocabulary the spec produces (also what the file's tokenizer.ggml.* keys hold).
struct TinyVocabulary {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 6 byte
  std::vector<float> scores;         // SentencePiece-like only
  std::vector<std::string> merges;   // byte-level BPE only, "left right"
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
};

TinyVocabulary make_tiny_vocabulary(TinyTokenizerKind kind);

// The random float weights of one tensor, before conversion to the spec's weight type, so tests
// can compare what they read back with what was meant.
std::vector<float> tiny_tensor_values(const TinyModelSpec& spec, const std::string& tensor_name,
                                      uint64_t n_elements);

// Builds the whole file; throws llms::Error(kInvalidArgument) naming the field when the spec
// cannot make a valid model (e.g. a row length that is not a multiple of the weight type's block).
gguf::GgufWriter build_tiny_model(const TinyModelSpec& spec);
void write_tiny_model(const TinyModelSpec& spec, const std::filesystem::path& path);

}  // namespace llms::model
