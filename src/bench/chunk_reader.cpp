// bench/chunk_reader: the fields the load client needs from one OpenAI response object or
// stream chunk (see chunk_reader.h).
#include "chunk_reader.h"

#include <array>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "util/utf8.h"

namespace llms::bench {

namespace {

using json = nlohmann::json;

int64_t int_or(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return -1;
  return it->get<int64_t>();
}

Usage read_usage(const json& u) {
  Usage usage;
  usage.prompt_tokens = int_or(u, "prompt_tokens");
  usage.completion_tokens = int_or(u, "completion_tokens");
  if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object()) {
    usage.cached_tokens = int_or(*d, "cached_tokens");
  }
  return usage;
}

size_t string_bytes(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get_ref<const std::string&>().size() : 0;
}

// Content bytes of one choice; `tool_calls` count as content even though they are not text.
size_t choice_content(const json& choice, bool& has_tool_calls) {
  size_t n = string_bytes(choice, "text");
  for (const char* holder : {"delta", "message"}) {
    auto d = choice.find(holder);
    if (d == choice.end() || !d->is_object()) continue;
    n += string_bytes(*d, "content") + string_bytes(*d, "reasoning_content") +
         string_bytes(*d, "reasoning");
    if (auto t = d->find("tool_calls"); t != d->end() && t->is_array() && !t->empty()) {
      has_tool_calls = true;
    }
  }
  return n;
}

// The whole document as a tree: for errors (rare), whose message may sit in any shape.
ChunkInfo read_object_dom(std::string_view text) {
  ChunkInfo info;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.is_malformed = true;
    return info;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    if (e->is_string()) {
      info.error = e->get<std::string>();
    } else if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) {
      info.error = (*e)["message"].get<std::string>();
    } else {
      info.error = e->dump();
    }
    return info;
  }
  if (auto o = j.find("object"); o != j.end() && o->is_string() && *o == "error") {
    auto m = j.find("message");
    info.error = m != j.end() && m->is_string() ? m->get<std::string>() : std::string("error");
    return info;
  }
  bool has_tool_calls = false;
  if (auto c = j.find("choices"); c != j.end() && c->is_array()) {
    for (const auto& choice : *c) {
      if (choice.is_object()) info.content_bytes += choice_content(choice, has_tool_calls);
    }
  }
  info.has_content = info.content_bytes > 0 || has_tool_calls;
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) info.usage = read_usage(*u);
  return info;
}

// The fields the client needs, read in one pass without building the tree (one event per
// streamed token, so this is the client's hot path). Equal to read_object_dom's answer except
// where a key repeats inside one object (there the tree keeps the last value, this sums or keeps
// the last too); an "error" that is not null or "object": "error" hands over to the tree.
class ChunkSax {
 public:
  bool needs_dom() const { return needs_dom_; }
  bool is_object() const { return is_object_; }
  ChunkInfo take(ChunkInfo info) {
    info.content_bytes = content_bytes_;
    info.has_content = content_bytes_ > 0 || has_tool_calls_;
    info.usage = usage_;
    return info;
  }

  // --- nlohmann SAX interface ---
  bool null() { return scalar(kNull); }
  bool boolean(bool) { return scalar(kOtherValue); }
  bool number_integer(json::number_integer_t v) { return integer(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    // get<int64_t> of an unsigned value above INT64_MAX wraps the same way.
    return integer(static_cast<int64_t>(v));
  }
  bool number_float(json::number_float_t, const json::string_t&) { return scalar(kOtherValue); }
  bool binary(json::binary_t&) { return scalar(kOtherValue); }
  bool string(json::string_t& v) { return string(std::string_view(v)); }
  bool key(json::string_t& k) { return key(std::string_view(k)); }

  // --- also driven by FastJsonScanner (decoded strings) ---
  bool string(std::string_view v) {
    if (depth_ == 0) return scalar(kOtherValue);
    switch (key_) {
      case Key::kText:
      case Key::kContent:
        content_bytes_ += v.size();
        break;
      case Key::kObject:
        if (v == "error") needs_dom_ = true;
        break;
      default:
        break;
    }
    return scalar(kOtherValue);
  }
  bool start_object(std::size_t) {
    Frame f = Frame::kOther;
    if (depth_ == 0) {
      is_object_ = true;
      f = Frame::kTop;
    } else if (top() == Frame::kChoices) {
      f = Frame::kChoice;
    } else {
      switch (key_) {
        case Key::kHolder:
          f = Frame::kHolder;
          break;
        case Key::kUsage:
          usage_ = Usage{};  // the last "usage" object counts
          f = Frame::kUsage;
          break;
        case Key::kDetails:
          usage_->cached_tokens = -1;
          f = Frame::kDetails;
          break;
        default:
          break;
      }
    }
    value_started();
    push(f);
    return true;
  }
  bool key(std::string_view k) {
    key_ = Key::kNone;
    switch (top()) {
      case Frame::kTop:
        if (k == "choices") key_ = Key::kChoices;
        if (k == "usage") key_ = Key::kUsage;
        if (k == "error") key_ = Key::kError;
        if (k == "object") key_ = Key::kObject;
        break;
      case Frame::kChoice:
        if (k == "text") key_ = Key::kText;
        if (k == "delta" || k == "message") key_ = Key::kHolder;
        break;
      case Frame::kHolder:
        if (k == "content" || k == "reasoning_content" || k == "reasoning") key_ = Key::kContent;
        if (k == "tool_calls") key_ = Key::kToolCalls;
        break;
      case Frame::kUsage:
        if (k == "prompt_tokens") key_ = Key::kPromptTokens;
        if (k == "completion_tokens") key_ = Key::kCompletionTokens;
        if (k == "prompt_tokens_details") key_ = Key::kDetails;
        break;
      case Frame::kDetails:
        if (k == "cached_tokens") key_ = Key::kCachedTokens;
        break;
      default:
        break;
    }
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) return false;  // not an object: malformed
    Frame f = Frame::kOther;
    if (top() == Frame::kTop && key_ == Key::kChoices) f = Frame::kChoices;
    if (top() == Frame::kHolder && key_ == Key::kToolCalls) f = Frame::kToolCalls;
    value_started();
    push(f);
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  enum class Frame { kTop, kChoices, kChoice, kHolder, kToolCalls, kUsage, kDetails, kOther };
  enum class Key {
    kNone,
    kChoices,
    kUsage,
    kError,
    kObject,
    kText,
    kHolder,
    kContent,
    kToolCalls,
    kPromptTokens,
    kCompletionTokens,
    kDetails,
    kCachedTokens
  };
  static constexpr bool kNull = true;
  static constexpr bool kOtherValue = false;

  // Containers nested deeper than the fields we read are only counted.
  static constexpr size_t kTracked = 8;
  Frame top() const {
    return depth_ == 0 || depth_ > kTracked ? Frame::kOther : frames_[depth_ - 1];
  }
  void push(Frame f) {
    if (depth_ < kTracked) frames_[depth_] = f;
    ++depth_;
  }

  // Every value (scalar or container) of the current key: what it means for the fields.
  void value_started(bool is_null = false) {
    if (depth_ != 0 && top() == Frame::kToolCalls) has_tool_calls_ = true;  // an element
    switch (key_) {
      case Key::kError:
        if (!is_null) needs_dom_ = true;
        break;
      case Key::kPromptTokens:
        usage_->prompt_tokens = -1;  // unless integer() sets it
        break;
      case Key::kCompletionTokens:
        usage_->completion_tokens = -1;
        break;
      case Key::kCachedTokens:
        usage_->cached_tokens = -1;
        break;
      default:
        break;
    }
    key_ = Key::kNone;
  }
  bool scalar(bool is_null) {
    if (depth_ == 0) return false;  // a scalar document: malformed
    value_started(is_null);
    return true;
  }
  bool integer(int64_t v) {
    if (depth_ == 0) return false;
    const Key k = key_;
    value_started();
    if (k == Key::kPromptTokens) usage_->prompt_tokens = v;
    if (k == Key::kCompletionTokens) usage_->completion_tokens = v;
    if (k == Key::kCachedTokens) usage_->cached_tokens = v;
    return true;
  }

  std::array<Frame, kTracked> frames_{};
  size_t depth_ = 0;
  Key key_ = Key::kNone;
  size_t content_bytes_ = 0;
  bool has_tool_calls_ = false;
  bool needs_dom_ = false;
  bool is_object_ = false;
  std::optional<Usage> usage_;
};

// A strict JSON (RFC 8259) reader that drives a ChunkSax without nlohmann's lexer, which builds
// every token char by char and asks localeconv() per document. It accepts exactly what
// nlohmann accepts as far as it goes; anything it does not take (bad syntax, lone surrogates,
// integers beyond 64 bits, deep nesting, a handler refusal) makes scan() return false and the
// caller starts again with nlohmann, so a mistake here can cost time but never change an answer.
class FastJsonScanner {
 public:
  FastJsonScanner(std::string_view text, ChunkSax& sax)
      : p_(text.data()), end_(text.data() + text.size()), sax_(sax) {}

  bool scan() {
    skip_ws();
    if (!value(0)) return false;
    skip_ws();
    return p_ == end_;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  bool value(int depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case '"': {
        std::string_view v;
        return string(v) && sax_.string(v);
      }
      case 't':
        return literal("true") && sax_.boolean(true);
      case 'f':
        return literal("false") && sax_.boolean(false);
      case 'n':
        return literal("null") && sax_.null();
      default:
        return number();
    }
  }

  bool object(int depth) {
    if (depth > kMaxDepth || !sax_.start_object(0)) return false;
    ++p_;
    skip_ws();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return sax_.end_object();
    }
    while (true) {
      skip_ws();
      std::string_view k;
      if (p_ == end_ || *p_ != '"' || !string(k) || !sax_.key(k)) return false;
      skip_ws();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      skip_ws();
      if (!value(depth)) return false;
      skip_ws();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != '}') return false;
      ++p_;
      return sax_.end_object();
    }
  }

  bool array(int depth) {
    if (depth > kMaxDepth || !sax_.start_array(0)) return false;
    ++p_;
    skip_ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return sax_.end_array();
    }
    while (true) {
      skip_ws();
      if (!value(depth)) return false;
      skip_ws();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != ']') return false;
      ++p_;
      return sax_.end_array();
    }
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? ; integers as nlohmann types them.
  bool number() {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    uint64_t u = 0;
    bool overflow = false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
        const uint64_t d = static_cast<uint64_t>(*p_ - '0');
        if (u > (UINT64_MAX - d) / 10) overflow = true;
        u = u * 10 + d;
        ++p_;
      }
    }
    bool is_integer = true;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (!digits()) return false;
      is_integer = false;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digits()) return false;
      is_integer = false;
    }
    if (!is_integer) {
      // nlohmann refuses a float that overflows to infinity; from_chars reports that (and
      // underflow, which nlohmann takes: it decides those).
      double v = 0;
      const auto r = std::from_chars(start, p_, v);
      if (r.ec != std::errc() || r.ptr != p_ || !std::isfinite(v)) return false;
      return sax_.number_float(v, kEmpty);
    }
    if (overflow) return false;  // beyond 64 bits: nlohmann makes it a float; let it decide
    if (negative) {
      if (u > uint64_t{1} << 63) return false;  // below INT64_MIN: likewise
      return sax_.number_integer(static_cast<int64_t>(0 - u));
    }
    return sax_.number_unsigned(u);
  }
  bool digits() {
    const char* start = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  static int hex4(const char* p) {
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = p[i];
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  }
  // A string token at p_ (the opening quote); `out` views its decoded text (the input itself
  // when it has no escapes, else buf_, valid until the next string).
  bool string(std::string_view& out) {
    ++p_;
    const char* start = p_;
    bool escaped = false;
    while (true) {
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') break;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (!escaped) buf_.assign(start, p_);
        escaped = true;
        if (end_ - p_ < 2) return false;
        const char e = p_[1];
        p_ += 2;
        switch (e) {
          case '"':
          case '\\':
          case '/':
            buf_.push_back(e);
            break;
          case 'b':
            buf_.push_back('\b');
            break;
          case 'f':
            buf_.push_back('\f');
            break;
          case 'n':
            buf_.push_back('\n');
            break;
          case 'r':
            buf_.push_back('\r');
            break;
          case 't':
            buf_.push_back('\t');
            break;
          case 'u': {
            if (end_ - p_ < 4) return false;
            int cp = hex4(p_);
            p_ += 4;
            if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;
            if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
              if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') return false;
              const int lo = hex4(p_ + 2);
              if (lo < 0xDC00 || lo > 0xDFFF) return false;
              p_ += 6;
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            append_utf8(static_cast<char32_t>(cp), buf_);
            break;
          }
          default:
            return false;
        }
        continue;
      }
      size_t n = 1;
      if (c >= 0x80) {  // a well-formed sequence (Unicode Table 3-7), or not JSON
        const Utf8Step step = utf8_step(std::string_view(p_, static_cast<size_t>(end_ - p_)), 0);
        if (step.kind != Utf8Step::Kind::kValid) return false;
        n = step.length;
      }
      if (escaped) buf_.append(p_, n);
      p_ += n;
    }
    out =
        escaped ? std::string_view(buf_) : std::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;
    return true;
  }

  inline static const json::string_t kEmpty;
  const char* p_;
  const char* end_;
  ChunkSax& sax_;
  std::string buf_;
};

}  // namespace

ChunkInfo read_chunk_object(std::string_view text) {
  ChunkSax sax;
  bool ok = FastJsonScanner(text, sax).scan();
  if (!ok) {
    sax = ChunkSax();  // start again with nlohmann, which decides what is malformed
    ok = json::sax_parse(text, &sax);
  }
  if (sax.needs_dom()) return read_object_dom(text);
  ChunkInfo info;
  if (!ok || !sax.is_object()) {
    info.is_malformed = true;
    return info;
  }
  return sax.take(info);
}

}  // namespace llms::bench
