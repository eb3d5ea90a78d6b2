// libFuzzer target for the tokenizer: arbitrary bytes through encode and decode on two small
// hand-built vocabularies (no model file), checking invariants rather than just "no crash":
//  - byte-level BPE with all 256 byte tokens: decode(encode(x)) == x for valid UTF-8 x, and the
//    U+FFFD repair of x otherwise, with or without special-token parsing;
//  - SentencePiece-style BPE with all 256 byte tokens (Gemma rules): the same round trip, except
//    that U+2581 in the input comes back as a space (as in HF);
//  - every id is in range; streaming (IncrementalDetokenizer) equals decode(); arbitrary id
//    sequences decode to valid UTF-8; stop strings are never emitted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_vocabularies.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

namespace {

using llms::fuzz::make_byte_level;
using llms::fuzz::make_sentencepiece;
using llms::tokenizer::DecodeOptions;
using llms::tokenizer::EncodeOptions;
using llms::tokenizer::IncrementalDetokenizer;
using llms::tokenizer::ModelKind;
using llms::tokenizer::Tokenizer;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string streamed(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDetokenizer d(tok, {.stop_strings = {}, .skip_special = skip});
  std::string out;
  for (int32_t id : ids) out += d.push(id).text;
  out += d.finish().text;
  return out;
}

void round_trip(const Tokenizer& tok, std::string_view text) {
  std::string repaired = llms::utf8_lossy(text);
  if (tok.kind() == ModelKind::kSentencePieceBpe) {
    // SentencePiece spells spaces as U+2581, so a U+2581 in the input decodes as a space.
    for (size_t at; (at = repaired.find("\xE2\x96\x81")) != std::string::npos;) {
      repaired.replace(at, 3, " ");
    }
  }
  for (bool parse : {false, true}) {
    const auto ids = tok.encode(text, EncodeOptions{.add_special = false, .parse_special = parse});
    for (int32_t id : ids) check(id >= 0 && id < tok.n_vocab());
    const std::string back = tok.decode(ids);
    check(back == repaired);
    check(streamed(tok, ids, false) == back);
    const std::string skipped = tok.decode(ids, DecodeOptions{.skip_special = true});
    check(llms::is_valid_utf8(skipped));
    check(streamed(tok, ids, true) == skipped);
  }
  const auto with_bos = tok.encode(text, EncodeOptions{.add_special = true});
  check(with_bos.size() >= (tok.add_bos() ? 1u : 0u));
}

void arbitrary_ids(const Tokenizer& tok, const uint8_t* data, size_t size) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < size && ids.size() < 256; i += 2) {
    ids.push_back(static_cast<int32_t>((data[i] | (data[i + 1] << 8)) % tok.n_vocab()));
  }
  const std::string text = tok.decode(ids);
  check(llms::is_valid_utf8(text));
  check(streamed(tok, ids, false) == text);

  // A stop string is never emitted, and what is emitted is a prefix of the full text.
  IncrementalDetokenizer d(
      tok, {.stop_strings = {"th", "\xEF\xBF\xBD\xEF\xBF\xBD"}, .skip_special = false});
  std::string out;
  bool stopped = false;
  for (int32_t id : ids) {
    const auto step = d.push(id);
    out += step.text;
    if (step.stop) {
      stopped = true;
      break;
    }
  }
  if (!stopped) {
    const auto last = d.finish();  // the final flush can complete a stop too
    out += last.text;
    stopped = last.stop.has_value();
  }
  check(text.compare(0, out.size(), out) == 0);
  check(out.find("th") == std::string::npos);
  if (!stopped) check(out == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer byte_level = make_byte_level();
  static const Tokenizer sentencepiece = make_sentencepiece();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  round_trip(byte_level, text);
  round_trip(sentencepiece, text);
  arbitrary_ids(byte_level, data, size);
  arbitrary_ids(sentencepiece, data, size);
  return 0;
}
