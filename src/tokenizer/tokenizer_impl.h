// tokenizer/tokenizer_impl: the immutable state behind a Tokenizer (internal to the module).
//
// Invariants after build (tokenizer_build.cpp): every vector indexed by token id has n_vocab
// entries; every id stored anywhere (merges, added tokens, byte tables, specials) is in
// [0, n_vocab); all strings are valid UTF-8 except token_bytes pieces (which are raw bytes).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "added_tokens.h"
#include "bpe.h"
#include "flat_map.h"
#include "pre_tokenizer.h"
#include "string_index.h"
#include "tokenizer/tokenizer.h"

namespace llms::tokenizer {

// Many short strings in one buffer: 262k tokens cost one allocation, not 262k.
class StringTable {
 public:
  void push_back(std::string_view s) {
    data_.append(s);
    ends_.push_back(data_.size());
  }
  std::string_view operator[](size_t i) const {
    const size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(data_).substr(begin, ends_[i] - begin);
  }
  size_t size() const { return ends_.size(); }

 private:
  std::string data_;
  std::vector<size_t> ends_;
};

// How a SentencePiece-style tokenizer puts U+2581 in front of the text.
enum class SpmPrepend {
  kNever,   // Gemma
  kFirst,   // Metaspace(prepend_scheme="first"): the segment at offset 0, unless it starts with it
  kAlways,  // Phi-3: normalizers.Prepend on every non-empty segment
};

struct Tokenizer::Impl {
  Impl() = default;
  Impl(const Impl&) = delete;  // `vocab` points into `spelled`
  Impl& operator=(const Impl&) = delete;

  uint64_t uid = 0;  // unique per process lifetime (keys the per-thread piece cache)
  ModelKind kind = ModelKind::kByteLevelBpe;
  std::string pre;
  int32_t n_vocab = 0;

  StringTable text;     // as in the file (UTF-8 repaired)
  StringTable spelled;  // as HF's model vocabulary spells it (byte alphabet / respelled spaces)
  StringTable bytes;    // what the token decodes to on its own
  std::vector<TokenType> types;
  std::vector<uint8_t> special;     // 1 = skipped by skip_special
  std::vector<int16_t> byte_value;  // SPM: the byte of a <0xNN> token for ByteFallback, else -1
  struct SpelledText {
    const StringTable* table;
    std::string_view operator()(int32_t id) const { return (*table)[static_cast<size_t>(id)]; }
  };
  StringIndex<SpelledText> vocab{SpelledText{&spelled}};  // spelled -> id (the last one wins)

  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t unk_id = kNoToken;
  int32_t pad_id = kNoToken;
  bool add_bos = false;
  bool add_eos = false;

  AddedTokenMatcher added;
  BpeMerges merges;

  // Byte-level BPE.
  std::array<int32_t, 256> byte_symbol{};  // id of the one-character token of each byte, or -1
  std::optional<RegexSplitter> splitter;

  // SentencePiece-style BPE.
  FlatMap<int32_t> char_symbol;              // code point -> id of the one-character token
  std::array<int32_t, 256> fallback_byte{};  // id of <0xNN>, or -1
  int32_t spm_unk = kNoToken;      // symbol for characters with neither a token nor byte tokens
  FlatMap<uint8_t> bigrams;        // (cp, cp) pairs that occur inside some token's spelling
  std::vector<char32_t> first_cp;  // first / last code point of each token's spelling
  std::vector<char32_t> last_cp;
  SpmPrepend prepend = SpmPrepend::kNever;
  bool strip_leading_space = false;  // decoders.Strip(" ", left=1) when a space was prepended

  bool valid_id(int32_t id) const { return id >= 0 && id < n_vocab; }
  void encode_segment(std::string_view segment, bool at_text_start, std::vector<int32_t>& out,
                      BpeScratch& scratch, std::vector<int32_t>& symbols) const;
  void encode_byte_level(std::string_view segment, std::vector<int32_t>& out, BpeScratch& scratch,
                         std::vector<int32_t>& symbols) const;
  void encode_spm(std::string_view segment, bool at_text_start, std::vector<int32_t>& out,
                  BpeScratch& scratch, std::vector<int32_t>& symbols) const;
};

// GPT-2's byte <-> unicode alphabet (bytes_to_unicode).
char32_t byte_to_char(uint8_t byte);
// The byte a character of the alphabet stands for, or -1.
int byte_of_char(char32_t cp);

}  // namespace llms::tokenizer
