// tokenizer/tokenizer: encoding and decoding (see tokenizer.h for the contract; the state is
// built in tokenizer_build.cpp).
//
// Encoding pipeline, as tokenizers runs it: repair UTF-8 -> split out added tokens (raw text) ->
// per remaining segment: byte-level (regex pieces -> bytes -> BPE) or SentencePiece (spaces to
// U+2581, optional prefix, characters or <0xNN> bytes -> BPE) -> BOS/EOS.
//
// SentencePiece segments are one BPE "word" in HF (its pre-tokenizer splits on spaces that the
// normalizer already replaced), so a 10 MB segment would be one 10 MB word. We cut it into chunks
// only between two symbols whose boundary characters (last of the left, first of the right)
// never occur next to each other inside any token: no merge can ever join such symbols, so each
// chunk merges exactly as it would inside the whole word, and the result is unchanged.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "tokenizer_impl.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::tokenizer {

namespace {

constexpr char32_t kSpmSpace = 0x2581;
constexpr std::string_view kSpmSpaceUtf8 = "\xE2\x96\x81";

void check_id(const Tokenizer::Impl& m, int32_t id) {
  if (!m.valid_id(id)) {
    throw Error(Error::Kind::kInvalidArgument, "token id " + std::to_string(id) +
                                                   " is out of range [0, " +
                                                   std::to_string(m.n_vocab) + ")");
  }
}

// A small direct-mapped cache of text -> ids for byte-level pieces and SentencePiece chunks, one
// per thread (no locks), shared by all tokenizers of the process: an entry counts only for the
// tokenizer whose uid it carries, and uids are never reused. Only text whose ids are a function
// of the text alone is cached. Natural text repeats its words, so most of them skip BPE.
class PieceCache {
 public:
  static constexpr size_t kMaxBytes = 22;
  static constexpr size_t kMaxIds = 8;

  // The cached ids of `piece`, or an empty span.
  std::span<const int32_t> find(uint64_t uid, std::string_view piece) {
    if (piece.size() > kMaxBytes || entries_.empty()) return {};
    const Entry& e = entries_[slot(piece)];
    if (e.uid != uid || e.n_bytes != piece.size() ||
        std::memcmp(e.bytes, piece.data(), piece.size()) != 0) {
      return {};
    }
    return {e.ids, e.n_ids};
  }

  void insert(uint64_t uid, std::string_view piece, std::span<const int32_t> ids) {
    if (piece.size() > kMaxBytes || ids.size() > kMaxIds) return;
    if (entries_.empty()) entries_.resize(kEntries);
    Entry& e = entries_[slot(piece)];
    e.uid = uid;
    e.n_bytes = static_cast<uint8_t>(piece.size());
    e.n_ids = static_cast<uint8_t>(ids.size());
    std::memcpy(e.bytes, piece.data(), piece.size());
    std::copy(ids.begin(), ids.end(), e.ids);
  }

 private:
  static constexpr size_t kEntries = 4096;
  struct Entry {
    uint64_t uid = 0;
    uint8_t n_bytes = 0;
    uint8_t n_ids = 0;
    char bytes[kMaxBytes];
    int32_t ids[kMaxIds];
  };

  static size_t slot(std::string_view piece) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (char c : piece) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    return static_cast<size_t>(h >> 52);  // 12 bits: kEntries
  }

  std::vector<Entry> entries_;
};

thread_local PieceCache t_piece_cache;

}  // namespace

void Tokenizer::Impl::encode_byte_level(std::string_view segment, std::vector<int32_t>& out,
                                        BpeScratch& scratch, std::vector<int32_t>& symbols) const {
  PieceCache& cache = t_piece_cache;
  splitter->split(segment, [&](std::string_view piece) {
    if (piece.size() == 1) {  // no merge possible; the most common piece after cache hits
      const int32_t id = byte_symbol[static_cast<uint8_t>(piece[0])];
      if (id != kNoToken) out.push_back(id);
      return;
    }
    if (const auto hit = cache.find(uid, piece); !hit.empty()) {
      out.insert(out.end(), hit.begin(), hit.end());
      return;
    }
    symbols.clear();
    for (char c : piece) {
      const int32_t id = byte_symbol[static_cast<uint8_t>(c)];
      if (id != kNoToken) symbols.push_back(id);  // no unknown token in HF's byte-level BPE
    }
    const size_t first = out.size();
    merges.apply(symbols, out, scratch);
    if (out.size() > first) {
      cache.insert(uid, piece, std::span<const int32_t>(out).subspan(first));
    }
  });
}

void Tokenizer::Impl::encode_spm(std::string_view segment, bool at_text_start,
                                 std::vector<int32_t>& out, BpeScratch& scratch,
                                 std::vector<int32_t>& chunk) const {
  PieceCache& cache = t_piece_cache;
  chunk.clear();
  size_t chunk_begin = 0;   // segment offset of the chunk's first character
  bool chunk_plain = true;  // one symbol per character (no prefix, byte or <unk> symbols), so the
                            // chunk's ids are a function of its text alone and may be cached
  int32_t pending_unk = kNoToken;  // a fused run of unknown characters not yet added

  // Merges the current chunk, which covers segment[chunk_begin, end).
  auto flush = [&](size_t end) {
    const std::string_view chunk_text = segment.substr(chunk_begin, end - chunk_begin);
    if (chunk_plain) {
      if (const auto hit = cache.find(uid, chunk_text); !hit.empty()) {
        out.insert(out.end(), hit.begin(), hit.end());
        chunk.clear();
        return;
      }
    }
    const size_t first = out.size();
    merges.apply(chunk, out, scratch);
    if (chunk_plain) cache.insert(uid, chunk_text, std::span<const int32_t>(out).subspan(first));
    chunk.clear();
  };
  // Adds one symbol that belongs to the character at segment offset `pos`.
  auto add = [&](int32_t id, size_t pos, bool plain) {
    if (!chunk.empty() &&
        !bigrams.contains(FlatMap<uint8_t>::pair_key(last_cp[chunk.back()], first_cp[id]))) {
      flush(pos);
    }
    if (chunk.empty()) {
      chunk_begin = pos;
      chunk_plain = true;
    }
    chunk_plain = chunk_plain && plain;
    chunk.push_back(id);
  };
  auto add_char = [&](char32_t cp, std::string_view utf8, size_t pos, bool plain) {
    if (const int32_t* id = char_symbol.find(cp)) {
      if (pending_unk != kNoToken) add(std::exchange(pending_unk, kNoToken), pos, false);
      add(*id, pos, plain);
      return;
    }
    bool have_bytes = true;
    for (char c : utf8) have_bytes = have_bytes && fallback_byte[static_cast<uint8_t>(c)] >= 0;
    if (have_bytes) {
      // tokenizers adds the byte tokens without first flushing a pending unknown token; the
      // order below reproduces that.
      for (char c : utf8) add(fallback_byte[static_cast<uint8_t>(c)], pos, false);
      return;
    }
    if (spm_unk != kNoToken) pending_unk = spm_unk;  // fuse_unk: a run becomes one token
  };

  bool add_prefix = false;
  if (!segment.empty()) {
    if (prepend == SpmPrepend::kAlways) {
      add_prefix = true;
    } else if (prepend == SpmPrepend::kFirst && at_text_start) {
      // Metaspace skips the prefix when the text already starts with one (after replacing).
      add_prefix = segment[0] != ' ' && segment.substr(0, 3) != kSpmSpaceUtf8;
    }
  }
  if (add_prefix) add_char(kSpmSpace, kSpmSpaceUtf8, 0, /*plain=*/false);
  for (size_t pos = 0; pos < segment.size();) {
    const Utf8Step step = utf8_step(segment, pos);
    if (step.code_point == ' ') {
      add_char(kSpmSpace, kSpmSpaceUtf8, pos, true);
    } else {
      add_char(step.code_point, segment.substr(pos, step.length), pos, true);
    }
    pos += step.length;
  }
  if (pending_unk != kNoToken) add(pending_unk, segment.size(), false);
  if (!chunk.empty()) flush(segment.size());
}

void Tokenizer::Impl::encode_segment(std::string_view segment, bool at_text_start,
                                     std::vector<int32_t>& out, BpeScratch& scratch,
                                     std::vector<int32_t>& symbols) const {
  if (kind == ModelKind::kByteLevelBpe) {
    encode_byte_level(segment, out, scratch, symbols);
  } else {
    encode_spm(segment, at_text_start, out, scratch, symbols);
  }
}

namespace {

// The whole pipeline; `accept(match)` decides whether a special-token match becomes its token.
template <typename Accept>
std::vector<int32_t> encode_text(const Tokenizer::Impl& m, std::string_view text, bool add_special,
                                 Accept&& accept) {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && m.add_bos) out.push_back(m.bos_id);

  BpeScratch scratch;
  std::vector<int32_t> symbols;
  size_t segment_start = 0;
  size_t search = 0;
  while (auto match = m.added.find(text, search)) {
    search = match->end;
    // A special token's text that is not accepted stays ordinary text; tokenizers still
    // consumes the match, so a shorter token inside it is not looked for.
    if (match->special && !accept(*match)) continue;
    if (match->begin > segment_start) {
      m.encode_segment(text.substr(segment_start, match->begin - segment_start), segment_start == 0,
                       out, scratch, symbols);
    }
    out.push_back(match->id);
    segment_start = match->end;
  }
  if (segment_start < text.size()) {
    m.encode_segment(text.substr(segment_start), segment_start == 0, out, scratch, symbols);
  }

  if (add_special && m.add_eos) out.push_back(m.eos_id);
  return out;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const bool parse = options.parse_special;
  return encode_text(*impl_, text, options.add_special,
                     [parse](const AddedTokenMatcher::Match&) { return parse; });
}

std::vector<SpecialTokenMatch> Tokenizer::find_special(std::string_view text) const {
  const Impl& m = *impl_;
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  std::vector<SpecialTokenMatch> found;
  size_t search = 0;
  while (auto match = m.added.find(text, search)) {
    search = match->end;
    if (match->special) found.push_back({match->begin, match->end, match->id});
  }
  return found;
}

std::vector<int32_t> Tokenizer::encode_with_special_at(std::string_view text,
                                                       std::span<const SpecialTokenMatch> allowed,
                                                       bool add_special) const {
  size_t next = 0;  // matches arrive in ascending order, so one pass over `allowed` suffices
  return encode_text(*impl_, text, add_special, [&](const AddedTokenMatcher::Match& match) {
    while (next < allowed.size() && allowed[next].begin < match.begin) ++next;
    return next < allowed.size() &&
           allowed[next] == SpecialTokenMatch{match.begin, match.end, match.id};
  });
}

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  for (int32_t id : ids) check_id(*impl_, id);
  DecodeStream stream(*this, options);
  std::string out;
  for (int32_t id : ids) stream.push(id, out);
  stream.finish(out);
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->n_vocab; }
ModelKind Tokenizer::kind() const { return impl_->kind; }
const std::string& Tokenizer::pre() const { return impl_->pre; }

std::string_view Tokenizer::token_text(int32_t id) const {
  check_id(*impl_, id);
  return impl_->text[id];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  check_id(*impl_, id);
  return impl_->bytes[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(*impl_, id);
  return impl_->types[id];
}

bool Tokenizer::is_control(int32_t id) const {
  return impl_->valid_id(id) && impl_->types[id] == TokenType::kControl;
}

bool Tokenizer::is_special(int32_t id) const {
  return impl_->valid_id(id) && impl_->special[id] != 0;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const Impl& m = *impl_;
  if (const int32_t id = m.vocab.find(text); id >= 0) return id;
  // The file's own spelling, where the model vocabulary respells it.
  for (int32_t id = 0; id < m.n_vocab; ++id) {
    if (m.text[id] == text) return id;
  }
  return std::nullopt;
}

int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id; }
int32_t Tokenizer::unk_id() const { return impl_->unk_id; }
int32_t Tokenizer::pad_id() const { return impl_->pad_id; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }

std::vector<int32_t> Tokenizer::end_of_generation_ids() const {
  std::vector<int32_t> ids;
  if (impl_->eos_id != kNoToken) ids.push_back(impl_->eos_id);
  for (std::string_view name : {"<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>",
                                "<|eom_id|>", "<|end|>", "</s>", "<|end_of_text|>"}) {
    const int32_t id = impl_->vocab.find(name);
    if (id < 0 || !is_special(id)) continue;
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

// ---- DecodeStream -------------------------------------------------------------------------

DecodeStream::DecodeStream(const Tokenizer& tokenizer, DecodeOptions options)
    : impl_(&tokenizer.impl()), options_(options) {}

void DecodeStream::emit(std::string_view text, std::string& out) {
  if (text.empty()) return;
  if (at_start_) {
    at_start_ = false;
    if (impl_->strip_leading_space && text[0] == ' ') text.remove_prefix(1);
  }
  out.append(text);
}

void DecodeStream::flush_bytes(std::string& out, bool final) {
  if (pending_.empty()) return;
  if (impl_->kind == ModelKind::kByteLevelBpe) {
    // tokenizers decodes all bytes at once with from_utf8_lossy: release what is settled.
    const size_t settled = final ? pending_.size() : utf8_settled_length(pending_);
    if (settled == 0) return;
    std::string text;
    append_utf8_lossy(std::string_view(pending_).substr(0, settled), text);
    pending_.erase(0, settled);
    emit(text, out);
    return;
  }
  // ByteFallback: a whole run of byte tokens is valid UTF-8, or each byte becomes U+FFFD.
  if (is_valid_utf8(pending_)) {
    emit(pending_, out);
  } else {
    std::string text;
    for (size_t i = 0; i < pending_.size(); ++i) text.append(kReplacementUtf8);
    emit(text, out);
  }
  pending_.clear();
}

void DecodeStream::push(int32_t id, std::string& out) {
  check_id(*impl_, id);
  if (options_.skip_special && impl_->special[id]) return;
  if (impl_->kind == ModelKind::kByteLevelBpe) {
    pending_.append(impl_->bytes[id]);
    flush_bytes(out, /*final=*/false);
    return;
  }
  if (impl_->byte_value[id] >= 0) {
    pending_.push_back(static_cast<char>(impl_->byte_value[id]));
    return;
  }
  flush_bytes(out, /*final=*/true);
  emit(impl_->bytes[id], out);
}

void DecodeStream::finish(std::string& out) {
  flush_bytes(out, /*final=*/true);
  at_start_ = true;
}

}  // namespace llms::tokenizer
