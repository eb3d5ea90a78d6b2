// model/kv_storage: the tensors behind the paged KV cache.
//
// kv/ decides which block holds which positions (block tables, ref counts, prefix sharing);
// this class only holds the numbers. Per layer, blocks are laid out [block][kv_head][slot][dim],
// so attention streams one head's keys contiguously and writing a token touches one slot per
// head. Elements are f32 for now (a quantized cache will change the element type, not the
// layout). Memory is allocated once, up front.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace llms::model {

class KvStorage {
 public:
  KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

  // Start of one head's block of keys/values: block_size rows of head_dim floats.
  float* key(size_t layer, int32_t block, uint64_t kv_head) {
    return keys_.data() + offset(layer, block, kv_head, head_dim_k_);
  }
  float* value(size_t layer, int32_t block, uint64_t kv_head) {
    return values_.data() + offset(layer, block, kv_head, head_dim_v_);
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
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace llms::model
