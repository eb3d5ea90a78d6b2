// kv/block_hash: XXH3-128 over (parent key, token ids, extra key), streamed so that no buffer
// is allocated per block. Token ids are hashed in native byte order: keys never leave the
// process, so they need not be portable.
#include "block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t's definition, so the state can live on the stack
#include <xxhash.h>

namespace llms::kv {

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens, uint64_t extra_key) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  const uint64_t parent_words[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&state, parent_words, sizeof(parent_words));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH3_128bits_update(&state, &extra_key, sizeof(extra_key));
  const XXH128_hash_t digest = XXH3_128bits_digest(&state);
  return BlockHash{digest.low64, digest.high64};
}

}  // namespace llms::kv
