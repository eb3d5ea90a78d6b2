// Shared by the grammar engine's fuzz targets (regex_fuzz, grammar_fuzz): a small vocabulary and
// a short walk that checks the matcher's invariants on whatever the compiler accepted.
//
// Checks, beyond "no sanitizer finding":
//   - every token fill_mask allows is accepted by accept_token, and a few it does not allow are
//     refused (the mask agrees with the parser in both directions on the tokens tried);
//   - after every accepted token the text can still complete or is complete (no dead prefix);
//   - the stop token is allowed exactly when the text is a complete sentence;
//   - rollback(1) and accepting the same token again gives the same parse position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "structured/matcher.h"
#include "util/error.h"

namespace llms::structured::fuzzing {

inline void check(bool ok) {
  if (!ok) std::abort();
}

inline constexpr int32_t kStop = 256;

// The 256 single bytes, a stop token, then tokens that cross symbol boundaries and split UTF-8.
inline std::shared_ptr<const TokenIndex> fuzz_index() {
  static const std::shared_ptr<const TokenIndex> index = [] {
    Vocabulary v;
    for (int b = 0; b < 256; ++b) {
      v.token_bytes.emplace_back(1, static_cast<char>(b));
      v.is_special.push_back(0);
    }
    v.token_bytes.emplace_back();
    v.is_special.push_back(1);
    v.stop_token_ids = {kStop};
    for (const char* s : {"ab",   "abc",      "\"a",      "\",",      "\":",
                          "{\"",  "[1",       "],",       "  ",       "\n",
                          "\\n",  "\xC3\xA9", "\xE4\xB8", "\xAD\"",   "12",
                          "true", "null",     "xyz",      "aaaaaaaa", "\xF0\x9F\x98\x80"}) {
      v.token_bytes.emplace_back(s);
      v.is_special.push_back(0);
    }
    return build_token_index(std::move(v));
  }();
  return index;
}

inline CompileLimits fuzz_limits() {
  return CompileLimits{std::chrono::milliseconds(300), 300'000};
}

// Walks up to `steps` tokens chosen by the input's bytes. A mask whose lazy walk over the
// vocabulary exceeds its own budget is refused with llms::Error(kInvalidArgument, "constraint too
// complex: ...") (the engine then ends that request); that ends the walk, anything else fails.
inline void walk_unguarded(const std::shared_ptr<const CompiledGrammar>& grammar,
                           const uint8_t* data, size_t size, int steps);

inline void walk(const std::shared_ptr<const CompiledGrammar>& grammar, const uint8_t* data,
                 size_t size, int steps) {
  try {
    walk_unguarded(grammar, data, size, steps);
  } catch (const llms::Error& e) {
    check(e.kind() == llms::Error::Kind::kInvalidArgument &&
          std::string_view(e.what()).find("constraint too complex") != std::string_view::npos);
  }
}

inline void walk_unguarded(const std::shared_ptr<const CompiledGrammar>& grammar,
                           const uint8_t* data, size_t size, int steps) {
  const TokenIndex& index = token_index(*grammar);
  Matcher m(grammar);
  std::vector<uint32_t> words(static_cast<size_t>(index.n_mask_words()));
  size_t cursor = 0;
  auto next_byte = [&]() -> uint32_t { return size == 0 ? 0 : data[cursor++ % size]; };
  for (int step = 0; step < steps; ++step) {
    m.fill_mask(words);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < index.n_tokens(); ++id) {
      if (words[static_cast<size_t>(id) / 32] >> (id % 32) & 1u) allowed.push_back(id);
    }
    const bool stop_allowed = words[kStop / 32] >> (kStop % 32) & 1u;
    check(stop_allowed == m.is_accepting());
    check(m.is_accepting() || m.can_continue() || allowed.empty());
    // A few tokens outside the mask must be refused.
    for (int probe = 0; probe < 4; ++probe) {
      const auto id = static_cast<int32_t>((next_byte() * 7 + next_byte()) %
                                           static_cast<uint32_t>(index.n_tokens()));
      if (words[static_cast<size_t>(id) / 32] >> (id % 32) & 1u) continue;
      Matcher copy = m;
      check(!copy.accept_token(id));
    }
    if (allowed.empty()) return;
    const int32_t pick = allowed[next_byte() % allowed.size()];
    if (pick == kStop) {
      check(m.accept_token(pick));
      check(m.is_stopped() && !m.can_continue());
      return;
    }
    check(m.accept_token(pick));
    check(m.is_accepting() || m.can_continue());
    const std::string position = m.debug_state();
    m.rollback(1);
    check(m.accept_token(pick));
    check(m.debug_state() == position);
  }
}

}  // namespace llms::structured::fuzzing
