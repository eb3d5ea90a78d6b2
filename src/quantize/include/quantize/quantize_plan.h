// quantize/quantize_plan: the quantization targets `llmserve quantize` offers and the rule that
// gives every tensor of a model its output type.
//
// Targets (names case-insensitive): F32, F16, Q8_0, Q6_K, Q5_K, Q4_K, Q5_0, Q4_0 (one type for
// every matrix) and the mixes Q4_K_M, Q5_K_M. Each target carries the LLAMA_FTYPE value llama.cpp
// reads from general.file_type; plain Q4_K and Q5_K files are labelled as llama.cpp's Q4_K_S (14)
// and Q5_K_S (16), the closest names it has (its own _S files also raise a few tensors; ours are
// uniform; the label only informs, nothing loads by it).
//
// The rule, in this order (the facts come from llama.cpp's llama-quant.cpp, so our files carry the
// same types as its files of the same name):
//   1. A tensor with fewer than 2 dimensions (norms, biases, rope_freqs) is F32: it is small and
//      every kernel reads it as floats.
//   2. F32 and F16 targets write every other tensor in that float type (that is how a reference
//      model is made from an already-quantized file).
//   3. The mixes start from their base type (Q4_K for Q4_K_M, Q5_K for Q5_K_M) and raise to Q6_K:
//      - output.weight, or token_embd.weight when the model has no output.weight (tied
//        embeddings: token_embd then also is the output projection, whose errors reach every
//        logit);
//      - attn_v.weight and ffn_down.weight of the layers llama.cpp's "use_more_bits" picks: the
//        first eighth of the layers, the last eighth, and every third layer in between
//        (uses_more_bits below). The layer is the N of the tensor name's "blk.N." prefix, the
//        layer count the model's <arch>.block_count.
//      Plain targets use their type for every matrix.
//   4. Fallback, when a row (ne[0]) is not a whole number of the chosen type's blocks (a
//      quantizer cannot split a block across rows): a K type (256 per block) falls back to a
//      32-element type of at least as many bits, Q8_0 for Q6_K and Q5_K and Q5_0 for Q4_K; when
//      even 32 does not divide the row (or the chosen type already was a 32-element one), F16.
//      Qwen2.5-0.5B's 896-wide rows are such a case: most of its Q4_K_M matrices are Q5_0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"

namespace llms::quantize {

enum class QuantizeTarget {
  kF32,
  kF16,
  kQ8_0,
  kQ6_K,
  kQ5_K,
  kQ4_K,
  kQ5_0,
  kQ4_0,
  kQ4_K_M,
  kQ5_K_M
};

struct TargetInfo {
  QuantizeTarget target;
  std::string_view name;     // as llama.cpp's llama-quantize spells it, e.g. "Q4_K_M"
  gguf::GgmlType base_type;  // the type of every matrix that no rule raises
  bool is_mix;               // rule 3 applies
  uint32_t llama_file_type;  // LLAMA_FTYPE, written as general.file_type
};

// Every target, in the order help texts and refusals list them.
std::span<const TargetInfo> all_targets();
const TargetInfo& target_info(QuantizeTarget target);
// "F32, F16, Q8_0, ..." for help texts and refusals.
std::string target_names();
// Case-insensitive; throws llms::Error(kInvalidArgument) naming the value and the valid names.
QuantizeTarget parse_target(std::string_view name);

// llama.cpp's use_more_bits: layer < n/8, or layer >= 7n/8, or (layer - n/8) % 3 == 2 (integer
// division). For 24 layers: 0-2, 5, 8, 11, 14, 17, 20, 21-23.
bool uses_more_bits(int64_t layer, int64_t n_layers);

// N of a "blk.N.<rest>" tensor name; std::nullopt for any other name.
std::optional<int64_t> layer_of(std::string_view tensor_name);

// Rule 4: `chosen` when row_length is a whole number of its blocks, else its fallback.
gguf::GgmlType fit_to_row(gguf::GgmlType chosen, uint64_t row_length);

class QuantizePlan {
 public:
  // n_layers: the model's block count (only the mixes read it); has_output: whether the model has
  // an output.weight tensor (if not, token_embd is the output projection).
  QuantizePlan(QuantizeTarget target, int64_t n_layers, bool has_output);

  // Reads the layer count from <general.architecture>.block_count and looks for output.weight.
  // Throws llms::Error(kInvalidFile) naming the key when a mix needs a layer count the file lacks.
  static QuantizePlan for_file(QuantizeTarget target, const gguf::GgufFile& file);

  const TargetInfo& target() const { return *target_; }
  int64_t n_layers() const { return n_layers_; }
  bool has_output() const { return has_output_; }

  // The output type of a tensor with this name, number of dimensions and row length (ne[0]).
  gguf::GgmlType type_for(std::string_view name, uint32_t n_dims, uint64_t row_length) const;
  gguf::GgmlType type_for(const gguf::TensorInfo& tensor) const {
    return type_for(tensor.name, tensor.n_dims, tensor.ne[0]);
  }

 private:
  // The type rules 1-3 choose, before the fallback of rule 4.
  gguf::GgmlType chosen_type(std::string_view name, uint32_t n_dims) const;

  const TargetInfo* target_;
  int64_t n_layers_;
  bool has_output_;
};

}  // namespace llms::quantize
