#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cublas.h"
#include "cuda_test_support.h"
#include "device_kernels.h"
#include "model/tiny_model.h"

namespace llms::cuda {
namespace {

using namespace testing_support;

// Kernel timings for the device run (LLMS_CUDA_TIMING=1; skipped otherwise, and never an
// assertion on time): the batch-1 GEMV per weight type on 7B/8B-shaped matrices and decode
// attention over a long context, each as bytes read per second and as a fraction of the read
// bandwidth measured on the device in the same run, and the two GEMM paths of steps of 16-256
// tokens in TFLOP/s. One JSON line per kernel on stdout.
TEST_F(CudaConformance, KernelTimings) {
  const char* on = std::getenv("LLMS_CUDA_TIMING");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set LLMS_CUDA_TIMING=1";
  const double bandwidth = measure_read_bandwidth(0, size_t{2} << 30, 5);
  std::printf("{\"kernel\": \"read_bandwidth\", \"bytes_per_s\": %.4g}\n", bandwidth);
  Stream stream;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  // Seconds per call: the best of 5 timings of 20 back-to-back calls.
  auto time_calls = [&](const std::function<void()>& call) {
    call();
    float best_ms = 1e30f;
    for (int rep = 0; rep < 5; ++rep) {
      check(cudaEventRecord(start, stream.get()), "cudaEventRecord");
      for (int i = 0; i < 20; ++i) call();
      check(cudaEventRecord(stop, stream.get()), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0.0f;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      best_ms = std::min(best_ms, ms / 20.0f);
    }
    return static_cast<double>(best_ms) / 1e3;
  };
  struct Shape {
    int64_t rows, cols;
  };
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ5_K, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kBF16, GgmlType::kF16}) {
    for (const Shape& shape :
         {Shape{4096, 4096}, Shape{14336, 4096}, Shape{4096, 14336}, Shape{3584, 18944}}) {
      const size_t row_bytes = *gguf::ggml_row_bytes(type, static_cast<uint64_t>(shape.cols));
      const auto bytes =
          model::fast_weight_bytes(type, static_cast<uint64_t>(shape.rows * shape.cols), 1, 0.05f);
      DeviceBuffer dw = upload(bytes);
      DeviceBuffer dx = upload(random_floats(static_cast<size_t>(shape.cols), 2));
      DeviceBuffer dy(static_cast<size_t>(shape.rows) * sizeof(float));
      const DeviceMatrix w{type, dw.get(), shape.rows, shape.cols, row_bytes};
      // The kernel gemv() takes and the sub-block one, side by side (GemvKernel).
      for (const auto& variant : {std::pair{GemvKernel::kAuto, "auto"},
                                  std::pair{GemvKernel::kSubBlocks, "sub_blocks"}}) {
        // Not a structured binding: clang 15 does not let a lambda capture one.
        const GemvKernel kernel = variant.first;
        const char* name = variant.second;
        const double s =
            time_calls([&] { gemv(w, dx.get<float>(), 1, dy.get<float>(), stream.get(), kernel); });
        const double rate = static_cast<double>(bytes.size()) / s;
        std::printf(
            "{\"kernel\": \"gemv\", \"variant\": \"%s\", \"type\": \"%s\", \"rows\": %lld, "
            "\"cols\": %lld, \"us\": %.2f, \"bytes_per_s\": %.4g, "
            "\"fraction_of_bandwidth\": %.3f}\n",
            name, std::string(gguf::ggml_type_name(type)).c_str(),
            static_cast<long long>(shape.rows), static_cast<long long>(shape.cols), s * 1e6, rate,
            rate / bandwidth);
      }
    }
  }
  // Steps of 16, 64 and 256 rows on a Qwen2.5-7B FFN matrix (18944 x 3584): the tiled GEMM on
  // the blocks against dequantize_bf16 + cuBLAS, which the runner takes past kMaxTiledGemmRows
  // (CudaRunner): where the two cross is what this measures.
  {
    const std::string no_cublas = cublas_unavailable_reason();
    std::unique_ptr<Cublas> cublas;
    if (no_cublas.empty()) cublas = std::make_unique<Cublas>(stream.get());
    const int64_t rows = 18944;
    const int64_t cols = 3584;
    const int32_t max_m = 256;
    DeviceBuffer dx(static_cast<size_t>(max_m * cols) * sizeof(uint16_t));
    check(cudaMemsetAsync(dx.get(), 0x3c, dx.bytes(), stream.get()), "cudaMemsetAsync");
    DeviceBuffer dy(static_cast<size_t>(max_m * rows) * sizeof(float));
    DeviceBuffer dbf16(static_cast<size_t>(rows * cols) * sizeof(uint16_t));
    for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kBF16}) {
      const size_t row_bytes = *gguf::ggml_row_bytes(type, static_cast<uint64_t>(cols));
      DeviceBuffer dw =
          upload(model::fast_weight_bytes(type, static_cast<uint64_t>(rows * cols), 1, 0.05f));
      const DeviceMatrix w{type, dw.get(), rows, cols, row_bytes};
      for (const int32_t m : {16, 64, max_m}) {
        auto report = [&](const char* path, double s) {
          std::printf(
              "{\"kernel\": \"gemm\", \"path\": \"%s\", \"type\": \"%s\", \"m\": %d, "
              "\"rows\": %lld, \"cols\": %lld, \"us\": %.2f, \"tflop_per_s\": %.2f}\n",
              path, std::string(gguf::ggml_type_name(type)).c_str(), m,
              static_cast<long long>(rows), static_cast<long long>(cols), s * 1e6,
              2.0 * static_cast<double>(m) * static_cast<double>(rows * cols) / s / 1e12);
        };
        report("tiled", time_calls([&] {
                 tiled_gemm(w, dx.get<uint16_t>(), m, dy.get<float>(), rows, stream.get());
               }));
        if (!cublas) continue;
        report("dequantize_cublas", time_calls([&] {
                 dequantize_bf16(w, rows, dbf16.get<uint16_t>(), stream.get());
                 cublas->gemm_bf16(dbf16.get<uint16_t>(), dx.get<uint16_t>(), dy.get<float>(), rows,
                                   m, cols, rows);
               }));
      }
    }
  }
  // Decode attention: one token per sequence, 1 or 8 sequences x 4,096 cached tokens, 32 query
  // heads on 8 KV heads of 128 (Llama-3-8B's layer), block size 16; each token's tiles in one
  // block (splits 1) and split as the runner splits a decode step (about 2 blocks per SM).
  for (const int32_t n_seqs : {1, 8}) {
    const int32_t ctx = 4096;
    const int32_t block = 16;
    const int32_t heads = 32;
    const int32_t kv_heads = 8;
    const int32_t dim = 128;
    const int32_t pages = n_seqs * ctx / block;
    DeviceBuffer k(static_cast<size_t>(pages) * kv_heads * block * dim * sizeof(uint16_t));
    DeviceBuffer v(k.bytes());
    check(cudaMemsetAsync(k.get(), 0x2c, k.bytes(), stream.get()), "cudaMemsetAsync");
    check(cudaMemsetAsync(v.get(), 0x2c, v.bytes(), stream.get()), "cudaMemsetAsync");
    std::vector<int32_t> seq(n_seqs);
    std::vector<int32_t> pos(n_seqs, ctx - 1);
    std::vector<int32_t> begin(n_seqs);
    std::vector<int32_t> tables(static_cast<size_t>(pages));
    for (int32_t i = 0; i < n_seqs; ++i) {
      seq[i] = i;
      begin[i] = i * (ctx / block);
    }
    for (int32_t p = 0; p < pages; ++p) tables[p] = p;
    DeviceBuffer dseq = upload(seq);
    DeviceBuffer dpos = upload(pos);
    DeviceBuffer dbegin = upload(begin);
    DeviceBuffer dtables = upload(tables);
    DeviceBuffer dq = upload(random_floats(static_cast<size_t>(n_seqs * heads * dim), 3));
    DeviceBuffer dout(static_cast<size_t>(n_seqs * heads * dim) * sizeof(float));
    const KvLayerView view{
        k.get<uint16_t>(), v.get<uint16_t>(), block, kv_heads, kv_heads, dim, dim};
    AttentionBatch ab;
    ab.n_tokens = n_seqs;
    ab.n_heads = heads;
    ab.token_seq = dseq.get<int32_t>();
    ab.token_pos = dpos.get<int32_t>();
    ab.seq_table_begin = dbegin.get<int32_t>();
    ab.tables = dtables.get<int32_t>();
    ab.scale = 0.088f;
    const int64_t tiles = attention_tiles(ctx - 1, 0);
    DeviceBuffer states(
        static_cast<size_t>(attention_tile_state_floats(n_seqs, heads, dim, tiles)) *
        sizeof(float));
    const int32_t decode_splits =
        attention_splits_for(n_seqs, heads, kv_heads, 2 * device_.multiprocessors);
    for (const int32_t splits : {1, decode_splits}) {
      const AttentionSplit split{splits, states.get<float>(), tiles};
      const double s = time_calls([&] {
        paged_attention(view, ab, dq.get<float>(), dout.get<float>(), stream.get(), split);
      });
      const double rate = static_cast<double>(k.bytes() + v.bytes()) / s;
      std::printf(
          "{\"kernel\": \"paged_attention_decode\", \"seqs\": %d, \"context\": %d, "
          "\"splits\": %d, \"us\": %.2f, \"kv_bytes_per_s\": %.4g, "
          "\"fraction_of_bandwidth\": %.3f}\n",
          n_seqs, ctx, splits, s * 1e6, rate, rate / bandwidth);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace
}  // namespace llms::cuda
