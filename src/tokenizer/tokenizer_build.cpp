// tokenizer/tokenizer_build: VocabSpec -> Tokenizer::Impl, following transformers' GGUF
// tokenizer conversion (integrations/gguf/gguf_tokenizer_mapping.py) rule by rule:
//  - byte-level: tokens outside the byte alphabet are respelled as the alphabet form of their
//    UTF-8 bytes; control tokens are added as special only when spelled in the alphabet;
//  - SentencePiece: tokens made only of whitespace that contain a space are respelled as U+2581
//    runs (Gemma), merges are derived from the vocabulary (spm_merges.h);
//  - user-defined tokens are added (always matched, not special) when their text is a token of
//    the model vocabulary; BOS/EOS/UNK/PAD are special.
// Every id that comes from the spec is range-checked here, so encode/decode never index out of
// bounds.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "spm_merges.h"
#include "tokenizer/byte_alphabet.h"
#include "tokenizer_impl.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::tokenizer {

namespace {

constexpr std::string_view kSpmSpaceUtf8 = "\xE2\x96\x81";

struct ByteAlphabet {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // the alphabet is U+0021..U+0143

  ByteAlphabet() {
    to_byte.fill(-1);
    for (int b = 0; b < 256; ++b) {
      to_char[b] = byte_level_char(static_cast<uint8_t>(b));
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

[[noreturn]] void fail(const std::string& what) {
  throw Error(Error::Kind::kInvalidFile, "tokenizer: " + what);
}

// Python's str.isspace() set, used by transformers' `not t.strip()`.
bool is_python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Calls fn(code_point, utf8_bytes) for each code point of valid UTF-8 `s`.
template <typename Fn>
void for_each_code_point(std::string_view s, Fn&& fn) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Step step = utf8_step(s, pos);
    fn(step.code_point, s.substr(pos, step.length));
    pos += step.length;
  }
}

bool all_in_byte_alphabet(std::string_view s) {
  bool ok = true;
  for_each_code_point(s, [&](char32_t cp, std::string_view) { ok = ok && byte_of_char(cp) >= 0; });
  return ok;
}

std::string to_byte_alphabet(std::string_view raw) {
  std::string out;
  for (char c : raw) append_utf8(byte_to_char(static_cast<uint8_t>(c)), out);
  return out;
}

// tokenizers' ByteLevel decoder on one token: the bytes its characters stand for, or the
// token's own UTF-8 when any character is outside the alphabet.
std::string byte_level_bytes(std::string_view s) {
  std::string out;
  bool ok = true;
  for_each_code_point(s, [&](char32_t cp, std::string_view) {
    const int b = byte_of_char(cp);
    if (b < 0) ok = false;
    if (ok) out.push_back(static_cast<char>(b));
  });
  return ok ? out : std::string(s);
}

std::string replace_spm_space(std::string_view s) {
  std::string out;
  for (size_t pos = 0; pos < s.size();) {
    if (s.substr(pos, 3) == kSpmSpaceUtf8) {
      out.push_back(' ');
      pos += 3;
    } else {
      out.push_back(s[pos++]);
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// tokenizers' ByteFallback decoder test: 6 bytes "<0x" XX ">", XX parsed by u8::from_str_radix
// (which also accepts a '+' sign before a single digit).
int fallback_byte_value(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  if (s[3] == '+') return hex_digit(s[4]);
  const int hi = hex_digit(s[3]);
  const int lo = hex_digit(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string hex_byte_token(int b) {
  constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

int32_t checked_special_id(int32_t id, int32_t n_vocab, const char* key) {
  if (id == kNoToken) return kNoToken;
  if (id < 0 || id >= n_vocab) {
    fail(std::string(key) + " = " + std::to_string(id) + " is not a token id (vocabulary has " +
         std::to_string(n_vocab) + " tokens)");
  }
  return id;
}

void build_byte_level(const VocabSpec& spec, Tokenizer::Impl& m) {
  // Model vocabulary spelling and the one-character symbol of each byte.
  for (int32_t id = 0; id < m.n_vocab; ++id) {
    const std::string_view text = m.text[id];
    m.spelled.push_back(all_in_byte_alphabet(text) ? std::string(text) : to_byte_alphabet(text));
  }
  m.vocab.reserve(static_cast<size_t>(m.n_vocab));
  for (int32_t id = 0; id < m.n_vocab; ++id) m.vocab.insert_or_assign(id);
  for (int b = 0; b < 256; ++b) {
    std::string one;
    append_utf8(byte_to_char(static_cast<uint8_t>(b)), one);
    m.byte_symbol[b] = m.vocab.find(one);
  }

  m.merges.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& line = spec.merges[rank];
    const size_t space = line.find(' ');
    const std::string where = "tokenizer.ggml.merges[" + std::to_string(rank) + "] \"" +
                              utf8_lossy(line.substr(0, 64)) + "\"";
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      fail(where + " is not two tokens separated by one space");
    }
    const std::string_view left(line.data(), space);
    const std::string_view right(line.data() + space + 1, line.size() - space - 1);
    const int32_t l = m.vocab.find(left);
    const int32_t r = m.vocab.find(right);
    const int32_t merged = m.vocab.find(std::string(left) + std::string(right));
    if (l < 0 || r < 0 || merged < 0) {
      fail(where + " names a token that is not in the vocabulary");
    }
    if (rank > static_cast<size_t>(std::numeric_limits<int32_t>::max())) fail(where + ": too many");
    m.merges.set(l, r, MergeRule{static_cast<int32_t>(rank), merged});
  }
  m.splitter.emplace(pre_tokenizer_pattern(spec.pre));
}

void build_sentencepiece(const VocabSpec& spec, Tokenizer::Impl& m) {
  const bool gemma = spec.architecture.rfind("gemma", 0) == 0;
  for (int32_t id = 0; id < m.n_vocab; ++id) {
    const std::string_view text = m.text[id];
    bool has_space = false;
    bool all_space = true;
    size_t n_cp = 0;
    for_each_code_point(text, [&](char32_t cp, std::string_view) {
      has_space = has_space || cp == ' ';
      all_space = all_space && is_python_space(cp);
      ++n_cp;
    });
    if (gemma && has_space && all_space) {
      std::string respelled;
      for (size_t i = 0; i < n_cp; ++i) respelled.append(kSpmSpaceUtf8);
      m.spelled.push_back(respelled);
    } else {
      m.spelled.push_back(text);
    }
  }
  m.vocab.reserve(static_cast<size_t>(m.n_vocab));
  for (int32_t id = 0; id < m.n_vocab; ++id) m.vocab.insert_or_assign(id);

  // Merge keys: Gemma ranks by position, the others by score.
  std::vector<double> key(static_cast<size_t>(m.n_vocab), 0.0);
  for (int32_t id = 0; id < m.n_vocab; ++id) {
    if (gemma) {
      key[id] = -static_cast<double>(id);
    } else if (!spec.scores.empty()) {
      if (std::isnan(spec.scores[id])) {
        fail("tokenizer.ggml.scores[" + std::to_string(id) + "] is NaN");
      }
      key[id] = spec.scores[id];
    }
  }
  std::vector<std::string_view> spelled(static_cast<size_t>(m.n_vocab));
  for (int32_t id = 0; id < m.n_vocab; ++id) spelled[id] = m.spelled[id];
  build_spm_merges(
      spelled, [&m](std::string_view text) { return m.vocab.find(text); }, key, m.merges);

  // Initial symbols, byte fallback, and the bigrams that make a chunk boundary unsafe.
  m.first_cp.assign(static_cast<size_t>(m.n_vocab), 0);
  m.last_cp.assign(static_cast<size_t>(m.n_vocab), 0);
  for (int32_t id = 0; id < m.n_vocab; ++id) {
    char32_t prev = 0;
    size_t n_cp = 0;
    for_each_code_point(m.spelled[id], [&](char32_t cp, std::string_view) {
      if (n_cp == 0) m.first_cp[id] = cp;
      if (n_cp > 0) m.bigrams.insert_or_assign(FlatMap<uint8_t>::pair_key(prev, cp), 1);
      prev = cp;
      ++n_cp;
    });
    m.last_cp[id] = prev;
    if (n_cp == 1) m.char_symbol.insert_or_assign(prev, m.vocab.find(m.spelled[id]));
  }
  for (int b = 0; b < 256; ++b) m.fallback_byte[b] = m.vocab.find(hex_byte_token(b));
  if (gemma) {
    // GemmaTokenizer's BPE uses "<unk>" as its unknown token (fused); LlamaTokenizer's has none,
    // so characters without a token or byte tokens are dropped there.
    m.spm_unk = m.vocab.find("<unk>");
    m.prepend = SpmPrepend::kNever;
  } else {
    const bool add_prefix = spec.add_space_prefix.value_or(true);
    m.prepend = spec.architecture == "phi3"
                    ? SpmPrepend::kAlways
                    : (add_prefix ? SpmPrepend::kFirst : SpmPrepend::kNever);
    m.strip_leading_space = add_prefix;
  }
}

}  // namespace

char32_t byte_to_char(uint8_t byte) { return alphabet().to_char[byte]; }

int byte_of_char(char32_t cp) {
  const auto& a = alphabet();
  return cp < a.to_byte.size() ? a.to_byte[cp] : -1;
}

Tokenizer Tokenizer::from_spec(const VocabSpec& spec) {
  static std::atomic<uint64_t> next_uid{1};
  auto m = std::make_shared<Impl>();
  m->uid = next_uid.fetch_add(1);
  m->kind = spec.kind;
  m->pre = spec.pre;
  if (spec.tokens.empty()) fail("tokenizer.ggml.tokens is empty");
  if (spec.tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("tokenizer.ggml.tokens has too many entries");
  }
  m->n_vocab = static_cast<int32_t>(spec.tokens.size());
  const auto n = static_cast<size_t>(m->n_vocab);
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    fail("tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
         " entries for " + std::to_string(n) + " tokens");
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    fail("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) + " entries for " +
         std::to_string(n) + " tokens");
  }
  m->bos_id = checked_special_id(spec.bos_id, m->n_vocab, "tokenizer.ggml.bos_token_id");
  m->eos_id = checked_special_id(spec.eos_id, m->n_vocab, "tokenizer.ggml.eos_token_id");
  m->unk_id = checked_special_id(spec.unk_id, m->n_vocab, "tokenizer.ggml.unknown_token_id");
  m->pad_id = checked_special_id(spec.pad_id, m->n_vocab, "tokenizer.ggml.padding_token_id");
  const bool spm = spec.kind == ModelKind::kSentencePieceBpe;
  m->add_bos = spec.add_bos.value_or(spm) && m->bos_id != kNoToken;
  m->add_eos = spec.add_eos.value_or(false) && m->eos_id != kNoToken;

  for (size_t id = 0; id < n; ++id) {
    // Python cannot hold invalid UTF-8 either; repair keeps every later step on valid text.
    m->text.push_back(is_valid_utf8(spec.tokens[id])
                          ? std::string_view(spec.tokens[id])
                          : std::string_view(utf8_lossy(spec.tokens[id])));
    const int32_t t = spec.token_types.empty() ? 1 : spec.token_types[id];
    m->types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t) : TokenType::kUndefined);
  }

  if (spm) {
    build_sentencepiece(spec, *m);
  } else {
    build_byte_level(spec, *m);
  }

  // Added tokens: user-defined first, then special ones, so a special flag wins a tie.
  std::vector<uint8_t> is_added(n, 0);
  m->special.assign(n, 0);
  for (int32_t id = 0; id < m->n_vocab; ++id) {
    if (m->types[id] != TokenType::kUserDefined) continue;
    const int32_t in_vocab = m->vocab.find(m->text[id]);
    if (in_vocab < 0) continue;
    m->added.add(m->text[id], in_vocab, /*special=*/false);
    is_added[in_vocab] = 1;
  }
  auto add_special = [&](int32_t id) {
    m->added.add(m->text[id], id, /*special=*/true);
    is_added[id] = 1;
    m->special[id] = 1;
  };
  for (int32_t id = 0; id < m->n_vocab; ++id) {
    if (m->types[id] != TokenType::kControl) continue;
    if (!spm && !all_in_byte_alphabet(m->text[id])) continue;  // a llama.cpp mislabel, HF skips
    add_special(id);
  }
  for (int32_t id : {m->bos_id, m->eos_id, m->unk_id, m->pad_id}) {
    if (id != kNoToken) add_special(id);
  }

  // What each token decodes to, as HF's decoder sees it (added tokens by their own text).
  m->byte_value.assign(n, -1);
  for (int32_t id = 0; id < m->n_vocab; ++id) {
    const std::string_view hf = is_added[id] ? m->text[id] : m->spelled[id];
    if (spm) {
      const std::string replaced = replace_spm_space(hf);
      const int b = fallback_byte_value(replaced);
      m->byte_value[id] = static_cast<int16_t>(b);
      m->bytes.push_back(b >= 0 ? std::string(1, static_cast<char>(b)) : replaced);
    } else {
      m->bytes.push_back(byte_level_bytes(hf));
    }
  }
  return Tokenizer(std::move(m));
}

}  // namespace llms::tokenizer
