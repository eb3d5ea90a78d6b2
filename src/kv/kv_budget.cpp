#include "kv/kv_budget.h"

#include <algorithm>
#include <array>
#include <string>

#include "util/checked_math.h"
#include "util/error.h"

namespace llms::kv {

namespace {

struct TypeRow {
  KvCacheType type;
  std::string_view name;
  uint64_t bytes;
  uint64_t scale_bytes;  // per key or value vector
};

constexpr std::array kTypes = {
    TypeRow{KvCacheType::kF32, "f32", 4, 0},
    TypeRow{KvCacheType::kF16, "f16", 2, 0},
    TypeRow{KvCacheType::kInt8, "int8", 1, 2},
    TypeRow{KvCacheType::kFp8, "fp8", 1, 2},
};

const TypeRow& row_of(KvCacheType type) {
  for (const auto& row : kTypes) {
    if (row.type == type) return row;
  }
  throw Error(Error::Kind::kInvalidArgument, "unknown KV cache type");
}

uint64_t checked(std::optional<uint64_t> v) {
  if (!v) throw Error(Error::Kind::kInvalidArgument, "KV cache size overflows 64 bits");
  return *v;
}

// Bytes for `tokens` tokens in one layer: per KV head, the K and V elements and their scales.
uint64_t layer_bytes(const KvLayer& layer, KvCacheType type, uint64_t tokens) {
  const TypeRow& row = row_of(type);
  const uint64_t width = checked(checked_add(layer.k_dim, layer.v_dim));
  const uint64_t per_head =
      checked(checked_add(checked(checked_mul(width, row.bytes)), 2 * row.scale_bytes));
  const uint64_t per_token = checked(checked_mul(per_head, layer.n_kv_heads));
  return checked(checked_mul(per_token, tokens));
}

}  // namespace

uint64_t kv_element_bytes(KvCacheType type) { return row_of(type).bytes; }

uint64_t kv_scale_bytes(KvCacheType type) { return row_of(type).scale_bytes; }

std::string_view kv_cache_type_names() { return "f32, f16, int8, fp8"; }

std::string_view kv_cache_type_name(KvCacheType type) {
  for (const auto& row : kTypes) {
    if (row.type == type) return row.name;
  }
  return "?";
}

std::optional<KvCacheType> kv_cache_type_from_name(std::string_view name) {
  for (const auto& row : kTypes) {
    if (row.name == name) return row.type;
  }
  if (name == "fp16") return KvCacheType::kF16;
  if (name == "fp32") return KvCacheType::kF32;
  if (name == "fp8_e4m3") return KvCacheType::kFp8;
  return std::nullopt;
}

KvShape KvShape::uniform(uint64_t n_layers, uint64_t n_kv_heads, uint64_t head_dim) {
  KvShape shape;
  shape.layers.assign(n_layers, KvLayer{n_kv_heads, head_dim, head_dim, 0});
  return shape;
}

KvShape KvShape::with_kv_heads(uint64_t n_kv_heads) const {
  KvShape out = *this;
  for (auto& layer : out.layers) layer.n_kv_heads = n_kv_heads;
  return out;
}

uint64_t kv_bytes_per_token(const KvShape& shape, KvCacheType type) {
  uint64_t total = 0;
  for (const auto& layer : shape.layers) {
    total = checked(checked_add(total, layer_bytes(layer, type, 1)));
  }
  return total;
}

uint64_t kv_bytes_per_sequence(const KvShape& shape, KvCacheType type, uint64_t n_ctx) {
  uint64_t total = 0;
  for (const auto& layer : shape.layers) {
    uint64_t tokens = layer.window ? std::min(layer.window, n_ctx) : n_ctx;
    total = checked(checked_add(total, layer_bytes(layer, type, tokens)));
  }
  return total;
}

uint64_t max_sequences(const KvShape& shape, KvCacheType type, uint64_t n_ctx,
                       uint64_t memory_bytes, uint64_t weight_bytes) {
  if (weight_bytes >= memory_bytes) return 0;
  uint64_t per_sequence = kv_bytes_per_sequence(shape, type, n_ctx);
  if (per_sequence == 0) {
    throw Error(Error::Kind::kInvalidArgument, "KV cache of zero bytes per sequence");
  }
  return (memory_bytes - weight_bytes) / per_sequence;
}

}  // namespace llms::kv
