// kernels/row_pairs: K-quant matrices (Q4_K, Q5_K, Q6_K) repacked once (at model load) so that
// each pair of rows reads in address order: the pair's super-blocks alternate, row 2p's block b
// then row 2p + 1's block b.
//
// Why: on AVX2 the K-quant GEMVs over short rows (Qwen2.5-1.5B's 1,536 columns, 6 super-blocks
// of 144 / 210 bytes) went one row at a time, each super-block's sums reduced on its own,
// because a 2-row tile over the row layout reads two streams 864 / 1,260 bytes apart, which
// streamed worse from memory than the same bytes in address order. With the pairs interleaved
// the 2-row tile shares each activation block and reduction between the rows and reads one
// stream, prefetched evenly 2 KiB ahead (Zen 3, 2 threads, Q4_K 1536 x 1536 from memory: 22-23
// -> 27-28 GB/s at best; docs/PERF.md).
//
// Contract:
//   - WeightLayout::kRowPairs (kernels/matmul.h): n_rows is even; rows 2p and 2p + 1 occupy
//     data + 2p * row_bytes .. + 2 * row_bytes, where row_bytes is exactly the bytes of n_cols
//     values (no row padding), and block b of row 2p + k is at data + 2p * row_bytes +
//     (2b + k) * sizeof(block). The blocks' bytes are GGUF's.
//   - matmul on a paired matrix gives bit for bit what it gives on the row layout with the AVX2
//     kernels (on AVX2 and AVX-512 CPUs: the same integers and the same f32 expression per
//     super-block, GEMV and GEMM alike), and on the scalar Isa what the scalar row kernel gives.
//   - pair_rows_pays(w, isa): Q4_K, Q5_K or Q6_K, an even number of rows of at most
//     kPairRowsMaxCols columns, and isa == kAvx2 (AVX-512 CPUs take the 16-row groups of
//     kernels/row_groups.h or the VNNI row kernels instead). The caller repacks only then.
//   - pair_rows writes the paired copy of w (layout kRows, any row_bytes) into dst, which must
//     hold paired_bytes(w) bytes, and returns the matrix that reads it. It throws
//     llms::Error(kInvalidArgument) for another type, an odd number of rows, a matrix not in the
//     row layout or a shape that is not whole super-blocks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul.h"

namespace llms::kernels {

// Rows longer than this keep the row layout: the 2-row tile over long rows already streams
// each row for several KiB, and the pairs were not faster there (docs/PERF.md).
inline constexpr int64_t kPairRowsMaxCols = 1536;

bool pair_rows_pays(const QuantMatrix& w, Isa isa = best_isa());
size_t paired_bytes(const QuantMatrix& w);
QuantMatrix pair_rows(const QuantMatrix& w, void* dst, ThreadPool* pool = nullptr);

}  // namespace llms::kernels
