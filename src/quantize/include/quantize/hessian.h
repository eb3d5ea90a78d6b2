// quantize/hessian: what GPTQ (quantize/gptq.h) learns from calibration text: for each weight
// matrix W of the repeating layers (and the output head), H = sum over activation rows x of x x^T,
// x being W's input.
//
// Weights that read the same input in a forward pass (a layer's attention q, k and v; its FFN
// gate and up) share one matrix: the collector sees their inputs one after another at the same
// address and sums that input once (only for those sibling names). Only matmuls of at least
// kMinRows rows are summed (decode steps of a few rows would weigh one token's quirks), and only
// weights named "blk.*" and the output head "output.weight" (whose input, the final norm's output,
// exists where the calibration run computes logits for every row; the embedding matrix stays
// round-to-nearest, and so does a head tied to it), and of those only the weights the collector's
// filter wants (all by default).
// Sums are f32, by BLAS ssyrk. Memory: n_columns^2 floats per distinct input (the 0.5B: 2.33 GiB,
// measured; the 1.5B: 9.8 GB by its shapes): group_layers() plans passes that each hold the
// Hessians of a group of layers under a budget.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llms::quantize {

struct HessianSet {
  struct Entry {
    int64_t n_columns = 0;
    int64_t n_rows = 0;    // activation rows summed
    std::vector<float> h;  // n_columns x n_columns, row-major, symmetric
  };
  std::map<std::string, std::shared_ptr<const Entry>, std::less<>> by_weight;

  // The entry of a weight tensor, or nullptr.
  const Entry* find(std::string_view weight) const;
  // Distinct matrices (several weights may share one).
  size_t n_distinct() const;
};

// The input a weight reads, as far as Hessians are concerned: "blk.N.attn_input" for a layer's q,
// k and v, "blk.N.ffn_input" for its gate and up, the weight's own name for any other.
std::string hessian_input_key(std::string_view weight);

// The output head's weight: the last matmul of the forward pass, reading the final norm's output.
inline constexpr std::string_view kOutputHead = "output.weight";

// A tensor GPTQ may quantize: a "blk.N." matrix, or the output head, converted to a type with a
// GPTQ quantizer (model_quantizer.h's gptq_tensors() lists a model's).
struct GptqTensor {
  std::string name;
  int64_t layer = 0;      // N; for the output head, one past the model's last layer
  int64_t n_columns = 0;  // ne[0]: its Hessian is n_columns x n_columns
};

// Bytes of the Hessians of `tensors`: n_columns^2 floats per distinct input (hessian_input_key).
uint64_t hessian_bytes(std::span<const GptqTensor> tensors);

// Consecutive layers [first_layer, last_layer] whose Hessians are gathered in one pass.
struct LayerGroup {
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  uint64_t hessian_bytes = 0;
};

// Splits the layers of `tensors` into consecutive groups, each holding as many layers as fit
// `budget` bytes of Hessians; one group when all fit, none for no tensors. Throws
// llms::Error(kInvalidArgument) when one layer's Hessians alone exceed the budget (naming both).
std::vector<LayerGroup> group_layers(std::span<const GptqTensor> tensors, uint64_t budget);

class HessianCollector {
 public:
  static constexpr int64_t kMinRows = 16;

  // `wanted`: which weights to sum Hessians for (empty: every "blk.*" weight).
  explicit HessianCollector(std::function<bool(std::string_view weight)> wanted = {});

  bool accepts(std::string_view weight, int64_t n_rows) const;
  // Adds x x^T of every row of `rows` (n_rows x n_columns, row-major) to the weight's matrix,
  // unless the previous call summed this same input (same address and shape) into the matrix the
  // weight shares. Throws llms::Error(kInvalidArgument) when the weight was seen with another
  // column count.
  void add(std::string_view weight, const float* rows, int64_t n_rows, int64_t n_columns);
  // The matrices so far, made symmetric.
  HessianSet take();
  uint64_t bytes() const;

 private:
  struct Group {
    int64_t n_columns = 0;
    int64_t n_rows = 0;
    std::vector<float> h;  // the lower triangle (row-major view) is summed; take() mirrors it
  };
  std::vector<std::shared_ptr<Group>> groups_;
  std::map<std::string, size_t, std::less<>> group_of_;
  // The input summed by the previous call, and into which group.
  const float* last_data_ = nullptr;
  int64_t last_rows_ = 0;
  int64_t last_columns_ = 0;
  size_t last_group_ = 0;
  std::string last_key_;                               // its hessian_input_key
  std::set<std::string, std::less<>> told_since_sum_;  // weights told that input since
  std::function<bool(std::string_view)> wanted_;
  bool has_last_ = false;
};

}  // namespace llms::quantize
