// quantize/quantize_plan: see quantize_plan.h for the rules; this file is their one home.
#include "quantize/quantize_plan.h"

#include <cctype>
#include <charconv>

#include "util/error.h"

namespace llms::quantize {

namespace {

using gguf::GgmlType;

// LLAMA_FTYPE values from llama.cpp's llama.h (facts of the format every loader reads).
constexpr TargetInfo kTargets[] = {
    {QuantizeTarget::kF32, "F32", GgmlType::kF32, false, 0},         // ALL_F32
    {QuantizeTarget::kF16, "F16", GgmlType::kF16, false, 1},         // MOSTLY_F16
    {QuantizeTarget::kQ8_0, "Q8_0", GgmlType::kQ8_0, false, 7},      // MOSTLY_Q8_0
    {QuantizeTarget::kQ6_K, "Q6_K", GgmlType::kQ6_K, false, 18},     // MOSTLY_Q6_K
    {QuantizeTarget::kQ5_K, "Q5_K", GgmlType::kQ5_K, false, 16},     // MOSTLY_Q5_K_S
    {QuantizeTarget::kQ4_K, "Q4_K", GgmlType::kQ4_K, false, 14},     // MOSTLY_Q4_K_S
    {QuantizeTarget::kQ5_0, "Q5_0", GgmlType::kQ5_0, false, 8},      // MOSTLY_Q5_0
    {QuantizeTarget::kQ4_0, "Q4_0", GgmlType::kQ4_0, false, 2},      // MOSTLY_Q4_0
    {QuantizeTarget::kQ4_K_M, "Q4_K_M", GgmlType::kQ4_K, true, 15},  // MOSTLY_Q4_K_M
    {QuantizeTarget::kQ5_K_M, "Q5_K_M", GgmlType::kQ5_K, true, 17},  // MOSTLY_Q5_K_M
};

// The type a mix raises its sensitive tensors to.
constexpr GgmlType kRaisedType = GgmlType::kQ6_K;

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The part of a "blk.N.<rest>" name after the layer prefix; empty for any other name.
std::string_view layer_tensor_suffix(std::string_view name) {
  if (!layer_of(name)) return {};
  const size_t dot = name.find('.', 4);
  return name.substr(dot + 1);
}

}  // namespace

std::span<const TargetInfo> all_targets() { return kTargets; }

const TargetInfo& target_info(QuantizeTarget target) {
  for (const TargetInfo& info : kTargets) {
    if (info.target == target) return info;
  }
  throw Error(Error::Kind::kInternal, "quantize: a target without a table entry");
}

std::string target_names() {
  std::string names;
  for (const TargetInfo& info : kTargets) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

QuantizeTarget parse_target(std::string_view name) {
  for (const TargetInfo& info : kTargets) {
    if (equals_ignoring_case(name, info.name)) return info.target;
  }
  throw Error(Error::Kind::kInvalidArgument, "--type: unknown quantization type '" +
                                                 std::string(name) + "'; expected one of " +
                                                 target_names());
}

bool uses_more_bits(int64_t layer, int64_t n_layers) {
  const int64_t eighth = n_layers / 8;
  return layer < eighth || layer >= 7 * n_layers / 8 || (layer - eighth) % 3 == 2;
}

std::optional<int64_t> layer_of(std::string_view tensor_name) {
  constexpr std::string_view kPrefix = "blk.";
  if (!tensor_name.starts_with(kPrefix)) return std::nullopt;
  const char* first = tensor_name.data() + kPrefix.size();
  const char* last = tensor_name.data() + tensor_name.size();
  int64_t layer = 0;
  const auto [end, error] = std::from_chars(first, last, layer);
  // Digits only (from_chars would take a sign), then the dot before the tensor's own name.
  if (error != std::errc() || end == first || *first == '-' || end == last || *end != '.') {
    return std::nullopt;
  }
  return layer;
}

GgmlType fit_to_row(GgmlType chosen, uint64_t row_length) {
  const uint32_t block = gguf::ggml_type_info(chosen).block_size;
  if (row_length % block == 0) return chosen;
  constexpr uint64_t kLegacyBlock = 32;
  if (block > kLegacyBlock && row_length % kLegacyBlock == 0) {
    // A 32-element type with at least the bits per weight of the K type it stands in for.
    return chosen == GgmlType::kQ4_K ? GgmlType::kQ5_0 : GgmlType::kQ8_0;
  }
  return GgmlType::kF16;
}

QuantizePlan::QuantizePlan(QuantizeTarget target, int64_t n_layers, bool has_output)
    : target_(&target_info(target)), n_layers_(n_layers), has_output_(has_output) {}

QuantizePlan QuantizePlan::for_file(QuantizeTarget target, const gguf::GgufFile& file) {
  const TargetInfo& info = target_info(target);
  int64_t n_layers = 0;
  if (info.is_mix) {
    const std::string arch = file.get_string("general.architecture").value_or("");
    const std::string key = arch + ".block_count";
    const auto count = arch.empty() ? std::nullopt : file.get_uint(key);
    if (!count || *count == 0 || *count > static_cast<uint64_t>(INT32_MAX)) {
      throw Error(Error::Kind::kInvalidFile,
                  std::string(info.name) + " needs the model's layer count, but " +
                      (arch.empty() ? std::string("general.architecture is missing")
                                    : key + " is missing or out of range"));
    }
    n_layers = static_cast<int64_t>(*count);
  }
  return QuantizePlan(target, n_layers, file.find_tensor("output.weight") != nullptr);
}

GgmlType QuantizePlan::chosen_type(std::string_view name, uint32_t n_dims) const {
  if (n_dims < 2) return GgmlType::kF32;
  if (!target_->is_mix) return target_->base_type;
  if (name == "output.weight" || (!has_output_ && name == "token_embd.weight")) {
    return kRaisedType;
  }
  const std::string_view suffix = layer_tensor_suffix(name);
  if ((suffix == "attn_v.weight" || suffix == "ffn_down.weight") &&
      uses_more_bits(*layer_of(name), n_layers_)) {
    return kRaisedType;
  }
  return target_->base_type;
}

GgmlType QuantizePlan::type_for(std::string_view name, uint32_t n_dims, uint64_t row_length) const {
  return fit_to_row(chosen_type(name, n_dims), row_length);
}

}  // namespace llms::quantize
