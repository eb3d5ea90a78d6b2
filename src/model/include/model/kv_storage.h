// model/kv_storage: the tensors behind the paged KV cache.
//
// kv/ decides which block holds which positions (block tables, ref counts, prefix sharing);
// this class only holds the numbers. Per layer, values are laid out [kv_head][block][slot][dim]
// and keys [kv_head][block][dim][slot]: one head's block is contiguous either way, and so are one
// head's consecutive blocks, so attention, which walks a sequence's blocks head by head, streams
// them as one run wherever the pool handed a sequence consecutive blocks (a prefill's); keys
// dim-major let it compute the scores of consecutive keys in vector lanes (a token's key is
// written with a stride of block_size). Elements are f32, f16, int8 or fp8 (kv::KvCacheType;
// f16 halves what attention reads per step, which at 32 decoding sequences is ~40 % as many bytes
// as the weights, and the 8-bit types halve it again). An 8-bit store also keeps, per layer, KV
// head and block, the bf16 scales of its slots' keys and of their values (kernels/attention.h),
// [kv_head][block][key scales | value scales], so a block's scales travel with it. Memory is
// reserved once, up front, on huge pages (util/huge_page_buffer.h: attention streams one head
// block after another from scattered blocks) and touched on first use.
//
// Cache groups (kv/kv_groups.h): a block is a page of the layout's members() member slots, and
// a layer reads and writes its member slot of the pages its group's table names, so per member
// (not per layer) values are [kv_head][block][slot][dim] and keys [kv_head][block][dim][slot].
// Without windows there is one group of every layer and a member is a layer.
//
// Contract: key<T>()/value<T>() only with the store's element type, T = float (f32), uint16_t
// (f16, IEEE half bits), int8_t (int8) or uint8_t (fp8 E4M3 bits); key_scales()/value_scales()
// only for int8 and fp8 stores. Anything else throws llms::Error(kInvalidArgument): a type
// mix-up would read garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kv/kv_budget.h"
#include "kv/kv_groups.h"
#include "kv/step_batch.h"
#include "model/key_smoothing.h"
#include "model/model_config.h"
#include "util/huge_page_buffer.h"

namespace llms::model {

class KvStorage {
 public:
  // Without a layout, one group of every layer (kv::KvGroupLayout::single).
  KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
            kv::KvCacheType type = kv::KvCacheType::kF32);
  KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks, kv::KvCacheType type,
            kv::KvGroupLayout layout);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  kv::KvCacheType type() const { return type_; }
  uint64_t head_dim_k() const { return head_dim_k_; }
  uint64_t head_dim_v() const { return head_dim_v_; }
  const kv::KvGroupLayout& layout() const { return layout_; }
  bool quantized() const { return scale_bytes_ != 0; }
  size_t bytes() const {
    return (n_key_elements_ + n_value_elements_) * element_bytes_ + scales_.size();
  }

  // Copies every member's keys and values of block `src` into block `dst` (copy-on-write).
  void copy_block(int32_t src, int32_t dst);
  // Copies every member's key and value of one token (a tree's kept branch moving into place).
  void copy_slot(const kv::SlotCopy& c);

  // Bytes one block (page) takes across its member slots (all layers without a layout).
  static size_t bytes_per_block(const ModelConfig& config, int32_t block_size,
                                kv::KvCacheType type = kv::KvCacheType::kF32);
  static size_t bytes_per_block(const ModelConfig& config, int32_t block_size, kv::KvCacheType type,
                                const kv::KvGroupLayout& layout);

  // Start of one head's block of keys (head_dim rows of block_size slots) or values (block_size
  // rows of head_dim elements), as T = float (f32), uint16_t (f16, IEEE half bits), int8_t
  // (int8) or uint8_t (fp8 E4M3 bits), whichever the store holds.
  template <class T>
  T* key(size_t layer, int32_t block, uint64_t kv_head) {
    check_type(element_type<T>());
    return static_cast<T*>(at(keys_, element_bytes_, layer, block, kv_head, head_dim_k_));
  }
  template <class T>
  T* value(size_t layer, int32_t block, uint64_t kv_head) {
    check_type(element_type<T>());
    return static_cast<T*>(at(values_, element_bytes_, layer, block, kv_head, head_dim_v_));
  }
  // The same blocks untyped, for a reader that carries the element type itself (attention's
  // kernels::KvBlock).
  const void* key_data(size_t layer, int32_t block, uint64_t kv_head) const {
    return at(keys_, element_bytes_, layer, block, kv_head, head_dim_k_);
  }
  const void* value_data(size_t layer, int32_t block, uint64_t kv_head) const {
    return at(values_, element_bytes_, layer, block, kv_head, head_dim_v_);
  }
  // An 8-bit store's bf16 scales of one head's block: block_size key scales, then (value_scales)
  // block_size value scales.
  uint16_t* key_scales(size_t layer, int32_t block, uint64_t kv_head) {
    if (!quantized()) throw_not_quantized();
    return static_cast<uint16_t*>(at(scales_, scale_bytes_, layer, block, kv_head, 2));
  }
  uint16_t* value_scales(size_t layer, int32_t block, uint64_t kv_head) {
    return key_scales(layer, block, kv_head) + block_size_;
  }

  // Key smoothing (model/key_smoothing.h): an int8 store needs its factors, [layer][kv_head][dim]
  // as smoothing_factors() lays them out, before the first key is written; then every key is
  // stored divided by them and read against a query multiplied by them. Other types ignore it.
  bool needs_key_smoothing() const {
    return type_ == kv::KvCacheType::kInt8 && key_smoothing_.empty();
  }
  void set_key_smoothing(std::vector<float> factors);
  // One head's factors (head_dim_k of them), or nullptr when keys are stored as they are.
  const float* key_smoothing(size_t layer, uint64_t kv_head) const {
    if (key_smoothing_.empty()) return nullptr;
    return key_smoothing_.data() + (head_start_[layer] + kv_head) * head_dim_k_;
  }
  // While set, every key written is also added to `stats` (a calibration pass).
  void record_keys(KeyStatistics* stats) { key_recorder_ = stats; }
  KeyStatistics* key_recorder() const { return key_recorder_; }

 private:
  template <class T>
  static constexpr kv::KvCacheType element_type() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t> ||
                      std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>,
                  "KV elements are float (f32), uint16_t (f16), int8_t (int8) or uint8_t (fp8)");
    if constexpr (std::is_same_v<T, float>) return kv::KvCacheType::kF32;
    if constexpr (std::is_same_v<T, uint16_t>) return kv::KvCacheType::kF16;
    if constexpr (std::is_same_v<T, int8_t>) return kv::KvCacheType::kInt8;
    return kv::KvCacheType::kFp8;
  }
  void check_type(kv::KvCacheType want) const {
    if (want != type_) throw_type_mismatch(want);
  }
  // One head's block of a layer in a store of `dim` units of `unit_bytes` per slot.
  void* at(const HugePageBuffer& store, size_t unit_bytes, size_t layer, int32_t block,
           uint64_t kv_head, uint64_t dim) const {
    return at_member(store, unit_bytes,
                     static_cast<size_t>(layout_.member_of(static_cast<int32_t>(layer))), block,
                     kv_head, dim);
  }
  void* at_member(const HugePageBuffer& store, size_t unit_bytes, size_t member, int32_t block,
                  uint64_t kv_head, uint64_t dim) const {
    const size_t element =
        (member_start_[member] * dim) +
        ((kv_head * static_cast<size_t>(n_blocks_) + static_cast<size_t>(block)) *
         static_cast<size_t>(block_size_)) *
            dim;
    return store.data() + element * unit_bytes;
  }
  [[noreturn]] void throw_type_mismatch(kv::KvCacheType want) const;
  [[noreturn]] void throw_not_quantized() const;

  int32_t block_size_;
  int32_t n_blocks_;
  kv::KvCacheType type_;
  size_t element_bytes_;
  size_t scale_bytes_;  // per key or value vector; 0 for f32 and f16
  uint64_t head_dim_k_;
  uint64_t head_dim_v_;
  kv::KvGroupLayout layout_;
  std::vector<uint64_t> n_kv_heads_;    // per layer
  std::vector<uint64_t> member_heads_;  // per member slot: the most KV heads of its layers
  std::vector<size_t> member_start_;    // in units of (slot x head) rows
  std::vector<size_t> head_start_;      // index of each layer's first KV head
  std::vector<float> key_smoothing_;
  KeyStatistics* key_recorder_ = nullptr;
  // Zero pages handed out lazily by the kernel: a large pool costs no time or resident memory
  // until blocks are first written, so sizing the pool generously is cheap.
  size_t n_key_elements_ = 0;
  size_t n_value_elements_ = 0;
  HugePageBuffer keys_;
  HugePageBuffer values_;
  HugePageBuffer scales_;  // 8-bit stores only
};

}  // namespace llms::model
