// kernels/row_groups: repacking a matrix into 16-row groups (contract in kernels/row_groups.h;
// the bytes of a grouped block in row_groups_layout.h).
#include "kernels/row_groups.h"

#include <algorithm>
#include <string>

#include "matmul_kernels.h"
#include "row_groups_layout.h"
#include "util/checked_math.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using detail::exact_row_bytes;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, "group_rows: " + message);
}

}  // namespace

bool group_rows_supported(gguf::GgmlType type) {
  return detail::grouped_type_block_bytes(type) != 0;
}

bool group_rows_pays(gguf::GgmlType type, Isa isa) {
  if (!isa_supported(isa)) return false;
  if (isa == Isa::kAvx512) return detail::find_grouped_avx512(type) != nullptr;
  if (isa == Isa::kAvx2) return detail::find_grouped_avx2(type) != nullptr;
  return false;
}

size_t grouped_bytes(const QuantMatrix& w) {
  if (w.n_rows <= 0) return 0;
  const auto rows = static_cast<uint64_t>((w.n_rows - 1) | (kRowGroupRows - 1)) + 1;
  const auto bytes = checked_mul(rows, exact_row_bytes(w));
  if (!bytes || *bytes > (uint64_t{1} << 60))
    invalid("the grouped copy overflows the address space");
  return static_cast<size_t>(*bytes);
}

QuantMatrix group_rows(const QuantMatrix& w, void* dst, ThreadPool* pool) {
  const std::string type_name(gguf::ggml_type_name(w.type));
  if (!group_rows_supported(w.type)) invalid("type " + type_name + " has no row-group layout");
  if (w.layout != WeightLayout::kRows) invalid("the matrix is not in the row layout");
  const int64_t block_values = detail::grouped_type_block_values(w.type);
  if (w.n_rows < 0 || w.n_cols < 0 || w.n_cols % block_values != 0) {
    invalid("shape " + std::to_string(w.n_rows) + " x " + std::to_string(w.n_cols) +
            " is not whole " + type_name + " blocks");
  }
  const size_t row_bytes = exact_row_bytes(w);
  if (w.row_bytes < row_bytes) invalid("row_bytes " + std::to_string(w.row_bytes) + " too small");
  if (w.n_rows > 0 && w.n_cols > 0 && (w.data == nullptr || dst == nullptr)) invalid("null data");
  const size_t block = detail::grouped_type_block_bytes(w.type);
  const int64_t n_blocks = w.n_cols / block_values;
  const int64_t n_groups = (w.n_rows + kRowGroupRows - 1) / kRowGroupRows;
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto* out = static_cast<uint8_t*>(dst);
  auto pack = [&](int64_t begin, int64_t end, int) {
    for (int64_t g = begin; g < end; ++g) {
      uint8_t* group = out + static_cast<size_t>(g) * kRowGroupRows * row_bytes;
      std::fill(group, group + kRowGroupRows * row_bytes, uint8_t{0});
      for (int i = 0; i < kRowGroupRows && g * kRowGroupRows + i < w.n_rows; ++i) {
        const uint8_t* row = src + static_cast<size_t>(g * kRowGroupRows + i) * w.row_bytes;
        for (int64_t b = 0; b < n_blocks; ++b) {
          detail::put_row_block(w.type, row + b * block, i,
                                group + static_cast<size_t>(b) * kRowGroupRows * block);
        }
      }
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(n_groups, pack);
  } else {
    pack(0, n_groups, 0);
  }
  QuantMatrix grouped = w;
  grouped.data = dst;
  grouped.row_bytes = row_bytes;
  grouped.layout = WeightLayout::kRowGroups16;
  return grouped;
}

}  // namespace llms::kernels
