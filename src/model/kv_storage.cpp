#include "model/kv_storage.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "util/error.h"

namespace llms::model {

namespace {

size_t storable_element_bytes(kv::KvCacheType type) {
  if (type != kv::KvCacheType::kF32 && type != kv::KvCacheType::kF16) {
    throw Error(Error::Kind::kInvalidArgument, "KV cache type '" +
                                                   std::string(kv::kv_cache_type_name(type)) +
                                                   "' is not supported (f32 and f16 are)");
  }
  return static_cast<size_t>(kv::kv_element_bytes(type));
}

}  // namespace

KvStorage::KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
                     kv::KvCacheType type)
    : block_size_(block_size),
      n_blocks_(n_blocks),
      type_(type),
      element_bytes_(storable_element_bytes(type)),
      head_dim_k_(config.head_dim_k),
      head_dim_v_(config.head_dim_v),
      n_kv_heads_(config.n_kv_heads) {
  if (block_size <= 0 || n_blocks <= 0) {
    throw Error(Error::Kind::kInvalidArgument, "KV storage needs a positive block size and count");
  }
  size_t rows = 0;
  for (uint64_t heads : n_kv_heads_) {
    layer_start_.push_back(rows);
    rows += static_cast<size_t>(n_blocks) * block_size * heads;
  }
  n_key_elements_ = rows * head_dim_k_;
  n_value_elements_ = rows * head_dim_v_;
  try {
    keys_ = HugePageBuffer(n_key_elements_ * element_bytes_);
    values_ = HugePageBuffer(n_value_elements_ * element_bytes_);
  } catch (const Error& e) {
    throw Error(Error::Kind::kInvalidArgument, std::string("KV cache: ") + e.what());
  }
}

void KvStorage::throw_type_mismatch(kv::KvCacheType want) const {
  throw Error(Error::Kind::kInvalidArgument,
              "KV storage holds " + std::string(kv::kv_cache_type_name(type_)) +
                  " elements, read as " + std::string(kv::kv_cache_type_name(want)));
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= n_blocks_ || dst >= n_blocks_) {
    throw Error(Error::Kind::kInvalidArgument, "KV block copy outside the pool");
  }
  if (src == dst) return;
  const size_t rows = static_cast<size_t>(block_size_);
  for (size_t layer = 0; layer < n_kv_heads_.size(); ++layer) {
    for (uint64_t h = 0; h < n_kv_heads_[layer]; ++h) {
      std::memcpy(at(keys_, type_, layer, dst, h, head_dim_k_),
                  at(keys_, type_, layer, src, h, head_dim_k_),
                  rows * head_dim_k_ * element_bytes_);
      std::memcpy(at(values_, type_, layer, dst, h, head_dim_v_),
                  at(values_, type_, layer, src, h, head_dim_v_),
                  rows * head_dim_v_ * element_bytes_);
    }
  }
}

void KvStorage::copy_slot(const kv::SlotCopy& c) {
  auto outside = [&](int32_t block, int32_t slot) {
    return block < 0 || block >= n_blocks_ || slot < 0 || slot >= block_size_;
  };
  if (outside(c.src_block, c.src_slot) || outside(c.dst_block, c.dst_slot)) {
    throw Error(Error::Kind::kInvalidArgument, "KV slot copy outside the pool");
  }
  if (c.src_block == c.dst_block && c.src_slot == c.dst_slot) return;
  const auto bs = static_cast<size_t>(block_size_);
  const auto from = static_cast<size_t>(c.src_slot);
  const auto to = static_cast<size_t>(c.dst_slot);
  for (size_t layer = 0; layer < n_kv_heads_.size(); ++layer) {
    for (uint64_t h = 0; h < n_kv_heads_[layer]; ++h) {
      // Keys are dim-major: element e of a slot is e * block_size further on.
      auto* dk = static_cast<uint8_t*>(at(keys_, type_, layer, c.dst_block, h, head_dim_k_));
      const auto* sk =
          static_cast<const uint8_t*>(at(keys_, type_, layer, c.src_block, h, head_dim_k_));
      for (size_t e = 0; e < head_dim_k_; ++e) {
        std::memcpy(dk + (e * bs + to) * element_bytes_, sk + (e * bs + from) * element_bytes_,
                    element_bytes_);
      }
      auto* dv = static_cast<uint8_t*>(at(values_, type_, layer, c.dst_block, h, head_dim_v_));
      const auto* sv =
          static_cast<const uint8_t*>(at(values_, type_, layer, c.src_block, h, head_dim_v_));
      std::memcpy(dv + to * head_dim_v_ * element_bytes_, sv + from * head_dim_v_ * element_bytes_,
                  head_dim_v_ * element_bytes_);
    }
  }
}

size_t KvStorage::bytes_per_block(const ModelConfig& config, int32_t block_size,
                                  kv::KvCacheType type) {
  const size_t element = storable_element_bytes(type);
  size_t per_token = 0;
  for (uint64_t heads : config.n_kv_heads) {
    per_token += heads * (config.head_dim_k + config.head_dim_v) * element;
  }
  return per_token * static_cast<size_t>(block_size);
}

}  // namespace llms::model
