// AVX-512 kernel check for machines without AVX-512: run.sh compiles the *_avx512.cpp tiles
// against SIMDe's software AVX-512 (simde_shim.h, harness only, never in the product build) and
// this program compares them with the scalar tiles on quantized and raw random weights, odd
// block counts, and GEMM tiles vs GEMV. Not a .cpp so the test glob does not pick it up; the
// real conformance test (matmul_test.cpp) runs these kernels natively on AVX-512 machines.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "matmul_kernels.h"
#include "quant/float_convert.h"
#include "quant/quant.h"

using namespace llms;
using namespace llms::kernels;
using namespace llms::kernels::detail;
using gguf::GgmlType;

int main() {
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> normal(0, 1);
  int failures = 0;
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                            GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (GgmlType type : types) {
    const bool is_k = gguf::ggml_type_info(type).block_size == 256;
    for (int64_t n_cols : {is_k ? 256 : 32, is_k ? 768 : 96, is_k ? 1024 : 320}) {
      for (int mode = 0; mode < 2; ++mode) {  // 0: quantized gaussian, 1: raw random bytes
        const int n_rows = 5, m = 7;
        const size_t row_bytes = quant::quantized_row_bytes(type, n_cols);
        std::vector<uint8_t> w(row_bytes * n_rows + 1);
        uint8_t* wb = w.data() + 1;
        const auto& info = gguf::ggml_type_info(type);
        for (int r = 0; r < n_rows; ++r) {
          if (mode == 0) {
            std::vector<float> row(n_cols);
            for (float& v : row) v = normal(rng);
            quant::quantize_row(type, row.data(), wb + r * row_bytes, n_cols);
          } else {
            for (size_t i = 0; i < row_bytes; ++i) wb[r * row_bytes + i] = rng() & 0xff;
            for (size_t b = 0; b < row_bytes / info.type_size; ++b) {
              uint8_t* blk = wb + r * row_bytes + b * info.type_size;
              auto put = [&](uint8_t* p) {
                uint16_t h = quant::fp32_to_fp16(normal(rng) * 0.05f);
                std::memcpy(p, &h, 2);
              };
              if (type == GgmlType::kQ6_K)
                put(blk + 208);
              else
                put(blk);
              if (type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 || type == GgmlType::kQ4_K ||
                  type == GgmlType::kQ5_K)
                put(blk + 2);
            }
          }
        }
        std::vector<float> x(m * n_cols);
        for (float& v : x) v = normal(rng) * (mode ? 30 : 1);
        const Kernel* ref = find_kernel_scalar(type);
        const Kernel* k = is_k ? find_kquant_avx512(type) : find_legacy_avx512(type);
        const size_t a_stride =
            is_k ? (n_cols / 256) * sizeof(ActQ8K) + 64 : (n_cols / 32) * sizeof(ActQ8) + 24;
        std::vector<uint8_t> act(a_stride * m + 64);
        for (int i = 0; i < m; ++i) {
          if (is_k)
            quantize_act_q8k_scalar(x.data() + i * n_cols, n_cols,
                                    reinterpret_cast<ActQ8K*>(act.data() + i * a_stride));
          else
            quantize_act_q8_scalar(x.data() + i * n_cols, n_cols,
                                   reinterpret_cast<ActQ8*>(act.data() + i * a_stride));
        }
        std::vector<float> y_ref(m * n_rows), y(m * n_rows, NAN), y_gemv(m * n_rows, NAN);
        Tile t{wb, row_bytes, 1, act.data(), a_stride, 1, n_cols, nullptr, n_rows};
        for (int i = 0; i < m; ++i)
          for (int r = 0; r < n_rows; ++r) {
            Tile u = t;
            u.w = wb + r * row_bytes;
            u.a = act.data() + i * a_stride;
            u.y = y_ref.data() + i * n_rows + r;
            ref->gemv(u);
          }
        // GEMM in tiles of the kernel's shape, GEMV per activation row.
        for (int r = 0; r < n_rows; r += k->gemm_rows)
          for (int i = 0; i < m; i += k->gemm_cols) {
            Tile u = t;
            u.w = wb + r * row_bytes;
            u.n_w = std::min(k->gemm_rows, n_rows - r);
            u.a = act.data() + i * a_stride;
            u.n_a = std::min(k->gemm_cols, m - i);
            u.y = y.data() + i * n_rows + r;
            k->gemm(u);
          }
        for (int i = 0; i < m; ++i)
          for (int r = 0; r < n_rows; r += k->gemv_rows) {
            Tile u = t;
            u.w = wb + r * row_bytes;
            u.n_w = std::min(k->gemv_rows, n_rows - r);
            u.a = act.data() + i * a_stride;
            u.n_a = 1;
            u.y = y_gemv.data() + i * n_rows + r;
            k->gemv(u);
          }
        double err = 0, norm = 0;
        bool same = true;
        for (size_t j = 0; j < y.size(); ++j) {
          err += (y[j] - y_ref[j]) * (double)(y[j] - y_ref[j]);
          norm += y_ref[j] * (double)y_ref[j];
          same &= y[j] == y_gemv[j];
        }
        const double e = std::sqrt(err / norm);
        const bool ok = e < 2e-6 && same;
        failures += !ok;
        std::printf("%s %-5s n_cols %5lld mode %d: err %.3g gemm==gemv %d\n", ok ? "ok  " : "FAIL",
                    std::string(gguf::ggml_type_name(type)).c_str(), (long long)n_cols, mode, e,
                    (int)same);
      }
    }
  }
  std::printf("%d failures\n", failures);
  return failures != 0;
}
