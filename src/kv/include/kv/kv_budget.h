// kv/kv_budget: how much memory a KV cache needs, and how many sequences fit in a budget.
//
// Pure arithmetic over a per-layer description of the cache, so it covers multi-head, grouped-
// query (GQA) and multi-query (MQA) attention, layers whose K and V widths differ, and
// sliding-window layers that never hold more than their window. All results are exact byte
// counts; std::nullopt / saturation is never silent: functions throw llms::Error on overflow.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace llms::kv {

// The element types a KV cache can store (every one is accepted by the engine). int8 and fp8
// (E4M3) are quantized per token: each key and value vector of one KV head carries a 2-byte
// scale.
enum class KvCacheType { kF32, kF16, kInt8, kFp8 };

// Bytes per stored element.
uint64_t kv_element_bytes(KvCacheType type);
// Bytes of scale per key or value vector (one token, one KV head): 2 for int8 and fp8, else 0.
uint64_t kv_scale_bytes(KvCacheType type);
std::string_view kv_cache_type_name(KvCacheType type);
// "f32", "f16", "int8", "fp8" and the aliases fp32, fp16, fp8_e4m3; nullopt otherwise.
std::optional<KvCacheType> kv_cache_type_from_name(std::string_view name);
// The names above without aliases, comma-separated ("f32, f16, int8, fp8"), for messages.
std::string_view kv_cache_type_names();

// One attention layer's cache: n_kv_heads heads of K (k_dim wide) and V (v_dim wide).
struct KvLayer {
  uint64_t n_kv_heads = 0;
  uint64_t k_dim = 0;
  uint64_t v_dim = 0;
  uint64_t window = 0;  // sliding-window length in tokens; 0 = attends to the whole context
};

struct KvShape {
  std::vector<KvLayer> layers;

  // n_layers identical full-attention layers.
  static KvShape uniform(uint64_t n_layers, uint64_t n_kv_heads, uint64_t head_dim);
  // The same shape if every query head kept its own K and V (no GQA/MQA sharing).
  KvShape with_kv_heads(uint64_t n_kv_heads) const;
};

// Bytes one token adds to the cache when every layer keeps it (context below every window).
uint64_t kv_bytes_per_token(const KvShape& shape, KvCacheType type);
// Bytes for one sequence of n_ctx tokens; sliding-window layers hold at most `window` tokens.
uint64_t kv_bytes_per_sequence(const KvShape& shape, KvCacheType type, uint64_t n_ctx);
// How many sequences of n_ctx tokens fit in memory_bytes after weight_bytes (0 if none).
uint64_t max_sequences(const KvShape& shape, KvCacheType type, uint64_t n_ctx,
                       uint64_t memory_bytes, uint64_t weight_bytes);

}  // namespace llms::kv
