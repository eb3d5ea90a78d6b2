// tokenizer/tokenizer: text <-> token ids for the models llmserve serves, identical to Hugging
// Face's tokenizer for the same GGUF file (transformers' GGUF conversion + `tokenizers`).
//
// Two model families, picked by `tokenizer.ggml.model`:
//  - "gpt2": byte-level BPE (GPT-2 byte-to-unicode alphabet, ranked merges from the file) after a
//    regex pre-tokenizer chosen by `tokenizer.ggml.pre` (Qwen2, Llama 3, GPT-2, GPT-4o, ...).
//  - "llama": SentencePiece-style BPE with byte fallback (<0xNN> tokens): spaces become U+2581
//    and merges are derived from the vocabulary, as transformers does for GGUF files. Gemma
//    files rank merges by token order; other "llama" files rank them by score and prepend U+2581
//    to the text (Metaspace) unless `tokenizer.ggml.add_space_prefix` is false.
//
// Control tokens (type 3) and the named special tokens (BOS/EOS/UNK/PAD) are "special": their
// text in the input is recognised only with EncodeOptions::parse_special, or only at chosen
// offsets with encode_with_special_at (a chat prompt's template scaffolding, chat_prompt.h);
// otherwise a user who types "<|im_end|>" gets those characters. User-defined tokens (type 4,
// e.g. "<tool_call>", Gemma's "<table>" and newline runs) are always recognised, as in HF.
//
// Invalid UTF-8 input: each maximal ill-formed subpart is replaced by U+FFFD before tokenizing
// (what Rust's String::from_utf8_lossy and Python's decode("utf-8", "replace") do; HF itself only
// ever sees valid strings). Decoding produces valid UTF-8 the same way HF does: byte-level output
// is the lossy conversion of all bytes; a run of <0xNN> tokens that is not valid UTF-8 becomes one
// U+FFFD per byte (tokenizers' ByteFallback decoder).
//
// Cost: encoding is O(n log n) in the text length for any input (merges use a heap; regexes have
// no unbounded backtracking). A Tokenizer is immutable after construction; copies share state and
// all const methods may be called from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llms::gguf {
class GgufFile;
}

namespace llms::tokenizer {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class ModelKind {
  kByteLevelBpe,      // "gpt2"
  kSentencePieceBpe,  // "llama"
};

inline constexpr int32_t kNoToken = -1;

// Everything a tokenizer is built from, as plain values (what the GGUF metadata holds), so tests
// and tools can build one without a file.
struct VocabSpec {
  ModelKind kind = ModelKind::kByteLevelBpe;
  std::string architecture;  // general.architecture: "gemma*" selects Gemma's SPM rules
  std::string pre;           // tokenizer.ggml.pre (byte-level pre-tokenizer name)
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // empty: all normal
  std::vector<std::string> merges;   // byte-level: "left right", best first
  std::vector<float> scores;         // SentencePiece: one per token (empty: all zero)
  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t unk_id = kNoToken;
  int32_t pad_id = kNoToken;
  std::optional<bool> add_bos;           // default: true for "llama", false for "gpt2"
  std::optional<bool> add_eos;           // default: false
  std::optional<bool> add_space_prefix;  // "llama" non-Gemma only; default true
};

struct EncodeOptions {
  bool add_special = true;     // add BOS/EOS where the model's metadata asks for them
  bool parse_special = false;  // recognise the text of special tokens in the input
};

// Where the text of a special token occurs in an input: bytes [begin, end) are token `id`.
struct SpecialTokenMatch {
  size_t begin = 0;
  size_t end = 0;
  int32_t id = kNoToken;
  friend bool operator==(const SpecialTokenMatch&, const SpecialTokenMatch&) = default;
};

struct DecodeOptions {
  bool skip_special = false;  // leave out special tokens (control, BOS/EOS/UNK/PAD)
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* (and general.architecture); throws llms::Error naming the key on
  // missing or malformed metadata, kUnsupported for a tokenizer model we do not implement.
  static Tokenizer from_gguf(const gguf::GgufFile& file);
  // Same rules from plain values; throws llms::Error(kInvalidFile) naming the field.
  static Tokenizer from_spec(const VocabSpec& spec);

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // The special-token matches that encode(text, {.parse_special = true}) turns into tokens, in
  // order (added tokens are matched leftmost-longest, so these never overlap). Offsets are into
  // `text`, or into utf8_lossy(text) when `text` is not valid UTF-8.
  std::vector<SpecialTokenMatch> find_special(std::string_view text) const;
  // encode(text, {.add_special = add_special, .parse_special = true}), except that special-token
  // text becomes its token only at the matches listed in `allowed` (ascending, from
  // find_special(text)); anywhere else it is ordinary text, exactly as with parse_special off.
  // Entries of `allowed` that are not matches of find_special(text) are ignored. This is how a
  // chat prompt parses the template's own control tokens but not those a user typed.
  std::vector<int32_t> encode_with_special_at(std::string_view text,
                                              std::span<const SpecialTokenMatch> allowed,
                                              bool add_special = false) const;
  // Throws llms::Error(kInvalidArgument) for an id outside [0, n_vocab()).
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  int32_t n_vocab() const;
  ModelKind kind() const;
  const std::string& pre() const;
  // The token as the vocabulary spells it ("Ġthe", "▁the", "<0x0A>", "<|im_end|>").
  std::string_view token_text(int32_t id) const;
  // The bytes the token contributes when decoded on its own; may be part of a UTF-8 character
  // (byte-level pieces, <0xNN> tokens). For grammar masks and `llmserve tokenize`.
  std::string_view token_bytes(int32_t id) const;
  TokenType token_type(int32_t id) const;
  bool is_control(int32_t id) const;
  // Skipped by DecodeOptions::skip_special: control tokens and BOS/EOS/UNK/PAD.
  bool is_special(int32_t id) const;
  // Exact look-up of a token's text; nullopt when no token is spelled so.
  std::optional<int32_t> find_token(std::string_view text) const;

  int32_t bos_id() const;  // kNoToken when the model has none
  int32_t eos_id() const;
  int32_t unk_id() const;
  int32_t pad_id() const;
  bool add_bos() const;
  bool add_eos() const;
  // Tokens that end a generation: EOS plus the end-of-turn tokens of known chat formats that
  // exist in this vocabulary (<|im_end|>, <|endoftext|>, <end_of_turn>, <|eot_id|>, ...).
  std::vector<int32_t> end_of_generation_ids() const;

  struct Impl;  // defined inside the module

 private:
  friend class DecodeStream;
  const Impl& impl() const { return *impl_; }
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// The streaming form of Tokenizer::decode: feed ids one at a time and get text as soon as it is
// settled. The concatenation of everything push() and finish() append equals decode() of all
// ids. Text is held back only while it may still change: a byte-level piece that ends inside a
// UTF-8 character, or a run of <0xNN> tokens (HF decides a whole run at once).
class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, DecodeOptions options = {});
  // Appends the text that `id` settles to `out`; throws like decode() on a bad id.
  void push(int32_t id, std::string& out);
  // Appends whatever is still held (an unfinished character becomes U+FFFD) and resets.
  void finish(std::string& out);

 private:
  void emit(std::string_view text, std::string& out);
  void flush_bytes(std::string& out, bool final);

  const Tokenizer::Impl* impl_;
  DecodeOptions options_;
  std::string pending_;   // bytes not yet settled
  bool at_start_ = true;  // nothing emitted yet (for the SPM leading-space strip)
};

}  // namespace llms::tokenizer
