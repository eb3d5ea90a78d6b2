// model/paged_attention: tiling, masks and threading around kernels::attention_block (contract
// in model/paged_attention.h).
//
// A tile's rows are (query position, query head) pairs, row = position * (heads in the tile) +
// head. Each row carries its own visible key range [lo, pos]; the tile walks the union of those
// ranges block by block, one kernel call per block, so a row sees the same sequence of kernel
// calls whatever tile it is in. Tiles are ordered heaviest first within a sequence (later
// positions have more context) and taken from an atomic counter, which balances a long prefill
// over the threads better than fixed ranges. Keys are written dim-major into their block (see
// kv_storage.h), so the kernel reads f32, f16 or 8-bit blocks (with their scales) in place.
#include "model/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/attention.h"
#include "util/error.h"

namespace llms::model {
namespace {

constexpr int32_t kTileRows = 32;  // query rows per tile (positions x group heads), about

// Blocks of one sequence lie anywhere in the pool, so the hardware prefetchers, which follow
// one stream within a page, start cold on every block: decode at 32 sequences spent ~20 % of
// its time in attention waiting for keys and values. So keys and values are requested
// kPrefetchBlocks blocks ahead of the one computed (with an f16 cache of 16-token blocks, 2 KiB of
// keys and 2 KiB of values per 64-dim head; 1 or 8 blocks ahead measured worse).
constexpr int64_t kPrefetchBlocks = 4;

inline void prefetch_to_l2(const void* p, size_t bytes) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 2);
}

kernels::KvElement element_of(kv::KvCacheType type) {
  switch (type) {
    case kv::KvCacheType::kF16:
      return kernels::KvElement::kF16;
    case kv::KvCacheType::kInt8:
      return kernels::KvElement::kInt8;
    case kv::KvCacheType::kFp8:
      return kernels::KvElement::kFp8;
    case kv::KvCacheType::kF32:
      break;
  }
  return kernels::KvElement::kF32;
}

// One head's block of the cache as the kernel reads it.
// The block of a sequence's block index b in cache group g (interleaved tables,
// kv/step_batch.h), or kNoBlock where it was given back (a window's or an eviction's: no key
// there to attend to).
kv::BlockId table_entry(const kv::SequenceSlice& s, int64_t b, int32_t n_groups, int32_t g) {
  return s.block_table[static_cast<size_t>(b * n_groups + g)];
}

kernels::KvBlock view_of(KvStorage& kv, size_t layer, kv::BlockId block, uint64_t kv_head) {
  kernels::KvBlock view;
  view.k_stride = kv.block_size();
  view.element = element_of(kv.type());
  view.k = kv.key_data(layer, block, kv_head);
  view.v = kv.value_data(layer, block, kv_head);
  if (kv.quantized()) {
    view.k_scale = kv.key_scales(layer, block, kv_head);
    view.v_scale = kv.value_scales(layer, block, kv_head);
  }
  return view;
}

// An 8-bit store of T (int8_t: int8, uint8_t: fp8 bits): the token's key and value quantized
// with a scale each.
template <class T>
void store_quantized(KvStorage& kv, size_t layer, kv::BlockId block, int32_t slot, uint64_t kv_head,
                     const float* k_row, const float* v_row, int64_t hdk, int64_t hdv,
                     float* smoothed) {
  const kernels::KvElement element = element_of(kv.type());
  if (const float* c = kv.key_smoothing(layer, kv_head)) {
    for (int64_t e = 0; e < hdk; ++e) smoothed[e] = k_row[e] / c[e];
    k_row = smoothed;
  }
  auto* kb = reinterpret_cast<uint8_t*>(kv.key<T>(layer, block, kv_head));
  auto* vb = reinterpret_cast<uint8_t*>(kv.value<T>(layer, block, kv_head));
  kernels::quantize_kv_vector(k_row, hdk, element, kb + slot, kv.block_size(),
                              kv.key_scales(layer, block, kv_head) + slot);
  kernels::quantize_kv_vector(v_row, hdv, element, vb + slot * hdv, 1,
                              kv.value_scales(layer, block, kv_head) + slot);
}

// Stores one token's key and value of one KV head at `slot` of `block` (keys dim-major, with a
// stride of block_size; through the head_dim_k scratch rows: f16 `key_halves`, int8 `smoothed`).
void store_token(KvStorage& kv, size_t layer, kv::BlockId block, int32_t slot, uint64_t kv_head,
                 const float* k_row, const float* v_row, int64_t hdk, int64_t hdv,
                 uint16_t* key_halves, float* smoothed) {
  if (KeyStatistics* stats = kv.key_recorder()) stats->add(layer, kv_head, k_row);
  const int32_t bs = kv.block_size();
  switch (kv.type()) {
    case kv::KvCacheType::kF16: {
      kernels::f32_to_f16_array(k_row, key_halves, hdk);
      uint16_t* kb = kv.key<uint16_t>(layer, block, kv_head) + slot;
      for (int64_t e = 0; e < hdk; ++e) kb[e * bs] = key_halves[e];
      kernels::f32_to_f16_array(v_row, kv.value<uint16_t>(layer, block, kv_head) + slot * hdv, hdv);
      return;
    }
    case kv::KvCacheType::kInt8:
      store_quantized<int8_t>(kv, layer, block, slot, kv_head, k_row, v_row, hdk, hdv, smoothed);
      return;
    case kv::KvCacheType::kFp8:
      store_quantized<uint8_t>(kv, layer, block, slot, kv_head, k_row, v_row, hdk, hdv, smoothed);
      return;
    case kv::KvCacheType::kF32: {
      float* kb = kv.key<float>(layer, block, kv_head) + slot;
      for (int64_t e = 0; e < hdk; ++e) kb[e * bs] = k_row[e];
      std::memcpy(kv.value<float>(layer, block, kv_head) + slot * hdv, v_row, hdv * sizeof(float));
      return;
    }
  }
}

}  // namespace

void PagedAttention::reserve(const ModelConfig& config, int n_threads, int32_t max_tokens,
                             int32_t block_size) {
  if (max_tokens <= max_tokens_ && n_threads <= n_threads_ && block_size <= block_size_) return;
  max_tokens_ = std::max(max_tokens, max_tokens_);
  n_threads_ = std::max(n_threads, n_threads_);
  block_size_ = std::max(block_size, block_size_);
  key_halves_.assign(config.head_dim_k, 0);
  key_smoothed_.assign(config.head_dim_k, 0.0f);
  max_rows_ = std::max<int32_t>(kTileRows, static_cast<int32_t>(config.n_heads));
  // Tiles cover disjoint (token, query head) sets, so there are at most that many.
  tiles_.reserve(static_cast<size_t>(max_tokens_) * std::max<uint64_t>(config.n_heads, 1));
  scratch_.resize(static_cast<size_t>(n_threads_));
  const auto rows = static_cast<size_t>(max_rows_);
  const size_t element_bytes = sizeof(float);  // the widest KV element
  for (Scratch& s : scratch_) {
    s.branch_k.assign(static_cast<size_t>(block_size_) * config.head_dim_k * element_bytes, 0);
    s.branch_v.assign(static_cast<size_t>(block_size_) * config.head_dim_v * element_bytes, 0);
    s.branch_k_scale.assign(static_cast<size_t>(block_size_), 0);
    s.branch_v_scale.assign(static_cast<size_t>(block_size_), 0);
    s.path.reserve(64);
    s.q.assign(rows * config.head_dim_k, 0.0f);
    s.q_sink.assign(rows * config.head_dim_k, 0.0f);
    s.acc.assign(rows * config.head_dim_v, 0.0f);
    s.max.assign(rows, 0.0f);
    s.sum.assign(rows, 0.0f);
    s.scores.assign(rows * static_cast<size_t>(block_size_), 0.0f);
    s.key_begin.assign(rows, 0);
    s.key_end.assign(rows, 0);
    s.pos.assign(rows, 0);
    s.lo.assign(rows, 0);
    s.hi.assign(rows, 0);
  }
}

void PagedAttention::run(const ModelConfig& config, size_t layer, const kv::StepBatch& batch,
                         KvStorage& kv, const float* q, const float* q_sink, const float* k,
                         const float* v, float* out, ThreadPool& pool, const AttentionMass* mass) {
  if (kv.needs_key_smoothing()) {
    throw Error(Error::Kind::kInternal,
                "an int8 KV cache needs calibrate_key_smoothing() before its first write");
  }
  const int32_t bs = kv.block_size();
  const auto n_kv = static_cast<int64_t>(config.n_kv_heads[layer]);
  const auto n_heads = static_cast<int64_t>(config.n_heads);
  const auto hdk = static_cast<int64_t>(config.head_dim_k);
  const auto hdv = static_cast<int64_t>(config.head_dim_v);
  if (n_kv <= 0 || n_heads % n_kv != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                "attention: layer " + std::to_string(layer) + " has " + std::to_string(n_heads) +
                    " query heads, not a multiple of its " + std::to_string(n_kv) + " KV heads");
  }
  const auto n_tokens = static_cast<int32_t>(batch.tokens.size());
  if (n_tokens == 0) return;
  reserve(config, pool.size(), n_tokens, bs);  // no-op once the step size has been seen
  const int32_t n_groups = batch.n_kv_groups;
  const int32_t group_of_layer = kv.layout().group_of(static_cast<int32_t>(layer));

  for (const auto& s : batch.sequences) {
    for (int32_t j = 0; j < s.n_query; ++j) {
      const int32_t i = s.query_begin + j;
      const int32_t pos = s.slot_of(j);  // a tree node's slot, not its position
      const kv::BlockId block = table_entry(s, pos / bs, n_groups, group_of_layer);
      if (block == kv::kNoBlock) {
        throw Error(Error::Kind::kInternal, "attention: sequence " + std::to_string(s.seq_id) +
                                                " writes position " + std::to_string(pos) +
                                                " into a block that was given back");
      }
      for (int64_t h = 0; h < n_kv; ++h) {
        store_token(kv, layer, block, pos % bs, static_cast<uint64_t>(h), k + (i * n_kv + h) * hdk,
                    v + (i * n_kv + h) * hdv, hdk, hdv, key_halves_.data(), key_smoothed_.data());
      }
    }
  }
  const auto group = static_cast<int32_t>(n_heads / n_kv);
  const int32_t per_tile = std::max<int32_t>(1, kTileRows / group);
  int64_t n_whole = 0;  // tiles with whole groups
  for (const auto& s : batch.sequences) n_whole += (s.n_query + per_tile - 1) / per_tile * n_kv;
  const int32_t n_parts =
      n_whole >= pool.size()
          ? 1
          : std::min<int32_t>(group, static_cast<int32_t>((pool.size() + n_whole - 1) / n_whole));
  const int32_t heads_per_part = (group + n_parts - 1) / n_parts;
  tiles_.clear();
  for (size_t si = 0; si < batch.sequences.size(); ++si) {
    const auto& s = batch.sequences[si];
    // Tree nodes see different keys each: one node per tile.
    const int32_t q_per_tile = s.tree_parents.empty() ? per_tile : 1;
    const int32_t n_chunks = (s.n_query + q_per_tile - 1) / q_per_tile;
    for (int32_t c = n_chunks - 1; c >= 0; --c) {
      const int32_t first = c * q_per_tile;
      for (int32_t g = 0; g < n_kv; ++g) {
        for (int32_t h = 0; h < group; h += heads_per_part) {
          tiles_.push_back(Tile{static_cast<int32_t>(si), g, h, std::min(heads_per_part, group - h),
                                s.query_begin + first, std::min(q_per_tile, s.n_query - first)});
        }
      }
    }
  }

  if (mass != nullptr) {
    for (Scratch& s : scratch_) {
      s.mass_acc.assign(mass->n_blocks, 0.0f);
      s.prev_max.resize(static_cast<size_t>(max_rows_));
      s.prev_sum.resize(static_cast<size_t>(max_rows_));
    }
  }
  std::atomic<size_t> next{0};
  pool.parallel_for(pool.size(), [&](int64_t, int64_t, int thread) {
    Scratch& s = scratch_[static_cast<size_t>(thread)];
    for (size_t t = next.fetch_add(1, std::memory_order_relaxed); t < tiles_.size();
         t = next.fetch_add(1, std::memory_order_relaxed)) {
      run_tile(config, layer, batch, kv, tiles_[t], q, q_sink, out, s, mass);
    }
  });
  if (mass != nullptr) {
    for (Scratch& s : scratch_) {
      for (size_t i = 0; i < mass->n_blocks; ++i) mass->out[i] += s.mass_acc[i];
    }
  }
}

void PagedAttention::set_key_ranges(Scratch& s, int32_t n_rows, int64_t first, int32_t n_keys) {
  for (int32_t r = 0; r < n_rows; ++r) {
    s.key_begin[r] = static_cast<int32_t>(std::max<int64_t>(s.lo[r] - first, 0));
    s.key_end[r] = static_cast<int32_t>(std::clamp<int64_t>(s.hi[r] - first, 0, n_keys));
  }
}

void PagedAttention::run_tile(const ModelConfig& config, size_t layer, const kv::StepBatch& batch,
                              KvStorage& kv, const Tile& tile, const float* q, const float* q_sink,
                              float* out, Scratch& s, const AttentionMass* mass) const {
  const kv::SequenceSlice& seq = batch.sequences[static_cast<size_t>(tile.slice)];
  const int32_t bs = kv.block_size();
  const int32_t cache_group = kv.layout().group_of(static_cast<int32_t>(layer));
  const auto n_heads = static_cast<int64_t>(config.n_heads);
  const auto n_kv = static_cast<int64_t>(config.n_kv_heads[layer]);
  const auto hdk = static_cast<int64_t>(config.head_dim_k);
  const auto hdv = static_cast<int64_t>(config.head_dim_v);
  const int64_t group = n_heads / n_kv;
  const int64_t n_th = tile.n_heads;
  const auto n_rows = static_cast<int32_t>(tile.n_q * n_th);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hdk));
  const auto window = static_cast<int64_t>(config.attention_window(layer));
  const auto n_sinks = static_cast<int64_t>(config.attention_sinks_of(layer));
  if (n_sinks > 0 && q_sink == nullptr) {
    throw Error(Error::Kind::kInternal, "attention: a layer with sinks needs their queries");
  }
  // Keys stored smoothed (int8) meet the query multiplied by the same factors.
  const float* smoothing = kv.key_smoothing(layer, static_cast<uint64_t>(tile.kv_head));
  auto load_query = [&](const float* src, float* dst) {
    if (smoothing != nullptr) {
      for (int64_t e = 0; e < hdk; ++e) dst[e] = src[e] * scale * smoothing[e];
    } else {
      for (int64_t e = 0; e < hdk; ++e) dst[e] = src[e] * scale;
    }
  };

  // Each row sees [lo, pos] (its window, or everything) and, when its window has left the
  // sinks behind, [0, n_sinks) through q_sink (a separate pass below).
  int64_t tile_lo = std::numeric_limits<int64_t>::max();
  int64_t tile_hi = 0;  // one past the last visible position
  bool any_gap = false;
  for (int32_t qi = 0; qi < tile.n_q; ++qi) {
    const int32_t i = tile.q_begin + qi;
    const int64_t pos = batch.positions[i];
    int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    if (lo <= n_sinks) lo = 0;  // the window still reaches the sinks: one run from 0
    any_gap = any_gap || (lo > 0 && n_sinks > 0);
    tile_lo = std::min(tile_lo, lo);
    tile_hi = std::max(tile_hi, pos + 1);
    for (int64_t hh = 0; hh < n_th; ++hh) {
      const int64_t r = qi * n_th + hh;
      const size_t at =
          static_cast<size_t>((i * n_heads + tile.kv_head * group + tile.head_begin + hh) * hdk);
      load_query(q + at, s.q.data() + r * hdk);
      if (n_sinks > 0) load_query(q_sink + at, s.q_sink.data() + r * hdk);
      std::fill_n(s.acc.data() + r * hdv, hdv, 0.0f);
      s.max[r] = -std::numeric_limits<float>::infinity();
      s.sum[r] = 0.0f;
      s.pos[r] = static_cast<int32_t>(pos);
      s.lo[r] = static_cast<int32_t>(lo);
      s.hi[r] = static_cast<int32_t>(pos + 1);
    }
  }

  kernels::AttentionTile t;
  t.q = s.q.data();
  t.acc = s.acc.data();
  t.max = s.max.data();
  t.sum = s.sum.data();
  t.key_begin = s.key_begin.data();
  t.key_end = s.key_end.data();
  t.scores = s.scores.data();
  t.n_rows = n_rows;
  t.head_dim_k = hdk;
  t.head_dim_v = hdv;
  const size_t element_bytes = kv::kv_element_bytes(kv.type());
  auto held = [&](int64_t b) {
    return table_entry(seq, b, batch.n_kv_groups, cache_group) != kv::kNoBlock;
  };
  auto block_view = [&](int64_t b) {
    return view_of(kv, layer, table_entry(seq, b, batch.n_kv_groups, cache_group),
                   static_cast<uint64_t>(tile.kv_head));
  };
  const int64_t b_begin = tile_lo / bs;
  const int64_t b_end = (tile_hi + bs - 1) / bs;
  auto prefetch_block = [&](int64_t b, int64_t end) {
    if (b >= end || !held(b)) return;
    const kernels::KvBlock view = block_view(b);
    prefetch_to_l2(view.k, bs * hdk * element_bytes);
    prefetch_to_l2(view.v, bs * hdv * element_bytes);
    if (view.k_scale != nullptr) prefetch_to_l2(view.k_scale, 2 * bs * sizeof(uint16_t));
  };
  // A tree node off the region's first branch: its ancestors are not in the slots its
  // positions name, so the blocks from the region on are folded as copies with the branch
  // moved in (branch_view).
  const int32_t tree_base = seq.tree_parents.empty() ? 0 : seq.tree_base();
  bool moved_branch = false;
  if (!seq.tree_parents.empty() && seq.slot_of(tile.q_begin - seq.query_begin) >= tree_base) {
    s.path.clear();
    for (int32_t r = seq.slot_of(tile.q_begin - seq.query_begin) - tree_base; r >= 0;
         r = seq.tree_parents[r]) {
      s.path.push_back(r);
    }
    std::reverse(s.path.begin(), s.path.end());
    for (size_t d = 0; d < s.path.size(); ++d) {
      if (s.path[d] != static_cast<int32_t>(d)) moved_branch = true;
    }
  }
  auto branch_view = [&](int64_t b) {
    const kernels::KvBlock real = block_view(b);
    std::memcpy(s.branch_k.data(), real.k, bs * hdk * element_bytes);
    std::memcpy(s.branch_v.data(), real.v, bs * hdv * element_bytes);
    if (kv.quantized()) {
      std::copy_n(real.k_scale, bs, s.branch_k_scale.data());
      std::copy_n(real.v_scale, bs, s.branch_v_scale.data());
    }
    const int64_t first = std::max<int64_t>(b * bs, tree_base);
    const int64_t last =
        std::min<int64_t>((b + 1) * bs, tree_base + static_cast<int64_t>(s.path.size()));
    for (int64_t p = first; p < last; ++p) {
      const int64_t src = tree_base + s.path[static_cast<size_t>(p - tree_base)];
      const kernels::KvBlock from = block_view(src / bs);
      const int64_t from_slot = src % bs;
      const int64_t to_slot = p % bs;
      for (int64_t e = 0; e < hdk; ++e) {
        std::memcpy(s.branch_k.data() + (e * bs + to_slot) * element_bytes,
                    static_cast<const uint8_t*>(from.k) + (e * bs + from_slot) * element_bytes,
                    element_bytes);
      }
      std::memcpy(s.branch_v.data() + to_slot * hdv * element_bytes,
                  static_cast<const uint8_t*>(from.v) + from_slot * hdv * element_bytes,
                  hdv * element_bytes);
      if (kv.quantized()) {
        s.branch_k_scale[to_slot] = from.k_scale[from_slot];
        s.branch_v_scale[to_slot] = from.v_scale[from_slot];
      }
    }
    kernels::KvBlock view = real;
    view.k = s.branch_k.data();
    view.v = s.branch_v.data();
    if (kv.quantized()) {
      view.k_scale = s.branch_k_scale.data();
      view.v_scale = s.branch_v_scale.data();
    }
    return view;
  };
  // Folds blocks [from, to) into every row's running softmax, each row within [lo, hi).
  // Tracking attention mass, each block's share of each row is kept at the row's running max
  // (the sum's growth over the block) and normalised once the row is done.
  s.mass_records.clear();
  auto fold = [&](int64_t from, int64_t to) {
    for (int64_t d = 0; d < kPrefetchBlocks; ++d) prefetch_block(from + d, to);
    for (int64_t b = from; b < to; ++b) {
      prefetch_block(b + kPrefetchBlocks, to);
      if (!held(b)) continue;        // given back: nothing to attend to
      const int64_t first = b * bs;  // position of the block's slot 0
      set_key_ranges(s, n_rows, first, bs);
      if (mass != nullptr) {
        std::copy_n(s.max.data(), n_rows, s.prev_max.data());
        std::copy_n(s.sum.data(), n_rows, s.prev_sum.data());
      }
      const bool holds_branch = moved_branch && (b + 1) * bs > tree_base;
      kernels::attention_block(t, holds_branch ? branch_view(b) : block_view(b), bs);
      if (mass != nullptr) {
        for (int32_t r = 0; r < n_rows; ++r) {
          if (s.key_begin[r] >= s.key_end[r] || std::isinf(s.max[r])) continue;
          // A difference of two sums: clamped, as rounding can take a tiny share below zero.
          const float grown =
              std::max(0.0f, s.sum[r] - s.prev_sum[r] * std::exp(s.prev_max[r] - s.max[r]));
          s.mass_records.push_back({static_cast<int32_t>(b), r, grown, s.max[r]});
        }
      }
    }
  };
  fold(b_begin, b_end);
  if (any_gap) {
    // The sinks of the rows whose window has left them, scored with their cache-position query
    // (the softmax state carries over: the order of folding does not change the result).
    for (int32_t r = 0; r < n_rows; ++r) {
      const bool gap = s.lo[r] > 0;
      s.hi[r] = gap ? static_cast<int32_t>(std::min<int64_t>(n_sinks, s.pos[r] + 1)) : 0;
      s.lo[r] = 0;
    }
    t.q = s.q_sink.data();
    fold(0, std::min<int64_t>(b_end, (n_sinks + bs - 1) / bs));
    t.q = s.q.data();
  }

  if (mass != nullptr) {
    float* acc = s.mass_acc.data() + mass->slice_offset[static_cast<size_t>(tile.slice)];
    for (const MassRecord& m : s.mass_records) {
      acc[m.block] += m.mass * std::exp(m.max - s.max[m.row]) / s.sum[m.row];
    }
  }
  for (int32_t qi = 0; qi < tile.n_q; ++qi) {
    const int64_t i = tile.q_begin + qi;
    for (int64_t hh = 0; hh < n_th; ++hh) {
      const int64_t r = qi * n_th + hh;
      const float inv = 1.0f / s.sum[r];
      const float* acc = s.acc.data() + r * hdv;
      float* dst = out + (i * n_heads + tile.kv_head * group + tile.head_begin + hh) * hdv;
      for (int64_t e = 0; e < hdv; ++e) dst[e] = acc[e] * inv;
    }
  }
}

}  // namespace llms::model
