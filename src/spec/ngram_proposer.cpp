#include "spec/ngram_proposer.h"

#include <algorithm>

#include "util/error.h"

namespace llms::spec {

std::vector<int32_t> lookup_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                                  int32_t max_drafts) {
  std::vector<int32_t> out;
  const auto size = static_cast<int64_t>(tokens.size());
  if (max_drafts <= 0 || min_n < 1) return out;
  for (int64_t n = std::min<int64_t>(max_n, size - 1); n >= min_n; --n) {
    const std::span<const int32_t> tail = tokens.subspan(static_cast<size_t>(size - n));
    // Latest match first: recent text predicts the next tokens best. A match must leave at least
    // one token after it, so it starts at most at size - n - 1.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (tokens[static_cast<size_t>(start)] != tail[0]) continue;
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_drafts, size - from);
      out.assign(tokens.begin() + from, tokens.begin() + from + count);
      return out;
    }
  }
  return out;
}

NgramProposer::NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n) {
    throw Error(Error::Kind::kInvalidArgument, "n-gram proposer: need 1 <= min_n <= max_n");
  }
}

void NgramProposer::propose(std::span<const ProposalRequest> requests,
                            std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    drafts[i] = lookup_ngram(requests[i].tokens, min_n_, max_n_, requests[i].max_drafts);
  }
}

}  // namespace llms::spec
