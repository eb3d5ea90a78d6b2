// quantize/gptq: see gptq.h for the method.
#include "quantize/gptq.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lapack.h"
#include "quant/quant.h"
#include "quantize/block_codes.h"
#include "quantize/weighted_quantizers.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {

namespace {

using gguf::GgmlType;

constexpr int kDampeningRetries = 4;
constexpr int64_t kTileRows = 64;     // rows whose trailing updates share one sgemm
constexpr int64_t kLegacySpan = 128;  // columns per span for the 32-element types

// U (row-major, upper triangular) with H^-1 = U^T U for H = the Hessian (row-major, n x n) with
// `diagonal` on its diagonal; false when the Cholesky factorization fails (H not positive
// definite). With P the order reversal, P H P = L L^T gives H^-1 = (P L^-1 P)^T (P L^-1 P), and
// P L^-1 P is upper triangular: so U = P L^-1 P. Working memory: n^2 doubles (P H P, factored and
// inverted in place) besides U.
bool inverse_hessian_factor(const float* hessian, const std::vector<double>& diagonal, int n,
                            std::vector<float>& u) {
  const size_t nn = static_cast<size_t>(n);
  std::vector<double> a(nn * nn);
  // Column-major element (i, j) of P H P; H is symmetric, so either layout reads the same.
  for (size_t j = 0; j < nn; ++j) {
    for (size_t i = 0; i < nn; ++i) a[i + j * nn] = hessian[(nn - 1 - i) * nn + (nn - 1 - j)];
    a[j + j * nn] = diagonal[nn - 1 - j];
  }
  int info = 0;
  dpotrf_("L", &n, a.data(), &n, &info, 1);
  if (info != 0) return false;
  dtrtri_("L", "N", &n, a.data(), &n, &info, 1, 1);
  if (info != 0) return false;
  u.assign(nn * nn, 0.0f);
  for (size_t i = 0; i < nn; ++i) {
    for (size_t j = i; j < nn; ++j) {
      // (L^-1)(r, c) for r = n-1-i >= c = n-1-j, column-major.
      u[i * nn + j] = static_cast<float>(a[(nn - 1 - i) + (nn - 1 - j) * nn]);
    }
  }
  return true;
}

// Sets OpenBLAS's thread count for a scope and puts the previous one back: other BLAS users (the
// Hessians' ssyrk in a later calibration run) must see the same count whether or not GPTQ ran
// before them, since a sum's rounding may depend on how it was split.
class BlasThreads {
 public:
  BlasThreads() : previous_(openblas_get_num_threads()) {}
  ~BlasThreads() { openblas_set_num_threads(previous_); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;
  void set(int n) { openblas_set_num_threads(std::max(1, n)); }

 private:
  int previous_;
};

// What every tile of rows reads: the matrix, U and the per-column facts.
struct RowTileContext {
  GgmlType type;
  const float* weights;  // rows x cols
  int64_t cols;
  const float* u;  // cols x cols, upper triangular
  const float* importance;
  const uint8_t* dead;
  int64_t span;  // columns updated one by one before one sgemm onto the rest
  int64_t block;
  int64_t sub_block;  // values per K sub-block, 0 for the 32-element types
  int64_t block_bytes;
  uint64_t row_bytes;
  uint8_t* out;
};

// One thread's working rows and span errors.
struct TileScratch {
  explicit TileScratch(const RowTileContext& ctx)
      : w(static_cast<size_t>(kTileRows * ctx.cols)),
        err(static_cast<size_t>(kTileRows * ctx.span)) {}
  std::vector<float> w;
  std::vector<float> err;
};

// Rounds rows [tile * kTileRows, +kTileRows) column by column, pushing each column's error onto
// the later columns (inside the span one by one, after it as one sgemm).
void quantize_row_tile(const RowTileContext& ctx, int64_t tile_index, int64_t rows,
                       TileScratch& scratch) {
  const int64_t r0 = tile_index * kTileRows;
  const int64_t tile = std::min(kTileRows, rows - r0);
  const int64_t cols = ctx.cols;
  const auto nn = static_cast<size_t>(cols);
  const int n = static_cast<int>(cols);
  const int64_t span = ctx.span;
  const int64_t block = ctx.block;
  float* w = scratch.w.data();
  float* err = scratch.err.data();
  std::memcpy(w, ctx.weights + r0 * cols, static_cast<size_t>(tile) * nn * sizeof(float));
  for (int64_t i = 0; i < tile; ++i) {
    for (size_t j = 0; j < nn; ++j) {
      if (ctx.dead[j]) w[static_cast<size_t>(i) * nn + j] = 0.0f;
    }
  }
  for (int64_t s = 0; s < cols; s += span) {
    const int64_t end = std::min(s + span, cols);
    for (int64_t c = s; c < end; ++c) {
      const float* u_row = ctx.u + static_cast<size_t>(c) * nn;
      const float u_cc = u_row[c];
      for (int64_t i = 0; i < tile; ++i) {
        float* wr = w + static_cast<size_t>(i) * nn;
        uint8_t* blk = ctx.out + static_cast<uint64_t>(r0 + i) * ctx.row_bytes +
                       static_cast<uint64_t>((c / block) * ctx.block_bytes);
        if (c % block == 0) {
          // The block's scales, fitted to its values as the earlier columns have left them.
          quantize_row_with_importance(ctx.type, wr + c, ctx.importance + c, blk, block);
        } else if (ctx.sub_block != 0 && c % ctx.sub_block == 0) {
          // A K sub-block's own fields, refitted at its turn: its values have moved since the
          // super-block's scales were fitted at the block's first column.
          const int64_t first = c - c % block;
          refit_sub_block(ctx.type, wr + first, ctx.importance + first, blk,
                          static_cast<int>((c % block) / ctx.sub_block));
        }
        const int j = static_cast<int>(c % block);
        const CodeGrid grid = code_grid(ctx.type, blk, j);
        const int code = grid.nearest(wr[c]);
        set_code(ctx.type, blk, j, code);
        const float e = (wr[c] - grid.decode(code)) / u_cc;
        err[static_cast<size_t>(i * span + (c - s))] = e;
        for (int64_t k = c + 1; k < end; ++k) wr[k] -= e * u_row[k];
      }
    }
    if (end < cols) {
      // w[:, end:] -= err[:, :len] * U[s:end, end:]; column-major, C (m x tile) -= A (m x len)
      // * B (len x tile) with A = U[s:end, end:] read transposed and B = err.
      const int m = static_cast<int>(cols - end);
      const int t = static_cast<int>(tile);
      const int len = static_cast<int>(end - s);
      const int ld_err = static_cast<int>(span);
      const float minus_one = -1.0f;
      const float one = 1.0f;
      sgemm_("N", "N", &m, &t, &len, &minus_one, ctx.u + static_cast<size_t>(s) * nn + end, &n, err,
             &ld_err, &one, w + end, &n, 1, 1);
    }
  }
}

}  // namespace

bool has_gptq_quantizer(GgmlType type) {
  return has_code_access(type) && has_weighted_quantizer(type);
}

void gptq_quantize(GgmlType type, const float* weights, int64_t rows, int64_t cols,
                   const float* hessian, void* out, const GptqOptions& options) {
  const std::string type_name(gguf::ggml_type_name(type));
  if (!has_gptq_quantizer(type)) {
    throw Error(Error::Kind::kUnsupported, "GPTQ: no quantizer for " + type_name);
  }
  const int64_t block = gguf::ggml_type_info(type).block_size;
  const int64_t block_bytes = gguf::ggml_type_info(type).type_size;
  if (rows < 1 || cols < block || cols % block != 0 || cols > INT_MAX) {
    throw Error(Error::Kind::kInvalidArgument,
                "GPTQ: a " + std::to_string(rows) + " x " + std::to_string(cols) +
                    " matrix is not whole " + type_name + " blocks of " + std::to_string(block));
  }
  const int n = static_cast<int>(cols);
  const size_t nn = static_cast<size_t>(n);

  // Dead columns (no activation reached them) weigh nothing and are zeroed, as in the paper.
  std::vector<double> diagonal(nn);
  std::vector<float> importance(nn);
  std::vector<uint8_t> dead(nn, 0);
  double diagonal_sum = 0.0;
  for (size_t i = 0; i < nn * nn; ++i) {
    if (!std::isfinite(hessian[i])) {
      throw Error(Error::Kind::kInvalidArgument, "GPTQ: the Hessian holds a non-finite value");
    }
  }
  for (size_t j = 0; j < nn; ++j) {
    const double hjj = hessian[j * nn + j];
    dead[j] = hjj > 0.0 ? 0 : 1;
    diagonal[j] = dead[j] ? 1.0 : hjj;
    importance[j] = dead[j] ? 0.0f : static_cast<float>(hjj);
    diagonal_sum += diagonal[j];
  }
  const double mean_diagonal = diagonal_sum / static_cast<double>(nn);

  BlasThreads blas_threads;
  blas_threads.set(options.n_threads);
  std::vector<float> u;
  double dampening = options.dampening;
  for (int attempt = 0;; ++attempt) {
    std::vector<double> damped = diagonal;
    for (double& d : damped) d += dampening * mean_diagonal;
    if (inverse_hessian_factor(hessian, damped, n, u)) break;
    if (attempt == kDampeningRetries) {
      throw Error(Error::Kind::kInternal,
                  "GPTQ: the Hessian is not positive definite even with dampening " +
                      std::to_string(dampening));
    }
    dampening *= 10.0;
  }

  const int64_t span = type == GgmlType::kQ4_0 || type == GgmlType::kQ5_0 || type == GgmlType::kQ8_0
                           ? kLegacySpan
                           : block;
  const RowTileContext ctx{type,
                           weights,
                           cols,
                           u.data(),
                           importance.data(),
                           dead.data(),
                           span,
                           block,
                           sub_block_values(type),
                           block_bytes,
                           quant::quantized_row_bytes(type, cols),
                           static_cast<uint8_t*>(out)};
  const int64_t n_tiles = (rows + kTileRows - 1) / kTileRows;
  // Each tile's matrix products run on its own thread (BLAS single-threaded), so the result is the
  // same whatever the thread count, pool or none.
  blas_threads.set(1);
  // An OpenMP build of OpenBLAS keeps its thread count per calling thread, so the pool's threads
  // would each fan out again: then the tiles run on this thread.
  constexpr int kOpenBlasOpenMp = 2;
  if (options.pool == nullptr || options.pool->size() < 2 || n_tiles < 2 ||
      openblas_get_parallel() == kOpenBlasOpenMp) {
    TileScratch scratch(ctx);
    for (int64_t tile = 0; tile < n_tiles; ++tile) quantize_row_tile(ctx, tile, rows, scratch);
    return;
  }
  std::vector<TileScratch> scratch(static_cast<size_t>(options.pool->size()), TileScratch(ctx));
  options.pool->parallel_for(n_tiles, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t tile = begin; tile < end; ++tile) {
      quantize_row_tile(ctx, tile, rows, scratch[static_cast<size_t>(thread)]);
    }
  });
  options.pool->rest();
}

}  // namespace llms::quantize
