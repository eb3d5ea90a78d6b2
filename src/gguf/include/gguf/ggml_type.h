// gguf/ggml_type: the GGML tensor element types a GGUF file may name, with their block layout.
//
// Facts of the file format only (id, name, elements per block, bytes per block); how to compute
// with a type lives in quant/ and kernels/. Ids that GGML retired are absent, so they read as
// unknown types.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace llms::gguf {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;     // as llama.cpp prints it, e.g. "Q4_K"
  uint32_t block_size;       // elements per block (1 for plain types)
  uint32_t type_size;        // bytes per block
  bool is_quantized;
};

// Info for a raw type id read from a file; std::nullopt for ids we do not know.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t raw_type);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
std::string_view ggml_type_name(GgmlType type);
std::optional<GgmlType> ggml_type_from_name(std::string_view name);
std::span<const GgmlTypeInfo> all_ggml_types();

// Bytes needed for n_elements of `type` (n_elements must be a multiple of the block size);
// std::nullopt on overflow or a partial block.
std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n_elements);

}  // namespace llms::gguf
