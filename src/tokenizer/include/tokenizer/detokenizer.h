// tokenizer/detokenizer: streaming text for generated tokens, with stop strings.
//
// IncrementalDetokenizer is fed token ids one at a time and returns only complete UTF-8 text:
// a character split across byte-level tokens, or spelled by <0xNN> byte tokens, comes out once it
// is whole (DecodeStream). Text that might still turn out to be the start of a stop string is
// held back; it is released as soon as it can no longer be a prefix of any stop string. When a
// stop string is completed, everything before it is released, the stop is reported, and neither
// the stop string nor anything after it is ever emitted.
//
// Which stop wins: the one that is completed first in the text; when several are completed by
// the same byte, the longest (it starts earliest). Matching is KMP per stop string, so each byte
// of output costs O(number of stop strings) however the text is cut into tokens.
//
// Invariant: without stop strings, the concatenation of all returned text equals
// Tokenizer::decode(ids, {.skip_special = options.skip_special}).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llms::tokenizer {

// Text-level stop-string matching, usable on its own (e.g. on text from other sources).
class StopStringMatcher {
 public:
  // Throws llms::Error(kInvalidArgument) naming the stop string that is empty or not valid UTF-8.
  explicit StopStringMatcher(std::vector<std::string> stops = {});

  // Feeds valid UTF-8 `text`; appends the text that is now safe to `out`. Returns the index of
  // the stop string when one is completed (then `out` got everything before it and the matcher
  // is stopped: later calls append nothing).
  std::optional<size_t> feed(std::string_view text, std::string& out);
  // End of stream without a stop: appends everything still held.
  void flush(std::string& out);

  bool stopped() const { return stopped_; }
  size_t held_size() const { return held_.size(); }
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  std::vector<std::string> stops_;
  std::vector<std::vector<uint32_t>> failure_;  // KMP failure function of each stop
  std::vector<uint32_t> state_;                 // matched prefix length of each stop
  std::string held_;
  bool stopped_ = false;
};

struct DetokenizerOptions {
  std::vector<std::string> stop_strings;
  bool skip_special = true;  // control tokens and BOS/EOS produce no text
};

struct DetokenizerOutput {
  std::string text;            // newly released text (valid UTF-8, possibly empty)
  std::optional<size_t> stop;  // index into stop_strings when one was completed
};

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, DetokenizerOptions options = {});

  // Throws llms::Error(kInvalidArgument) for an id outside the vocabulary. After a stop, returns
  // nothing.
  DetokenizerOutput push(int32_t id);
  // End of generation: releases everything still held (an unfinished character as U+FFFD).
  DetokenizerOutput finish();

  bool stopped() const { return stops_.stopped(); }

 private:
  DecodeStream stream_;
  StopStringMatcher stops_;
  std::string scratch_;
};

}  // namespace llms::tokenizer
