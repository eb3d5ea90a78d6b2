// tokenizer/pre_tokenizer: the regex split that byte-level BPE applies before merging.
//
// Contract: split() reproduces tokenizers' Split(pattern, behavior="isolated") (and ByteLevel's
// own regex split, which behaves the same): every match is one piece, and every stretch of text
// between matches is one piece too, in order, so the pieces concatenate to the input.
//
// The patterns are Hugging Face's (run there by Oniguruma), rewritten for PCRE2 with UTF and UCP
// where the engines differ: `\s` is spelled out as Oniguruma's Unicode set (U+0009..000D, U+0085
// and the Z categories), because PCRE2's \s also matches U+180E. The input must be valid UTF-8
// (the tokenizer repairs it first). The patterns only use single-character repeats, so matching
// is linear in the length of the text (no nested quantifiers that could backtrack without bound).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace llms::tokenizer {

// The PCRE2 pattern HF uses for a GGUF `tokenizer.ggml.pre` name. Names HF does not map fall back
// to GPT-2's ByteLevel regex, as HF's GPT2Tokenizer does.
std::string pre_tokenizer_pattern(std::string_view pre_name);

class RegexSplitter {
 public:
  explicit RegexSplitter(const std::string& pattern);  // throws llms::Error if it does not compile
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;
  ~RegexSplitter();

  // Calls fn(std::string_view piece) for every piece of `text` (valid UTF-8), in order.
  template <typename Fn>
  void split(std::string_view text, Fn&& fn) const {
    Cursor cursor(*this, text);
    size_t begin = 0;
    size_t end = 0;
    size_t last = 0;
    while (cursor.next(begin, end)) {
      if (begin > last) fn(text.substr(last, begin - last));
      fn(text.substr(begin, end - begin));
      last = end;
    }
    if (last < text.size()) fn(text.substr(last));
  }

 private:
  // Iterates non-empty matches left to right; owns the per-call PCRE2 match data, so one
  // RegexSplitter can be used from many threads at once.
  class Cursor {
   public:
    Cursor(const RegexSplitter& splitter, std::string_view text);
    ~Cursor();
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;
    bool next(size_t& begin, size_t& end);

   private:
    const RegexSplitter& splitter_;
    std::string_view text_;
    size_t offset_ = 0;
    void* match_data_ = nullptr;
  };

  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace llms::tokenizer
