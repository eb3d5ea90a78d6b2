// structured/grammar: grammars, regular expressions and choice lists compiled into an immutable
// automaton that computes exact token masks over one TokenIndex.
//
// A CompiledGrammar is shared by every sequence that uses the constraint (a Matcher per
// sequence holds the state). It is safe to use from several threads at once: its lazily filled
// caches (per-state token masks) are internally synchronised.
//
// Formats (see docs/STRUCTURED.md for the full contract):
// - compile_grammar: GBNF (rules `name ::= ...`, start rule `root`, literals, character
//   classes, `.`, groups, `| * + ? {m} {m,} {m,n}`, comments) plus `/regex/` terminals.
// - compile_regex: the whole output matches the pattern (ECMA-262 subset that JSON Schema
//   `pattern` uses; `^`/`$` only at the very ends; no backreferences or lookaround).
// - compile_choices: the whole output is exactly one of the strings.
//
// Errors: llms::Error(kInvalidArgument) whose message names the problem and where it is
// (line:column in a grammar, byte offset in a regex), or the budget that was exceeded.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "structured/compile_budget.h"
#include "structured/vocabulary.h"

namespace llms::structured {

class CompiledGrammar;  // opaque; defined in compiled_grammar.h (internal)

std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view grammar_text,
                                                       std::shared_ptr<const TokenIndex> index,
                                                       const CompileLimits& limits = {});
// The same, charging an existing budget (e.g. one a JSON Schema compilation already used).
std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view grammar_text,
                                                       std::shared_ptr<const TokenIndex> index,
                                                       CompileBudget& budget);

std::shared_ptr<const CompiledGrammar> compile_regex(std::string_view pattern,
                                                     std::shared_ptr<const TokenIndex> index,
                                                     const CompileLimits& limits = {});

std::shared_ptr<const CompiledGrammar> compile_choices(std::span<const std::string> choices,
                                                       std::shared_ptr<const TokenIndex> index,
                                                       const CompileLimits& limits = {});

// The index a compiled grammar masks over.
const TokenIndex& token_index(const CompiledGrammar& grammar);

// The shape of a compiled grammar and what its masks have cached so far (tests, diagnostics).
// The automaton is built on demand: grammar_stats() builds all of it to count its states.
struct GrammarStats {
  int32_t states = 0;        // automaton states, all rules
  int32_t states_built = 0;  // of those, made by compiling and masking before this call
  int32_t rules = 0;         // rules the parser calls (the others are inlined)
  int64_t mask_entries = 0;  // per-state token walks cached so far
};
GrammarStats grammar_stats(const CompiledGrammar& grammar);

}  // namespace llms::structured
