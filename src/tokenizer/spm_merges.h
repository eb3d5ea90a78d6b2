// tokenizer/spm_merges: the merge list transformers derives for a SentencePiece vocabulary that
// ships without merges (transformers' tokenization_utils_base.generate_merges).
//
// Contract: for every token t and every split t = l + r at a code point boundary where l and r
// are both tokens, there is a merge (l, r) -> t. Merges are ranked best first by the key of t
// (descending), then by the code point lengths of l and of r (descending), then by the order in
// which t first appears in the vocabulary. The key is the token's score, or for Gemma minus its
// position, because Gemma's scores do not follow its merge order. Strings that occur twice
// resolve to their last id, as a Python dict built from the list does.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "bpe.h"

namespace llms::tokenizer {

// `spelled` are the tokens as the model vocabulary spells them; `find` maps a string to its
// (last) id or -1; `key` has one entry per token (only the key at a string's last id is used).
// Fills `merges` with rank = position in the list.
void build_spm_merges(const std::vector<std::string_view>& spelled,
                      const std::function<int32_t(std::string_view)>& find,
                      const std::vector<double>& key, BpeMerges& merges);

}  // namespace llms::tokenizer
