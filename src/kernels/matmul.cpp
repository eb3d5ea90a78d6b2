// kernels/matmul: validation, activation quantization into the scratch, and the tiling and
// threading around the per-ISA tile kernels (contract in kernels/matmul.h).
//
// Work split: the weight row tiles are handed out by guided self-scheduling (parallel_guided):
// a few large claims per thread, then smaller ones, so threads that run at different speeds
// (one slowed by the other's memory traffic) still finish together. Each thread walks its rows
// tile by tile against chunks of activation rows small enough to stay in L2, so for GEMM a
// weight tile is decoded once per activation tile and the activations are re-read from cache,
// not memory. When there are fewer weight tiles than threads (tiny matrices, big m), the split is
// over activation rows instead. matmul_many lays the row tiles of its matrices end to end and
// splits them the same way, in one pass.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "kernels/row_groups.h"
#include "matmul_kernels.h"
#include "util/checked_math.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using detail::ActKind;
using detail::ActQ8Kx8;
using detail::ActQ8x8;
using detail::Kernel;
using gguf::GgmlType;

constexpr size_t kAlign = 64;
constexpr size_t kActChunkBytes = 256 * 1024;  // activation rows walked per weight tile

[[noreturn]] void invalid(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, "matmul: " + message);
}

const Kernel* find_kernel(const QuantMatrix& w, Isa isa) {
  const GgmlType type = w.type;
  if (w.layout == WeightLayout::kRowGroups16) {
    const Kernel* kernel = isa == Isa::kAvx512 ? detail::find_grouped_avx512(type)
                           : isa == Isa::kAvx2 ? detail::find_grouped_avx2(type)
                                               : nullptr;
    return kernel != nullptr ? kernel : detail::find_grouped_scalar(type);
  }
  if (w.layout == WeightLayout::kRowPairs) {
    return isa >= Isa::kAvx2 ? detail::find_pairs_avx2(type) : detail::find_pairs_scalar(type);
  }
  const Kernel* kernel = nullptr;
  if (isa == Isa::kAvx512) kernel = detail::find_kernel_avx512(type);
  if (kernel == nullptr && isa >= Isa::kAvx2) kernel = detail::find_kernel_avx2(type);
  if (kernel == nullptr) kernel = detail::find_kernel_scalar(type);
  return kernel;
}

size_t round_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Activation rows [8 * g, 8 * g + 8) of `rows` (ActQ8 rows, row_stride bytes apart; rows at or
// past m read as zeros) interleaved into n_blocks ActQ8x8 blocks at out.
void interleave_group(const uint8_t* rows, size_t row_stride, int64_t g, int64_t m,
                      int64_t n_blocks, ActQ8x8* out) {
  const int64_t n = std::min<int64_t>(8, m - 8 * g);
  for (int64_t b = 0; b < n_blocks; ++b) {
    ActQ8x8& o = out[b];
    for (int64_t i = 0; i < 8; ++i) {
      if (i >= n) {
        o.d[i] = 0.0f;
        o.sum[i] = 0;
        for (int j = 0; j < 8; ++j) std::memset(&o.qs[j][4 * i], 0, 4);
        continue;
      }
      const auto* src =
          reinterpret_cast<const ActQ8*>(rows + static_cast<size_t>(8 * g + i) * row_stride) + b;
      o.d[i] = src->d;
      o.sum[i] = src->sum;
      for (int j = 0; j < 8; ++j) std::memcpy(&o.qs[j][4 * i], src->qs + 4 * j, 4);
    }
  }
}

// The same for ActQ8K rows into n_blocks ActQ8Kx8 blocks.
void interleave_group_k(const uint8_t* rows, size_t row_stride, int64_t g, int64_t m,
                        int64_t n_blocks, ActQ8Kx8* out) {
  const int64_t n = std::min<int64_t>(8, m - 8 * g);
  constexpr int kGroups = quant::kQK_K / 4;
  constexpr int kPairs = quant::kQK_K / 32;
  for (int64_t b = 0; b < n_blocks; ++b) {
    ActQ8Kx8& o = out[b];
    for (int64_t i = 0; i < 8; ++i) {
      if (i >= n) {
        o.d[i] = 0.0f;
        for (int p = 0; p < kPairs; ++p) o.bsums[p][2 * i] = o.bsums[p][2 * i + 1] = 0;
        for (int j = 0; j < kGroups; ++j) std::memset(&o.qs[j][4 * i], 0, 4);
        continue;
      }
      const auto* src =
          reinterpret_cast<const ActQ8K*>(rows + static_cast<size_t>(8 * g + i) * row_stride) + b;
      o.d[i] = src->d;
      for (int p = 0; p < kPairs; ++p) {
        o.bsums[p][2 * i] = src->bsums[2 * p];
        o.bsums[p][2 * i + 1] = src->bsums[2 * p + 1];
      }
      for (int j = 0; j < kGroups; ++j) std::memcpy(&o.qs[j][4 * i], src->qs + 4 * j, 4);
    }
  }
}

// Bytes of one quantized activation row, padded to the alignment.
size_t act_row_bytes(ActKind act, int64_t n_cols) {
  const auto n = static_cast<size_t>(n_cols);
  switch (act) {
    case ActKind::kQ8:
    case ActKind::kQ8x8:
      return round_up((n + quant::kQK - 1) / quant::kQK * sizeof(ActQ8));
    case ActKind::kQ8K:
    case ActKind::kQ8Kx8:
      return round_up((n + quant::kQK_K - 1) / quant::kQK_K * sizeof(ActQ8K));
    case ActKind::kF32:
      return 0;
  }
  return 0;
}

void validate(const QuantMatrix& w, const float* x, int64_t m, int64_t x_stride, const float* y,
              int64_t y_stride, Isa isa) {
  const std::string type_name(gguf::ggml_type_name(w.type));
  if (!matmul_supports(w.type)) {
    throw Error(Error::Kind::kUnsupported, "matmul: weight type " + type_name + " not supported");
  }
  if (!isa_supported(isa)) {
    invalid("ISA " + std::string(isa_name(isa)) + " is not supported by this CPU");
  }
  if (w.n_rows < 0 || w.n_cols < 0 || m < 0) {
    invalid("negative shape (n_rows " + std::to_string(w.n_rows) + ", n_cols " +
            std::to_string(w.n_cols) + ", m " + std::to_string(m) + ")");
  }
  const auto row = gguf::ggml_row_bytes(w.type, static_cast<uint64_t>(w.n_cols));
  if (!row) {
    invalid("n_cols " + std::to_string(w.n_cols) + " is not a whole number of " + type_name +
            " blocks");
  }
  if (w.row_bytes < *row) {
    invalid("row_bytes " + std::to_string(w.row_bytes) + " < " + std::to_string(*row) +
            " bytes of " + std::to_string(w.n_cols) + " " + type_name + " values");
  }
  // The repacked layouts: the type must have one, and rows no padding (the kernels derive each
  // row's place from row_bytes alone).
  const bool grouped = w.layout == WeightLayout::kRowGroups16;
  const bool paired = w.layout == WeightLayout::kRowPairs;
  if (grouped || paired) {
    const char* layout_name = grouped ? "row-group" : "row-pair";
    if ((grouped ? detail::find_grouped_scalar(w.type) : detail::find_pairs_scalar(w.type)) ==
        nullptr) {
      throw Error(Error::Kind::kUnsupported,
                  "matmul: weight type " + type_name + " has no " + layout_name + " layout");
    }
    if (w.row_bytes != *row) {
      invalid("row_bytes " + std::to_string(w.row_bytes) + " of a " + layout_name +
              " matrix must be " + std::to_string(*row));
    }
  }
  if (paired && w.n_rows % 2 != 0) {
    invalid("a row-pair matrix has an odd number of rows (" + std::to_string(w.n_rows) + ")");
  }
  if (m == 0 || w.n_rows == 0) return;
  if (w.n_cols > 0 && (w.data == nullptr || x == nullptr)) invalid("null weight or input data");
  if (y == nullptr) invalid("null output");
  if (m > 1 && x_stride < w.n_cols) {
    invalid("x_stride " + std::to_string(x_stride) + " < n_cols " + std::to_string(w.n_cols));
  }
  if (m > 1 && y_stride < w.n_rows) {
    invalid("y_stride " + std::to_string(y_stride) + " < n_rows " + std::to_string(w.n_rows));
  }
  // A row-group matrix spans whole groups of 16 rows (the last one padded).
  const int64_t last_row = grouped ? (w.n_rows - 1) | (kRowGroupRows - 1) : w.n_rows - 1;
  const auto span = checked_mul(static_cast<uint64_t>(last_row), w.row_bytes);
  const auto x_span = checked_mul(static_cast<uint64_t>(m), static_cast<uint64_t>(x_stride));
  const auto y_span = checked_mul(static_cast<uint64_t>(m), static_cast<uint64_t>(y_stride));
  if (!span || !x_span || !y_span || *x_span > (uint64_t{1} << 60) ||
      *y_span > (uint64_t{1} << 60)) {
    invalid("shape overflows the address space");
  }
}

}  // namespace

bool matmul_supports(GgmlType type) { return detail::find_kernel_scalar(type) != nullptr; }

void MatmulScratch::Free::operator()(void* p) const { std::free(p); }

MatmulScratch::MatmulScratch() = default;
MatmulScratch::~MatmulScratch() = default;
MatmulScratch::MatmulScratch(MatmulScratch&&) noexcept = default;
MatmulScratch& MatmulScratch::operator=(MatmulScratch&&) noexcept = default;

void MatmulScratch::reserve(int64_t max_m, int64_t max_cols) {
  if (max_m < 0 || max_cols < 0) {
    invalid("scratch reserve: negative size (m " + std::to_string(max_m) + ", cols " +
            std::to_string(max_cols) + ")");
  }
  const size_t row =
      std::max(act_row_bytes(ActKind::kQ8, max_cols), act_row_bytes(ActKind::kQ8K, max_cols));
  // The rows, then (GEMM of kQ8x8 / kQ8Kx8 kernels) their interleaved copy in whole groups of 8.
  const auto bytes = checked_mul(row, static_cast<uint64_t>(max_m + (max_m + 7) / 8 * 8));
  if (!bytes) invalid("scratch reserve overflows");
  ensure(static_cast<size_t>(*bytes));
}

void* MatmulScratch::ensure(size_t bytes) {
  if (bytes > capacity_ || !buffer_) {
    const size_t size = round_up(std::max<size_t>(bytes, kAlign));
    void* p = std::aligned_alloc(kAlign, size);
    if (p == nullptr) throw std::bad_alloc();
    buffer_.reset(p);
    capacity_ = size;
  }
  return buffer_.get();
}

namespace {

// The activations as the kernels read them: the caller's floats (kF32), or quantized rows in the
// scratch, interleaved by groups of 8 for the GEMM of kQ8x8 / kQ8Kx8 kernels.
struct ActView {
  const uint8_t* a = nullptr;
  size_t a_stride = 0;
};

// The quantized rows, and (for a GEMM of kQ8x8 / kQ8Kx8 kernels) their interleaved groups after
// them in the scratch: a kernel of the plain row form reads the rows, so matrices whose kernels
// differ only by the interleaving (a grouped Q4_K beside a Q6_K) share one quantization.
struct Activations {
  ActView rows;
  ActView groups;
  // What a tile function reading activations of this kind takes.
  const ActView& view(ActKind act) const {
    return groups.a != nullptr && is_interleaved_kind(act) ? groups : rows;
  }
  static bool is_interleaved_kind(ActKind act) {
    return act == ActKind::kQ8x8 || act == ActKind::kQ8Kx8;
  }
};

// The activation form without its interleaving (kQ8x8 -> kQ8, kQ8Kx8 -> kQ8K).
ActKind row_form(ActKind act) {
  if (act == ActKind::kQ8x8) return ActKind::kQ8;
  if (act == ActKind::kQ8Kx8) return ActKind::kQ8K;
  return act;
}

// act: the kind to prepare; an interleaved kind also gives the rows.
Activations prepare_activations(ActKind act, int64_t n_cols, const float* x, int64_t m,
                                int64_t x_stride, ThreadPool& pool, MatmulScratch& scratch,
                                Isa isa) {
  Activations out;
  out.rows = {reinterpret_cast<const uint8_t*>(x), static_cast<size_t>(x_stride) * sizeof(float)};
  if (act == ActKind::kF32) return out;
  size_t a_stride = act_row_bytes(act, n_cols);
  const bool is_k = act == ActKind::kQ8K || act == ActKind::kQ8Kx8;
  const bool is_interleaved = Activations::is_interleaved_kind(act) && m > 1;
  const int64_t n_groups = (m + 7) / 8;
  const size_t rows_bytes = a_stride * static_cast<size_t>(m);
  const size_t bytes =
      rows_bytes + (is_interleaved ? a_stride * static_cast<size_t>(8 * n_groups) : 0);
  auto* buffer = static_cast<uint8_t*>(scratch.ensure(bytes));
  out.rows = {buffer, a_stride};
  auto quantize_rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      uint8_t* row = buffer + static_cast<size_t>(i) * a_stride;
      const float* xi = x + i * x_stride;
      if (!is_k) {
        quantize_act_q8(xi, n_cols, reinterpret_cast<ActQ8*>(row), isa);
      } else {
        quantize_act_q8k(xi, n_cols, reinterpret_cast<ActQ8K*>(row), isa);
      }
    }
  };
  const bool is_parallel = m >= 2 * pool.size() && m * n_cols >= (1 << 16);
  if (is_parallel) {
    pool.parallel_for(m, quantize_rows);
  } else {
    quantize_rows(0, m, 0);
  }
  if (is_interleaved) {
    const int64_t n_blocks = n_cols / (is_k ? quant::kQK_K : quant::kQK);
    uint8_t* groups = buffer + rows_bytes;
    const size_t block_bytes = is_k ? sizeof(ActQ8K) : sizeof(ActQ8);
    auto interleave = [&](int64_t begin, int64_t end, int) {
      for (int64_t g = begin; g < end; ++g) {
        uint8_t* group = groups + static_cast<size_t>(g * n_blocks) * 8 * block_bytes;
        if (is_k) {
          interleave_group_k(buffer, a_stride, g, m, n_blocks, reinterpret_cast<ActQ8Kx8*>(group));
        } else {
          interleave_group(buffer, a_stride, g, m, n_blocks, reinterpret_cast<ActQ8x8*>(group));
        }
      }
    };
    if (is_parallel) {
      pool.parallel_for(n_groups, interleave);
    } else {
      interleave(0, n_groups, 0);
    }
    out.groups = {groups, static_cast<size_t>(n_blocks) * block_bytes};
  }
  return out;
}

// One weight matrix of a call with its kernel, tile shape and output.
struct Plan {
  const QuantMatrix* w = nullptr;
  const Kernel* kernel = nullptr;
  ActKind act = ActKind::kF32;  // the activation form fn reads
  float* y = nullptr;
  int64_t y_stride = 0;
  int tile_rows = 1;
  int tile_cols = 1;
  detail::TileFn fn = nullptr;
  int64_t n_row_tiles = 0;
};

Plan make_plan(const QuantMatrix& w, float* y, int64_t y_stride, int64_t m, Isa isa) {
  Plan p;
  p.w = &w;
  p.kernel = find_kernel(w, isa);
  p.y = y;
  p.y_stride = m == 1 ? w.n_rows : y_stride;
  const bool is_gemv = m == 1;
  if (!is_gemv && m <= p.kernel->small_max_m) {
    // A few activation rows (Kernel::small): the GEMV's activation form and results.
    p.act = row_form(p.kernel->act);
    p.tile_rows = p.kernel->small_rows;
    p.tile_cols = p.kernel->small_cols;
    p.fn = p.kernel->small;
  } else {
    p.act = p.kernel->act;
    p.tile_rows = is_gemv ? p.kernel->gemv_rows : p.kernel->gemm_rows;
    p.tile_cols = is_gemv ? 1 : p.kernel->gemm_cols;
    p.fn = is_gemv ? p.kernel->gemv : p.kernel->gemm;
  }
  p.n_row_tiles = (w.n_rows + p.tile_rows - 1) / p.tile_rows;
  return p;
}

// Bytes at the start of a thread's weight range requested before its first tile (the kernels'
// own prefetch distance is 2-4 KiB).
constexpr size_t kHeadPrefetchBytes = 4096;

// Weight rows [r0, r1) of the plan's matrix against activation rows [i0, i1): activation chunks
// small enough to stay in L2, each walked by every weight tile of the range.
void run_block(const Plan& p, const Activations& acts, int64_t r0, int64_t r1, int64_t i0,
               int64_t i1) {
  const ActView& act = acts.view(p.act);
  const QuantMatrix& w = *p.w;
  const int64_t act_chunk = std::max<int64_t>(
      p.tile_cols, static_cast<int64_t>(kActChunkBytes / act.a_stride) / p.tile_cols * p.tile_cols);
  // The kernels prefetch a few KiB ahead of what they read, so the first KiBs of a range would
  // be demand misses, one after another: at ~100 calls per decode step, each starting cold from
  // DRAM, that ramp costs more than the small matrices' reads themselves.
  const auto* w_begin = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r0) * w.row_bytes;
  const size_t head = std::min(kHeadPrefetchBytes, static_cast<size_t>(r1 - r0) * w.row_bytes);
  for (size_t off = 0; off < head; off += 64) __builtin_prefetch(w_begin + off, 0, 3);
  detail::Tile t{};
  t.w_stride = w.row_bytes;
  t.a_stride = act.a_stride;
  t.n_cols = w.n_cols;
  t.y_stride = p.y_stride;
  for (int64_t ic = i0; ic < i1; ic += act_chunk) {
    const int64_t ic_end = std::min(i1, ic + act_chunk);
    // A GEMM reads a weight tile from memory during its first activation tile only (the later
    // ones find it in cache), so the stream came in bursts faster than one core can pull and the
    // memory sat idle in between. The next weight tile is requested into L2 a share per
    // activation tile instead, spreading the stream over all of them (the 145 MB output matrix
    // at m = 32, from memory: 510 -> 550 GFLOP/s).
    const int64_t n_act_tiles = (ic_end - ic + p.tile_cols - 1) / p.tile_cols;
    const size_t tile_bytes = static_cast<size_t>(p.tile_rows) * w.row_bytes;
    const size_t share = (tile_bytes / static_cast<size_t>(n_act_tiles) + 63) / 64 * 64;
    for (int64_t r = r0; r < r1; r += p.tile_rows) {
      t.w = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.row_bytes;
      t.n_w = static_cast<int>(std::min<int64_t>(p.tile_rows, r1 - r));
      const uint8_t* next = t.w + tile_bytes;
      // Nothing to spread for a single activation tile (a GEMV prefetches its own stream).
      const size_t next_bytes =
          n_act_tiles > 1 && r + p.tile_rows < r1
              ? std::min<size_t>(tile_bytes,
                                 static_cast<size_t>(r1 - r - p.tile_rows) * w.row_bytes)
              : 0;
      size_t fetched = 0;
      for (int64_t i = ic; i < ic_end; i += p.tile_cols) {
        const size_t end = std::min(next_bytes, fetched + share);
        for (; fetched < end; fetched += 64) __builtin_prefetch(next + fetched, 0, 2);
        t.a = act.a + static_cast<size_t>(i) * act.a_stride;
        t.n_a = static_cast<int>(std::min<int64_t>(p.tile_cols, ic_end - i));
        t.y = p.y + i * p.y_stride + r;
        p.fn(t);
      }
    }
  }
}

// Row tiles [0, n_tiles) on the pool, claimed by guided self-scheduling: each claim takes a
// share of what is left (at least min_tiles), so a thread that the other's memory traffic slowed
// down hands its last rows over instead of keeping the others at the barrier. Early claims are
// large, so each thread still reads a few long contiguous runs (a GEMV is a stream: every claim
// starts it cold). Which thread computes a tile never changes its result.
template <class F>
void parallel_guided(ThreadPool& pool, int64_t n_tiles, int64_t min_tiles, F&& fn) {
  if (pool.size() == 1 || n_tiles <= 2 * min_tiles) {
    pool.parallel_for(n_tiles, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
    return;
  }
  std::atomic<int64_t> next{0};
  const int64_t share = 2 * pool.size();
  pool.parallel_for(pool.size(), [&](int64_t, int64_t, int) {
    for (;;) {
      int64_t begin = next.load(std::memory_order_relaxed);
      int64_t take = 0;
      do {
        if (begin >= n_tiles) return;
        take = std::max(min_tiles, (n_tiles - begin) / share);
      } while (!next.compare_exchange_weak(begin, begin + take, std::memory_order_relaxed));
      fn(begin, std::min(n_tiles, begin + take));
    }
  });
}

// Tiles per guided claim: at least this many weight bytes, so a claim's cold start is small
// next to its stream.
constexpr size_t kMinClaimBytes = 64 * 1024;

int64_t min_claim_tiles(const Plan& p) {
  const size_t tile_bytes = std::max<size_t>(1, p.w->row_bytes * static_cast<size_t>(p.tile_rows));
  return std::max<int64_t>(1, static_cast<int64_t>(kMinClaimBytes / tile_bytes));
}

// The whole of one plan on the pool: split over weight rows, or over activation rows when there
// are too few weight tiles to go round.
void run_plan(const Plan& p, const Activations& act, int64_t m, ThreadPool& pool) {
  if (m == 1 || p.n_row_tiles >= pool.size()) {
    parallel_guided(pool, p.n_row_tiles, min_claim_tiles(p), [&](int64_t t0, int64_t t1) {
      run_block(p, act, t0 * p.tile_rows, std::min(p.w->n_rows, t1 * p.tile_rows), 0, m);
    });
  } else {
    pool.parallel_for(m, p.tile_cols, [&](int64_t begin, int64_t end, int) {
      run_block(p, act, 0, p.w->n_rows, begin, end);
    });
  }
}

void zero_rows(const QuantMatrix& w, int64_t m, float* y, int64_t y_stride) {
  for (int64_t i = 0; i < m; ++i) std::fill(y + i * y_stride, y + i * y_stride + w.n_rows, 0.f);
}

}  // namespace

void matmul(const QuantMatrix& w, const float* x, int64_t m, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch, Isa isa) {
  validate(w, x, m, x_stride, y, y_stride, isa);
  if (m == 0 || w.n_rows == 0) return;
  if (m == 1) x_stride = w.n_cols;
  if (w.n_cols == 0) return zero_rows(w, m, y, m == 1 ? w.n_rows : y_stride);
  const Plan plan = make_plan(w, y, y_stride, m, isa);
  const Activations act =
      prepare_activations(plan.act, w.n_cols, x, m, x_stride, pool, scratch, isa);
  run_plan(plan, act, m, pool);
}

void matmul_many(std::span<const MatmulTarget> targets, const float* x, int64_t m, int64_t x_stride,
                 ThreadPool& pool, MatmulScratch& scratch, Isa isa) {
  if (targets.empty()) return;
  const int64_t n_cols = targets[0].w.n_cols;
  for (size_t j = 0; j < targets.size(); ++j) {
    const MatmulTarget& t = targets[j];
    if (t.w.n_cols != n_cols) {
      invalid("matmul_many: target " + std::to_string(j) + " has n_cols " +
              std::to_string(t.w.n_cols) + ", target 0 has " + std::to_string(n_cols));
    }
    validate(t.w, x, m, x_stride, t.y, t.y_stride, isa);
  }
  if (m == 0) return;
  if (m == 1) x_stride = n_cols;

  // Fused only when every matrix reads the same activation form, up to the interleaving of the
  // GEMM's groups (prepared once, rows included, when any matrix needs it); otherwise one call
  // each.
  const size_t n = targets.size();
  Plan plans[kMaxFusedTargets];
  int64_t first_tile[kMaxFusedTargets + 1] = {0};
  bool fusable = n_cols > 0 && n <= kMaxFusedTargets;
  ActKind act_kind = ActKind::kF32;  // the form to prepare: target 0's, or an interleaved one
  bool enough_rows = true;
  for (size_t j = 0; fusable && j < n; ++j) {
    plans[j] = make_plan(targets[j].w, targets[j].y, targets[j].y_stride, m, isa);
    fusable = row_form(plans[j].act) == row_form(plans[0].act);
    if (j == 0 || Activations::is_interleaved_kind(plans[j].act)) {
      act_kind = plans[j].act;
    }
    first_tile[j + 1] = first_tile[j] + plans[j].n_row_tiles;
    enough_rows = enough_rows && plans[j].n_row_tiles >= pool.size();
  }
  if (!fusable) {
    for (const MatmulTarget& t : targets) {
      matmul(t.w, x, m, x_stride, t.y, t.y_stride, pool, scratch, isa);
    }
    return;
  }
  const Activations act = prepare_activations(act_kind, n_cols, x, m, x_stride, pool, scratch, isa);
  if (m > 1 && !enough_rows) {  // a small matrix: split each over activation rows instead
    for (size_t j = 0; j < n; ++j) {
      if (plans[j].n_row_tiles > 0) run_plan(plans[j], act, m, pool);
    }
    return;
  }
  // One pass over the row tiles of all the matrices, end to end: one barrier for the lot.
  auto run_tiles = [&](int64_t begin, int64_t end) {
    for (size_t j = 0; j < n; ++j) {
      const int64_t lo = std::max(begin, first_tile[j]);
      const int64_t hi = std::min(end, first_tile[j + 1]);
      if (lo >= hi) continue;
      const Plan& p = plans[j];
      const int64_t r0 = (lo - first_tile[j]) * p.tile_rows;
      const int64_t r1 = std::min(p.w->n_rows, (hi - first_tile[j]) * p.tile_rows);
      run_block(p, act, r0, r1, 0, m);
    }
  };
  parallel_guided(pool, first_tile[n], min_claim_tiles(plans[0]), run_tiles);
}

}  // namespace llms::kernels
