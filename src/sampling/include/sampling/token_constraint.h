// sampling/token_constraint: which tokens may come next, for structured output.
//
// The sampler does not know about grammars: it is given a TokenConstraint (structured/'s matcher
// behind an adapter), masks every row it processes with it, before anything else in its chain,
// and tells it every token it accepts. Drafted tokens that a constraint forbids get probability 0
// in the row they are checked against, so speculative decoding needs nothing more, and the
// constraint never sees a token that was not kept.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "util/error.h"

namespace llms::sampling {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token that may not come next to -infinity. Returns false when no
  // token may come next (the logits are then unspecified).
  virtual bool mask(std::span<float> logits) = 0;
  // The token was emitted (it was allowed): the constraint moves past it.
  virtual void accept(int32_t token) = 0;
};

// Makes one constraint per sample of a request (n > 1 samples each get their own).
class TokenConstraintFactory {
 public:
  virtual ~TokenConstraintFactory() = default;
  virtual std::unique_ptr<TokenConstraint> make() const = 0;
  // False once a factory should no longer be shared by later requests (a grammar whose automaton
  // ran out of its budget): a cache then compiles the constraint afresh.
  virtual bool reusable() const { return true; }
};

// Thrown by the sampler when its constraint allows no next token; the engine ends that sample.
class ConstraintDeadEnd : public Error {
 public:
  ConstraintDeadEnd()
      : Error(Error::Kind::kInvalidArgument,
              "structured output: no token can continue the constrained output") {}
};

}  // namespace llms::sampling
