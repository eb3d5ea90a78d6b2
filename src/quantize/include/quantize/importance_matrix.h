// quantize/importance_matrix: per-column activation statistics of a model's weight matrices
// (an "importance matrix"), gathered from calibration text, and their file.
//
// For a weight W (rows = outputs, columns = inputs) the matmul y = W x sees activations x; a
// column j whose activations are large moves the outputs most, so its weights deserve the least
// rounding error. The statistic per column is sum over calibration tokens of x_j^2, with the
// number of tokens: mean squared activation = sum_squares[j] / n_tokens, as llama.cpp's
// `llama-imatrix` computes it (facts of its format; none of its code).
//
// File: llama.cpp's imatrix GGUF, so either tool reads the other's: per weight tensor NAME an F32
// tensor "NAME.in_sum2" of ne = [n_columns, 1] (the sums) and an F32 tensor "NAME.counts" of
// ne = [1, 1] (the token count), plus the keys general.type = "imatrix", imatrix.datasets
// (array of strings: the calibration files), imatrix.chunk_count (u32) and imatrix.chunk_size
// (u32, tokens per chunk). Tensors of mixture-of-experts models (n_experts > 1) are refused.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace llms::quantize {

struct ImportanceMatrix {
  struct Entry {
    std::vector<float> sum_squares;  // per input column
    int64_t n_tokens = 0;            // activation rows summed
  };
  std::map<std::string, Entry> entries;  // by weight tensor name, e.g. "blk.0.attn_q.weight"
  std::vector<std::string> datasets;     // calibration files
  int64_t chunk_count = 0;
  int64_t chunk_size = 0;

  // The entry of a weight, or nullptr.
  const Entry* find(const std::string& weight_name) const;
};

// Throws llms::Error: kIo when the file cannot be read (kNotFound when it does not exist),
// kInvalidFile naming the tensor or key when it is not an imatrix GGUF (a .in_sum2 without its
// .counts or the reverse, a non-F32 tensor, a shape other than the above, a negative or
// non-finite value; also: general.type other than "imatrix", a tensor of neither suffix, a count
// that is not a whole number of at least 1, no entry at all).
ImportanceMatrix read_importance_matrix(const std::filesystem::path& path);

// Writes the file whole or not at all (GgufWriter::write). Throws llms::Error(kIo); and
// kInvalidArgument, before writing, for what the format cannot hold (no entry, an entry without
// columns or with n_tokens < 1, a name too long for GGUF, chunk_count or chunk_size outside u32).
void write_importance_matrix(const ImportanceMatrix& matrix, const std::filesystem::path& path);

// Gathers an ImportanceMatrix from the inputs of a model's weight matmuls, by llama.cpp's rules:
// only weights of the repeating layers ("blk.*"), plus "output.weight" when `include_output`
// (llama-imatrix's --process-output), and only matmuls of at least kMinRows activation rows (a
// few decode rows would weigh one token's quirks). Sums in double, stored as f32 by take().
class ImportanceMatrixCollector {
 public:
  static constexpr int64_t kMinRows = 16;

  explicit ImportanceMatrixCollector(bool include_output = false)
      : include_output_(include_output) {}

  // Whether add() keeps a matmul of this weight and row count.
  bool accepts(std::string_view weight, int64_t n_rows) const;
  // Adds x_j^2 of every row of `rows` (n_rows x n_columns, row-major) to the weight's sums.
  // Throws llms::Error(kInvalidArgument) when the weight was seen with another column count.
  void add(std::string_view weight, const float* rows, int64_t n_rows, int64_t n_columns);
  size_t n_entries() const { return sums_.size(); }
  // The sums so far as a matrix (datasets and chunk fields left for the caller).
  ImportanceMatrix take() const;

 private:
  struct Sums {
    std::vector<double> sum_squares;
    int64_t n_tokens = 0;
  };
  bool include_output_;
  std::map<std::string, Sums, std::less<>> sums_;
};

}  // namespace llms::quantize
