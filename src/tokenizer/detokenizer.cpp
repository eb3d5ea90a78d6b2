// tokenizer/detokenizer: stop-string holding and streaming decode (see detokenizer.h).
//
// Why the released cut is always a character boundary: the text held back is a suffix equal to a
// prefix of some stop string, and a valid UTF-8 stop string starts with a lead byte.
#include "tokenizer/detokenizer.h"

#include <algorithm>

#include "util/error.h"
#include "util/utf8.h"

namespace llms::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t k = 0; k < stops_.size(); ++k) {
    const std::string& s = stops_[k];
    if (s.empty() || !is_valid_utf8(s)) {
      throw Error(Error::Kind::kInvalidArgument, "stop[" + std::to_string(k) + "] is " +
                                                     (s.empty() ? "empty" : "not valid UTF-8"));
    }
    // failure[i] = length of the longest proper prefix of s[0..i] that is also its suffix.
    std::vector<uint32_t> failure(s.size(), 0);
    uint32_t len = 0;
    for (size_t i = 1; i < s.size(); ++i) {
      while (len > 0 && s[i] != s[len]) len = failure[len - 1];
      if (s[i] == s[len]) ++len;
      failure[i] = len;
    }
    failure_.push_back(std::move(failure));
  }
  state_.assign(stops_.size(), 0);
}

std::optional<size_t> StopStringMatcher::feed(std::string_view text, std::string& out) {
  if (stopped_) return std::nullopt;
  const size_t base = held_.size();
  held_.append(text);
  for (size_t i = base; i < held_.size(); ++i) {
    const char c = held_[i];
    std::optional<size_t> hit;
    for (size_t k = 0; k < stops_.size(); ++k) {
      const std::string& s = stops_[k];
      uint32_t& st = state_[k];
      while (st > 0 && s[st] != c) st = failure_[k][st - 1];
      if (s[st] == c) ++st;
      if (st == s.size() && (!hit || s.size() > stops_[*hit].size())) hit = k;
    }
    if (hit) {
      const size_t start = i + 1 - stops_[*hit].size();
      out.append(held_, 0, start);
      held_.clear();
      stopped_ = true;
      return hit;
    }
  }
  uint32_t keep = 0;
  for (uint32_t st : state_) keep = std::max(keep, st);
  const size_t release = held_.size() - std::min<size_t>(keep, held_.size());
  out.append(held_, 0, release);
  held_.erase(0, release);
  return std::nullopt;
}

void StopStringMatcher::flush(std::string& out) {
  if (stopped_) return;
  out.append(held_);
  held_.clear();
  std::fill(state_.begin(), state_.end(), 0);
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               DetokenizerOptions options)
    : stream_(tokenizer, DecodeOptions{options.skip_special}),
      stops_(std::move(options.stop_strings)) {}

DetokenizerOutput IncrementalDetokenizer::push(int32_t id) {
  DetokenizerOutput result;
  if (stops_.stopped()) return result;
  scratch_.clear();
  stream_.push(id, scratch_);
  result.stop = stops_.feed(scratch_, result.text);
  return result;
}

DetokenizerOutput IncrementalDetokenizer::finish() {
  DetokenizerOutput result;
  if (stops_.stopped()) return result;
  scratch_.clear();
  stream_.finish(scratch_);
  result.stop = stops_.feed(scratch_, result.text);
  if (!result.stop) stops_.flush(result.text);
  return result;
}

}  // namespace llms::tokenizer
