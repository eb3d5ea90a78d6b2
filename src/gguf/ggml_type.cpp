#include "gguf/ggml_type.h"

#include <array>
#include <string>

#include "util/checked_math.h"
#include "util/error.h"

namespace llms::gguf {

namespace {

// Block sizes and byte sizes follow the block structs of the GGML file format.
constexpr std::array kTypes = {
    GgmlTypeInfo{GgmlType::kF32, "F32", 1, 4, false},
    GgmlTypeInfo{GgmlType::kF16, "F16", 1, 2, false},
    GgmlTypeInfo{GgmlType::kQ4_0, "Q4_0", 32, 18, true},
    GgmlTypeInfo{GgmlType::kQ4_1, "Q4_1", 32, 20, true},
    GgmlTypeInfo{GgmlType::kQ5_0, "Q5_0", 32, 22, true},
    GgmlTypeInfo{GgmlType::kQ5_1, "Q5_1", 32, 24, true},
    GgmlTypeInfo{GgmlType::kQ8_0, "Q8_0", 32, 34, true},
    GgmlTypeInfo{GgmlType::kQ8_1, "Q8_1", 32, 36, true},
    GgmlTypeInfo{GgmlType::kQ2_K, "Q2_K", 256, 84, true},
    GgmlTypeInfo{GgmlType::kQ3_K, "Q3_K", 256, 110, true},
    GgmlTypeInfo{GgmlType::kQ4_K, "Q4_K", 256, 144, true},
    GgmlTypeInfo{GgmlType::kQ5_K, "Q5_K", 256, 176, true},
    GgmlTypeInfo{GgmlType::kQ6_K, "Q6_K", 256, 210, true},
    GgmlTypeInfo{GgmlType::kQ8_K, "Q8_K", 256, 292, true},
    GgmlTypeInfo{GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66, true},
    GgmlTypeInfo{GgmlType::kIQ2_XS, "IQ2_XS", 256, 74, true},
    GgmlTypeInfo{GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98, true},
    GgmlTypeInfo{GgmlType::kIQ1_S, "IQ1_S", 256, 50, true},
    GgmlTypeInfo{GgmlType::kIQ4_NL, "IQ4_NL", 32, 18, true},
    GgmlTypeInfo{GgmlType::kIQ3_S, "IQ3_S", 256, 110, true},
    GgmlTypeInfo{GgmlType::kIQ2_S, "IQ2_S", 256, 82, true},
    GgmlTypeInfo{GgmlType::kIQ4_XS, "IQ4_XS", 256, 136, true},
    GgmlTypeInfo{GgmlType::kI8, "I8", 1, 1, false},
    GgmlTypeInfo{GgmlType::kI16, "I16", 1, 2, false},
    GgmlTypeInfo{GgmlType::kI32, "I32", 1, 4, false},
    GgmlTypeInfo{GgmlType::kI64, "I64", 1, 8, false},
    GgmlTypeInfo{GgmlType::kF64, "F64", 1, 8, false},
    GgmlTypeInfo{GgmlType::kIQ1_M, "IQ1_M", 256, 56, true},
    GgmlTypeInfo{GgmlType::kBF16, "BF16", 1, 2, false},
    GgmlTypeInfo{GgmlType::kTQ1_0, "TQ1_0", 256, 54, true},
    GgmlTypeInfo{GgmlType::kTQ2_0, "TQ2_0", 256, 66, true},
    GgmlTypeInfo{GgmlType::kMXFP4, "MXFP4", 32, 17, true},
};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t raw_type) {
  for (const auto& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == raw_type) return info;
  }
  return std::nullopt;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info;
  }
  // Only a raw id cast to the enum without ggml_type_info(uint32_t) can get here.
  throw Error(Error::Kind::kInvalidArgument,
              "unknown GGML type id " + std::to_string(static_cast<uint32_t>(type)));
}

std::string_view ggml_type_name(GgmlType type) { return ggml_type_info(type).name; }

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const auto& info : kTypes) {
    if (info.name == name) return info.type;
  }
  return std::nullopt;
}

std::span<const GgmlTypeInfo> all_ggml_types() { return kTypes; }

std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n_elements) {
  const auto& info = ggml_type_info(type);
  if (n_elements % info.block_size != 0) return std::nullopt;
  return checked_mul(n_elements / info.block_size, info.type_size);
}

}  // namespace llms::gguf
