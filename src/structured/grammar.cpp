// structured/grammar: the compile entry points (see grammar.h).
#include "structured/grammar.h"

#include <string>

#include "compiled_grammar.h"
#include "grammar_parser.h"
#include "regex_parser.h"
#include "util/error.h"

namespace llms::structured {

std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view grammar_text,
                                                       std::shared_ptr<const TokenIndex> index,
                                                       const CompileLimits& limits) {
  CompileBudget budget(limits);
  return compile_grammar(grammar_text, std::move(index), budget);
}

std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view grammar_text,
                                                       std::shared_ptr<const TokenIndex> index,
                                                       CompileBudget& budget) {
  budget.charge(static_cast<int64_t>(grammar_text.size() / 64), "grammar text");
  const Grammar grammar = parse_gbnf(grammar_text, budget);
  return link_grammar(grammar, std::move(index), budget, "grammar");
}

std::shared_ptr<const CompiledGrammar> compile_regex(std::string_view pattern,
                                                     std::shared_ptr<const TokenIndex> index,
                                                     const CompileLimits& limits) {
  CompileBudget budget(limits);
  Grammar grammar;
  const int32_t root = parse_regex(pattern, grammar.arena, budget);
  grammar.rules.push_back(GrammarRule{"root", root, 0});
  grammar.root = 0;
  return link_grammar(grammar, std::move(index), budget, "regex");
}

std::shared_ptr<const CompiledGrammar> compile_choices(std::span<const std::string> choices,
                                                       std::shared_ptr<const TokenIndex> index,
                                                       const CompileLimits& limits) {
  if (choices.empty()) throw Error(Error::Kind::kInvalidArgument, "choices: the list is empty");
  CompileBudget budget(limits);
  Grammar grammar;
  std::vector<int32_t> branches;
  branches.reserve(choices.size());
  for (const std::string& choice : choices) {
    budget.charge(1 + static_cast<int64_t>(choice.size()), "choice bytes");
    branches.push_back(grammar.arena.add_literal(choice));
  }
  const int32_t root = grammar.arena.add_node(ExprKind::kAlt, branches);
  grammar.rules.push_back(GrammarRule{"root", root, 0});
  grammar.root = 0;
  return link_grammar(grammar, std::move(index), budget, "choices");
}

const TokenIndex& token_index(const CompiledGrammar& grammar) { return *grammar.index; }

GrammarStats grammar_stats(const CompiledGrammar& grammar) {
  GrammarStats stats;
  stats.states_built = grammar.automaton->n_states();
  grammar.automaton->build_all();
  stats.states = grammar.automaton->n_states();
  stats.rules = static_cast<int32_t>(grammar.rules.size());
  stats.mask_entries = grammar.cached_mask_infos();
  return stats;
}

}  // namespace llms::structured
