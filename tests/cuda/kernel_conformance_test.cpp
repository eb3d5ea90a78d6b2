// The CUDA kernels against the CPU (llama.cpp's test-backend-ops idea): every kernel of
// cuda/device_kernels.h on random inputs of many shapes, compared with the CPU's scalar
// reference by normalized squared error, or bit for bit where the operation is exact. Needs an
// NVIDIA GPU: without one every test skips and says why (cuda::probe()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cublas.h"
#include "cuda_test_support.h"
#include "device_kernels.h"
#include "kernels/ops.h"
#include "quant/float_convert.h"
#include "util/error.h"

namespace llms::cuda {
namespace {

using namespace testing_support;

// Both GEMV kernels (cuda/device_kernels.h: GemvKernel), on widths of whole and partial staged
// groups (64 sub-blocks: 2,048 values), rows that start off 16-byte boundaries (Q6_K's 210-byte
// blocks, Q8_0's 34) and a matrix that does (the staged kernel) or does not (the other).
TEST_F(CudaConformance, GemvMatchesTheDecodedWeightsForEveryTypeAndShape) {
  for (GgmlType type : kTypes) {
    const std::vector<int64_t> widths = k_quant(type) ? std::vector<int64_t>{256, 768, 3584, 4096}
                                                      : std::vector<int64_t>{32, 896, 2080, 4096};
    for (int64_t cols : widths) {
      for (int64_t rows : {1, 5, 67}) {
        for (int32_t m : {1, 2, 3, 5, kMaxGemvRows}) {
          SCOPED_TRACE(std::string(gguf::ggml_type_name(type)) + " " + std::to_string(rows) + "x" +
                       std::to_string(cols) + " m=" + std::to_string(m));
          const HostMatrix w = random_matrix(type, rows, cols, 7 + rows + cols);
          const std::vector<float> x = random_floats(static_cast<size_t>(m * cols), 11 + m);
          std::vector<float> want(static_cast<size_t>(m * rows));
          for (int32_t i = 0; i < m; ++i) {
            for (int64_t r = 0; r < rows; ++r) {
              double acc = 0.0;
              for (int64_t c = 0; c < cols; ++c) {
                acc += static_cast<double>(w.values[r * cols + c]) * x[i * cols + c];
              }
              want[i * rows + r] = static_cast<float>(acc);
            }
          }
          DeviceBuffer dw = upload(w.bytes);
          DeviceBuffer dx = upload(x);
          DeviceBuffer dy(want.size() * sizeof(float));
          const DeviceMatrix matrix{type, dw.get(), rows, cols, w.row_bytes};
          gemv(matrix, dx.get<float>(), m, dy.get<float>(), nullptr, GemvKernel::kAuto);
          const std::vector<float> got = download<float>(dy, want.size());
          EXPECT_LT(nmse(got, want), 1e-10);
          gemv(matrix, dx.get<float>(), m, dy.get<float>(), nullptr, GemvKernel::kSubBlocks);
          ASSERT_EQ(download<float>(dy, want.size()), got) << "the two kernels differ";
          // The same matrix 2 bytes past a 16-byte boundary: the sub-block kernel.
          std::vector<uint8_t> shifted(w.bytes.size() + 2);
          std::copy(w.bytes.begin(), w.bytes.end(), shifted.begin() + 2);
          DeviceBuffer ds = upload(shifted);
          gemv(DeviceMatrix{type, ds.get<uint8_t>() + 2, rows, cols, w.row_bytes}, dx.get<float>(),
               m, dy.get<float>(), nullptr);
          ASSERT_EQ(download<float>(dy, want.size()), got) << "unaligned matrix";
        }
      }
    }
  }
}

TEST_F(CudaConformance, DequantizeToBf16IsTheCpuValueRounded) {
  for (GgmlType type : kTypes) {
    const int64_t cols = k_quant(type) ? 512 : 96;
    const HostMatrix w = random_matrix(type, 9, cols, 3);
    DeviceBuffer dw = upload(w.bytes);
    DeviceBuffer out(w.values.size() * sizeof(uint16_t));
    dequantize_bf16(DeviceMatrix{type, dw.get(), 9, cols, w.row_bytes}, 9, out.get<uint16_t>(),
                    nullptr);
    const auto got = download<uint16_t>(out, w.values.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], quant::fp32_to_bf16(w.values[i])) << gguf::ggml_type_name(type) << " " << i;
    }
  }
}

TEST_F(CudaConformance, GatherRowsDecodesExactlyAndScales) {
  const HostMatrix w = random_matrix(GgmlType::kQ6_K, 40, 256, 5);
  const std::vector<int32_t> rows = {39, 0, 7, 7};
  DeviceBuffer dw = upload(w.bytes);
  DeviceBuffer dr = upload(rows);
  DeviceBuffer out(rows.size() * 256 * sizeof(float));
  for (float scale : {1.0f, 16.0f}) {
    gather_rows(DeviceMatrix{GgmlType::kQ6_K, dw.get(), 40, 256, w.row_bytes}, dr.get<int32_t>(), 4,
                scale, out.get<float>(), nullptr);
    const auto got = download<float>(out, rows.size() * 256);
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t c = 0; c < 256; ++c) {
        ASSERT_EQ(got[i * 256 + c], w.values[rows[i] * 256 + c] * scale);
      }
    }
  }
}

// The hidden states' logits rows are gathered from an f32 matrix (the runner's x).
TEST_F(CudaConformance, GatherRowsOfF32IsACopy) {
  const std::vector<float> x = random_floats(7 * 96, 8);
  const std::vector<int32_t> rows = {6, 2, 3};
  DeviceBuffer dx = upload(x);
  DeviceBuffer dr = upload(rows);
  DeviceBuffer out(rows.size() * 96 * sizeof(float));
  gather_rows(DeviceMatrix{GgmlType::kF32, dx.get(), 7, 96, 96 * sizeof(float)}, dr.get<int32_t>(),
              3, 1.0f, out.get<float>(), nullptr);
  const auto got = download<float>(out, rows.size() * 96);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t c = 0; c < 96; ++c) ASSERT_EQ(got[i * 96 + c], x[rows[i] * 96 + c]);
  }
}

// The GEMM of the prefill path, straight through cuBLAS: a row slice's results land in their
// rows of a wider output (ldy > rows), as CudaRunner::matmul slices a large matrix.
TEST_F(CudaConformance, CublasGemmWritesItsRowsOfAWiderOutput) {
  const std::string no_cublas = cublas_unavailable_reason();  // the emulation's GEMM: ""
  if (!no_cublas.empty()) GTEST_SKIP() << "no cuBLAS here: " << no_cublas;
  const int64_t rows = 40;
  const int64_t m = 12;
  const int64_t k = 96;
  const int64_t ldy = 50;
  std::vector<uint16_t> w(static_cast<size_t>(rows * k));
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  const auto wf = random_floats(w.size(), 21);
  const auto xf = random_floats(x.size(), 22);
  for (size_t i = 0; i < w.size(); ++i) w[i] = quant::fp32_to_bf16(wf[i]);
  for (size_t i = 0; i < x.size(); ++i) x[i] = quant::fp32_to_bf16(xf[i]);
  std::vector<float> y(static_cast<size_t>(m * ldy), -7.0f);
  std::vector<float> want = y;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        acc += static_cast<double>(quant::bf16_to_fp32(w[r * k + c])) *
               quant::bf16_to_fp32(x[i * k + c]);
      }
      want[i * ldy + r] = static_cast<float>(acc);
    }
  }
  DeviceBuffer dw = upload(w);
  DeviceBuffer dx = upload(x);
  DeviceBuffer dy = upload(y);
  Stream stream;
  Cublas cublas(stream.get());
  cublas.gemm_bf16(dw.get<uint16_t>(), dx.get<uint16_t>(), dy.get<float>(), rows, m, k, ldy);
  check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
  const auto got = download<float>(dy, y.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(got[i * ldy + r], -7.0f) << "row " << r;
  }
  EXPECT_LT(nmse(got, want), 1e-10);
}

// The tensor-core GEMM on the file's blocks (tiled_gemm), for every type: 1, 2 and 4 fragments
// of activation rows and two block rows of them, weight rows past a whole tile, a last chunk of
// fewer than 4 sub-blocks (224 columns), against the bf16-rounded products summed in double, in
// a wider output whose other columns stay as they were. The activation rows past m are NaN:
// none of it may reach the output.
TEST_F(CudaConformance, TiledGemmMatchesTheBf16ProductsForEveryType) {
  for (GgmlType type : kTypes) {
    const int64_t cols = k_quant(type) ? 256 : 224;
    for (const auto& [rows, m] : {std::pair<int64_t, int32_t>{40, 9}, {96, 27}, {33, 70}}) {
      SCOPED_TRACE(std::string(gguf::ggml_type_name(type)) + " " + std::to_string(rows) + "x" +
                   std::to_string(cols) + " m=" + std::to_string(m));
      const HostMatrix w = random_matrix(type, rows, cols, 5 + rows);
      const int32_t padded = (m + kTiledGemmRowAlign - 1) / kTiledGemmRowAlign * kTiledGemmRowAlign;
      std::vector<uint16_t> x(static_cast<size_t>(padded * cols), 0x7fc0);  // bf16 NaN
      const auto xf = random_floats(static_cast<size_t>(m * cols), 23 + m);
      for (size_t i = 0; i < xf.size(); ++i) x[i] = quant::fp32_to_bf16(xf[i]);
      const int64_t ldy = rows + 5;
      std::vector<float> want(static_cast<size_t>(m * ldy), -7.0f);
      for (int32_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          double acc = 0.0;
          for (int64_t c = 0; c < cols; ++c) {
            acc += static_cast<double>(
                       quant::bf16_to_fp32(quant::fp32_to_bf16(w.values[r * cols + c]))) *
                   quant::bf16_to_fp32(x[i * cols + c]);
          }
          want[i * ldy + r] = static_cast<float>(acc);
        }
      }
      DeviceBuffer dw = upload(w.bytes);
      DeviceBuffer dx = upload(x);
      DeviceBuffer dy = upload(std::vector<float>(want.size(), -7.0f));
      const DeviceMatrix matrix{type, dw.get(), rows, cols, w.row_bytes};
      tiled_gemm(matrix, dx.get<uint16_t>(), m, dy.get<float>(), ldy, nullptr);
      const std::vector<float> got = download<float>(dy, want.size());
      for (int32_t i = 0; i < m; ++i) {
        for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(got[i * ldy + r], -7.0f) << "column " << r;
      }
      EXPECT_LT(nmse(got, want), 1e-10);
      EXPECT_THROW(tiled_gemm(matrix, dx.get<uint16_t>() + 1, m, dy.get<float>(), ldy, nullptr),
                   Error)
          << "activations off a 32-byte boundary";
    }
  }
}

TEST_F(CudaConformance, RowOpsMatchTheCpuKernels) {
  for (int32_t dim : {64, 896, 4096}) {
    const int32_t n = 5;
    const auto x = random_floats(static_cast<size_t>(n * dim), 1);
    const auto w = random_floats(static_cast<size_t>(dim), 2);
    const auto b = random_floats(static_cast<size_t>(n * dim), 3);
    std::vector<float> want(x.size());
    for (int32_t r = 0; r < n; ++r) {
      kernels::rms_norm(x.data() + r * dim, w.data(), want.data() + r * dim, dim, 1e-6f);
    }
    DeviceBuffer dx = upload(x);
    DeviceBuffer dw = upload(w);
    rms_norm(dx.get<float>(), dw.get<float>(), dx.get<float>(), n, dim, 1e-6f,
             nullptr);  // in place
    EXPECT_LT(nmse(download<float>(dx, x.size()), want), 1e-12) << "rms_norm " << dim;

    std::vector<float> silu(x.size());
    std::vector<float> gelu(x.size());
    std::vector<float> sum(x.size());
    kernels::silu_mul(x.data(), b.data(), silu.data(), static_cast<int64_t>(x.size()));
    kernels::gelu_tanh_mul(x.data(), b.data(), gelu.data(), static_cast<int64_t>(x.size()));
    kernels::add(x.data(), b.data(), sum.data(), static_cast<int64_t>(x.size()));
    DeviceBuffer db = upload(b);
    DeviceBuffer g1 = upload(x);
    silu_mul(g1.get<float>(), db.get<float>(), static_cast<int64_t>(x.size()), nullptr);
    EXPECT_LT(nmse(download<float>(g1, x.size()), silu), 1e-12) << "silu_mul";
    DeviceBuffer g2 = upload(x);
    gelu_tanh_mul(g2.get<float>(), db.get<float>(), static_cast<int64_t>(x.size()), nullptr);
    EXPECT_LT(nmse(download<float>(g2, x.size()), gelu), 1e-12) << "gelu_tanh_mul";
    DeviceBuffer g3 = upload(x);
    add(g3.get<float>(), db.get<float>(), static_cast<int64_t>(x.size()), nullptr);
    EXPECT_EQ(download<float>(g3, x.size()), sum) << "add";

    std::vector<float> biased(x);
    for (int32_t r = 0; r < n; ++r) {
      for (int32_t e = 0; e < dim; ++e) biased[r * dim + e] += w[e];
    }
    DeviceBuffer g4 = upload(x);
    add_bias(g4.get<float>(), dw.get<float>(), n, dim, nullptr);
    EXPECT_EQ(download<float>(g4, x.size()), biased) << "add_bias";
  }
}

TEST_F(CudaConformance, RopeMatchesTheCpuInBothLayouts) {
  for (int32_t head_dim : {64, 128, 256}) {
    for (bool neox : {false, true}) {
      const int32_t n_tokens = 3;
      const int32_t n_heads = 5;
      const int32_t half = head_dim / 2;
      const auto x = random_floats(static_cast<size_t>(n_tokens * n_heads * head_dim), 4);
      std::vector<float> cos(static_cast<size_t>(n_tokens * half));
      std::vector<float> sin(cos.size());
      for (int32_t t = 0; t < n_tokens; ++t) {
        kernels::rope_cos_sin(100 * t + 3, head_dim, 10000.0f, 1.0f, cos.data() + t * half,
                              sin.data() + t * half);
      }
      std::vector<float> want(x);
      for (int32_t t = 0; t < n_tokens; ++t) {
        kernels::rope_apply(want.data() + t * n_heads * head_dim, n_heads, head_dim,
                            cos.data() + t * half, sin.data() + t * half,
                            neox ? kernels::RopeMode::kNeox : kernels::RopeMode::kNormal);
      }
      DeviceBuffer dx = upload(x);
      DeviceBuffer dc = upload(cos);
      DeviceBuffer ds = upload(sin);
      rope(dx.get<float>(), n_tokens, n_heads, head_dim, dc.get<float>(), ds.get<float>(), neox,
           nullptr);
      EXPECT_LT(nmse(download<float>(dx, x.size()), want), 1e-12)
          << "head_dim " << head_dim << (neox ? " neox" : " normal");
    }
  }
}

// Attention over a paged f16 cache against a double-precision reference over the same f16
// keys and values: GQA, two cache groups, windows, odd block sizes, shuffled pages.
TEST_F(CudaConformance, PagedAttentionMatchesAReferenceOverTheSameCache) {
  struct Case {
    int32_t head_dim_k, head_dim_v, block_size, n_heads, n_kv_heads, page_heads, window, n_groups;
  };
  // Head dims with a tail of fewer than 8 (scalar key loads), more than 8 query heads per KV
  // head (two blocks per KV head), windows that give back blocks and leave tiles empty.
  const Case cases[] = {{64, 64, 16, 4, 2, 2, 0, 1},   {128, 128, 16, 8, 1, 1, 0, 1},
                        {256, 256, 7, 2, 2, 2, 5, 2},  {80, 64, 16, 6, 3, 4, 33, 2},
                        {128, 128, 32, 4, 4, 4, 0, 1}, {64, 64, 16, 4, 2, 3, 12, 1},
                        {36, 20, 16, 18, 2, 2, 0, 1},  {64, 64, 16, 4, 1, 1, 150, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim_k) + " block " +
                 std::to_string(c.block_size) + " window " + std::to_string(c.window));
    // Two sequences: a prefill chunk of 19 tokens after 281 cached, a decode at position 449
    // (3 and 4 tiles of keys).
    const std::vector<int32_t> n_context = {300, 450};
    const std::vector<int32_t> n_query = {19, 1};
    std::mt19937_64 rng(9);
    int32_t n_pages = 0;
    for (int32_t s = 0; s < 2; ++s) {
      n_pages += (n_context[s] + c.block_size - 1) / c.block_size * c.n_groups;
    }
    std::vector<int32_t> pages(n_pages);
    for (int32_t i = 0; i < n_pages; ++i) pages[i] = i;
    std::shuffle(pages.begin(), pages.end(), rng);
    const int32_t group = c.n_groups - 1;
    std::vector<int32_t> tables;
    std::vector<int32_t> table_begin;
    std::vector<std::vector<int32_t>> seq_pages(2);
    int32_t next_page = 0;
    for (int32_t s = 0; s < 2; ++s) {
      table_begin.push_back(static_cast<int32_t>(tables.size()));
      const int32_t blocks = (n_context[s] + c.block_size - 1) / c.block_size;
      for (int32_t b = 0; b < blocks; ++b) {
        for (int32_t g = 0; g < c.n_groups; ++g) {
          const int32_t p = pages[next_page++];
          tables.push_back(p);
          if (g == group) seq_pages[s].push_back(p);
        }
      }
    }
    // Every cached slot gets random f16 keys and values (the earlier steps' writes); this
    // step's tokens are written by write_kv.
    const size_t k_page = static_cast<size_t>(c.page_heads * c.block_size * c.head_dim_k);
    const size_t v_page = static_cast<size_t>(c.page_heads * c.block_size * c.head_dim_v);
    std::vector<uint16_t> k_pool(k_page * n_pages);
    std::vector<uint16_t> v_pool(v_page * n_pages);
    const auto kr = random_floats(k_pool.size(), 12);
    const auto vr = random_floats(v_pool.size(), 13);
    for (size_t i = 0; i < k_pool.size(); ++i) k_pool[i] = quant::fp32_to_fp16(kr[i]);
    for (size_t i = 0; i < v_pool.size(); ++i) v_pool[i] = quant::fp32_to_fp16(vr[i]);
    const int32_t n_tokens = n_query[0] + n_query[1];
    std::vector<int32_t> token_seq;
    std::vector<int32_t> token_pos;
    std::vector<int32_t> token_page;
    std::vector<int32_t> token_slot;
    for (int32_t s = 0; s < 2; ++s) {
      for (int32_t j = 0; j < n_query[s]; ++j) {
        const int32_t pos = n_context[s] - n_query[s] + j;
        token_seq.push_back(s);
        token_pos.push_back(pos);
        token_page.push_back(seq_pages[s][pos / c.block_size]);
        token_slot.push_back(pos % c.block_size);
      }
    }
    const auto q = random_floats(static_cast<size_t>(n_tokens * c.n_heads * c.head_dim_k), 14);
    const auto k_new =
        random_floats(static_cast<size_t>(n_tokens * c.n_kv_heads * c.head_dim_k), 15);
    const auto v_new =
        random_floats(static_cast<size_t>(n_tokens * c.n_kv_heads * c.head_dim_v), 16);
    // The reference cache: what write_kv must leave.
    std::vector<uint16_t> k_want = k_pool;
    std::vector<uint16_t> v_want = v_pool;
    for (int32_t t = 0; t < n_tokens; ++t) {
      for (int32_t h = 0; h < c.n_kv_heads; ++h) {
        const size_t base = (static_cast<size_t>(token_page[t]) * c.page_heads + h) * c.block_size +
                            static_cast<size_t>(token_slot[t]);
        for (int32_t e = 0; e < c.head_dim_k; ++e) {
          k_want[base * c.head_dim_k + e] =
              quant::fp32_to_fp16(k_new[(t * c.n_kv_heads + h) * c.head_dim_k + e]);
        }
        for (int32_t e = 0; e < c.head_dim_v; ++e) {
          v_want[base * c.head_dim_v + e] =
              quant::fp32_to_fp16(v_new[(t * c.n_kv_heads + h) * c.head_dim_v + e]);
        }
      }
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
    std::vector<float> want(static_cast<size_t>(n_tokens * c.n_heads * c.head_dim_v));
    for (int32_t t = 0; t < n_tokens; ++t) {
      const int32_t s = token_seq[t];
      const int32_t pos = token_pos[t];
      const int32_t lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
      for (int32_t h = 0; h < c.n_heads; ++h) {
        const int32_t kvh = h / (c.n_heads / c.n_kv_heads);
        std::vector<double> scores;
        for (int32_t j = lo; j <= pos; ++j) {
          const size_t base =
              (static_cast<size_t>(seq_pages[s][j / c.block_size]) * c.page_heads + kvh) *
                  c.block_size +
              static_cast<size_t>(j % c.block_size);
          double dot = 0.0;
          for (int32_t e = 0; e < c.head_dim_k; ++e) {
            dot += static_cast<double>(q[(t * c.n_heads + h) * c.head_dim_k + e]) *
                   quant::fp16_to_fp32(k_want[base * c.head_dim_k + e]);
          }
          scores.push_back(dot * scale);
        }
        const double mx = *std::max_element(scores.begin(), scores.end());
        double total = 0.0;
        for (double& sc : scores) total += (sc = std::exp(sc - mx));
        for (int32_t e = 0; e < c.head_dim_v; ++e) {
          double acc = 0.0;
          for (int32_t j = lo; j <= pos; ++j) {
            const size_t base =
                (static_cast<size_t>(seq_pages[s][j / c.block_size]) * c.page_heads + kvh) *
                    c.block_size +
                static_cast<size_t>(j % c.block_size);
            acc += scores[j - lo] * quant::fp16_to_fp32(v_want[base * c.head_dim_v + e]);
          }
          want[(t * c.n_heads + h) * c.head_dim_v + e] = static_cast<float>(acc / total);
        }
      }
    }
    // Blocks wholly before every query's window are given back (-1), as a windowed cache
    // group's table holds them: the kernel must not read them.
    if (c.window > 0) {
      for (int32_t s = 0; s < 2; ++s) {
        const int32_t first_query = n_context[s] - n_query[s];
        const int32_t lowest_key = std::max(0, first_query - c.window + 1);
        for (int32_t b = 0; (b + 1) * c.block_size <= lowest_key; ++b) {
          tables[table_begin[s] + b * c.n_groups + group] = -1;
        }
      }
    }
    DeviceBuffer dk = upload(k_pool);
    DeviceBuffer dv = upload(v_pool);
    DeviceBuffer dq = upload(q);
    DeviceBuffer dkn = upload(k_new);
    DeviceBuffer dvn = upload(v_new);
    DeviceBuffer dpage = upload(token_page);
    DeviceBuffer dslot = upload(token_slot);
    DeviceBuffer dseq = upload(token_seq);
    DeviceBuffer dpos = upload(token_pos);
    DeviceBuffer dbegin = upload(table_begin);
    DeviceBuffer dtables = upload(tables);
    DeviceBuffer dout(want.size() * sizeof(float));
    const KvLayerView view{dk.get<uint16_t>(), dv.get<uint16_t>(), c.block_size, c.page_heads,
                           c.n_kv_heads,       c.head_dim_k,       c.head_dim_v};
    write_kv(view, dkn.get<float>(), dvn.get<float>(), n_tokens, dpage.get<int32_t>(),
             dslot.get<int32_t>(), nullptr);
    EXPECT_EQ(download<uint16_t>(dk, k_want.size()), k_want) << "write_kv keys";
    EXPECT_EQ(download<uint16_t>(dv, v_want.size()), v_want) << "write_kv values";
    AttentionBatch ab;
    ab.n_tokens = n_tokens;
    ab.n_heads = c.n_heads;
    ab.token_seq = dseq.get<int32_t>();
    ab.token_pos = dpos.get<int32_t>();
    ab.seq_table_begin = dbegin.get<int32_t>();
    ab.tables = dtables.get<int32_t>();
    ab.n_groups = c.n_groups;
    ab.group = group;
    ab.window = c.window;
    ab.scale = scale;
    paged_attention(view, ab, dq.get<float>(), dout.get<float>(), nullptr);
    const std::vector<float> whole = download<float>(dout, want.size());
    EXPECT_LT(nmse(whole, want), 1e-10);
    // Split over blocks (the tiles' states merged by the second kernel): the same bits.
    const int64_t tiles = attention_tiles(n_context[1] - 1, 0);
    DeviceBuffer states(
        static_cast<size_t>(attention_tile_state_floats(n_tokens, c.n_heads, c.head_dim_v, tiles)) *
        sizeof(float));
    for (int32_t splits : {2, 3, kMaxAttentionSplits}) {
      DeviceBuffer split_out(want.size() * sizeof(float));
      paged_attention(view, ab, dq.get<float>(), split_out.get<float>(), nullptr,
                      AttentionSplit{splits, states.get<float>(), tiles});
      EXPECT_EQ(download<float>(split_out, want.size()), whole) << splits << " splits";
    }
  }
}

TEST_F(CudaConformance, CopyPagesCopiesEveryMember) {
  const int32_t members = 3;
  const int64_t n_pages = 10;
  const size_t k_page = 48;  // whole 16-byte units: the vector copy
  const size_t v_page = 44;  // not: the element copy
  std::vector<uint16_t> k(members * n_pages * k_page);
  std::vector<uint16_t> v(members * n_pages * v_page);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint16_t>(i * 7);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i * 5 + 1);
  const std::vector<int32_t> src = {2, 9};
  const std::vector<int32_t> dst = {4, 0};
  std::vector<uint16_t> k_want = k;
  std::vector<uint16_t> v_want = v;
  for (int32_t m = 0; m < members; ++m) {
    for (size_t i = 0; i < src.size(); ++i) {
      std::copy_n(k.begin() + (m * n_pages + src[i]) * k_page, k_page,
                  k_want.begin() + (m * n_pages + dst[i]) * k_page);
      std::copy_n(v.begin() + (m * n_pages + src[i]) * v_page, v_page,
                  v_want.begin() + (m * n_pages + dst[i]) * v_page);
    }
  }
  DeviceBuffer dk = upload(k);
  DeviceBuffer dv = upload(v);
  DeviceBuffer ds = upload(src);
  DeviceBuffer dd = upload(dst);
  copy_pages(dk.get<uint16_t>(), dv.get<uint16_t>(), members, n_pages, k_page, v_page,
             ds.get<int32_t>(), dd.get<int32_t>(), 2, nullptr);
  EXPECT_EQ(download<uint16_t>(dk, k.size()), k_want);
  EXPECT_EQ(download<uint16_t>(dv, v.size()), v_want);
}

// The floors bench-model measures a GPU against (cuda/cuda_backend.h), on small sizes: the
// kernels and the timing around them run and give a rate; bad arguments are refused.
TEST_F(CudaConformance, TheBenchmarkFloorsAreMeasured) {
  const double bandwidth = measure_read_bandwidth(0, size_t{8} << 20, 2);
  EXPECT_TRUE(std::isfinite(bandwidth) && bandwidth > 0.0) << bandwidth;
  const double flops = measure_bf16_gemm_flops(0, 64, 2);
  EXPECT_TRUE(std::isfinite(flops) && flops > 0.0) << flops;
  EXPECT_THROW(measure_read_bandwidth(0, 8, 1), Error);
  EXPECT_THROW(measure_bf16_gemm_flops(0, 8, 1), Error);
}

}  // namespace
}  // namespace llms::cuda
