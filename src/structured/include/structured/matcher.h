// structured/matcher: one constrained sequence's position in a compiled grammar.
//
// A Matcher is cheap to create and to copy (n > 1 samples fork it; copies share the grammar and
// the immutable parse history, and diverge independently). It is not thread-safe itself; distinct
// matchers over one grammar may be used from distinct threads.
//
// Exactness: fill_mask allows token t iff some complete sentence of the grammar starts with the
// text accepted so far followed by t's bytes (tokens that span several grammar symbols, partial
// UTF-8 characters and whitespace included). Special and empty tokens are never allowed; stop
// tokens are allowed exactly when is_accepting().
//
// A moved-from Matcher may only be destroyed or assigned to.
//
// History: every successful accept_token / accept_bytes call is one step; rollback(n) undoes the
// last n steps, up to kMaxRollback of them (speculative decoding rejects drafts).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "structured/grammar.h"

namespace llms::structured {

class Matcher {
 public:
  static constexpr int32_t kMaxRollback = 64;

  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~Matcher();
  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher& other);
  Matcher(Matcher&& other) noexcept;
  Matcher& operator=(Matcher&& other) noexcept;

  // Bit (id % 32) of words[id / 32] is set iff token id is allowed next. words.size() must be
  // (n_tokens + 31) / 32 (else llms::Error(kInvalidArgument)). All zero when nothing is allowed
  // (a dead end or after a stop token): never a crash.
  void fill_mask(std::span<uint32_t> words);

  // Advances by one token; false (state unchanged) if it is not allowed. Accepting a stop token
  // (only possible where is_accepting()) ends the sentence: nothing is allowed after it.
  bool accept_token(int32_t id);

  // Advances by raw bytes (tests, forced text); false (state unchanged) if they cannot continue a
  // valid sentence. An empty string is accepted and still counts as a step.
  bool accept_bytes(std::string_view bytes);

  // Undoes the last n steps; llms::Error(kInvalidArgument) if n < 0 or more than the history
  // kept (min(kMaxRollback, steps taken)).
  void rollback(int32_t n_steps);

  bool is_accepting() const;  // the text so far is a complete sentence (and not yet stopped)
  bool can_continue() const;  // some non-empty continuation exists
  bool is_stopped() const;    // a stop token was accepted
  int32_t n_tokens_accepted() const;  // steps taken (tokens and accept_bytes calls)

  // For tests and debugging: a canonical description of the parse position. Two matchers of one
  // grammar with equal descriptions have the same futures.
  std::string debug_state() const;

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct State;  // the parse position and its bounded history (matcher.cpp)

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<State> state_;
};

}  // namespace llms::structured
