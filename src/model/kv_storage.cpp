#include "model/kv_storage.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace llms::model {

KvStorage::KvStorage(const ModelConfig& config, int32_t block_size, int32_t n_blocks)
    : block_size_(block_size),
      n_blocks_(n_blocks),
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
  n_key_floats_ = rows * head_dim_k_;
  n_value_floats_ = rows * head_dim_v_;
  try {
    keys_ = HugePageBuffer(n_key_floats_ * sizeof(float));
    values_ = HugePageBuffer(n_value_floats_ * sizeof(float));
  } catch (const Error& e) {
    throw Error(Error::Kind::kInvalidArgument, std::string("KV cache: ") + e.what());
  }
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= n_blocks_ || dst >= n_blocks_) {
    throw Error(Error::Kind::kInvalidArgument, "KV block copy outside the pool");
  }
  if (src == dst) return;
  for (size_t layer = 0; layer < n_kv_heads_.size(); ++layer) {
    const size_t rows = static_cast<size_t>(block_size_) * n_kv_heads_[layer];
    std::copy_n(key(layer, src, 0), rows * head_dim_k_, key(layer, dst, 0));
    std::copy_n(value(layer, src, 0), rows * head_dim_v_, value(layer, dst, 0));
  }
}

size_t KvStorage::bytes_per_block(const ModelConfig& config, int32_t block_size) {
  size_t per_token = 0;
  for (uint64_t heads : config.n_kv_heads) {
    per_token += heads * (config.head_dim_k + config.head_dim_v) * sizeof(float);
  }
  return per_token * static_cast<size_t>(block_size);
}

}  // namespace llms::model
