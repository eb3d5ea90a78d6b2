// kv/kv_cache_manager: sequences' block tables on top of BlockPool (ref counts, free list,
// key registry). Contract and invariants: kv/kv_cache_manager.h.
//
// Per sequence we keep its table and the keys of its first chain.size() blocks (the hash chain):
// those blocks were full of computed tokens when hashed, so commit() resumes the chain from the
// last key instead of rehashing the prompt, and a fork inherits it. Writing into an already
// hashed block (after a truncate(), or a rewind) truncates the chain so the block is hashed again
// from its new tokens. Every mutating call checks all it can before it changes
// anything, so a refused call leaves the state as it was.
#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "block_hash.h"
#include "block_pool.h"
#include "util/error.h"

namespace llms::kv {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(Error::Kind::kInvalidArgument, "KV cache: " + what);
}

std::string seq_name(int64_t seq_id) { return "sequence " + std::to_string(seq_id); }

}  // namespace

struct KvCacheManager::Impl {
  struct Sequence {
    std::vector<BlockId> table;
    std::vector<BlockHash> chain;  // keys of table[0 .. chain.size()), each block full when hashed
    uint64_t extra_key = 0;
  };

  Impl(int32_t n_blocks, int32_t block_size_in, bool prefix_caching)
      : block_size(block_size_in), enable_prefix_caching(prefix_caching), pool(n_blocks) {}

  template <class Self>
  static auto& get(Self& self, int64_t seq_id, const char* op) {
    auto it = self.sequences.find(seq_id);
    if (it == self.sequences.end()) invalid(std::string(op) + ": unknown " + seq_name(seq_id));
    return it->second;
  }

  // Blocks needed for n_tokens positions, without saturation (n_tokens >= 0).
  int64_t blocks_for(int64_t n_tokens) const {
    return n_tokens / block_size + (n_tokens % block_size != 0 ? 1 : 0);
  }

  BlockId take_fresh() {
    bool evicted = false;
    const BlockId b = pool.take_fresh(evicted);
    if (evicted) ++stats.evictions;
    return b;
  }

  const int32_t block_size;
  const bool enable_prefix_caching;
  BlockPool pool;
  std::unordered_map<int64_t, Sequence> sequences;
  KvCacheStats stats;
};

KvCacheManager::KvCacheManager(int32_t n_blocks, int32_t block_size, bool enable_prefix_caching) {
  if (n_blocks < 1) invalid("n_blocks must be >= 1, got " + std::to_string(n_blocks));
  if (block_size < 1) invalid("block_size must be >= 1, got " + std::to_string(block_size));
  // Token counts are int32 in the API (add_sequence's return, StepBatch); the pool must fit.
  if (int64_t{n_blocks} * block_size > std::numeric_limits<int32_t>::max()) {
    invalid("n_blocks " + std::to_string(n_blocks) + " x block_size " + std::to_string(block_size) +
            " token slots exceed 2^31 - 1");
  }
  impl_ = std::make_unique<Impl>(n_blocks, block_size, enable_prefix_caching);
}

KvCacheManager::~KvCacheManager() = default;

int32_t KvCacheManager::block_size() const { return impl_->block_size; }
int32_t KvCacheManager::n_blocks() const { return impl_->pool.n_blocks(); }
int32_t KvCacheManager::n_free_blocks() const { return impl_->pool.n_free(); }

int32_t KvCacheManager::blocks_for(int64_t n_tokens) const {
  if (n_tokens < 0) invalid("blocks_for: negative token count " + std::to_string(n_tokens));
  return static_cast<int32_t>(
      std::min<int64_t>(impl_->blocks_for(n_tokens), std::numeric_limits<int32_t>::max()));
}

int32_t KvCacheManager::add_sequence(int64_t seq_id, std::span<const int32_t> tokens,
                                     uint64_t extra_key) {
  Impl& m = *impl_;
  if (m.sequences.contains(seq_id)) invalid("add_sequence: " + seq_name(seq_id) + " exists");
  Impl::Sequence& seq = m.sequences[seq_id];
  seq.extra_key = extra_key;
  if (!m.enable_prefix_caching || tokens.empty()) return 0;

  // Only blocks fully inside tokens[0 .. size - 1) may come from the cache: the last prompt
  // token must be computed for its logits.
  const int64_t bs = m.block_size;
  const int64_t n_lookup = static_cast<int64_t>(tokens.size() - 1) / bs;
  m.stats.prefix_queries += n_lookup * bs;
  BlockHash parent{};
  for (int64_t i = 0; i < n_lookup; ++i) {
    const BlockHash key = hash_block(parent, tokens.subspan(i * bs, bs), extra_key);
    const std::optional<BlockId> hit = m.pool.find(key);
    if (!hit) break;
    m.pool.add_ref(*hit);
    seq.table.push_back(*hit);
    seq.chain.push_back(key);
    parent = key;
  }
  const int32_t n_cached = static_cast<int32_t>(seq.table.size()) * m.block_size;
  m.stats.prefix_hits += n_cached;
  return n_cached;
}

bool KvCacheManager::allocate(int64_t seq_id, int64_t n_write_begin, int64_t n_tokens_total,
                              std::vector<BlockCopy>& copies) {
  Impl& m = *impl_;
  Impl::Sequence& seq = Impl::get(m, seq_id, "allocate");
  if (n_write_begin < 0 || n_tokens_total < n_write_begin) {
    invalid("allocate: " + seq_name(seq_id) + " write range [" + std::to_string(n_write_begin) +
            ", " + std::to_string(n_tokens_total) + ") is not a range of positions");
  }
  const int64_t n_needed = m.blocks_for(n_tokens_total);
  if (n_needed > m.pool.n_blocks()) return false;
  const int64_t n_have = static_cast<int64_t>(seq.table.size());
  const int64_t n_new = std::max<int64_t>(0, n_needed - n_have);

  // Existing blocks that the write range falls in; those shared with another table are copied.
  const bool writes = n_write_begin < n_tokens_total;
  const int64_t first_written = n_write_begin / m.block_size;
  const int64_t end_existing = writes ? std::min(n_have, n_needed) : first_written;
  int64_t n_copies = 0;
  for (int64_t b = first_written; b < end_existing; ++b) {
    if (m.pool.ref_count(seq.table[b]) > 1) ++n_copies;
  }
  if (n_new + n_copies > m.pool.n_free()) return false;

  // From here on nothing can fail.
  if (writes && first_written < static_cast<int64_t>(seq.chain.size())) {
    seq.chain.resize(static_cast<size_t>(first_written));
  }
  for (int64_t b = first_written; b < end_existing; ++b) {
    const BlockId old = seq.table[b];
    if (m.pool.ref_count(old) > 1) {
      const BlockId fresh = m.take_fresh();
      copies.push_back(BlockCopy{old, fresh});
      m.pool.release(old);  // stays referenced by the other tables
      seq.table[b] = fresh;
    } else {
      // Ours alone and about to be overwritten: its registered key (if any) would go stale.
      m.pool.unregister(old);
    }
  }
  for (int64_t i = 0; i < n_new; ++i) seq.table.push_back(m.take_fresh());
  return true;
}

void KvCacheManager::commit(int64_t seq_id, std::span<const int32_t> tokens, int64_t n_computed) {
  Impl& m = *impl_;
  Impl::Sequence& seq = Impl::get(m, seq_id, "commit");
  if (n_computed < 0 || n_computed > static_cast<int64_t>(tokens.size())) {
    invalid("commit: " + seq_name(seq_id) + " n_computed " + std::to_string(n_computed) +
            " is outside the " + std::to_string(tokens.size()) + " tokens given");
  }
  const int64_t n_covered = static_cast<int64_t>(seq.table.size()) * m.block_size;
  if (n_computed > n_covered) {
    invalid("commit: " + seq_name(seq_id) + " n_computed " + std::to_string(n_computed) +
            " exceeds the " + std::to_string(n_covered) + " positions its blocks hold");
  }
  if (!m.enable_prefix_caching) return;

  const int64_t bs = m.block_size;
  const int64_t n_full = n_computed / bs;
  BlockHash parent = seq.chain.empty() ? BlockHash{} : seq.chain.back();
  for (int64_t b = static_cast<int64_t>(seq.chain.size()); b < n_full; ++b) {
    const BlockHash key = hash_block(parent, tokens.subspan(b * bs, bs), seq.extra_key);
    // If another block already holds this key (the same prefix computed concurrently) or this
    // block already carries one, the existing registration stands and this block stays unkeyed.
    m.pool.register_key(seq.table[b], key);
    seq.chain.push_back(key);
    parent = key;
  }
}

void KvCacheManager::truncate(int64_t seq_id, int64_t n_tokens) {
  Impl& m = *impl_;
  Impl::Sequence& seq = Impl::get(m, seq_id, "truncate");
  const int64_t n_covered = static_cast<int64_t>(seq.table.size()) * m.block_size;
  if (n_tokens < 0 || n_tokens > n_covered) {
    invalid("truncate: " + seq_name(seq_id) + " to " + std::to_string(n_tokens) +
            " tokens, but its blocks hold " + std::to_string(n_covered) + " positions");
  }
  const int64_t n_keep = m.blocks_for(n_tokens);
  // Tail first, as free() does.
  while (static_cast<int64_t>(seq.table.size()) > n_keep) {
    m.pool.release(seq.table.back());
    seq.table.pop_back();
  }
  const int64_t first_rewritten = n_tokens / m.block_size;
  if (first_rewritten < static_cast<int64_t>(seq.chain.size())) {
    seq.chain.resize(static_cast<size_t>(first_rewritten));
  }
  for (int64_t b = first_rewritten; b < n_keep; ++b) {
    if (m.pool.ref_count(seq.table[b]) == 1) m.pool.unregister(seq.table[b]);
  }
}

void KvCacheManager::fork(int64_t parent, int64_t child) {
  Impl& m = *impl_;
  const Impl::Sequence& from = Impl::get(m, parent, "fork");
  if (m.sequences.contains(child)) {
    invalid("fork: child " + seq_name(child) + " of " + seq_name(parent) + " exists");
  }
  Impl::Sequence copy = from;
  for (BlockId b : copy.table) m.pool.add_ref(b);
  m.sequences.emplace(child, std::move(copy));
}

void KvCacheManager::free(int64_t seq_id) {
  Impl& m = *impl_;
  auto it = m.sequences.find(seq_id);
  if (it == m.sequences.end()) return;
  // Tail first: the free list is evicted from the front, so the prefix heads (the blocks most
  // likely to be shared again) are the last of this sequence's blocks to be evicted.
  const std::vector<BlockId>& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) m.pool.release(*b);
  m.sequences.erase(it);
}

bool KvCacheManager::has_sequence(int64_t seq_id) const {
  return impl_->sequences.contains(seq_id);
}

std::span<const BlockId> KvCacheManager::block_table(int64_t seq_id) const {
  return Impl::get(std::as_const(*impl_), seq_id, "block_table").table;
}

double KvCacheManager::usage() const {
  const int32_t n = impl_->pool.n_blocks();
  return static_cast<double>(n - impl_->pool.n_free()) / n;
}

const KvCacheStats& KvCacheManager::stats() const { return impl_->stats; }

void KvCacheManager::check_invariants() const {
  const Impl& m = *impl_;
  const int32_t n = m.pool.n_blocks();
  std::vector<int32_t> census(static_cast<size_t>(n), 0);
  for (const auto& [seq_id, seq] : m.sequences) {
    if (seq.chain.size() > seq.table.size()) {
      throw Error(Error::Kind::kInternal, "KV cache: " + seq_name(seq_id) + " has " +
                                              std::to_string(seq.chain.size()) + " keys for " +
                                              std::to_string(seq.table.size()) + " blocks");
    }
    for (BlockId b : seq.table) {
      if (b < 0 || b >= n) {
        throw Error(Error::Kind::kInternal, "KV cache: " + seq_name(seq_id) + " holds block " +
                                                std::to_string(b) + " outside the pool of " +
                                                std::to_string(n));
      }
      ++census[b];
    }
  }
  m.pool.check_invariants(census);
  // A keyed block inside a sequence's hashed prefix holds exactly that prefix: its key is the
  // sequence's chain key at that index (else a hit could hand out the wrong tokens' KV).
  for (const auto& [seq_id, seq] : m.sequences) {
    for (size_t i = 0; i < seq.chain.size(); ++i) {
      const BlockHash* key = m.pool.key_of(seq.table[i]);
      if (key != nullptr && !(*key == seq.chain[i])) {
        throw Error(Error::Kind::kInternal, "KV cache: " + seq_name(seq_id) + " block " +
                                                std::to_string(seq.table[i]) + " at index " +
                                                std::to_string(i) + " is keyed for another prefix");
      }
    }
  }
  if (!m.enable_prefix_caching) {
    for (BlockId b = 0; b < n; ++b) {
      if (m.pool.has_key(b)) {
        throw Error(Error::Kind::kInternal, "KV cache: block " + std::to_string(b) +
                                                " is keyed with prefix caching disabled");
      }
    }
  }
}

}  // namespace llms::kv
