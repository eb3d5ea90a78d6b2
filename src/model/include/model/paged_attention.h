// model/paged_attention: paged causal attention of one layer for a whole StepBatch.
//
// Contract: run() first writes this step's keys and values into the KV storage at the slots
// the block tables name, then computes, for every token and query head, softmax(q k^T / sqrt(d))
// v over its own sequence's cache: positions <= its own, and within the sliding window on
// layers that have one. Work is cut into tiles: one sequence, one KV head, a few consecutive
// query positions, and the `group` query heads that share that KV head (all of them, unless
// there would be fewer tiles than threads, as in a single decode on one KV head), so each KV
// block is read once per tile; tiles are handed to the pool's threads dynamically. Per row the
// blocks are folded in order with a block-wise online softmax (kernels/attention.h), so a token's
// output does not depend on what else is in the batch, on the tiling or on the thread.
// Attention sinks (StreamingLLM, ModelConfig::streaming_window): a layer with sinks also
// attends to its first `sinks` tokens; a query whose window has left them scores them with
// q_sink, its query rotated at its position in that cache (sinks, then the window: position
// sinks + window - 1) instead of its own, so the sinks sit just before the window.
// A token-tree node (kv/step_batch.h) gets a tile of its own; the blocks that hold its branch
// are folded as a copy in which its ancestors sit in the slots a plain run would give them, so
// its output equals that of the same branch computed as a plain run, bit for bit.
// reserve() sizes every buffer; run() calls it, so it allocates only for a step larger (in
// tokens, threads or block size) than every one before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/model_config.h"
#include "util/thread_pool.h"

namespace llms::model {

// Where attention reports the mass each KV block drew (H2O, kv/heavy_hitters.h):
// out[slice_offset[i] + b] += the softmax weight of block index b's keys, summed over slice i's
// queries and heads (and over layers, as the caller accumulates); n_blocks entries in all.
struct AttentionMass {
  float* out = nullptr;
  std::span<const size_t> slice_offset;
  size_t n_blocks = 0;
};

class PagedAttention {
 public:
  // For steps of up to max_tokens tokens on a pool of n_threads threads, with KV blocks of up to
  // block_size slots.
  void reserve(const ModelConfig& config, int n_threads, int32_t max_tokens, int32_t block_size);

  // q: [token][n_heads][head_dim_k]; k, v: [token][n_kv_heads][head_dim]; out:
  // [token][n_heads][head_dim_v]. q_sink: like q, rotated at min(position, sinks + window - 1),
  // for a layer with attention sinks (else unused, may be null). The batch must have been
  // validated against `kv`.
  void run(const ModelConfig& config, size_t layer, const kv::StepBatch& batch, KvStorage& kv,
           const float* q, const float* q_sink, const float* k, const float* v, float* out,
           ThreadPool& pool, const AttentionMass* mass = nullptr);

 private:
  struct Tile {
    int32_t slice;  // index in batch.sequences
    int32_t kv_head;
    int32_t head_begin;  // first query head of the group in this tile
    int32_t n_heads;     // query heads of the group in this tile
    int32_t q_begin;     // first token (index in batch.tokens)
    int32_t n_q;         // consecutive tokens of the slice
  };
  struct MassRecord {
    int32_t block;  // block index in the slice
    int32_t row;    // tile row
    float mass;     // the row's sum grown over the block, at `max`
    float max;      // the row's running max after the block
  };
  struct Scratch {
    std::vector<float> q, q_sink, acc, max, sum, scores;
    std::vector<int32_t> key_begin, key_end, pos, lo, hi;
    std::vector<int32_t> path;                // a tree node's ancestors by depth (region indices)
    std::vector<uint8_t> branch_k, branch_v;  // one block with a tree branch laid out in place
    std::vector<uint16_t> branch_k_scale, branch_v_scale;  // and its scales (8-bit caches)
    std::vector<float> prev_max, prev_sum, mass_acc;       // attention-mass tracking
    std::vector<MassRecord> mass_records;
  };

  void run_tile(const ModelConfig& config, size_t layer, const kv::StepBatch& batch, KvStorage& kv,
                const Tile& tile, const float* q, const float* q_sink, float* out, Scratch& s,
                const AttentionMass* mass) const;
  // Each row's visible keys [key_begin, key_end) within the n_keys keys from position `first`:
  // row r sees positions [lo[r], hi[r]).
  static void set_key_ranges(Scratch& s, int32_t n_rows, int64_t first, int32_t n_keys);

  int32_t max_tokens_ = 0;
  int n_threads_ = 0;
  int32_t max_rows_ = 0;
  int32_t block_size_ = 0;
  std::vector<uint16_t> key_halves_;  // a key converted to f16 before its dim-major scatter
  std::vector<float> key_smoothed_;   // an int8 cache's key divided by its smoothing factors
  std::vector<Tile> tiles_;
  std::vector<Scratch> scratch_;  // one per pool thread
};

}  // namespace llms::model
