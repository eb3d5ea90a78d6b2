// tokenizer/spm_merges: see spm_merges.h for the ranking rule.
#include "spm_merges.h"

#include <algorithm>
#include <unordered_set>

namespace llms::tokenizer {

namespace {

struct Candidate {
  double key;           // of the merged token; higher first
  uint32_t len_left;    // code points; longer first
  uint32_t len_right;   // code points; longer first
  uint32_t first_seen;  // first index of the merged string; lower first
  int32_t left;
  int32_t right;
  int32_t merged;
};

bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.key != b.key) return a.key > b.key;
  if (a.len_left != b.len_left) return a.len_left > b.len_left;
  if (a.len_right != b.len_right) return a.len_right > b.len_right;
  return a.first_seen < b.first_seen;
}

}  // namespace

void build_spm_merges(const std::vector<std::string_view>& spelled,
                      const std::function<int32_t(std::string_view)>& find,
                      const std::vector<double>& key, BpeMerges& merges) {
  std::vector<Candidate> candidates;
  std::vector<size_t> boundaries;  // byte offsets of the code points of one token
  std::unordered_set<std::string_view> seen;
  seen.reserve(spelled.size());
  for (size_t i = 0; i < spelled.size(); ++i) {
    const std::string_view token = spelled[i];
    // Only the first occurrence of a string contributes (dict iteration order); it carries the
    // id and key of the last occurrence (dict value).
    if (token.size() < 2) continue;
    const int32_t self = find(token);
    if (self < 0) continue;
    if (!seen.insert(token).second) continue;

    boundaries.clear();
    for (size_t b = 0; b < token.size(); ++b) {
      if ((static_cast<uint8_t>(token[b]) & 0xC0) != 0x80) boundaries.push_back(b);
    }
    const auto n_cp = static_cast<uint32_t>(boundaries.size());
    for (uint32_t k = 1; k < n_cp; ++k) {
      const size_t cut = boundaries[k];
      const int32_t left = find(token.substr(0, cut));
      if (left < 0) continue;
      const int32_t right = find(token.substr(cut));
      if (right < 0) continue;
      candidates.push_back(Candidate{key[static_cast<size_t>(self)], k, n_cp - k,
                                     static_cast<uint32_t>(i), left, right, self});
    }
  }
  std::sort(candidates.begin(), candidates.end(), ranks_before);
  merges.reserve(candidates.size());
  for (size_t rank = 0; rank < candidates.size(); ++rank) {
    const Candidate& c = candidates[rank];
    merges.set(c.left, c.right, MergeRule{static_cast<int32_t>(rank), c.merged});
  }
}

}  // namespace llms::tokenizer
