// kernels/row_groups: weight matrices repacked once (at model load) into groups of 16 rows, the
// layout of the AVX-512 VNNI kernels for Q4_0, Q5_0, Q8_0, Q4_K and Q6_K and of the AVX2 kernels
// for Q4_0 and Q5_0 (which take a group as two halves of 8 rows).
//
// Why: in the row layout a kernel must shuffle each weight block into 4-byte groups and
// broadcast them against the activations; with 16 rows interleaved, one 64-byte load (plus the
// nibble unpack) gives 4 consecutive values of each of 16 rows, the activations are broadcast
// straight from memory, and one vpdpbusd (AVX2: one vpmaddubsw per 8 rows) advances 16 rows'
// dots at once, with no horizontal sums (docs/KERNELS.md has the measurements).
//
// Contract:
//   - WeightLayout::kRowGroups16 (kernels/matmul.h): rows in groups of 16, the last group padded
//     with zero rows; group g starts at data + 16 * g * row_bytes, where row_bytes is exactly the
//     bytes of n_cols values of the type (no row padding), so a group is the same bytes as its 16
//     rows were. Within a group the blocks (32 columns; K-quants 256) follow one another; block b
//     is 16 * sizeof(block) bytes: the 16 rows' f16 scales (Q4_K: d, dmin and the packed 6-bit
//     scales, byte-interleaved; Q6_K: d and the int8 sub-block scales), then for Q5_0 the fifth
//     bits (64 bytes, laid out like a quant vector), then the quants (the byte layout is in
//     row_groups_layout.h).
//   - matmul on a grouped matrix gives bit for bit what it gives on the row layout with the same
//     Isa's kernels where that Isa has grouped kernels for the type (the same integers and the
//     same f32 expression per block); other Isas read it through a scalar tile that agrees with the
//     scalar reference to f32 rounding (the same integers, its per-block sums added one by one).
//   - grouped_bytes throws llms::Error(kInvalidArgument) when the size overflows.
//   - group_rows_supported(type): Q4_0, Q5_0, Q8_0, Q4_K and Q6_K. group_rows_pays(type, isa):
//     whether isa has grouped kernels for type (the caller repacks only then).
//   - group_rows writes the grouped copy of w (layout kRows, any row_bytes) into dst, which
//     must hold grouped_bytes(w) bytes, and returns the matrix that reads it. It throws
//     llms::Error(kInvalidArgument) for a type without the layout, a matrix already grouped or a
//     shape that is not whole blocks.
#pragma once

#include <cstddef>

#include "kernels/matmul.h"

namespace llms::kernels {

inline constexpr int kRowGroupRows = 16;

bool group_rows_supported(gguf::GgmlType type);
bool group_rows_pays(gguf::GgmlType type, Isa isa = best_isa());
size_t grouped_bytes(const QuantMatrix& w);
QuantMatrix group_rows(const QuantMatrix& w, void* dst, ThreadPool* pool = nullptr);

}  // namespace llms::kernels
