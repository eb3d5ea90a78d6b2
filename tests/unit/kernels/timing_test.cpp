// Timing mode of the kernel tests (LLMS_KERNEL_TIMING=1; otherwise every case skips): prints one
// JSON line per case and asserts nothing about speed.
//   - read bandwidth: sum of a 1 GiB float array with 1 and 2 threads (the decode floor); it and
//     the GEMVs' weights sit on huge pages (HugePageBuffer), as the model's weight arena does;
//   - every figure is the best batch of calls (see time_per_call), so that on a shared machine
//     the time other processes take is not charged to the kernel;
//   - GEMV (m = 1) on the Qwen2.5-0.5B projection shapes in Q5_0/Q8_0/Q4_K/Q5_K/Q6_K and the
//     1.5B ones in Q4_K/Q6_K, per ISA and thread count, as GB/s of weight bytes and as a ratio to
//     the measured read bandwidth. The weights are cycled through enough copies (>= 512 MiB) that
//     each call reads from memory, not from the last-level cache, as in a real decode step
//     (LLMS_KERNEL_TIMING_HOT=1: one copy, so the kernel's compute rate shows without DRAM);
//   - GEMM with m = 32 and m = 512, as GFLOP/s (2 * m * n_rows * n_cols per call), for the
//     quantized types and (GemmFloat, 1 and 2 threads) for F16/BF16/F32 weights, and the
//     output matrix (Q8_0 151936 x 896, Qwen2.5's tied embedding) at m = 32 (batched decode);
//   - LLMS_KERNEL_TIMING_TYPES=Q4_K,Q6_K (GGML type names) times only those types' GEMVs;
//   - GemvGrouped and GemmGrouped: the same GEMVs and GEMMs on the 16-row-group layout that the
//     loader repacks Q4_0/Q5_0/Q8_0/Q4_K/Q6_K into where group_rows_pays, per ISA;
//   - GemvPairs: the GEMVs on the row-pair layout (short Q4_K/Q5_K/Q6_K rows on AVX2) where
//     pair_rows_pays.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/row_groups.h"
#include "kernels/row_pairs.h"
#include "quant/quant.h"
#include "util/huge_page_buffer.h"

namespace llms::kernels {
namespace {

using gguf::GgmlType;
using Clock = std::chrono::steady_clock;

bool timing_enabled() {
  const char* env = std::getenv("LLMS_KERNEL_TIMING");
  return env != nullptr && std::string(env) == "1";
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds per call of fn: the best batch (>= 5 ms of calls each) over at least min_seconds,
// after a warm-up call. The best batch rather than the mean, so that time slices lost to other
// processes on a shared machine do not count against the kernel.
template <class F>
double time_per_call(F&& fn, double min_seconds = 0.3) {
  fn();
  int64_t batch = 1;
  for (;;) {  // size a batch to >= 5 ms
    const auto start = Clock::now();
    for (int64_t k = 0; k < batch; ++k) fn();
    if (seconds_since(start) >= 5e-3) break;
    batch *= 2;
  }
  double best = INFINITY;
  const auto start = Clock::now();
  do {
    const auto batch_start = Clock::now();
    for (int64_t k = 0; k < batch; ++k) fn();
    best = std::min(best, seconds_since(batch_start) / static_cast<double>(batch));
  } while (seconds_since(start) < min_seconds);
  return best;
}

int thread_counts_max() { return std::max(2, std::min(physical_core_count(), 2)); }

// GB/s of summing a 1 GiB float array, per thread count (index = threads). Timed like the
// GEMVs: each call sums the next 16 MiB slice (so every call reads from memory: the slice was
// last touched 64 calls ago) and the best batch counts.
std::vector<double>& read_bandwidth() {
  static std::vector<double> gbps = [] {
    std::vector<double> result(static_cast<size_t>(thread_counts_max()) + 1, 0.0);
    const size_t n = (size_t{1} << 30) / sizeof(float);
    const size_t slice = (size_t{16} << 20) / sizeof(float);
    // On huge pages, as bench-model's floor and the model's weight arena.
    HugePageBuffer store(n * sizeof(float));
    float* const data = reinterpret_cast<float*>(store.data());
    std::fill(data, data + n, 1.0f);  // touched: no page faults while timing
    for (int threads = 1; threads <= thread_counts_max(); ++threads) {
      ThreadPool pool(threads);
      std::vector<float> partial(static_cast<size_t>(threads));
      size_t next = 0;
      const double seconds = time_per_call(
          [&] {
            const float* base = data + next * slice;
            next = (next + 1) % (n / slice);
            pool.parallel_for(
                static_cast<int64_t>(slice), 1024, [&](int64_t begin, int64_t end, int t) {
                  __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(),
                                   _mm_setzero_ps()};
                  for (int64_t i = begin; i < end; i += 16) {
                    for (int k = 0; k < 4; ++k) {
                      acc[k] = _mm_add_ps(acc[k], _mm_loadu_ps(base + i + 4 * k));
                    }
                  }
                  float out[4];
                  _mm_storeu_ps(out,
                                _mm_add_ps(_mm_add_ps(acc[0], acc[1]), _mm_add_ps(acc[2], acc[3])));
                  partial[static_cast<size_t>(t)] = out[0] + out[1] + out[2] + out[3];
                });
          },
          1.0);
      result[static_cast<size_t>(threads)] =
          static_cast<double>(slice * sizeof(float)) / seconds / 1e9;
      std::printf(
          "{\"bench\": \"read_bandwidth\", \"threads\": %d, \"bytes\": %zu, \"gb_per_s\": %.2f}\n",
          threads, n * sizeof(float), result[static_cast<size_t>(threads)]);
    }
    return result;
  }();
  return gbps;
}

struct Shape {
  int64_t n_rows;
  int64_t n_cols;
};

// Qwen2.5-0.5B (n_rows x n_cols): q/o projections 896x896, gate/up 4864x896, down 896x4864.
// 896 is not a multiple of 256, so the K-quants only take the down projection (which is what
// the GGUF does: Q5_0/Q8_0 for the 896-column matrices, Q4_K/Q6_K for ffn_down).
constexpr Shape kShapes[] = {{896, 896}, {4864, 896}, {896, 4864}};
// Qwen2.5-1.5B's projections (q/o 1536x1536, gate/up 8960x1536, down 1536x8960), timed for the
// types its Q4_K_M file uses there (Q4_K, Q6_K): the GEMV case only.
constexpr Shape kShapes1_5B[] = {{1536, 1536}, {8960, 1536}, {1536, 8960}};

bool fits(GgmlType type, Shape shape) {
  return shape.n_cols % gguf::ggml_type_info(type).block_size == 0;
}
constexpr GgmlType kTypes[] = {GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                               GgmlType::kQ6_K};

std::vector<uint8_t> random_matrix(GgmlType type, Shape shape, size_t* row_bytes) {
  auto rng = testing::rng_for(static_cast<uint64_t>(type));
  *row_bytes = quant::quantized_row_bytes(type, shape.n_cols);
  std::vector<uint8_t> bytes(*row_bytes * static_cast<size_t>(shape.n_rows));
  const std::vector<float> row = testing::gaussian(rng, static_cast<size_t>(shape.n_cols));
  for (int64_t r = 0; r < shape.n_rows; ++r) {
    quant::quantize_row(type, row.data(), bytes.data() + r * *row_bytes, shape.n_cols);
  }
  return bytes;
}

TEST(KernelTiming, ReadBandwidth) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  EXPECT_GT(read_bandwidth()[1], 0.0);
}

// Whether type is timed: LLMS_KERNEL_TIMING_TYPES (a comma-separated list of GGML type names,
// e.g. "Q4_K,Q6_K") narrows the GEMV timings to those types; unset, every type is timed.
bool type_selected(GgmlType type) {
  const char* env = std::getenv("LLMS_KERNEL_TIMING_TYPES");
  if (env == nullptr) return true;
  const std::string list = std::string(",") + env + ",";
  return list.find("," + std::string(gguf::ggml_type_name(type)) + ",") != std::string::npos;
}

// The GEMVs of the decode shapes in one layout: the rows, the 16-row groups or the row pairs (each
// where the loader would repack into it).
void time_gemvs(WeightLayout target) {
  const bool grouped = target == WeightLayout::kRowGroups16;
  const bool paired = target == WeightLayout::kRowPairs;
  const std::vector<double>& bandwidth = read_bandwidth();
  std::vector<std::pair<GgmlType, Shape>> cases;
  for (GgmlType type : kTypes) {
    for (const Shape& shape : kShapes) {
      if (fits(type, shape)) cases.emplace_back(type, shape);
    }
  }
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (const Shape& shape : kShapes1_5B) cases.emplace_back(type, shape);
  }
  for (const auto& one_case : cases) {
    const GgmlType type = one_case.first;  // not a structured binding: clang 14's lambdas
    const Shape shape = one_case.second;   // cannot capture those
    if (!type_selected(type)) continue;
    size_t row_bytes = 0;
    std::vector<uint8_t> one = random_matrix(type, shape, &row_bytes);
    QuantMatrix layout{type, nullptr, shape.n_rows, shape.n_cols, row_bytes};
    // The row-layout matrix; after a repack below only its type and shape are read.
    const QuantMatrix rows{type, one.data(), shape.n_rows, shape.n_cols, row_bytes};
    if (paired) {
      if (!pair_rows_pays(rows, Isa::kAvx2)) continue;
      std::vector<uint8_t> store(paired_bytes(rows));
      layout = pair_rows(rows, store.data());
      one.swap(store);
    }
    if (grouped) {
      if (!group_rows_supported(type)) continue;
      std::vector<uint8_t> store(grouped_bytes(rows));
      layout = group_rows(rows, store.data());
      one.swap(store);
    }
    // Enough copies that a pass over them all overflows any cache (one in the HOT mode).
    const size_t n_copies = std::getenv("LLMS_KERNEL_TIMING_HOT") != nullptr
                                ? 1
                                : std::max<size_t>(2, (size_t{512} << 20) / one.size());
    // On huge pages, as the model's weight arena (Transformer::place_weights).
    HugePageBuffer copies(one.size() * n_copies);
    for (size_t c = 0; c < n_copies; ++c)
      std::copy(one.begin(), one.end(), copies.data() + c * one.size());
    auto rng = testing::rng_for(3);
    const std::vector<float> x = testing::gaussian(rng, static_cast<size_t>(shape.n_cols));
    std::vector<float> y(static_cast<size_t>(shape.n_rows));
    for (Isa isa : testing::all_isas()) {
      if (!isa_supported(isa) || (grouped && !group_rows_pays(type, isa)) ||
          (paired && !pair_rows_pays(rows, isa))) {
        continue;
      }
      for (int threads = 1; threads <= thread_counts_max(); ++threads) {
        ThreadPool pool(threads);
        MatmulScratch scratch;
        scratch.reserve(1, shape.n_cols);
        size_t next = 0;
        const double seconds = time_per_call([&] {
          QuantMatrix w = layout;
          w.data = copies.data() + next * one.size();
          next = (next + 1) % n_copies;
          matmul(w, x.data(), 1, shape.n_cols, y.data(), shape.n_rows, pool, scratch, isa);
        });
        const double gbps = static_cast<double>(one.size()) / seconds / 1e9;
        std::printf(
            "{\"bench\": \"gemv\", \"layout\": \"%s\", \"type\": \"%s\", \"isa\": \"%s\", "
            "\"threads\": %d, \"n_rows\": %lld, \"n_cols\": %lld, \"weight_bytes\": %zu, "
            "\"us_per_call\": %.2f, "
            "\"gb_per_s\": %.2f, \"ratio_to_read_bw\": %.3f}\n",
            grouped  ? "row_groups16"
            : paired ? "row_pairs"
                     : "rows",
            std::string(gguf::ggml_type_name(type)).c_str(), std::string(isa_name(isa)).c_str(),
            threads, static_cast<long long>(shape.n_rows), static_cast<long long>(shape.n_cols),
            one.size(), seconds * 1e6, gbps, gbps / bandwidth[static_cast<size_t>(threads)]);
      }
    }
  }
}

TEST(KernelTiming, Gemv) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  time_gemvs(WeightLayout::kRows);
}

TEST(KernelTiming, GemvGrouped) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  time_gemvs(WeightLayout::kRowGroups16);
}

TEST(KernelTiming, GemvPairs) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  time_gemvs(WeightLayout::kRowPairs);
}

// Times every GEMM of `types` on the 0.5B shapes at m = 32 and 512 and prints one JSON line
// each: with every thread count up to the maximum when all_thread_counts, else the maximum only;
// the scalar ISA only where with_scalar and m = 32 (it is slow).
void time_gemms(std::span<const GgmlType> types, bool all_thread_counts, bool with_scalar,
                double min_seconds, bool grouped = false) {
  for (GgmlType type : types) {
    for (const Shape& shape : kShapes) {
      if (!fits(type, shape)) continue;
      size_t row_bytes = 0;
      const std::vector<uint8_t> bytes = random_matrix(type, shape, &row_bytes);
      const QuantMatrix rows{type, bytes.data(), shape.n_rows, shape.n_cols, row_bytes};
      std::vector<uint8_t> grouped_store(grouped ? grouped_bytes(rows) : 0);
      const QuantMatrix w = grouped ? group_rows(rows, grouped_store.data()) : rows;
      for (int64_t m : {32, 512}) {
        auto rng = testing::rng_for(4);
        const std::vector<float> x = testing::gaussian(rng, static_cast<size_t>(m * shape.n_cols));
        std::vector<float> y(static_cast<size_t>(m * shape.n_rows));
        for (Isa isa : testing::all_isas()) {
          if (!isa_supported(isa)) continue;
          if (isa == Isa::kScalar && (!with_scalar || m > 32)) continue;
          if (grouped && !group_rows_pays(type, isa)) continue;
          const int max_threads = thread_counts_max();
          for (int threads = all_thread_counts ? 1 : max_threads; threads <= max_threads;
               ++threads) {
            ThreadPool pool(threads);
            MatmulScratch scratch;
            scratch.reserve(m, shape.n_cols);
            const double seconds = time_per_call(
                [&] {
                  matmul(w, x.data(), m, shape.n_cols, y.data(), shape.n_rows, pool, scratch, isa);
                },
                min_seconds);
            const double flops = 2.0 * static_cast<double>(m * shape.n_rows * shape.n_cols);
            std::printf(
                "{\"bench\": \"gemm\", \"layout\": \"%s\", \"type\": \"%s\", \"isa\": \"%s\", "
                "\"threads\": %d, \"m\": %lld, \"n_rows\": %lld, \"n_cols\": %lld, "
                "\"ms_per_call\": %.3f, "
                "\"gflop_per_s\": %.2f}\n",
                grouped ? "row_groups16" : "rows", std::string(gguf::ggml_type_name(type)).c_str(),
                std::string(isa_name(isa)).c_str(), threads, static_cast<long long>(m),
                static_cast<long long>(shape.n_rows), static_cast<long long>(shape.n_cols),
                seconds * 1e3, flops / seconds / 1e9);
          }
        }
      }
    }
  }
}

TEST(KernelTiming, Gemm) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  time_gemms(kTypes, /*all_thread_counts=*/false, /*with_scalar=*/true, 0.3);
}

TEST(KernelTiming, GemmGrouped) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  constexpr GgmlType kGroupedTypes[] = {GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ8_0,
                                        GgmlType::kQ4_K, GgmlType::kQ6_K};
  time_gemms(kGroupedTypes, /*all_thread_counts=*/false, /*with_scalar=*/false, 0.3,
             /*grouped=*/true);
}

// F32/F16/BF16 weights (f32 activations, FMA-bound) with 1 and 2 threads; the SIMD ISAs only
// (the scalar float path is far too slow to time here).
TEST(KernelTiming, GemmFloat) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  constexpr GgmlType kFloatTypes[] = {GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32};
  time_gemms(kFloatTypes, /*all_thread_counts=*/true, /*with_scalar=*/false, 0.2);
}

TEST(KernelTiming, GemmOutputMatrix) {
  if (!timing_enabled()) GTEST_SKIP() << "set LLMS_KERNEL_TIMING=1 to time";
  const Shape shape{151936, 896};
  const GgmlType type = GgmlType::kQ8_0;
  size_t row_bytes = 0;
  const std::vector<uint8_t> bytes = random_matrix(type, shape, &row_bytes);
  const QuantMatrix rows{type, bytes.data(), shape.n_rows, shape.n_cols, row_bytes};
  const int64_t m = 32;
  auto rng = testing::rng_for(5);
  const std::vector<float> x = testing::gaussian(rng, static_cast<size_t>(m * shape.n_cols));
  std::vector<float> y(static_cast<size_t>(m * shape.n_rows));
  // The matrix (145 MB) is far larger than the caches: every call streams it from memory, as
  // a decode step does its weights. Timed in the layout the model would load it in.
  for (Isa isa : testing::all_isas()) {
    if (!isa_supported(isa) || isa == Isa::kScalar) continue;
    const bool grouped = group_rows_pays(type, isa);
    std::vector<uint8_t> grouped_store(grouped ? grouped_bytes(rows) : 0);
    const QuantMatrix w = grouped ? group_rows(rows, grouped_store.data()) : rows;
    const int threads = thread_counts_max();
    ThreadPool pool(threads);
    MatmulScratch scratch;
    scratch.reserve(m, shape.n_cols);
    const double seconds = time_per_call(
        [&] { matmul(w, x.data(), m, shape.n_cols, y.data(), shape.n_rows, pool, scratch, isa); });
    const double flops = 2.0 * static_cast<double>(m * shape.n_rows * shape.n_cols);
    std::printf(
        "{\"bench\": \"gemm\", \"layout\": \"%s\", \"type\": \"%s\", \"isa\": \"%s\", "
        "\"threads\": %d, \"m\": %lld, \"n_rows\": %lld, \"n_cols\": %lld, \"ms_per_call\": %.3f, "
        "\"gflop_per_s\": %.2f}\n",
        grouped ? "row_groups16" : "rows", std::string(gguf::ggml_type_name(type)).c_str(),
        std::string(isa_name(isa)).c_str(), threads, static_cast<long long>(m),
        static_cast<long long>(shape.n_rows), static_cast<long long>(shape.n_cols), seconds * 1e3,
        flops / seconds / 1e9);
  }
}

}  // namespace
}  // namespace llms::kernels
