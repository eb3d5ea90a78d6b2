// spec/verifier: lossless verification of drafted tokens against the target model's rows.
//
// Given the 1 + k logits rows a verification step produced for one sequence (row j follows the
// sequence's last sampled token and the first j drafts) and the k drafts, the verifier walks the
// rows in order with the sequence's own Sampler:
// - greedy (temperature 0): draft j is kept iff it is the argmax of the processed row j (the
//   token sample() would give); the first mismatch is replaced by that argmax;
// - sampling: standard speculative rejection sampling. Draft j, proposed from a distribution q
//   (a point mass when the proposer gives none), is kept with probability min(1, p(d) / q(d)),
//   p being the sampler's processed distribution of row j (penalties, bias, temperature, top-k,
//   top-p, min-p); on rejection the token is drawn from normalize(max(0, p - q)). Either way the
//   output token follows p exactly.
// When every draft is kept, row k gives one more token (the bonus), drawn as sample() would.
// Each emitted token is accept()ed by the sampler before the next row is processed, so the
// penalties see accepted tokens only. With no drafts this is exactly one sample() (the plain
// decode step).
//
// Token trees (verify_tree): the drafts are the nodes of a tree whose root is the sequence's
// last sampled token; row r follows the root and node r's branch. From the root, the token is
// drawn from the processed row as sample() would (the argmax when greedy); if a child of the
// current node holds it, that child is kept and the walk goes on from its row, else the drawn
// token ends the walk. Every output token is thus drawn from the target's own distribution
// given the tokens before it: the output follows p exactly, for any tree (the proposer's
// drafts act as point masses, as in verify()).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model_runner.h"
#include "sampling/sampler.h"

namespace llms::spec {

struct Verification {
  int32_t n_accepted = 0;       // drafts kept
  std::vector<int32_t> tokens;  // the kept drafts, then the corrected or bonus token
  // Row (after first_row) each token was drawn from: 0..n_accepted for a chain; with a tree the
  // kept nodes' region indices are rows[1..n_accepted] (the root is region index 0).
  std::vector<int32_t> rows;
};

class Verifier {
 public:
  // rows.row(first_row + j), j = 0..drafts.size(), are the sequence's rows. draft_q: one
  // distribution per draft, or empty for point-mass proposals.
  Verification verify(sampling::Sampler& sampler, const model::LogitsView& rows, int32_t first_row,
                      std::span<const int32_t> drafts,
                      std::span<const sampling::Distribution> draft_q = {});

  // nodes[r - 1] is region node r's token and parents[r] its parent (parents[0] = -1: the root;
  // parents[r] < r); rows.row(first_row + r) follows node r.
  Verification verify_tree(sampling::Sampler& sampler, const model::LogitsView& rows,
                           int32_t first_row, std::span<const int32_t> nodes,
                           std::span<const int32_t> parents);

 private:
  std::vector<float> row_;  // the row being processed (the chain edits it in place)
  sampling::Distribution p_;
  sampling::Distribution residual_;
  std::vector<float> q_dense_;  // the draft distribution over the vocabulary (on rejection)
};

}  // namespace llms::spec
