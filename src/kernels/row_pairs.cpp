// kernels/row_pairs: repacking a Q4_K / Q5_K / Q6_K matrix into interleaved row pairs (contract in
// kernels/row_pairs.h).
#include "kernels/row_pairs.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "matmul_kernels.h"
#include "util/checked_math.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using detail::exact_row_bytes;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, "pair_rows: " + message);
}

// The types with pair kernels (the scalar table has every one).
bool has_pair_layout(gguf::GgmlType type) { return detail::find_pairs_scalar(type) != nullptr; }

}  // namespace

bool pair_rows_pays(const QuantMatrix& w, Isa isa) {
  return isa == Isa::kAvx2 && isa_supported(isa) && has_pair_layout(w.type) &&
         w.layout == WeightLayout::kRows && w.n_rows > 0 && w.n_rows % 2 == 0 && w.n_cols > 0 &&
         w.n_cols <= kPairRowsMaxCols && exact_row_bytes(w) != 0;
}

size_t paired_bytes(const QuantMatrix& w) {
  if (w.n_rows <= 0) return 0;
  const auto bytes = checked_mul(static_cast<uint64_t>(w.n_rows), exact_row_bytes(w));
  if (!bytes || *bytes > (uint64_t{1} << 60))
    invalid("the paired copy overflows the address space");
  return static_cast<size_t>(*bytes);
}

QuantMatrix pair_rows(const QuantMatrix& w, void* dst, ThreadPool* pool) {
  const std::string type_name(gguf::ggml_type_name(w.type));
  if (!has_pair_layout(w.type)) invalid("type " + type_name + " has no row-pair layout");
  if (w.layout != WeightLayout::kRows) invalid("the matrix is not in the row layout");
  const size_t row_bytes = exact_row_bytes(w);
  if (w.n_rows < 0 || w.n_cols < 0 || (w.n_cols > 0 && row_bytes == 0)) {
    invalid("shape " + std::to_string(w.n_rows) + " x " + std::to_string(w.n_cols) +
            " is not whole " + type_name + " super-blocks");
  }
  if (w.n_rows % 2 != 0) invalid("an odd number of rows (" + std::to_string(w.n_rows) + ")");
  if (w.row_bytes < row_bytes) invalid("row_bytes " + std::to_string(w.row_bytes) + " too small");
  if (w.n_rows > 0 && w.n_cols > 0 && (w.data == nullptr || dst == nullptr)) invalid("null data");
  const size_t block = static_cast<size_t>(gguf::ggml_type_info(w.type).type_size);
  const size_t n_blocks = row_bytes / block;
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto* out = static_cast<uint8_t*>(dst);
  auto pack = [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p) {
      uint8_t* pair = out + static_cast<size_t>(2 * p) * row_bytes;
      for (int k = 0; k < 2; ++k) {
        const uint8_t* row = src + static_cast<size_t>(2 * p + k) * w.row_bytes;
        for (size_t b = 0; b < n_blocks; ++b) {
          std::memcpy(pair + (2 * b + k) * block, row + b * block, block);
        }
      }
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(w.n_rows / 2, pack);
  } else {
    pack(0, w.n_rows / 2, 0);
  }
  QuantMatrix paired = w;
  paired.data = dst;
  paired.row_bytes = row_bytes;
  paired.layout = WeightLayout::kRowPairs;
  return paired;
}

}  // namespace llms::kernels
