// model/kv_storage: the tensors behind the paged KV cache.
//
// kv/ decides which block holds which positions (block tables, ref counts, prefix sharing);
// this class only holds the numbers. Per layer, blocks are laid out [block][kv_head][slot][dim],
// so attention streams one head's keys contiguously and writing a token touches one slot per
// head. Elements are f32 for now (a quantized cache will change the element type, not the
// layout). Memory is reserved once, up front, on huge pages (util/huge_page_buffer.h: attention
// streams one 4 KiB head block after another from scattered blocks) and touched on first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "util/huge_page_buffer.h"

namespace llms::model {

class KvStorage {
 public:
  KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  size_t bytes() const { return (n_key_floats_ + n_value_floats_) * sizeof(float); }

  // Copies every layer's keys and values of block `src` into block `dst` (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

  // Bytes one block takes across all layers.
  static size_t bytes_per_block(const ModelConfig& config, int32_t block_size);

  // Start of one head's block of keys/values: block_size rows of head_dim floats.
  float* key(size_t layer, int32_t block, uint64_t kv_head) {
    return keys() + offset(layer, block, kv_head, head_dim_k_);
  }
  float* value(size_t layer, int32_t block, uint64_t kv_head) {
    return values() + offset(layer, block, kv_head, head_dim_v_);
  }

 private:
  size_t offset(size_t layer, int32_t block, uint64_t kv_head, uint64_t dim) const {
    return (layer_start_[layer] * dim) +
           ((static_cast<size_t>(block) * n_kv_heads_[layer] + kv_head) * block_size_) * dim;
  }

  int32_t block_size_;
  int32_t n_blocks_;
  uint64_t head_dim_k_;
  uint64_t head_dim_v_;
  std::vector<uint64_t> n_kv_heads_;
  std::vector<size_t> layer_start_;  // in units of (slot x head) rows
  // Zero pages handed out lazily by the kernel: a large pool costs no time or resident memory
  // until blocks are first written, so sizing the pool generously is cheap.
  float* keys() { return reinterpret_cast<float*>(keys_.data()); }
  float* values() { return reinterpret_cast<float*>(values_.data()); }
  size_t n_key_floats_ = 0;
  size_t n_value_floats_ = 0;
  HugePageBuffer keys_;
  HugePageBuffer values_;
};

}  // namespace llms::model
