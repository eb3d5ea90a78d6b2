// spec/draft_model_proposer: a smaller model with the same tokenizer drafts the next tokens.
//
// The draft model runs behind its own ModelRunner (sharing the target's compute threads) with
// its own paged KV pool: a block table per sequence in a kv::KvCacheManager without prefix
// caching. Each propose() call first brings every sequence's draft cache up to its known
// tokens (the longest common prefix of what the draft computed and the tokens it is given
// stays; the rest, rejected drafts included, is rolled back and the new tokens computed, in
// passes of at most max_tokens_per_pass tokens across sequences), then drafts greedily: one
// batched forward pass over all sequences per draft position. Proposals are point masses (the
// draft's argmax), which the verifier's rejection rule handles for any target temperature.
//
// With tree_width > 1, propose_tree() drafts a token tree instead (a dynamic tree, as EAGLE-2
// builds one): a candidate's score is the draft's log-probability of its whole branch; each
// level expands the tree_width best candidates of the newest level (one batched pass per level,
// with the tree attention of kv/step_batch.h), each adding its tree_width likeliest tokens as
// candidates; the tree is the max_drafts best candidates overall (a child never scores above its
// parent, so they form a tree). Where the draft is sure the tree is a deep chain; where it
// hesitates it branches. Expansion stops when no candidate of the newest level could still
// enter the best max_drafts, or at depth max_drafts. The tree's keys and values then leave the
// draft cache (the next catch-up computes the branch the target kept).
//
// A sequence whose draft cache cannot get blocks gets no drafts and its cache is dropped, so a
// full draft pool only slows speculation down, never fails a request.
#pragma once

#include <memory>
#include <unordered_map>

#include "kv/kv_cache_manager.h"
#include "model/model_runner.h"
#include "spec/proposer.h"

namespace llms::spec {

class DraftModelProposer final : public Proposer {
 public:
  // `runner` has no KV storage yet; the proposer gives it n_blocks of block_size tokens.
  // Drafts are ids below n_valid_tokens (the tokenizer's vocabulary: a padded output row is
  // never proposed).
  DraftModelProposer(std::unique_ptr<model::ModelRunner> runner, int32_t block_size,
                     int32_t n_blocks, kv::KvCacheType kv_type, int32_t n_valid_tokens,
                     int32_t max_tokens_per_pass = 1024, int32_t tree_width = 1);

  void propose(std::span<const ProposalRequest> requests,
               std::vector<std::vector<int32_t>>& drafts) override;
  void propose_tree(std::span<const ProposalRequest> requests,
                    std::vector<std::vector<int32_t>>& drafts,
                    std::vector<std::vector<int32_t>>& parents) override;
  void remove(int64_t seq_id) override;
  int64_t backlog(int64_t seq_id, std::span<const int32_t> tokens) const override;

  // Draft forward passes run so far (for the engine's statistics and tests).
  int64_t n_passes() const { return n_passes_; }
  // The passes of the latest propose() call: tokens and seconds each, for the draft-length
  // policy's cost model (catch-up passes are long, drafting passes short).
  struct PassTiming {
    int32_t n_tokens = 0;
    double seconds = 0.0;
  };
  const std::vector<PassTiming>& last_passes() const { return last_passes_; }
  const kv::KvCacheManager& kv_cache() const { return kv_; }

 private:
  struct Sequence {
    std::vector<int32_t> computed;  // tokens whose keys and values are in the draft cache
  };
  // A candidate node of a token tree: its token, the candidate it follows (-1: the root), the
  // draft's log-probability of its whole branch, its depth (1: follows the root) and its slot in
  // the draft cache's tree region once expanded (-1 before).
  struct Candidate {
    int32_t token = 0;
    int32_t parent = -1;
    float score = 0.0f;
    int32_t depth = 1;
    int32_t region = -1;
  };
  struct Work {
    size_t request = 0;
    int64_t seq_id = 0;
    Sequence* seq = nullptr;
    std::vector<int32_t> pending;  // tokens still to compute before the next draft
    bool failed = false;
    // Token trees: every candidate so far (a child is created after its parent), the ones the
    // next pass expands, and the parents of the expanded ones in the draft cache's tree region
    // (region index of the parent, -1 for the root).
    std::vector<Candidate> candidates;
    std::vector<int32_t> frontier;        // indices in candidates
    std::vector<int32_t> region_parents;  // per expanded candidate, in expansion order
    size_t level_begin = 0;               // the newest level's first candidate
  };

  // Brings every item's draft cache up to its request's tokens: drops what no longer matches,
  // gathers the rest in `pending`. Requests that want no drafts get no item.
  std::vector<Work*> catch_up_items(std::span<const ProposalRequest> requests,
                                    std::vector<Work>& work);
  // Computes every work item's pending tokens (in passes) and hands each item's last row (the
  // one after its pending tokens) to on_row(Work&, row).
  template <class OnRow>
  void run_passes(std::vector<Work*>& items, OnRow&& on_row);
  // Adds to w.candidates the tree_width likeliest tokens of a draft row after candidate
  // `parent` (-1: the root).
  void add_candidates(std::span<const float> row, int32_t parent, Work& w) const;
  // Chooses the next level's frontier (false: nothing left worth expanding).
  bool choose_frontier(Work& w, int32_t max_nodes) const;
  // The max_nodes best candidates as drafts in creation order, parents as draft indices.
  static void select_tree(const Work& w, int32_t max_nodes, std::vector<int32_t>& drafts,
                          std::vector<int32_t>& parents);
  bool extend(int64_t seq_id, Sequence& seq, int64_t n_new);
  // Runs batch_ and records the pass in last_passes_ (its tokens and seconds).
  model::LogitsView execute_timed();

  std::unique_ptr<model::ModelRunner> runner_;
  kv::KvCacheManager kv_;
  int32_t n_valid_tokens_;
  int32_t max_tokens_per_pass_;
  int32_t tree_width_;
  std::unordered_map<int64_t, Sequence> seqs_;
  kv::StepBatch batch_;
  std::vector<kv::BlockCopy> copies_;
  int64_t n_passes_ = 0;
  std::vector<PassTiming> last_passes_;
};

}  // namespace llms::spec
