// server/constraint_compiler: see constraint_compiler.h.
#include "server/constraint_compiler.h"

#include <fmt/core.h>

#include "server/api_error.h"
#include "structured/compile_budget.h"
#include "structured/grammar.h"
#include "structured/grammar_constraint.h"
#include "structured/json_schema.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::server {

structured::Vocabulary structured_vocabulary(const tokenizer::Tokenizer& tok,
                                             int32_t n_logit_rows) {
  structured::Vocabulary v;
  const int32_t n = std::max(n_logit_rows, tok.n_vocab());
  v.token_bytes.resize(static_cast<size_t>(n));
  v.is_special.assign(static_cast<size_t>(n), 1);
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string_view bytes = tok.token_bytes(id);
    v.token_bytes[static_cast<size_t>(id)] = std::string(bytes);
    // Text a model may write: normal, user-defined (Qwen's <tool_call>) and byte tokens. Control
    // tokens, unused (padding) ones and UNK never are.
    const tokenizer::TokenType type = tok.token_type(id);
    const bool text =
        type == tokenizer::TokenType::kNormal || type == tokenizer::TokenType::kUserDefined ||
        type == tokenizer::TokenType::kByte || type == tokenizer::TokenType::kUndefined;
    v.is_special[static_cast<size_t>(id)] = !text || tok.is_special(id) || bytes.empty() ? 1 : 0;
  }
  v.stop_token_ids = tok.end_of_generation_ids();
  return v;
}

ConstraintCompiler::ConstraintCompiler(const tokenizer::Tokenizer& tok, int32_t n_logit_rows)
    : index_(structured::build_token_index(structured_vocabulary(tok, n_logit_rows))) {}

std::shared_ptr<const sampling::TokenConstraintFactory> ConstraintCompiler::cached(
    const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return nullptr;
  order_.remove(key);
  if (!it->second->reusable()) {  // its automaton ran out of budget: the caller compiles afresh
    cache_.erase(it);
    return nullptr;
  }
  order_.push_front(key);
  return it->second;
}

void ConstraintCompiler::remember(const std::string& key,
                                  std::shared_ptr<const sampling::TokenConstraintFactory> f) {
  std::lock_guard lock(mutex_);
  if (cache_.count(key) != 0) return;
  cache_[key] = std::move(f);
  order_.push_front(key);
  if (order_.size() > kCacheSize) {
    cache_.erase(order_.back());
    order_.pop_back();
  }
}

std::shared_ptr<const sampling::TokenConstraintFactory> ConstraintCompiler::compile(
    const StructuredOutput& so) {
  using Kind = StructuredOutput::Kind;
  if (!so.active()) return nullptr;
  std::string key;
  switch (so.kind) {
    case Kind::kJsonObject:
      key = "o";
      break;
    case Kind::kJsonSchema:
      key = "s" + (so.ordered_schema.is_null() ? so.schema.dump() : so.ordered_schema.dump());
      break;
    case Kind::kRegex:
      key = "r" + so.text;
      break;
    case Kind::kChoice:
      key = "c" + nlohmann::json(so.choices).dump();
      break;
    case Kind::kGrammar:
      key = "g" + so.text;
      break;
    case Kind::kNone:
      return nullptr;
  }
  if (auto hit = cached(key)) return hit;
  std::shared_ptr<const structured::CompiledGrammar> grammar;
  try {
    const structured::JsonSchemaOptions options;
    switch (so.kind) {
      case Kind::kJsonObject: {
        structured::CompileBudget budget;
        grammar = structured::compile_grammar(structured::any_json_object_grammar(options), index_,
                                              budget);
        break;
      }
      case Kind::kJsonSchema: {
        structured::CompileBudget budget;
        const std::string text =
            so.ordered_schema.is_null()
                ? structured::json_schema_to_grammar(so.schema, options, budget)
                : structured::json_schema_to_grammar(so.ordered_schema, options, budget);
        grammar = structured::compile_grammar(text, index_, budget);
        break;
      }
      case Kind::kRegex:
        grammar = structured::compile_regex(so.text, index_);
        break;
      case Kind::kChoice:
        grammar = structured::compile_choices(so.choices, index_);
        break;
      case Kind::kGrammar:
        grammar = structured::compile_grammar(so.text, index_);
        break;
      case Kind::kNone:
        return nullptr;
    }
  } catch (const Error& e) {
    throw_invalid(so.param, fmt::format("{}: {}", so.param, e.what()));
  }
  auto factory = std::make_shared<const structured::GrammarConstraintFactory>(std::move(grammar));
  remember(key, factory);
  return factory;
}

std::shared_ptr<const sampling::TokenConstraintFactory> ConstraintCompiler::compile_grammar_text(
    const std::string& grammar, const std::string& param) {
  const std::string key = "g" + grammar;
  if (auto hit = cached(key)) return hit;
  std::shared_ptr<const structured::CompiledGrammar> compiled;
  try {
    compiled = structured::compile_grammar(grammar, index_);
  } catch (const Error& e) {
    throw_invalid(param, fmt::format("{}: {}", param, e.what()));
  }
  auto factory = std::make_shared<const structured::GrammarConstraintFactory>(std::move(compiled));
  remember(key, factory);
  return factory;
}

}  // namespace llms::server
