// structured/grammar_constraint: see grammar_constraint.h.
#include "structured/grammar_constraint.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compiled_grammar.h"
#include "structured/matcher.h"
#include "util/error.h"

namespace llms::structured {
namespace {

class GrammarConstraint final : public sampling::TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar)
      : matcher_(grammar), words_(static_cast<size_t>(token_index(*grammar).n_mask_words())) {}

  bool mask(std::span<float> logits) override {
    matcher_.fill_mask(words_);
    constexpr float kNever = -std::numeric_limits<float>::infinity();
    const size_t n_rows = logits.size();
    bool any = false;
    // Word by word: most words are all allowed (skipped) or all refused (filled); only mixed
    // words visit their refused bits, one count-trailing-zeros each.
    for (size_t w = 0; w < words_.size(); ++w) {
      const size_t first = w * 32;
      if (first >= n_rows) break;
      const size_t end = std::min(first + 32, n_rows);
      // Bits past the last row are treated as allowed: there is nothing to mask there.
      const uint32_t in_rows = end - first == 32 ? 0xffffffffu : (1u << (end - first)) - 1u;
      const uint32_t refused = ~words_[w] & in_rows;
      if (refused != in_rows) any = true;
      if (refused == 0) continue;
      if (refused == 0xffffffffu) {
        std::fill(logits.begin() + static_cast<std::ptrdiff_t>(first),
                  logits.begin() + static_cast<std::ptrdiff_t>(first + 32), kNever);
        continue;
      }
      for (uint32_t r = refused; r != 0; r &= r - 1) {
        logits[first + static_cast<size_t>(std::countr_zero(r))] = kNever;
      }
    }
    // Rows the vocabulary does not cover (a padded output matrix) are never allowed.
    for (size_t id = words_.size() * 32; id < n_rows; ++id) logits[id] = kNever;
    return any;
  }

  void accept(int32_t token) override {
    if (!matcher_.accept_token(token)) {
      // The sampler drew from the masked row, so this is a bug of ours, not the request's.
      throw Error(Error::Kind::kInternal, "structured output: the sampler produced token " +
                                              std::to_string(token) +
                                              ", which the grammar does not allow");
    }
  }

 private:
  Matcher matcher_;
  std::vector<uint32_t> words_;
};

}  // namespace

GrammarConstraintFactory::GrammarConstraintFactory(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  if (!grammar_) throw Error(Error::Kind::kInvalidArgument, "grammar constraint: no grammar");
}

bool GrammarConstraintFactory::reusable() const { return !grammar_->exhausted(); }

std::unique_ptr<sampling::TokenConstraint> GrammarConstraintFactory::make() const {
  return std::make_unique<GrammarConstraint>(grammar_);
}

}  // namespace llms::structured
