#include "model/kv_storage.h"

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
  keys_.assign(rows * head_dim_k_, 0.0f);
  values_.assign(rows * head_dim_v_, 0.0f);
}

}  // namespace llms::model
