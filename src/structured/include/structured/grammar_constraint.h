// structured/grammar_constraint: a compiled grammar as the sampler's TokenConstraint.
//
// The sampler knows nothing of grammars (sampling/token_constraint.h); this adapter gives each
// sample a Matcher of its own: mask() sets every token the matcher does not allow to -infinity
// (rows past the vocabulary's, padding, always), accept() moves the matcher on.
#pragma once

#include <memory>

#include "sampling/token_constraint.h"
#include "structured/grammar.h"

namespace llms::structured {

class GrammarConstraintFactory final : public sampling::TokenConstraintFactory {
 public:
  explicit GrammarConstraintFactory(std::shared_ptr<const CompiledGrammar> grammar);
  std::unique_ptr<sampling::TokenConstraint> make() const override;
  bool reusable() const override;
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
};

}  // namespace llms::structured
