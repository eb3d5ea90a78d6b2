// server/reasoning: see reasoning.h.
#include "server/reasoning.h"

#include <algorithm>

namespace llms::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

bool template_has_reasoning(std::string_view chat_template) {
  return chat_template.find(kClose) != std::string_view::npos;
}

ReasoningParser::ReasoningParser(bool starts_inside)
    : state_(starts_inside ? State::kThinking : State::kStart) {}

void ReasoningParser::push(std::string_view text, std::string& reasoning, std::string& content) {
  pending_.append(text);
  for (;;) {
    switch (state_) {
      case State::kStart: {
        // Blanks before the tag are dropped; anything else decides.
        size_t lead = 0;
        while (lead < pending_.size() && blank(pending_[lead])) ++lead;
        const std::string_view rest = std::string_view(pending_).substr(lead);
        if (rest.empty()) return;
        if (rest.substr(0, kOpen.size()) == kOpen) {
          pending_.erase(0, lead + kOpen.size());
          state_ = State::kThinking;
          continue;
        }
        if (kOpen.substr(0, rest.size()) == rest) return;  // the tag may be coming
        state_ = State::kAnswer;
        continue;
      }
      case State::kThinking: {
        const size_t close = pending_.find(kClose);
        if (close == std::string::npos) {
          const size_t keep = partial_suffix(pending_, kClose);
          reasoning.append(pending_, 0, pending_.size() - keep);
          pending_.erase(0, pending_.size() - keep);
          return;
        }
        reasoning.append(pending_, 0, close);
        pending_.erase(0, close + kClose.size());
        // The answer usually starts after a blank line: drop the blanks that follow the tag.
        size_t lead = 0;
        while (lead < pending_.size() && blank(pending_[lead])) ++lead;
        pending_.erase(0, lead);
        state_ = State::kAnswer;
        skip_blanks_ = pending_.empty();
        continue;
      }
      case State::kAnswer:
        if (skip_blanks_) {
          size_t lead = 0;
          while (lead < pending_.size() && blank(pending_[lead])) ++lead;
          pending_.erase(0, lead);
          if (pending_.empty()) return;
          skip_blanks_ = false;
        }
        content += pending_;
        pending_.clear();
        return;
    }
  }
}

void ReasoningParser::finish(std::string& reasoning, std::string& content) {
  switch (state_) {
    case State::kStart:
    case State::kAnswer:
      if (!skip_blanks_) content += pending_;
      break;
    case State::kThinking:
      reasoning += pending_;  // cut while thinking
      break;
  }
  pending_.clear();
}

}  // namespace llms::server
