#include "spec/draft_model_proposer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>

#include "sampling/sampler.h"
#include "spec/speculative_config.h"
#include "util/error.h"

namespace llms::spec {
namespace {

// How many leading tokens the draft computed and the sequence still agree on, never the last
// known token: it is recomputed, since its logits give the first draft.
size_t agreed_prefix(const std::vector<int32_t>& computed, std::span<const int32_t> tokens) {
  const size_t limit = std::min(computed.size(), tokens.size() - 1);
  size_t lcp = 0;
  while (lcp < limit && computed[lcp] == tokens[lcp]) ++lcp;
  return lcp;
}

}  // namespace

DraftModelProposer::DraftModelProposer(std::unique_ptr<model::ModelRunner> runner,
                                       int32_t block_size, int32_t n_blocks,
                                       kv::KvCacheType kv_type, int32_t n_valid_tokens,
                                       int32_t max_tokens_per_pass, int32_t tree_width)
    : runner_(std::move(runner)),
      kv_(n_blocks, block_size, /*enable_prefix_caching=*/false),
      n_valid_tokens_(n_valid_tokens),
      max_tokens_per_pass_(max_tokens_per_pass),
      tree_width_(tree_width) {
  if (!runner_) throw Error(Error::Kind::kInvalidArgument, "draft proposer: no draft model");
  if (n_valid_tokens < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                "draft proposer: the tokenizer's vocabulary exceeds the draft model's output");
  }
  if (tree_width < 1 || tree_width > kMaxDraftTreeWidth) {
    throw Error(Error::Kind::kInvalidArgument, "draft proposer: tree_width out of range");
  }
  if (max_tokens_per_pass < 1) {
    throw Error(Error::Kind::kInvalidArgument, "draft proposer: max_tokens_per_pass must be >= 1");
  }
  runner_->allocate_kv(block_size, n_blocks, kv_type, runner_->config().single_kv_layout());
  runner_->reserve(max_tokens_per_pass, 1);
}

void DraftModelProposer::remove(int64_t seq_id) {
  kv_.free(seq_id);
  seqs_.erase(seq_id);
}

// What catch_up_items() would leave pending: the tokens past the agreed prefix (at least the
// last one).
int64_t DraftModelProposer::backlog(int64_t seq_id, std::span<const int32_t> tokens) const {
  if (tokens.empty()) return 0;
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return static_cast<int64_t>(tokens.size());
  return static_cast<int64_t>(tokens.size() - agreed_prefix(it->second.computed, tokens));
}

bool DraftModelProposer::extend(int64_t seq_id, Sequence& seq, int64_t n_new) {
  const auto n_have = static_cast<int64_t>(seq.computed.size());
  copies_.clear();
  return kv_.allocate(seq_id, n_have, n_have + n_new, copies_);
}

std::vector<DraftModelProposer::Work*> DraftModelProposer::catch_up_items(
    std::span<const ProposalRequest> requests, std::vector<Work>& work) {
  std::vector<Work*> items;
  for (size_t i = 0; i < requests.size(); ++i) {
    const ProposalRequest& r = requests[i];
    if (r.max_drafts < 1 || r.tokens.empty()) continue;
    auto [it, inserted] = seqs_.try_emplace(r.seq_id);
    if (inserted) kv_.add_sequence(r.seq_id, {});
    Sequence& seq = it->second;
    const size_t lcp = agreed_prefix(seq.computed, r.tokens);
    seq.computed.resize(lcp);
    kv_.truncate(r.seq_id, static_cast<int64_t>(lcp));
    Work& w = work[i];
    w.request = i;
    w.seq_id = r.seq_id;
    w.seq = &seq;
    w.pending.assign(r.tokens.begin() + static_cast<std::ptrdiff_t>(lcp), r.tokens.end());
    items.push_back(&w);
  }
  return items;
}

void DraftModelProposer::propose(std::span<const ProposalRequest> requests,
                                 std::vector<std::vector<int32_t>>& drafts) {
  drafts.assign(requests.size(), {});
  last_passes_.clear();
  std::vector<Work> work(requests.size());
  std::vector<Work*> items = catch_up_items(requests, work);
  const auto append_argmax = [&](Work& w, std::span<const float> row) {
    const size_t width = std::min(row.size(), static_cast<size_t>(n_valid_tokens_));
    drafts[w.request].push_back(sampling::argmax(row.first(width)));
  };
  // Draft position 1 needs the catch-up; each later one a single token (the previous draft).
  for (int32_t position = 0; !items.empty(); ++position) {
    run_passes(items, append_argmax);
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

void DraftModelProposer::add_candidates(std::span<const float> row, int32_t parent, Work& w) const {
  const size_t width = std::min(row.size(), static_cast<size_t>(n_valid_tokens_));
  const std::span<const float> r = row.first(width);
  // The tree_width greatest logits, kept sorted (ties: the lower id, as argmax).
  std::array<std::pair<float, int32_t>, kMaxDraftTreeWidth> top;
  int32_t n_top = 0;
  float max = -std::numeric_limits<float>::infinity();
  for (size_t id = 0; id < r.size(); ++id) {
    const float v = r[id];
    max = std::max(max, v);
    if (n_top == tree_width_ && !(v > top[static_cast<size_t>(n_top - 1)].first)) continue;
    int32_t at = std::min(n_top, tree_width_ - 1);
    while (at > 0 && v > top[static_cast<size_t>(at - 1)].first) {
      top[static_cast<size_t>(at)] = top[static_cast<size_t>(at - 1)];
      --at;
    }
    top[static_cast<size_t>(at)] = {v, static_cast<int32_t>(id)};
    n_top = std::min(n_top + 1, tree_width_);
  }
  double sum = 0.0;
  for (const float v : r) sum += std::exp(static_cast<double>(v - max));
  const auto log_z = static_cast<float>(max + std::log(sum));
  // The parent's values, copied: pushing candidates may move the vector.
  const float parent_score = parent >= 0 ? w.candidates[static_cast<size_t>(parent)].score : 0.0f;
  const int32_t parent_depth = parent >= 0 ? w.candidates[static_cast<size_t>(parent)].depth : 0;
  for (int32_t i = 0; i < n_top; ++i) {
    Candidate c;
    c.token = top[static_cast<size_t>(i)].second;
    c.parent = parent;
    // min(): a rounding log_z must not let a child outscore its parent.
    c.score = std::min(parent_score, parent_score + (top[static_cast<size_t>(i)].first - log_z));
    c.depth = parent_depth + 1;
    w.candidates.push_back(c);
  }
}

bool DraftModelProposer::choose_frontier(Work& w, int32_t max_nodes) const {
  const size_t newest = w.level_begin;
  if (newest >= w.candidates.size()) return false;
  if (w.candidates[newest].depth >= max_nodes) return false;  // deep enough
  // The score a candidate must beat to be among the max_nodes best so far.
  std::vector<float> scores;
  scores.reserve(w.candidates.size());
  for (const Candidate& c : w.candidates) scores.push_back(c.score);
  float bar = -std::numeric_limits<float>::infinity();
  if (static_cast<int32_t>(scores.size()) >= max_nodes) {
    std::nth_element(scores.begin(), scores.begin() + (max_nodes - 1), scores.end(),
                     std::greater<>());
    bar = scores[static_cast<size_t>(max_nodes - 1)];
  }
  w.frontier.clear();
  for (size_t i = newest; i < w.candidates.size(); ++i) {
    // A child never scores above its parent: one at or below the bar can only add children
    // that stay out of the tree.
    if (w.candidates[i].score > bar || static_cast<int32_t>(scores.size()) < max_nodes) {
      w.frontier.push_back(static_cast<int32_t>(i));
    }
  }
  const auto keep = std::min<size_t>(w.frontier.size(), static_cast<size_t>(tree_width_));
  std::partial_sort(w.frontier.begin(), w.frontier.begin() + static_cast<std::ptrdiff_t>(keep),
                    w.frontier.end(), [&](int32_t a, int32_t b) {
                      return w.candidates[static_cast<size_t>(a)].score >
                             w.candidates[static_cast<size_t>(b)].score;
                    });
  w.frontier.resize(keep);
  return !w.frontier.empty();
}

void DraftModelProposer::select_tree(const Work& w, int32_t max_nodes, std::vector<int32_t>& drafts,
                                     std::vector<int32_t>& parents) {
  std::vector<int32_t> order(w.candidates.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  const auto keep = std::min<size_t>(order.size(), static_cast<size_t>(std::max(max_nodes, 0)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](int32_t a, int32_t b) {
                      const Candidate& x = w.candidates[static_cast<size_t>(a)];
                      const Candidate& y = w.candidates[static_cast<size_t>(b)];
                      if (x.score != y.score) return x.score > y.score;
                      if (x.depth != y.depth) return x.depth < y.depth;
                      return a < b;
                    });
  order.resize(keep);
  std::sort(order.begin(), order.end());  // creation order: parents before children
  std::vector<int32_t> draft_index(w.candidates.size(), -1);
  drafts.clear();
  parents.clear();
  for (const int32_t i : order) {
    const Candidate& c = w.candidates[static_cast<size_t>(i)];
    const int32_t parent = c.parent < 0 ? -1 : draft_index[static_cast<size_t>(c.parent)];
    if (c.parent >= 0 && parent < 0) continue;  // unreachable: ancestors rank first
    draft_index[static_cast<size_t>(i)] = static_cast<int32_t>(drafts.size());
    drafts.push_back(c.token);
    parents.push_back(parent);
  }
}

void DraftModelProposer::propose_tree(std::span<const ProposalRequest> requests,
                                      std::vector<std::vector<int32_t>>& drafts,
                                      std::vector<std::vector<int32_t>>& parents) {
  if (tree_width_ <= 1) {
    Proposer::propose_tree(requests, drafts, parents);
    return;
  }
  drafts.assign(requests.size(), {});
  parents.assign(requests.size(), {});
  last_passes_.clear();
  std::vector<Work> work(requests.size());
  std::vector<Work*> items = catch_up_items(requests, work);
  run_passes(items, [&](Work& w, std::span<const float> row) {
    w.level_begin = 0;
    add_candidates(row, -1, w);
  });
  const auto max_nodes = [&](const Work& w) { return requests[w.request].max_drafts; };
  std::vector<Work*> growing;
  for (Work* w : items) {
    if (!w->failed && choose_frontier(*w, max_nodes(*w))) growing.push_back(w);
  }
  // One batched pass per level (more when a level exceeds a pass): each frontier node's row
  // gives its children.
  std::vector<int32_t> tokens;
  while (!growing.empty()) {
    std::vector<Work*> next;
    size_t item = 0;
    while (item < growing.size()) {
      batch_.clear();
      std::vector<Work*> in_batch;
      int32_t budget = max_tokens_per_pass_;
      for (; item < growing.size(); ++item) {
        Work& w = *growing[item];
        const auto n = static_cast<int32_t>(w.frontier.size());
        if (n > budget && !in_batch.empty()) break;
        const auto base = static_cast<int32_t>(w.seq->computed.size());
        const auto n_before = static_cast<int32_t>(w.region_parents.size());
        copies_.clear();
        if (!kv_.allocate(w.seq_id, base + n_before, base + n_before + n, copies_)) {
          // The draft pool is full: the tree stops growing here.
          w.failed = true;
          continue;
        }
        tokens.clear();
        for (const int32_t f : w.frontier) {
          Candidate& c = w.candidates[static_cast<size_t>(f)];
          c.region = static_cast<int32_t>(w.region_parents.size());
          w.region_parents.push_back(
              c.parent < 0 ? -1 : w.candidates[static_cast<size_t>(c.parent)].region);
          tokens.push_back(c.token);
        }
        batch_.add_sequence(w.seq_id, tokens, base + n_before, kv_.block_table(w.seq_id), n,
                            w.region_parents);
        budget -= n;
        in_batch.push_back(&w);
      }
      if (in_batch.empty()) break;
      const model::LogitsView logits = execute_timed();
      int32_t row = 0;
      for (Work* w : in_batch) {
        w->level_begin = w->candidates.size();
        for (const int32_t f : w->frontier) add_candidates(logits.row(row++), f, *w);
        if (choose_frontier(*w, max_nodes(*w))) next.push_back(w);
      }
    }
    growing.swap(next);
  }
  for (Work* w : items) {
    select_tree(*w, max_nodes(*w), drafts[w->request], parents[w->request]);
    // The tree leaves the draft cache: the next catch-up computes the branch the target kept.
    if (seqs_.count(w->seq_id) != 0) {
      kv_.truncate(w->seq_id, static_cast<int64_t>(w->seq->computed.size()));
    }
  }
}

model::LogitsView DraftModelProposer::execute_timed() {
  const auto t0 = std::chrono::steady_clock::now();
  const model::LogitsView logits = runner_->execute(batch_);
  ++n_passes_;
  last_passes_.push_back(
      {static_cast<int32_t>(batch_.tokens.size()),
       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
  return logits;
}

template <class OnRow>
void DraftModelProposer::run_passes(std::vector<Work*>& items, OnRow&& on_row) {
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
    const model::LogitsView logits = execute_timed();
    int32_t row = 0;
    for (size_t i : in_batch) {
      Work& w = *items[i];
      if (done[i] != w.pending.size()) continue;  // no logits row: its chunk did not finish
      on_row(w, logits.row(row++));
    }
  }
}

}  // namespace llms::spec
