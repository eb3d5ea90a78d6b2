// spec/ngram_proposer: prompt lookup. For n from max_n down to min_n, find the latest earlier
// place where the sequence's last n tokens occurred (in the prompt or the output so far) and
// propose the tokens that followed it. Editing, summarising and code-completion answers repeat
// long runs of their prompt, which this finds without a second model. Stateless.
#pragma once

#include "spec/proposer.h"

namespace llms::spec {

// The proposal for one sequence (at most max_drafts tokens; empty when no n-gram recurs).
std::vector<int32_t> lookup_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                                  int32_t max_drafts);

class NgramProposer final : public Proposer {
 public:
  NgramProposer(int32_t min_n, int32_t max_n);
  void propose(std::span<const ProposalRequest> requests,
               std::vector<std::vector<int32_t>>& drafts) override;

 private:
  int32_t min_n_;
  int32_t max_n_;
};

}  // namespace llms::spec
