// model/kv_storage: the tensors behind the paged KV cache.
//
// kv/ decides which block holds which positions (block tables, ref counts, prefix sharing);
// this class only holds the numbers. Per layer, blocks are laid out [block][kv_head][slot][dim],
// so attention streams one head's keys contiguously and writing a token touches one slot per
// head. Elements are f32 or f16 (kv::KvCacheType; f16 halves what attention reads per step,
// which at 32 decoding sequences is ~40 % as many bytes as the weights). Memory is reserved
// once, up front, on huge pages (util/huge_page_buffer.h: attention streams one head block
// after another from scattered blocks) and touched on first use.
//
// Contract: key_f32()/value_f32() only for an f32 store and key_f16()/value_f16() only for an
// f16 one (they throw llms::Error(kInvalidArgument) otherwise: a type mix-up would read garbage).
// The constructor refuses the types it cannot store (bf16, int8, fp8) by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/kv_budget.h"
#include "model/model_config.h"
#include "util/huge_page_buffer.h"

namespace llms::model {

class KvStorage {
 public:
  KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
            kv::KvCacheType type = kv::KvCacheType::kF32);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  kv::KvCacheType type() const { return type_; }
  size_t bytes() const { return (n_key_elements_ + n_value_elements_) * element_bytes_; }

  // Copies every layer's keys and values of block `src` into block `dst` (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

  // Bytes one block takes across all layers.
  static size_t bytes_per_block(const ModelConfig& config, int32_t block_size,
                                kv::KvCacheType type = kv::KvCacheType::kF32);

  // Start of one head's block of keys/values: block_size rows of head_dim elements.
  float* key_f32(size_t layer, int32_t block, uint64_t kv_head) {
    return static_cast<float*>(
        at(keys_, kv::KvCacheType::kF32, layer, block, kv_head, head_dim_k_));
  }
  float* value_f32(size_t layer, int32_t block, uint64_t kv_head) {
    return static_cast<float*>(
        at(values_, kv::KvCacheType::kF32, layer, block, kv_head, head_dim_v_));
  }
  uint16_t* key_f16(size_t layer, int32_t block, uint64_t kv_head) {
    return static_cast<uint16_t*>(
        at(keys_, kv::KvCacheType::kF16, layer, block, kv_head, head_dim_k_));
  }
  uint16_t* value_f16(size_t layer, int32_t block, uint64_t kv_head) {
    return static_cast<uint16_t*>(
        at(values_, kv::KvCacheType::kF16, layer, block, kv_head, head_dim_v_));
  }

 private:
  void* at(const HugePageBuffer& store, kv::KvCacheType want, size_t layer, int32_t block,
           uint64_t kv_head, uint64_t dim) const {
    if (want != type_) throw_type_mismatch(want);
    const size_t element =
        (layer_start_[layer] * dim) + ((static_cast<size_t>(block) * n_kv_heads_[layer] + kv_head) *
                                       static_cast<size_t>(block_size_)) *
                                          dim;
    return store.data() + element * element_bytes_;
  }
  [[noreturn]] void throw_type_mismatch(kv::KvCacheType want) const;

  int32_t block_size_;
  int32_t n_blocks_;
  kv::KvCacheType type_;
  size_t element_bytes_;
  uint64_t head_dim_k_;
  uint64_t head_dim_v_;
  std::vector<uint64_t> n_kv_heads_;
  std::vector<size_t> layer_start_;  // in units of (slot x head) rows
  // Zero pages handed out lazily by the kernel: a large pool costs no time or resident memory
  // until blocks are first written, so sizing the pool generously is cheap.
  size_t n_key_elements_ = 0;
  size_t n_value_elements_ = 0;
  HugePageBuffer keys_;
  HugePageBuffer values_;
};

}  // namespace llms::model
