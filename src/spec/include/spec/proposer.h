// spec/proposer: what proposes draft tokens for the engine to verify.
//
// Each step the engine asks once, for every sequence that will speculate, with the sequence's
// known tokens (prompt and accepted output, the last one just sampled) and how many drafts it
// wants at most; a proposer may return fewer (none when it has nothing to say). Proposals are
// only proposals: verification keeps the target model's output whatever they are, so a
// proposer trades nothing but speed. A proposer may keep per-sequence state (a draft model's
// KV cache): it finds out by itself how much of it the accepted tokens still match, and
// remove() tells it a sequence is gone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llms::spec {

struct ProposalRequest {
  int64_t seq_id = 0;
  std::span<const int32_t> tokens;  // prompt + output so far; valid during propose()
  int32_t max_drafts = 0;           // >= 1
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // drafts is resized to requests.size(); drafts[i] gets at most requests[i].max_drafts tokens.
  virtual void propose(std::span<const ProposalRequest> requests,
                       std::vector<std::vector<int32_t>>& drafts) = 0;
  // Token trees: as propose(), and parents[i] (resized to requests.size()) is empty when
  // drafts[i] is a chain, else one entry per draft: the index in drafts[i] of the draft it
  // follows, or -1 for one that follows the known tokens directly; parents precede children.
  // max_drafts then bounds the tree's nodes. Proposers of chains need not override it.
  virtual void propose_tree(std::span<const ProposalRequest> requests,
                            std::vector<std::vector<int32_t>>& drafts,
                            std::vector<std::vector<int32_t>>& parents) {
    propose(requests, drafts);
    parents.assign(requests.size(), {});
  }
  // The sequence ended (or will not speculate again soon): drop what is kept for it.
  virtual void remove(int64_t /*seq_id*/) {}
  // How many of the sequence's known tokens the proposer would compute before drafting for it
  // (a draft model's cache behind them: a whole prompt the first time), for the draft-length
  // policy to weigh; 0 for a proposer that keeps no state.
  virtual int64_t backlog(int64_t /*seq_id*/, std::span<const int32_t> /*tokens*/) const {
    return 0;
  }
};

}  // namespace llms::spec
