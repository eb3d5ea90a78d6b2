// model/kv_storage: the tensors behind the paged KV cache.
//
// kv/ decides which block holds which positions (block tables, ref counts, prefix sharing);
// this class only holds the numbers. Per layer, values are laid out [kv_head][block][slot][dim]
// and keys [kv_head][block][dim][slot]: one head's block is contiguous either way, and so are one
// head's consecutive blocks, so attention, which walks a sequence's blocks head by head, streams
// them as one run wherever the pool handed a sequence consecutive blocks (a prefill's); keys
// dim-major let it compute the scores of consecutive keys in vector lanes (a token's key is
// written with a stride of block_size). Elements are f32 or f16 (kv::KvCacheType;
// f16 halves what attention reads per step, which at 32 decoding sequences is ~40 % as many bytes
// as the weights). Memory is reserved once, up front, on huge pages (util/huge_page_buffer.h:
// attention streams one head block after another from scattered blocks) and touched on first use.
//
// Contract: key<float>()/value<float>() only for an f32 store and key<uint16_t>()/value<uint16_t>()
// only for an f16 one (they throw llms::Error(kInvalidArgument) otherwise: a type mix-up would
// read garbage).
// The constructor refuses the types it cannot store (bf16, int8, fp8) by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kv/kv_budget.h"
#include "kv/step_batch.h"
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
  // Copies every layer's key and value of one token (a tree's kept branch moving into place).
  void copy_slot(const kv::SlotCopy& c);

  // Bytes one block takes across all layers.
  static size_t bytes_per_block(const ModelConfig& config, int32_t block_size,
                                kv::KvCacheType type = kv::KvCacheType::kF32);

  // Start of one head's block of keys (head_dim rows of block_size slots) or values (block_size
  // rows of head_dim elements), as T = float (an f32 store) or T = uint16_t (an f16 store, IEEE
  // half bits).
  template <class T>
  T* key(size_t layer, int32_t block, uint64_t kv_head) {
    return static_cast<T*>(at(keys_, element_type<T>(), layer, block, kv_head, head_dim_k_));
  }
  template <class T>
  T* value(size_t layer, int32_t block, uint64_t kv_head) {
    return static_cast<T*>(at(values_, element_type<T>(), layer, block, kv_head, head_dim_v_));
  }

 private:
  template <class T>
  static constexpr kv::KvCacheType element_type() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t>,
                  "KV elements are float (f32) or uint16_t (f16)");
    return std::is_same_v<T, float> ? kv::KvCacheType::kF32 : kv::KvCacheType::kF16;
  }
  void* at(const HugePageBuffer& store, kv::KvCacheType want, size_t layer, int32_t block,
           uint64_t kv_head, uint64_t dim) const {
    if (want != type_) throw_type_mismatch(want);
    const size_t element =
        (layer_start_[layer] * dim) +
        ((kv_head * static_cast<size_t>(n_blocks_) + static_cast<size_t>(block)) *
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
