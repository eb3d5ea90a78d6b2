#include "model/kv_storage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "util/error.h"

namespace llms::model {

namespace {

// The most KV heads of the layers that share each member slot.
std::vector<uint64_t> heads_per_member(const ModelConfig& config, const kv::KvGroupLayout& layout) {
  std::vector<uint64_t> heads(static_cast<size_t>(layout.members()), 0);
  for (size_t l = 0; l < config.n_kv_heads.size(); ++l) {
    auto& h = heads[static_cast<size_t>(layout.member_of(static_cast<int32_t>(l)))];
    h = std::max(h, config.n_kv_heads[l]);
  }
  return heads;
}

void check_layout(const ModelConfig& config, const kv::KvGroupLayout& layout) {
  if (static_cast<size_t>(layout.n_layers()) != config.n_kv_heads.size()) {
    throw Error(Error::Kind::kInvalidArgument,
                "KV storage: a cache-group layout of " + std::to_string(layout.n_layers()) +
                    " layers for a model of " + std::to_string(config.n_kv_heads.size()));
  }
}

}  // namespace

KvStorage::KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
                     kv::KvCacheType type)
    : KvStorage(config, block_size, n_blocks, type,
                kv::KvGroupLayout::single(static_cast<int32_t>(config.n_kv_heads.size()))) {}

KvStorage::KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
                     kv::KvCacheType type, kv::KvGroupLayout layout)
    : block_size_(block_size),
      n_blocks_(n_blocks),
      type_(type),
      element_bytes_(kv::kv_element_bytes(type)),
      scale_bytes_(kv::kv_scale_bytes(type)),
      head_dim_k_(config.head_dim_k),
      head_dim_v_(config.head_dim_v),
      layout_(std::move(layout)),
      n_kv_heads_(config.n_kv_heads) {
  if (block_size <= 0 || n_blocks <= 0) {
    throw Error(Error::Kind::kInvalidArgument, "KV storage needs a positive block size and count");
  }
  check_layout(config, layout_);
  size_t heads_so_far = 0;
  for (uint64_t heads : n_kv_heads_) {
    head_start_.push_back(heads_so_far);
    heads_so_far += heads;
  }
  member_heads_ = heads_per_member(config, layout_);
  size_t rows = 0;
  for (uint64_t heads : member_heads_) {
    member_start_.push_back(rows);
    rows += static_cast<size_t>(n_blocks) * block_size * heads;
  }
  n_key_elements_ = rows * head_dim_k_;
  n_value_elements_ = rows * head_dim_v_;
  try {
    keys_ = HugePageBuffer(n_key_elements_ * element_bytes_);
    values_ = HugePageBuffer(n_value_elements_ * element_bytes_);
    if (quantized()) scales_ = HugePageBuffer(rows * 2 * scale_bytes_);
  } catch (const Error& e) {
    throw Error(Error::Kind::kInvalidArgument, std::string("KV cache: ") + e.what());
  }
}

void KvStorage::throw_type_mismatch(kv::KvCacheType want) const {
  throw Error(Error::Kind::kInvalidArgument,
              "KV storage holds " + std::string(kv::kv_cache_type_name(type_)) +
                  " elements, read as " + std::string(kv::kv_cache_type_name(want)));
}

void KvStorage::set_key_smoothing(std::vector<float> factors) {
  if (type_ != kv::KvCacheType::kInt8) {
    throw Error(Error::Kind::kInvalidArgument, "key smoothing is for int8 KV caches only");
  }
  const size_t heads = head_start_.empty() ? 0 : head_start_.back() + n_kv_heads_.back();
  if (factors.size() != heads * head_dim_k_) {
    throw Error(Error::Kind::kInvalidArgument, "key smoothing: " + std::to_string(factors.size()) +
                                                   " factors for " + std::to_string(heads) +
                                                   " KV heads of " + std::to_string(head_dim_k_));
  }
  for (float f : factors) {
    if (!(f > 0.0f) || !std::isfinite(f)) {
      throw Error(Error::Kind::kInvalidArgument,
                  "key smoothing: factors must be positive and finite");
    }
  }
  key_smoothing_ = std::move(factors);
}

void KvStorage::throw_not_quantized() const {
  throw Error(Error::Kind::kInvalidArgument,
              "KV storage of " + std::string(kv::kv_cache_type_name(type_)) + " has no scales");
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= n_blocks_ || dst >= n_blocks_) {
    throw Error(Error::Kind::kInvalidArgument, "KV block copy outside the pool");
  }
  if (src == dst) return;
  const size_t rows = static_cast<size_t>(block_size_);
  for (size_t m = 0; m < member_heads_.size(); ++m) {
    for (uint64_t h = 0; h < member_heads_[m]; ++h) {
      std::memcpy(at_member(keys_, element_bytes_, m, dst, h, head_dim_k_),
                  at_member(keys_, element_bytes_, m, src, h, head_dim_k_),
                  rows * head_dim_k_ * element_bytes_);
      std::memcpy(at_member(values_, element_bytes_, m, dst, h, head_dim_v_),
                  at_member(values_, element_bytes_, m, src, h, head_dim_v_),
                  rows * head_dim_v_ * element_bytes_);
      if (quantized()) {
        std::memcpy(at_member(scales_, scale_bytes_, m, dst, h, 2),
                    at_member(scales_, scale_bytes_, m, src, h, 2), rows * 2 * scale_bytes_);
      }
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
  for (size_t m = 0; m < member_heads_.size(); ++m) {
    for (uint64_t h = 0; h < member_heads_[m]; ++h) {
      // Keys are dim-major: element e of a slot is e * block_size further on.
      auto* dk =
          static_cast<uint8_t*>(at_member(keys_, element_bytes_, m, c.dst_block, h, head_dim_k_));
      const auto* sk = static_cast<const uint8_t*>(
          at_member(keys_, element_bytes_, m, c.src_block, h, head_dim_k_));
      for (size_t e = 0; e < head_dim_k_; ++e) {
        std::memcpy(dk + (e * bs + to) * element_bytes_, sk + (e * bs + from) * element_bytes_,
                    element_bytes_);
      }
      auto* dv =
          static_cast<uint8_t*>(at_member(values_, element_bytes_, m, c.dst_block, h, head_dim_v_));
      const auto* sv = static_cast<const uint8_t*>(
          at_member(values_, element_bytes_, m, c.src_block, h, head_dim_v_));
      std::memcpy(dv + to * head_dim_v_ * element_bytes_, sv + from * head_dim_v_ * element_bytes_,
                  head_dim_v_ * element_bytes_);
      if (quantized()) {
        auto* dst = static_cast<uint16_t*>(at_member(scales_, scale_bytes_, m, c.dst_block, h, 2));
        const auto* src =
            static_cast<const uint16_t*>(at_member(scales_, scale_bytes_, m, c.src_block, h, 2));
        dst[to] = src[from];            // key scale
        dst[bs + to] = src[bs + from];  // value scale
      }
    }
  }
}

size_t KvStorage::bytes_per_block(const ModelConfig& config, int32_t block_size,
                                  kv::KvCacheType type) {
  return bytes_per_block(config, block_size, type,
                         kv::KvGroupLayout::single(static_cast<int32_t>(config.n_kv_heads.size())));
}

size_t KvStorage::bytes_per_block(const ModelConfig& config, int32_t block_size,
                                  kv::KvCacheType type, const kv::KvGroupLayout& layout) {
  // Every member slot keeps every slot of its blocks, windowed or not.
  check_layout(config, layout);
  const size_t element = kv::kv_element_bytes(type);
  const size_t scale = kv::kv_scale_bytes(type);
  size_t per_token = 0;
  for (uint64_t heads : heads_per_member(config, layout)) {
    per_token += heads * ((config.head_dim_k + config.head_dim_v) * element + 2 * scale);
  }
  return per_token * static_cast<size_t>(block_size);
}

}  // namespace llms::model
