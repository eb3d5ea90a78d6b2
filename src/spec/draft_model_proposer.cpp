#include "spec/draft_model_proposer.h"

#include <algorithm>
#include <chrono>

#include "sampling/sampler.h"
#include "util/error.h"

namespace llms::spec {

DraftModelProposer::DraftModelProposer(std::unique_ptr<model::ModelRunner> runner,
                                       int32_t block_size, int32_t n_blocks,
                                       kv::KvCacheType kv_type, int32_t n_valid_tokens,
                                       int32_t max_tokens_per_pass)
    : runner_(std::move(runner)),
      kv_(n_blocks, block_size, /*enable_prefix_caching=*/false),
      n_valid_tokens_(n_valid_tokens),
      max_tokens_per_pass_(max_tokens_per_pass) {
  if (!runner_) throw Error(Error::Kind::kInvalidArgument, "draft proposer: no draft model");
  if (n_valid_tokens < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                "draft proposer: the tokenizer's vocabulary exceeds the draft model's output");
  }
  if (max_tokens_per_pass < 1) {
    throw Error(Error::Kind::kInvalidArgument, "draft proposer: max_tokens_per_pass must be >= 1");
  }
  runner_->allocate_kv(block_size, n_blocks, kv_type);
  runner_->reserve(max_tokens_per_pass, 1);
}

void DraftModelProposer::remove(int64_t seq_id) {
  kv_.free(seq_id);
  seqs_.erase(seq_id);
}

bool DraftModelProposer::extend(int64_t seq_id, Sequence& seq, int64_t n_new) {
  const auto n_have = static_cast<int64_t>(seq.computed.size());
  copies_.clear();
  return kv_.allocate(seq_id, n_have, n_have + n_new, copies_);
}

void DraftModelProposer::propose(std::span<const ProposalRequest> requests,
                                 std::vector<std::vector<int32_t>>& drafts) {
  drafts.assign(requests.size(), {});
  last_passes_.clear();
  std::vector<Work> work(requests.size());
  std::vector<Work*> items;
  for (size_t i = 0; i < requests.size(); ++i) {
    const ProposalRequest& r = requests[i];
    if (r.max_drafts < 1 || r.tokens.empty()) continue;
    auto [it, inserted] = seqs_.try_emplace(r.seq_id);
    if (inserted) kv_.add_sequence(r.seq_id, {});
    Sequence& seq = it->second;
    // What the draft computed and the sequence still agree on; at least the last known token is
    // recomputed, since its logits give the first draft.
    const size_t limit = std::min(seq.computed.size(), r.tokens.size() - 1);
    size_t lcp = 0;
    while (lcp < limit && seq.computed[lcp] == r.tokens[lcp]) ++lcp;
    seq.computed.resize(lcp);
    kv_.truncate(r.seq_id, static_cast<int64_t>(lcp));
    Work& w = work[i];
    w.request = i;
    w.seq_id = r.seq_id;
    w.seq = &seq;
    w.pending.assign(r.tokens.begin() + static_cast<std::ptrdiff_t>(lcp), r.tokens.end());
    items.push_back(&w);
  }
  // Draft position 1 needs the catch-up; each later one a single token (the previous draft).
  for (int32_t position = 0; !items.empty(); ++position) {
    run_passes(items, drafts);
    std::vector<Work*> next;
    for (Work* w : items) {
      const std::vector<int32_t>& d = drafts[w->request];
      if (w->failed || d.empty()) continue;
      if (static_cast<int32_t>(d.size()) >= requests[w->request].max_drafts) continue;
      w->pending.assign(1, d.back());
      next.push_back(w);
    }
    items.swap(next);
  }
}

void DraftModelProposer::run_passes(std::vector<Work*>& items,
                                    std::vector<std::vector<int32_t>>& drafts) {
  // Each item's offset into its pending tokens.
  std::vector<size_t> done(items.size(), 0);
  for (;;) {
    batch_.clear();
    std::vector<size_t> in_batch;
    int32_t budget = max_tokens_per_pass_;
    for (size_t i = 0; i < items.size() && budget > 0; ++i) {
      Work& w = *items[i];
      if (w.failed || done[i] == w.pending.size()) continue;
      const auto n_left = static_cast<int32_t>(w.pending.size() - done[i]);
      const int32_t n = std::min(n_left, budget);
      const int64_t seq_id = w.seq_id;
      if (!extend(seq_id, *w.seq, n)) {
        // The draft pool is full: this sequence goes without drafts and gives its blocks back.
        w.failed = true;
        remove(seq_id);
        continue;
      }
      const std::span<const int32_t> chunk(w.pending.data() + done[i], static_cast<size_t>(n));
      batch_.add_sequence(seq_id, chunk, static_cast<int32_t>(w.seq->computed.size()),
                          kv_.block_table(seq_id), n == n_left ? 1 : 0);
      w.seq->computed.insert(w.seq->computed.end(), chunk.begin(), chunk.end());
      done[i] += static_cast<size_t>(n);
      budget -= n;
      in_batch.push_back(i);
    }
    if (in_batch.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    const model::LogitsView logits = runner_->execute(batch_);
    ++n_passes_;
    last_passes_.push_back(
        {static_cast<int32_t>(batch_.tokens.size()),
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    int32_t row = 0;
    for (size_t i : in_batch) {
      Work& w = *items[i];
      if (done[i] != w.pending.size()) continue;  // no logits row: its chunk did not finish
      const std::span<const float> r = logits.row(row++);
      const size_t width = std::min(r.size(), static_cast<size_t>(n_valid_tokens_));
      drafts[w.request].push_back(sampling::argmax(r.first(width)));
    }
  }
}

}  // namespace llms::spec
