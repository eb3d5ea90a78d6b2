// tokenizer/pre_tokenizer: PCRE2 versions of Hugging Face's pre-tokenizer regexes (see the
// header for the contract and for why `\s` is spelled out).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pre_tokenizer.h"

#include <pcre2.h>

#include <array>
#include <utility>

#include "util/error.h"

namespace llms::tokenizer {

namespace {

// Oniguruma's Unicode \s: U+0009..000D, U+0085, Space_Separator, Line_Separator,
// Paragraph_Separator. For use inside a character class.
#define LLMS_WS \
  "\\t-\\r "    \
  "\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define LLMS_S "[" LLMS_WS "]"
#define LLMS_NOT_S "[^" LLMS_WS "]"
#define LLMS_CONTRACTIONS "'s|'t|'re|'ve|'m|'ll|'d"

// Code points that HF's Oniguruma (Unicode 16) puts in a category that PCRE2 10.42 (Unicode 14)
// leaves unassigned. Found by comparing both engines on every code point (the reverse set is
// empty); added to the classes so that letters of new scripts split as they do in HF.
#define LLMS_NEW_L                                                                 \
  "\\x{1c89}-\\x{1c8a}\\x{a7cb}-\\x{a7cd}\\x{a7da}-\\x{a7dc}\\x{105c0}-\\x{105f3}" \
  "\\x{10d4a}-\\x{10d65}\\x{10d6f}-\\x{10d85}\\x{10ec2}-\\x{10ec4}"                \
  "\\x{1123f}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138b}\\x{1138e}"                 \
  "\\x{11390}-\\x{113b5}\\x{113b7}\\x{113d1}\\x{113d3}\\x{11bc0}-\\x{11be0}"       \
  "\\x{11f02}\\x{11f04}-\\x{11f10}\\x{11f12}-\\x{11f33}\\x{1342f}"                 \
  "\\x{13441}-\\x{13446}\\x{13460}-\\x{143fa}\\x{16100}-\\x{1611d}"                \
  "\\x{16d40}-\\x{16d6c}\\x{18cff}\\x{1b132}\\x{1b155}\\x{1df25}-\\x{1df2a}"       \
  "\\x{1e030}-\\x{1e06d}\\x{1e4d0}-\\x{1e4eb}\\x{1e5d0}-\\x{1e5ed}\\x{1e5f0}"      \
  "\\x{2b739}\\x{2ebf0}-\\x{2ee5d}\\x{31350}-\\x{323af}"
#define LLMS_NEW_N                                                  \
  "\\x{10d40}-\\x{10d49}\\x{116d0}-\\x{116e3}\\x{11bf0}-\\x{11bf9}" \
  "\\x{11f50}-\\x{11f59}\\x{16130}-\\x{16139}\\x{16d70}-\\x{16d79}" \
  "\\x{1ccf0}-\\x{1ccf9}\\x{1d2c0}-\\x{1d2d3}\\x{1e4f0}-\\x{1e4f9}" \
  "\\x{1e5f1}-\\x{1e5fa}"
#define LLMS_NEW_M                                                               \
  "\\x{897}\\x{cf3}\\x{ece}\\x{10d69}-\\x{10d6d}\\x{10efc}-\\x{10eff}\\x{11241}" \
  "\\x{113b8}-\\x{113c0}\\x{113c2}\\x{113c5}\\x{113c7}-\\x{113ca}"               \
  "\\x{113cc}-\\x{113d0}\\x{113d2}\\x{113e1}-\\x{113e2}\\x{11f00}-\\x{11f01}"    \
  "\\x{11f03}\\x{11f34}-\\x{11f3a}\\x{11f3e}-\\x{11f42}\\x{11f5a}\\x{13440}"     \
  "\\x{13447}-\\x{13455}\\x{1611e}-\\x{1612f}\\x{1e08f}\\x{1e4ec}-\\x{1e4ef}"    \
  "\\x{1e5ee}-\\x{1e5ef}"
#define LLMS_NEW_LU "\\x{1c89}\\x{a7cb}-\\x{a7cc}\\x{a7da}\\x{a7dc}\\x{10d50}-\\x{10d65}"
#define LLMS_NEW_LL "\\x{1c8a}\\x{a7cd}\\x{a7db}\\x{10d70}-\\x{10d85}\\x{1df25}-\\x{1df2a}"
#define LLMS_NEW_LM \
  "\\x{10d4e}\\x{10d6f}\\x{16d40}-\\x{16d42}\\x{16d6b}-\\x{16d6c}\\x{1e030}-\\x{1e06d}\\x{1e4eb}"
#define LLMS_NEW_LO                                                           \
  "\\x{105c0}-\\x{105f3}\\x{10d4a}-\\x{10d4d}\\x{10d4f}\\x{10ec2}-\\x{10ec4}" \
  "\\x{1123f}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138b}\\x{1138e}"            \
  "\\x{11390}-\\x{113b5}\\x{113b7}\\x{113d1}\\x{113d3}\\x{11bc0}-\\x{11be0}"  \
  "\\x{11f02}\\x{11f04}-\\x{11f10}\\x{11f12}-\\x{11f33}\\x{1342f}"            \
  "\\x{13441}-\\x{13446}\\x{13460}-\\x{143fa}\\x{16100}-\\x{1611d}"           \
  "\\x{16d43}-\\x{16d6a}\\x{18cff}\\x{1b132}\\x{1b155}\\x{1e4d0}-\\x{1e4ea}"  \
  "\\x{1e5d0}-\\x{1e5ed}\\x{1e5f0}\\x{2b739}\\x{2ebf0}-\\x{2ee5d}\\x{31350}-\\x{323af}"

// Class bodies (without brackets): \p{L}, \p{N}, \p{M} as Oniguruma has them.
#define LLMS_L "\\p{L}" LLMS_NEW_L
#define LLMS_N "\\p{N}" LLMS_NEW_N
#define LLMS_M "\\p{M}" LLMS_NEW_M
#define LLMS_UPPERISH "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}" LLMS_NEW_LU LLMS_NEW_LM LLMS_NEW_LO LLMS_M "]"
#define LLMS_LOWERISH "[\\p{Ll}\\p{Lm}\\p{Lo}" LLMS_NEW_LL LLMS_NEW_LM LLMS_NEW_LO LLMS_M "]"
#define LLMS_SPACES_TAIL "|" LLMS_S "*[\\r\\n]+|" LLMS_S "+(?!" LLMS_NOT_S ")|" LLMS_S "+"

// tokenizers' ByteLevel regex (GPT-2).
constexpr const char* kGpt2 =
    LLMS_CONTRACTIONS "| ?[" LLMS_L "]+| ?[" LLMS_N "]+| ?[^" LLMS_WS LLMS_L LLMS_N "]+|" LLMS_S
                      "+(?!" LLMS_NOT_S ")|" LLMS_S "+";

// Llama 3 (tiktoken cl100k style): digits in groups of at most three.
constexpr const char* kLlama3 =
    "(?i:" LLMS_CONTRACTIONS ")|[^\\r\\n" LLMS_L LLMS_N "]?[" LLMS_L "]+|[" LLMS_N
    "]{1,3}| ?[^" LLMS_WS LLMS_L LLMS_N "]+[\\r\\n]*" LLMS_SPACES_TAIL;

// Qwen2: like Llama 3 but every digit on its own.
constexpr const char* kQwen2 =
    "(?i:" LLMS_CONTRACTIONS ")|[^\\r\\n" LLMS_L LLMS_N "]?[" LLMS_L "]+|[" LLMS_N
    "]| ?[^" LLMS_WS LLMS_L LLMS_N "]+[\\r\\n]*" LLMS_SPACES_TAIL;

// Qwen3.5: Qwen2 with combining marks kept with letters.
constexpr const char* kQwen35 =
    "(?i:" LLMS_CONTRACTIONS ")|[^\\r\\n" LLMS_L LLMS_N "]?[" LLMS_L LLMS_M "]+|[" LLMS_N
    "]| ?[^" LLMS_WS LLMS_L LLMS_M LLMS_N "]+[\\r\\n]*" LLMS_SPACES_TAIL;

// GPT-4o / Llama 4 (tiktoken o200k style).
constexpr const char* kGpt4o =
    "[^\\r\\n" LLMS_L LLMS_N "]?" LLMS_UPPERISH "*" LLMS_LOWERISH "+(?i:" LLMS_CONTRACTIONS
    ")?|[^\\r\\n" LLMS_L LLMS_N "]?" LLMS_UPPERISH "+" LLMS_LOWERISH "*(?i:" LLMS_CONTRACTIONS
    ")?|[" LLMS_N "]{1,3}| ?[^" LLMS_WS LLMS_L LLMS_N "]+[\\r\\n/]*" LLMS_SPACES_TAIL;

// Mistral Tekken.
constexpr const char* kTekken =
    "[^\\r\\n" LLMS_L LLMS_N "]?" LLMS_UPPERISH "*" LLMS_LOWERISH "+|[^\\r\\n" LLMS_L LLMS_N
    "]?" LLMS_UPPERISH "+" LLMS_LOWERISH "*|[" LLMS_N "]| ?[^" LLMS_WS LLMS_L LLMS_N
    "]+[\\r\\n/]*" LLMS_SPACES_TAIL;

#undef LLMS_SPACES_TAIL
#undef LLMS_LOWERISH
#undef LLMS_UPPERISH
#undef LLMS_M
#undef LLMS_N
#undef LLMS_L
#undef LLMS_NEW_LO
#undef LLMS_NEW_LM
#undef LLMS_NEW_LL
#undef LLMS_NEW_LU
#undef LLMS_NEW_M
#undef LLMS_NEW_N
#undef LLMS_NEW_L
#undef LLMS_CONTRACTIONS
#undef LLMS_NOT_S
#undef LLMS_S
#undef LLMS_WS

struct PreName {
  const char* name;
  const char* pattern;
};

// The table of transformers' GGUF_PRE_TOKENIZER_SPLITS (integrations/gguf).
constexpr std::array<PreName, 23> kPreNames = {{
    {"llama3", kLlama3},       {"llama-v3", kLlama3},
    {"llama-bpe", kLlama3},    {"falcon3", kLlama3},
    {"falcon-h1", kLlama3},    {"pixtral", kLlama3},
    {"midm-2.0", kLlama3},     {"lfm2", kLlama3},
    {"jina-v5-nano", kLlama3}, {"dbrx", kLlama3},
    {"smaug-bpe", kLlama3},    {"tekken", kTekken},
    {"qwen2", kQwen2},         {"deepseek-r1-qwen", kQwen2},
    {"kormo", kQwen2},         {"f2llmv2", kQwen2},
    {"megrez", kQwen2},        {"qwen35", kQwen35},
    {"gpt-4o", kGpt4o},        {"llama4", kGpt4o},
    {"kanana2", kGpt4o},       {"talkie", kGpt4o},
    {"minimax-m2", kGpt4o},
}};

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return reinterpret_cast<const char*>(buffer.data());
}

}  // namespace

std::string pre_tokenizer_pattern(std::string_view pre_name) {
  for (const PreName& p : kPreNames) {
    if (pre_name == p.name) return p.pattern;
  }
  return kGpt2;
}

RegexSplitter::RegexSplitter(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &error,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    throw Error(Error::Kind::kInvalidArgument,
                "tokenizer: pre-tokenizer regex does not compile at offset " +
                    std::to_string(error_offset) + ": " + pcre2_message(error));
  }
  // JIT is an optimisation only: without it the interpreter gives the same matches.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

RegexSplitter::RegexSplitter(RegexSplitter&& other) noexcept
    : code_(std::exchange(other.code_, nullptr)), jit_(other.jit_) {}

RegexSplitter& RegexSplitter::operator=(RegexSplitter&& other) noexcept {
  if (this != &other) {
    if (code_) pcre2_code_free(as_code(code_));
    code_ = std::exchange(other.code_, nullptr);
    jit_ = other.jit_;
  }
  return *this;
}

RegexSplitter::~RegexSplitter() {
  if (code_) pcre2_code_free(as_code(code_));
}

RegexSplitter::Cursor::Cursor(const RegexSplitter& splitter, std::string_view text)
    : splitter_(splitter), text_(text) {
  match_data_ = pcre2_match_data_create_from_pattern(as_code(splitter.code_), nullptr);
  if (match_data_ == nullptr) throw std::bad_alloc();
}

RegexSplitter::Cursor::~Cursor() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
}

bool RegexSplitter::Cursor::next(size_t& begin, size_t& end) {
  auto* md = static_cast<pcre2_match_data*>(match_data_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
  while (offset_ < text_.size()) {
    // The text was validated (or repaired) before splitting, so UTF checks are skipped.
    const int rc = splitter_.jit_ ? pcre2_jit_match(as_code(splitter_.code_), subject, text_.size(),
                                                    offset_, PCRE2_NO_UTF_CHECK, md, nullptr)
                                  : pcre2_match(as_code(splitter_.code_), subject, text_.size(),
                                                offset_, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      throw Error(Error::Kind::kInvalidArgument, "tokenizer: pre-tokenizer regex failed at byte " +
                                                     std::to_string(offset_) + ": " +
                                                     pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md);
    begin = ovector[0];
    end = ovector[1];
    if (end > begin) {
      offset_ = end;
      return true;
    }
    // An empty match (none of our patterns can produce one) must not stall the loop: step over
    // one code point and search again.
    offset_ = begin + 1;
    while (offset_ < text_.size() && (static_cast<uint8_t>(text_[offset_]) & 0xC0) == 0x80) {
      ++offset_;
    }
  }
  return false;
}

}  // namespace llms::tokenizer
