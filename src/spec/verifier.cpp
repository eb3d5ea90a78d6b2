#include "spec/verifier.h"

#include <algorithm>

#include "util/error.h"

namespace llms::spec {

Verification Verifier::verify(sampling::Sampler& sampler, const model::LogitsView& rows,
                              int32_t first_row, std::span<const int32_t> drafts,
                              std::span<const sampling::Distribution> draft_q) {
  const auto k = static_cast<int32_t>(drafts.size());
  if (first_row < 0 || first_row + k >= rows.n_rows) {
    throw Error(Error::Kind::kInternal, "verifier: rows for the drafts are missing");
  }
  if (!draft_q.empty() && draft_q.size() != drafts.size()) {
    throw Error(Error::Kind::kInternal, "verifier: one distribution per draft is needed");
  }
  Verification out;
  out.tokens.reserve(static_cast<size_t>(k) + 1);
  for (int32_t j = 0; j <= k; ++j) {
    out.rows.push_back(j);
    const std::span<const float> row = rows.row(first_row + j);
    row_.assign(row.begin(), row.end());
    if (j == k) {  // every draft kept: the bonus token
      const int32_t token = sampler.sample(row_).token;
      sampler.accept(token);
      out.tokens.push_back(token);
      break;
    }
    const int32_t draft = drafts[static_cast<size_t>(j)];
    sampler.distribution(row_, p_);
    bool keep = false;
    const float p_draft = p_.prob_of(draft);
    const sampling::Distribution* q = draft_q.empty() ? nullptr : &draft_q[static_cast<size_t>(j)];
    // A proposer that gives its own draft no probability is taken to have proposed it for sure:
    // a point mass, in the acceptance ratio and in the residual alike.
    if (q != nullptr && !(q->prob_of(draft) > 0.0f)) q = nullptr;
    const float q_draft = q != nullptr ? q->prob_of(draft) : 1.0f;
    if (sampler.is_greedy()) {
      keep = p_draft > 0.0f;  // the argmax is the only candidate
    } else if (p_draft > 0.0f) {
      const double ratio = static_cast<double>(p_draft) / q_draft;
      keep = ratio >= 1.0 || sampler.uniform01() < ratio;
    }
    if (keep) {
      sampler.accept(draft);
      out.tokens.push_back(draft);
      ++out.n_accepted;
      continue;
    }
    // Rejected: draw from normalize(max(0, p - q)).
    int32_t token = -1;
    if (sampler.is_greedy()) {
      token = p_.ids.front();
    } else {
      residual_.clear();
      // q densely, so the residual costs O(|p| + |q|) even when both cover the vocabulary; a
      // point mass needs no table (q is 1 at the draft, 0 elsewhere).
      if (q != nullptr) {
        q_dense_.assign(static_cast<size_t>(rows.n_vocab), 0.0f);
        for (size_t i = 0; i < q->ids.size(); ++i) {
          const int32_t id = q->ids[i];
          if (id >= 0 && id < rows.n_vocab) q_dense_[static_cast<size_t>(id)] = q->probs[i];
        }
      }
      for (size_t i = 0; i < p_.ids.size(); ++i) {
        const int32_t id = p_.ids[i];
        const float q_id =
            q != nullptr ? q_dense_[static_cast<size_t>(id)] : (id == draft ? 1.0f : 0.0f);
        const float r = p_.probs[i] - q_id;
        if (r > 0.0f) {
          residual_.ids.push_back(id);
          residual_.probs.push_back(r);
        }
      }
      // p <= q everywhere cannot reject (p(d) >= q(d) then), except by rounding: fall back to p.
      token = sampler.draw_from(residual_.ids.empty() ? p_ : residual_);
    }
    sampler.accept(token);
    out.tokens.push_back(token);
    break;
  }
  return out;
}

Verification Verifier::verify_tree(sampling::Sampler& sampler, const model::LogitsView& rows,
                                   int32_t first_row, std::span<const int32_t> nodes,
                                   std::span<const int32_t> parents) {
  const auto n_region = static_cast<int32_t>(nodes.size()) + 1;
  if (static_cast<int32_t>(parents.size()) != n_region || parents[0] != -1) {
    throw Error(Error::Kind::kInternal, "verifier: a tree needs one parent per node, root first");
  }
  if (first_row < 0 || first_row + n_region > rows.n_rows) {
    throw Error(Error::Kind::kInternal, "verifier: rows for the tree are missing");
  }
  Verification out;
  int32_t node = 0;
  for (;;) {
    const std::span<const float> row = rows.row(first_row + node);
    row_.assign(row.begin(), row.end());
    out.rows.push_back(node);
    int32_t token = -1;
    bool has_child = false;
    for (int32_t r = node + 1; r < n_region && !has_child; ++r) has_child = parents[r] == node;
    if (!has_child) {
      token = sampler.sample(row_).token;
    } else {
      sampler.distribution(row_, p_);
      token = sampler.is_greedy() ? p_.ids.front() : sampler.draw_from(p_);
    }
    sampler.accept(token);
    out.tokens.push_back(token);
    int32_t child = -1;
    for (int32_t r = node + 1; r < n_region; ++r) {
      if (parents[r] == node && nodes[static_cast<size_t>(r - 1)] == token) {
        child = r;
        break;
      }
    }
    if (child < 0) break;
    ++out.n_accepted;
    node = child;
  }
  return out;
}

}  // namespace llms::spec
