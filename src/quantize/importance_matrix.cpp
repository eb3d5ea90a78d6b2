// quantize/importance_matrix: see importance_matrix.h for the file format and its checks. The
// reader refuses rather than guesses: a file that is not exactly an imatrix GGUF of a dense model
// is refused naming the tensor or key, before anything of it is used.
#include "quantize/importance_matrix.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <utility>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace llms::quantize {

namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

constexpr std::string_view kSumsSuffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";
constexpr std::string_view kTypeKey = "general.type";
constexpr std::string_view kDatasetsKey = "imatrix.datasets";
constexpr std::string_view kChunkCountKey = "imatrix.chunk_count";
constexpr std::string_view kChunkSizeKey = "imatrix.chunk_size";

[[noreturn]] void refuse_file(const fs::path& path, const std::string& what) {
  throw Error(Error::Kind::kInvalidFile, "imatrix '" + path.string() + "': " + what);
}

[[noreturn]] void refuse_write(const std::string& what) {
  throw Error(Error::Kind::kInvalidArgument, "imatrix: " + what);
}

bool strip_suffix(std::string_view name, std::string_view suffix, std::string* stem) {
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return false;
  *stem = std::string(name.substr(0, name.size() - suffix.size()));
  return true;
}

// The tensor's f32 values; refused unless it is F32 with every dimension past the first 1 (a
// second dimension above 1 is llama.cpp's per-expert layout).
std::vector<float> read_column_values(const gguf::GgufFile& file, const gguf::TensorInfo& t,
                                      const fs::path& path) {
  if (t.type != GgmlType::kF32) {
    refuse_file(path, "tensor '" + t.name + "' is " + std::string(gguf::ggml_type_name(t.type)) +
                          ", not F32");
  }
  if (t.ne[1] > 1) {
    refuse_file(path, "tensor '" + t.name + "' holds " + std::to_string(t.ne[1]) +
                          " matrices (a mixture-of-experts model's); only dense models are "
                          "supported");
  }
  if (t.ne[2] != 1 || t.ne[3] != 1) {
    refuse_file(path, "tensor '" + t.name + "' has more than 2 dimensions");
  }
  std::vector<float> values(t.n_elements);
  const std::span<const uint8_t> data = file.tensor_data(t);
  std::memcpy(values.data(), data.data(), values.size() * sizeof(float));
  for (size_t j = 0; j < values.size(); ++j) {
    if (!std::isfinite(values[j]) || values[j] < 0.0f) {
      refuse_file(path, "tensor '" + t.name + "' value " + std::to_string(j) + " is " +
                            std::to_string(values[j]) + " (must be finite and >= 0)");
    }
  }
  return values;
}

uint32_t to_u32(int64_t value, const char* what) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max()) {
    refuse_write(std::string(what) + " " + std::to_string(value) + " does not fit a u32");
  }
  return static_cast<uint32_t>(value);
}

}  // namespace

const ImportanceMatrix::Entry* ImportanceMatrix::find(const std::string& weight_name) const {
  const auto it = entries.find(weight_name);
  return it == entries.end() ? nullptr : &it->second;
}

namespace {

// The file as GGUF; the reader's refusals (which name the file) say it was meant as an imatrix.
gguf::GgufFile open_gguf(const fs::path& path) {
  try {
    return gguf::GgufFile::open(path);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string("imatrix: ") + e.what());
  }
}

}  // namespace

ImportanceMatrix read_importance_matrix(const fs::path& path) {
  const gguf::GgufFile file = open_gguf(path);
  const std::optional<std::string> type = file.get_string(kTypeKey);
  if (type != "imatrix") {
    refuse_file(path, type ? "general.type is '" + *type + "', not 'imatrix'"
                           : "no general.type key: not an imatrix GGUF");
  }
  ImportanceMatrix matrix;
  if (auto datasets = file.get_strings(kDatasetsKey)) matrix.datasets = std::move(*datasets);
  if (auto n = file.get_uint(kChunkCountKey)) matrix.chunk_count = static_cast<int64_t>(*n);
  if (auto n = file.get_uint(kChunkSizeKey)) matrix.chunk_size = static_cast<int64_t>(*n);

  // Sums and counts may come in any order: pair them by weight name first.
  struct Pair {
    const gguf::TensorInfo* sums = nullptr;
    const gguf::TensorInfo* counts = nullptr;
  };
  std::map<std::string, Pair> pairs;
  for (const gguf::TensorInfo& t : file.tensors()) {
    std::string weight;
    if (strip_suffix(t.name, kSumsSuffix, &weight)) {
      pairs[weight].sums = &t;
    } else if (strip_suffix(t.name, kCountsSuffix, &weight)) {
      pairs[weight].counts = &t;
    } else {
      refuse_file(path, "tensor '" + t.name + "' is neither NAME" + std::string(kSumsSuffix) +
                            " nor NAME" + std::string(kCountsSuffix));
    }
  }
  if (pairs.empty()) refuse_file(path, "it holds no importance entry");
  for (const auto& [weight, pair] : pairs) {
    if (!pair.sums) {
      refuse_file(path, "tensor '" + weight + std::string(kCountsSuffix) + "' has no '" + weight +
                            std::string(kSumsSuffix) + "'");
    }
    if (!pair.counts) {
      refuse_file(path, "tensor '" + weight + std::string(kSumsSuffix) + "' has no '" + weight +
                            std::string(kCountsSuffix) + "'");
    }
    const std::vector<float> counts = read_column_values(file, *pair.counts, path);
    if (counts.size() != 1) {
      refuse_file(path, "tensor '" + pair.counts->name + "' has " + std::to_string(counts.size()) +
                            " values, not 1");
    }
    // A token count held in an f32: exact up to 2^24, and never fractional.
    if (counts[0] < 1.0f || counts[0] != std::floor(counts[0])) {
      refuse_file(path, "tensor '" + pair.counts->name + "' counts " + std::to_string(counts[0]) +
                            " tokens (must be a whole number >= 1)");
    }
    ImportanceMatrix::Entry entry;
    entry.sum_squares = read_column_values(file, *pair.sums, path);
    entry.n_tokens = static_cast<int64_t>(counts[0]);
    matrix.entries.emplace(weight, std::move(entry));
  }
  return matrix;
}

void write_importance_matrix(const ImportanceMatrix& matrix, const fs::path& path) {
  if (matrix.entries.empty()) refuse_write("no entry to write");
  gguf::GgufWriter writer;
  writer.set_string(kTypeKey, "imatrix");
  writer.set_strings(kDatasetsKey, matrix.datasets);
  writer.set_u32(kChunkCountKey, to_u32(matrix.chunk_count, "chunk_count"));
  writer.set_u32(kChunkSizeKey, to_u32(matrix.chunk_size, "chunk_size"));
  for (const auto& [weight, entry] : matrix.entries) {
    if (entry.sum_squares.empty()) refuse_write("entry '" + weight + "' has no columns");
    if (entry.n_tokens < 1) {
      refuse_write("entry '" + weight + "' counts " + std::to_string(entry.n_tokens) + " tokens");
    }
    const uint64_t sums_ne[] = {entry.sum_squares.size(), 1};
    const uint64_t counts_ne[] = {1, 1};
    const float count = static_cast<float>(entry.n_tokens);
    // The writer refuses a name past GGUF's length limit, naming it.
    writer.add_tensor(
        weight + std::string(kSumsSuffix), GgmlType::kF32, sums_ne,
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(entry.sum_squares.data()),
                                 entry.sum_squares.size() * sizeof(float)));
    writer.add_tensor(
        weight + std::string(kCountsSuffix), GgmlType::kF32, counts_ne,
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&count), sizeof(float)));
  }
  writer.write(path);
}

bool ImportanceMatrixCollector::accepts(std::string_view weight, int64_t n_rows) const {
  if (n_rows < kMinRows) return false;
  return weight.starts_with("blk.") || (include_output_ && weight == "output.weight");
}

void ImportanceMatrixCollector::add(std::string_view weight, const float* rows, int64_t n_rows,
                                    int64_t n_columns) {
  if (!accepts(weight, n_rows)) return;
  if (n_columns < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                "imatrix: weight '" + std::string(weight) + "' told with no columns");
  }
  auto it = sums_.find(weight);
  if (it == sums_.end()) {
    it = sums_.emplace(std::string(weight), Sums{}).first;
    it->second.sum_squares.assign(static_cast<size_t>(n_columns), 0.0);
  }
  Sums& sums = it->second;
  if (sums.sum_squares.size() != static_cast<size_t>(n_columns)) {
    throw Error(Error::Kind::kInvalidArgument, "imatrix: weight '" + std::string(weight) +
                                                   "' told with " + std::to_string(n_columns) +
                                                   " columns after " +
                                                   std::to_string(sums.sum_squares.size()));
  }
  double* sum = sums.sum_squares.data();
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* x = rows + r * n_columns;
    for (int64_t j = 0; j < n_columns; ++j) sum[j] += static_cast<double>(x[j]) * x[j];
  }
  sums.n_tokens += n_rows;
}

ImportanceMatrix ImportanceMatrixCollector::take() const {
  ImportanceMatrix matrix;
  for (const auto& [weight, sums] : sums_) {
    ImportanceMatrix::Entry entry;
    entry.sum_squares.assign(sums.sum_squares.begin(), sums.sum_squares.end());
    entry.n_tokens = sums.n_tokens;
    matrix.entries.emplace(weight, std::move(entry));
  }
  return matrix;
}

}  // namespace llms::quantize
