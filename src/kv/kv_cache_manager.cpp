// kv/kv_cache_manager: sequences' block tables on top of BlockPool (ref counts, free list,
// key registry). Contract and invariants: kv/kv_cache_manager.h.
//
// Per sequence we keep its table and the keys of its first chain.size() blocks (the hash chain):
// those blocks were full of computed tokens when hashed, so commit() resumes the chain from the
// last key instead of rehashing the prompt, and a fork inherits it. Writing into an already
// hashed block (after a truncate(), or a rewind) truncates the chain so the block is hashed again
// from its new tokens. Every mutating call checks all it can before it changes
// anything, so a refused call leaves the state as it was.
//
// Groups: a sequence's table is interleaved, entry b * G + g for block index b of group g; its
// chain is shared (a key names tokens, not layers) and each group registers its own copy of a
// block under group_key(key, g). A windowed group remembers, per sequence, the first entry of
// its window it still holds: entries from its sink blocks up to that one are kNoBlock.
#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "block_hash.h"
#include "block_pool.h"
#include "kv/kv_groups.h"
#include "util/error.h"

namespace llms::kv {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(Error::Kind::kInvalidArgument, "KV cache: " + what);
}

std::string seq_name(int64_t seq_id) { return "sequence " + std::to_string(seq_id); }

// The key group g registers a block under: group 0 keeps the chain key, others a derived one
// (a collision between derived keys is as unlikely as one between chain keys).
BlockHash group_key(const BlockHash& key, int32_t group) {
  if (group == 0) return key;
  const auto g = static_cast<uint64_t>(group);
  return BlockHash{key.lo ^ (g * 0x9E3779B97F4A7C15ull), key.hi + g};
}

}  // namespace

struct KvCacheManager::Impl {
  struct Sequence {
    std::vector<BlockId> table;       // interleaved: entry b * n_groups + g
    std::vector<BlockHash> chain;     // keys of block indices [0, chain.size()), full when hashed
    std::vector<int64_t> first_held;  // per group: entries [sink blocks, it) are kNoBlock
    uint64_t extra_key = 0;
    bool evicted = false;  // evict_block() made holes anywhere; no more prefix keys

    int64_t n_indices(int32_t groups) const { return static_cast<int64_t>(table.size()) / groups; }
  };

  Impl(int32_t n_blocks, int32_t block_size_in, bool prefix_caching,
       std::vector<int64_t> group_windows, std::vector<int64_t> group_sinks)
      : block_size(block_size_in),
        enable_prefix_caching(prefix_caching),
        windows(std::move(group_windows)),
        sinks(std::move(group_sinks)),
        n_groups(static_cast<int32_t>(windows.size())),
        pool(n_blocks) {}

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

  // Blocks holding a group's attention sinks (kept for good).
  int64_t sink_blocks(int32_t g) const { return blocks_for(sinks[static_cast<size_t>(g)]); }

  // The first block index past the sinks a windowed group needs for queries from position `pos`
  // on (0 for a full group).
  int64_t first_needed(int32_t g, int64_t pos) const {
    const int64_t w = windows[static_cast<size_t>(g)];
    if (w == 0) return 0;
    return std::max(sink_blocks(g), std::max<int64_t>(0, pos - w + 1) / block_size);
  }

  BlockId& entry(Sequence& seq, int64_t b, int32_t g) const {
    return seq.table[static_cast<size_t>(b * n_groups + g)];
  }
  BlockId entry(const Sequence& seq, int64_t b, int32_t g) const {
    return seq.table[static_cast<size_t>(b * n_groups + g)];
  }

  BlockId take_fresh() {
    bool evicted = false;
    const BlockId b = pool.take_fresh(evicted);
    if (evicted) ++stats.evictions;
    return b;
  }

  // Gives back a windowed group's blocks that no query from position `pos` on can see.
  void release_outside_windows(Sequence& seq, int64_t pos) {
    const int64_t n_idx = seq.n_indices(n_groups);
    for (int32_t g = 0; g < n_groups; ++g) {
      const int64_t keep_from = std::min(first_needed(g, pos), n_idx);
      int64_t& first = seq.first_held[static_cast<size_t>(g)];
      for (; first < keep_from; ++first) {
        BlockId& b = entry(seq, first, g);
        if (b != kNoBlock) pool.release(b);
        b = kNoBlock;
      }
    }
  }

  const int32_t block_size;
  const bool enable_prefix_caching;
  const std::vector<int64_t> windows;
  const std::vector<int64_t> sinks;
  const int32_t n_groups;
  BlockPool pool;
  std::unordered_map<int64_t, Sequence> sequences;
  KvCacheStats stats;
};

KvCacheManager::KvCacheManager(int32_t n_blocks, int32_t block_size, bool enable_prefix_caching,
                               std::span<const int64_t> group_windows,
                               std::span<const int64_t> group_sinks) {
  if (n_blocks < 1) invalid("n_blocks must be >= 1, got " + std::to_string(n_blocks));
  if (block_size < 1) invalid("block_size must be >= 1, got " + std::to_string(block_size));
  // Token counts are int32 in the API (add_sequence's return, StepBatch); the pool must fit.
  if (int64_t{n_blocks} * block_size > std::numeric_limits<int32_t>::max()) {
    invalid("n_blocks " + std::to_string(n_blocks) + " x block_size " + std::to_string(block_size) +
            " token slots exceed 2^31 - 1");
  }
  std::vector<int64_t> windows(group_windows.begin(), group_windows.end());
  if (windows.empty()) windows.push_back(0);
  std::vector<int64_t> sinks(group_sinks.begin(), group_sinks.end());
  if (sinks.empty()) sinks.assign(windows.size(), 0);
  if (sinks.size() != windows.size()) {
    invalid("sinks for " + std::to_string(sinks.size()) + " of " + std::to_string(windows.size()) +
            " cache groups");
  }
  for (size_t g = 0; g < windows.size(); ++g) {
    if (windows[g] < 0)
      invalid("a cache group's window must be >= 0, got " + std::to_string(windows[g]));
    if (sinks[g] < 0 || (sinks[g] > 0 && windows[g] == 0)) {
      invalid("a cache group's sinks must be >= 0 and need a window, got " +
              std::to_string(sinks[g]));
    }
  }
  impl_ = std::make_unique<Impl>(n_blocks, block_size, enable_prefix_caching, std::move(windows),
                                 std::move(sinks));
}

KvCacheManager::~KvCacheManager() = default;

int32_t KvCacheManager::block_size() const { return impl_->block_size; }
int32_t KvCacheManager::n_blocks() const { return impl_->pool.n_blocks(); }
int32_t KvCacheManager::n_free_blocks() const { return impl_->pool.n_free(); }
int32_t KvCacheManager::n_groups() const { return impl_->n_groups; }

int32_t KvCacheManager::blocks_for(int64_t n_tokens) const {
  if (n_tokens < 0) invalid("blocks_for: negative token count " + std::to_string(n_tokens));
  return static_cast<int32_t>(
      std::min<int64_t>(impl_->blocks_for(n_tokens), std::numeric_limits<int32_t>::max()));
}

int32_t KvCacheManager::blocks_for_sequence(int64_t n_tokens, int64_t max_step_tokens) const {
  const Impl& m = *impl_;
  if (n_tokens < 0 || max_step_tokens < 1) {
    invalid("blocks_for_sequence: " + std::to_string(n_tokens) + " tokens in steps of " +
            std::to_string(max_step_tokens));
  }
  const int64_t total =
      kv::blocks_for_sequence(m.windows, m.sinks, m.block_size, n_tokens, max_step_tokens);
  return static_cast<int32_t>(std::min<int64_t>(total, std::numeric_limits<int32_t>::max()));
}

int32_t KvCacheManager::add_sequence(int64_t seq_id, std::span<const int32_t> tokens,
                                     uint64_t extra_key) {
  Impl& m = *impl_;
  if (m.sequences.contains(seq_id)) invalid("add_sequence: " + seq_name(seq_id) + " exists");
  Impl::Sequence& seq = m.sequences[seq_id];
  seq.extra_key = extra_key;
  seq.first_held.resize(static_cast<size_t>(m.n_groups));
  for (int32_t g = 0; g < m.n_groups; ++g)
    seq.first_held[static_cast<size_t>(g)] = m.sink_blocks(g);
  if (!m.enable_prefix_caching || tokens.empty()) return 0;

  // Only blocks fully inside tokens[0 .. size - 1) may come from the cache: the last prompt
  // token must be computed for its logits.
  const int64_t bs = m.block_size;
  const int64_t n_lookup = static_cast<int64_t>(tokens.size() - 1) / bs;
  m.stats.prefix_queries += n_lookup * bs;
  // The chain keys, as long as every full group finds its blocks.
  std::vector<BlockHash> keys;
  BlockHash parent{};
  for (int64_t i = 0; i < n_lookup; ++i) {
    const BlockHash key = hash_block(parent, tokens.subspan(i * bs, bs), extra_key);
    bool found = true;
    for (int32_t g = 0; g < m.n_groups && found; ++g) {
      if (m.windows[static_cast<size_t>(g)] == 0)
        found = m.pool.find(group_key(key, g)).has_value();
    }
    if (!found) break;
    keys.push_back(key);
    parent = key;
  }
  // The longest hit whose windowed groups hold their sinks and the window before it.
  auto window_cached = [&](int64_t k) {
    for (int32_t g = 0; g < m.n_groups; ++g) {
      if (m.windows[static_cast<size_t>(g)] == 0) continue;
      auto cached = [&](int64_t from, int64_t to) {
        for (int64_t b = from; b < to; ++b) {
          if (!m.pool.find(group_key(keys[static_cast<size_t>(b)], g))) return false;
        }
        return true;
      };
      if (!cached(0, std::min(k, m.sink_blocks(g))) || !cached(m.first_needed(g, k * bs), k)) {
        return false;
      }
    }
    return true;
  };
  auto k = static_cast<int64_t>(keys.size());
  while (k > 0 && !window_cached(k)) --k;

  seq.table.assign(static_cast<size_t>(k * m.n_groups), kNoBlock);
  for (int32_t g = 0; g < m.n_groups; ++g) {
    const int64_t first = std::max(m.first_needed(g, k * bs), m.sink_blocks(g));
    seq.first_held[static_cast<size_t>(g)] = first;
    for (int64_t b = 0; b < k; ++b) {
      if (b >= m.sink_blocks(g) && b < first) continue;  // given back: outside the window
      const BlockId hit = *m.pool.find(group_key(keys[static_cast<size_t>(b)], g));
      m.pool.add_ref(hit);
      m.entry(seq, b, g) = hit;
    }
  }
  seq.chain.assign(keys.begin(), keys.begin() + k);
  const auto n_cached = static_cast<int32_t>(k * bs);
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
  // Block indices, not blocks: a windowed group's table may cover more positions than the pool
  // has slots (its early entries given back); what must fit the pool is n_fresh below.
  const int64_t n_needed = m.blocks_for(n_tokens_total);
  const int64_t n_have = seq.n_indices(m.n_groups);
  const int64_t n_new = std::max<int64_t>(0, n_needed - n_have);

  // Existing blocks that the write range falls in; those shared with another table are copied.
  const bool writes = n_write_begin < n_tokens_total;
  const int64_t first_written = n_write_begin / m.block_size;
  const int64_t end_existing = writes ? std::min(n_have, n_needed) : first_written;
  int64_t n_fresh = 0;
  for (int32_t g = 0; g < m.n_groups; ++g) {
    // The queries from n_write_begin on read blocks a windowed group may have given back.
    const int64_t first_read =
        std::max(m.sink_blocks(g), std::min(m.first_needed(g, n_write_begin), first_written));
    if (first_read < seq.first_held[static_cast<size_t>(g)]) {
      invalid("allocate: " + seq_name(seq_id) + " writes from position " +
              std::to_string(n_write_begin) + ", but its sliding-window blocks before position " +
              std::to_string(seq.first_held[static_cast<size_t>(g)] * m.block_size) +
              " were given back");
    }
    for (int64_t b = first_written; b < end_existing; ++b) {
      if (m.entry(seq, b, g) == kNoBlock) {
        invalid("allocate: " + seq_name(seq_id) + " writes into block index " + std::to_string(b) +
                ", which was given back");
      }
      if (m.pool.ref_count(m.entry(seq, b, g)) > 1) ++n_fresh;
    }
    n_fresh += n_new;
  }
  if (n_fresh > m.pool.n_free()) return false;

  // From here on nothing can fail.
  if (writes && first_written < static_cast<int64_t>(seq.chain.size())) {
    seq.chain.resize(static_cast<size_t>(first_written));
  }
  for (int64_t b = first_written; b < end_existing; ++b) {
    for (int32_t g = 0; g < m.n_groups; ++g) {
      BlockId& slot = m.entry(seq, b, g);
      if (m.pool.ref_count(slot) > 1) {
        const BlockId fresh = m.take_fresh();
        copies.push_back(BlockCopy{slot, fresh});
        m.pool.release(slot);  // stays referenced by the other tables
        slot = fresh;
      } else {
        // Ours alone and about to be overwritten: its registered key (if any) would go stale.
        m.pool.unregister(slot);
      }
    }
  }
  for (int64_t i = 0; i < n_new * m.n_groups; ++i) seq.table.push_back(m.take_fresh());
  return true;
}

void KvCacheManager::commit(int64_t seq_id, std::span<const int32_t> tokens, int64_t n_computed) {
  Impl& m = *impl_;
  Impl::Sequence& seq = Impl::get(m, seq_id, "commit");
  if (n_computed < 0 || n_computed > static_cast<int64_t>(tokens.size())) {
    invalid("commit: " + seq_name(seq_id) + " n_computed " + std::to_string(n_computed) +
            " is outside the " + std::to_string(tokens.size()) + " tokens given");
  }
  const int64_t n_covered = seq.n_indices(m.n_groups) * m.block_size;
  if (n_computed > n_covered) {
    invalid("commit: " + seq_name(seq_id) + " n_computed " + std::to_string(n_computed) +
            " exceeds the " + std::to_string(n_covered) + " positions its blocks hold");
  }
  if (m.enable_prefix_caching && !seq.evicted) {
    const int64_t bs = m.block_size;
    const int64_t n_full = n_computed / bs;
    BlockHash parent = seq.chain.empty() ? BlockHash{} : seq.chain.back();
    for (int64_t b = static_cast<int64_t>(seq.chain.size()); b < n_full; ++b) {
      const BlockHash key = hash_block(parent, tokens.subspan(b * bs, bs), seq.extra_key);
      // If another block already holds this key (the same prefix computed concurrently) or this
      // block already carries one, the existing registration stands and this block stays
      // unkeyed.
      for (int32_t g = 0; g < m.n_groups; ++g) {
        const BlockId block = m.entry(seq, b, g);
        if (block != kNoBlock) m.pool.register_key(block, group_key(key, g));
      }
      seq.chain.push_back(key);
      parent = key;
    }
  }
  // Keyed first, so what falls out of a window stays findable for a later prefix hit.
  m.release_outside_windows(seq, n_computed);
}

void KvCacheManager::truncate(int64_t seq_id, int64_t n_tokens) {
  Impl& m = *impl_;
  Impl::Sequence& seq = Impl::get(m, seq_id, "truncate");
  const int64_t n_covered = seq.n_indices(m.n_groups) * m.block_size;
  if (n_tokens < 0 || n_tokens > n_covered) {
    invalid("truncate: " + seq_name(seq_id) + " to " + std::to_string(n_tokens) +
            " tokens, but its blocks hold " + std::to_string(n_covered) + " positions");
  }
  const int64_t n_keep = m.blocks_for(n_tokens);
  for (int32_t g = 0; g < m.n_groups; ++g) {
    const int64_t first_held = seq.first_held[static_cast<size_t>(g)];
    if (m.first_needed(g, n_tokens) < first_held && first_held > m.sink_blocks(g)) {
      invalid("truncate: " + seq_name(seq_id) + " to " + std::to_string(n_tokens) +
              " tokens, but its sliding-window blocks before position " +
              std::to_string(first_held * m.block_size) + " were given back");
    }
  }
  // Tail first, as free() does.
  while (seq.n_indices(m.n_groups) > n_keep) {
    for (int32_t g = m.n_groups - 1; g >= 0; --g) {
      if (seq.table.back() != kNoBlock) m.pool.release(seq.table.back());
      seq.table.pop_back();
    }
  }
  const int64_t first_rewritten = n_tokens / m.block_size;
  if (first_rewritten < static_cast<int64_t>(seq.chain.size())) {
    seq.chain.resize(static_cast<size_t>(first_rewritten));
  }
  for (int64_t b = first_rewritten; b < n_keep; ++b) {
    for (int32_t g = 0; g < m.n_groups; ++g) {
      const BlockId block = m.entry(seq, b, g);
      if (block != kNoBlock && m.pool.ref_count(block) == 1) m.pool.unregister(block);
    }
  }
}

void KvCacheManager::evict_block(int64_t seq_id, int64_t b) {
  Impl& m = *impl_;
  Impl::Sequence& seq = Impl::get(m, seq_id, "evict_block");
  if (b < 0 || b >= seq.n_indices(m.n_groups)) {
    invalid("evict_block: " + seq_name(seq_id) + " has no block index " + std::to_string(b));
  }
  for (int64_t w : m.windows) {
    if (w > 0) invalid("evict_block: cache groups with a window give blocks back themselves");
  }
  for (int32_t g = 0; g < m.n_groups; ++g) {
    if (m.entry(seq, b, g) == kNoBlock) {
      invalid("evict_block: " + seq_name(seq_id) + " block index " + std::to_string(b) +
              " was given back already");
    }
  }
  for (int32_t g = 0; g < m.n_groups; ++g) {
    BlockId& block = m.entry(seq, b, g);
    m.pool.release(block);
    block = kNoBlock;
  }
  // The chain stays as it is: keys name the blocks computed before any eviction.
  seq.evicted = true;
}

void KvCacheManager::fork(int64_t parent, int64_t child) {
  Impl& m = *impl_;
  const Impl::Sequence& from = Impl::get(m, parent, "fork");
  if (m.sequences.contains(child)) {
    invalid("fork: child " + seq_name(child) + " of " + seq_name(parent) + " exists");
  }
  Impl::Sequence copy = from;
  for (BlockId b : copy.table) {
    if (b != kNoBlock) m.pool.add_ref(b);
  }
  m.sequences.emplace(child, std::move(copy));
}

void KvCacheManager::free(int64_t seq_id) {
  Impl& m = *impl_;
  auto it = m.sequences.find(seq_id);
  if (it == m.sequences.end()) return;
  // Tail first: the free list is evicted from the front, so the prefix heads (the blocks most
  // likely to be shared again) are the last of this sequence's blocks to be evicted.
  const std::vector<BlockId>& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) {
    if (*b != kNoBlock) m.pool.release(*b);
  }
  m.sequences.erase(it);
}

bool KvCacheManager::has_sequence(int64_t seq_id) const {
  return impl_->sequences.contains(seq_id);
}

std::span<const BlockId> KvCacheManager::block_table(int64_t seq_id) const {
  return Impl::get(std::as_const(*impl_), seq_id, "block_table").table;
}

int32_t KvCacheManager::n_blocks_held(int64_t seq_id) const {
  const auto& table = Impl::get(std::as_const(*impl_), seq_id, "n_blocks_held").table;
  return static_cast<int32_t>(
      std::count_if(table.begin(), table.end(), [](BlockId b) { return b != kNoBlock; }));
}

double KvCacheManager::usage() const {
  const int32_t n = impl_->pool.n_blocks();
  return static_cast<double>(n - impl_->pool.n_free()) / n;
}

const KvCacheStats& KvCacheManager::stats() const { return impl_->stats; }

void KvCacheManager::check_invariants() const {
  const Impl& m = *impl_;
  const int32_t n = m.pool.n_blocks();
  auto broken = [](int64_t seq_id, const std::string& what) {
    throw Error(Error::Kind::kInternal, "KV cache: " + seq_name(seq_id) + " " + what);
  };
  std::vector<int32_t> census(static_cast<size_t>(n), 0);
  for (const auto& [seq_id, seq] : m.sequences) {
    if (seq.table.size() % static_cast<size_t>(m.n_groups) != 0) {
      broken(seq_id, "has a table of " + std::to_string(seq.table.size()) + " entries for " +
                         std::to_string(m.n_groups) + " groups");
    }
    const int64_t n_idx = seq.n_indices(m.n_groups);
    if (static_cast<int64_t>(seq.chain.size()) > n_idx) {
      broken(seq_id, "has " + std::to_string(seq.chain.size()) + " keys for " +
                         std::to_string(n_idx) + " blocks");
    }
    for (int32_t g = 0; g < m.n_groups; ++g) {
      const int64_t first = seq.first_held[static_cast<size_t>(g)];
      const int64_t gap_begin = m.sink_blocks(g);
      if (first > 0 && m.windows[static_cast<size_t>(g)] == 0) {
        broken(seq_id, "gave back blocks of full-attention group " + std::to_string(g));
      }
      if (first < gap_begin) {
        broken(seq_id, "group " + std::to_string(g) + " holds its window from block index " +
                           std::to_string(first) + ", inside its sinks");
      }
      for (int64_t b = 0; b < n_idx; ++b) {
        const BlockId block = m.entry(seq, b, g);
        const bool given_back = b >= gap_begin && b < first;
        if (block == kNoBlock ? !given_back && !seq.evicted : given_back) {
          broken(seq_id, "group " + std::to_string(g) + " entry " + std::to_string(b) +
                             (block == kNoBlock ? " was given back inside its window"
                                                : " is held before its window"));
        }
        if (block == kNoBlock) continue;
        if (block < 0 || block >= n) {
          broken(seq_id, "holds block " + std::to_string(block) + " outside the pool of " +
                             std::to_string(n));
        }
        ++census[static_cast<size_t>(block)];
      }
    }
  }
  m.pool.check_invariants(census);
  // A keyed block inside a sequence's hashed prefix holds exactly that prefix: its key is the
  // sequence's chain key at that index (else a hit could hand out the wrong tokens' KV).
  for (const auto& [seq_id, seq] : m.sequences) {
    for (size_t i = 0; i < seq.chain.size(); ++i) {
      for (int32_t g = 0; g < m.n_groups; ++g) {
        const BlockId block = m.entry(seq, static_cast<int64_t>(i), g);
        if (block == kNoBlock) continue;
        const BlockHash* key = m.pool.key_of(block);
        if (key != nullptr && !(*key == group_key(seq.chain[i], g))) {
          broken(seq_id, "block " + std::to_string(block) + " at index " + std::to_string(i) +
                             " is keyed for another prefix");
        }
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
