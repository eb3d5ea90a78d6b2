// The CUDA backend against the CPU (llama.cpp's test-backend-ops idea): every kernel of
// cuda/device_kernels.h on random inputs of many shapes, compared with the CPU's scalar
// reference by normalized squared error (or bit for bit where the operation is exact), and the
// CUDA runner end to end against the CPU runner on tiny models of each family: the same greedy
// tokens and logits within tolerance. Needs an NVIDIA GPU: without one every test skips and
// says why (cuda::probe()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cublas.h"
#include "cuda/cuda_backend.h"
#include "cuda_runner.h"
#include "device_buffer.h"
#include "device_kernels.h"
#include "gguf/gguf_file.h"
#include "kernels/ops.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "quant/float_convert.h"
#include "quant/quant.h"

namespace llms::cuda {
namespace {

using gguf::GgmlType;

class CudaConformance : public ::testing::Test {
 protected:
  DeviceInfo device_;
  void SetUp() override {
    const Probe p = probe();
    // The device run sets LLMS_REQUIRE_GPU=1: there a missing GPU (an old driver, a libcuda
    // the runtime cannot load) is a failure, not a skip that would pass for a clean run.
    const char* require = std::getenv("LLMS_REQUIRE_GPU");
    if (p.devices.empty() && require != nullptr && std::string(require) == "1") {
      FAIL() << "LLMS_REQUIRE_GPU=1 and no GPU: " << p.why_none;
    }
    if (p.devices.empty()) GTEST_SKIP() << "no GPU: " << p.why_none;
    if (p.devices[0].compute_major < 8) {
      GTEST_SKIP() << p.devices[0].name << " has compute capability " << p.devices[0].compute_major
                   << "." << p.devices[0].compute_minor
                   << "; the kernels are built for 8.0 and later";
    }
    device_ = p.devices[0];
    check(cudaSetDevice(0), "cudaSetDevice");
  }
};

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(1, v.size() * sizeof(T)));
  if (!v.empty())
    check(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return b;
}

template <class T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<T> v(n);
  if (n > 0)
    check(cudaMemcpy(v.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return v;
}

// sum (got - want)^2 / sum want^2, as test-backend-ops measures a backend against the CPU.
double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0;
  double ref = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  return ref > 0.0 ? err / ref : err;
}

std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A matrix of random values stored as `type`, and its values as the CPU decodes them.
struct HostMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // n_rows x n_cols
  size_t row_bytes = 0;
};

HostMatrix random_matrix(GgmlType type, int64_t rows, int64_t cols, uint64_t seed) {
  HostMatrix m;
  m.row_bytes = *gguf::ggml_row_bytes(type, static_cast<uint64_t>(cols));
  m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
  m.values.resize(static_cast<size_t>(rows * cols));
  const std::vector<float> src = random_floats(static_cast<size_t>(rows * cols), seed);
  for (int64_t r = 0; r < rows; ++r) {
    quant::quantize_row(type, src.data() + r * cols, m.bytes.data() + r * m.row_bytes, cols);
    quant::dequantize_row(type, m.bytes.data() + r * m.row_bytes, m.values.data() + r * cols, cols);
  }
  return m;
}

const GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,
                           GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

bool k_quant(GgmlType t) {
  return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
}

TEST_F(CudaConformance, GemvMatchesTheDecodedWeightsForEveryTypeAndShape) {
  for (GgmlType type : kTypes) {
    const std::vector<int64_t> widths =
        k_quant(type) ? std::vector<int64_t>{256, 768, 4096} : std::vector<int64_t>{32, 896, 4096};
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
          gemv(DeviceMatrix{type, dw.get(), rows, cols, w.row_bytes}, dx.get<float>(), m,
               dy.get<float>(), nullptr);
          EXPECT_LT(nmse(download<float>(dy, want.size()), want), 1e-10);
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
  if (gemm_path() != "cublas") GTEST_SKIP() << "no cuBLAS here: " << gemm_path();
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
  const Case cases[] = {{64, 64, 16, 4, 2, 2, 0, 1},   {128, 128, 16, 8, 1, 1, 0, 1},
                        {256, 256, 7, 2, 2, 2, 5, 2},  {80, 64, 16, 6, 3, 4, 33, 2},
                        {128, 128, 32, 4, 4, 4, 0, 1}, {64, 64, 16, 4, 2, 3, 12, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim_k) + " block " +
                 std::to_string(c.block_size) + " window " + std::to_string(c.window));
    // Two sequences: one prefill chunk of 19 tokens after 40 cached, one decode at position 70.
    const std::vector<int32_t> n_context = {59, 71};
    const std::vector<int32_t> n_query = {19, 1};
    std::mt19937_64 rng(9);
    const int32_t n_pages = 64;
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
    EXPECT_LT(nmse(download<float>(dout, want.size()), want), 1e-10);
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

// End to end: the CUDA runner against the CPU runner on the same tiny model and the same
// batches. The runners sit side by side; every step goes to both and every logits row is
// compared: within a normalized error `tolerance` (1e-3 leaves room for bf16 GEMM products in
// steps of more than 8 tokens and the CPU's 8-bit activations on quantized weights), and the
// argmax too unless the CPU's top two are within 5 % of the row's RMS (a tie either rounding may
// break).
class TwinRunners {
 public:
  // use_graphs: small steps replay captured graphs (some tests run eagerly, so a graph bug and
  // a kernel bug show apart).
  TwinRunners(const model::TinyModelSpec& spec, const DeviceInfo& device, bool use_graphs,
              int64_t slice_elements)
      : bytes_(model::build_tiny_model(spec).to_bytes()),
        file_(gguf::GgufFile::from_bytes(bytes_)),
        cpu_(file_, std::make_shared<ThreadPool>(2)),
        gpu_(file_, device, 0.5, use_graphs, slice_elements),
        layout_(cpu_.config().windowed_kv_layout()) {
    cpu_.allocate_kv(kBlock, kBlocks, kv::KvCacheType::kF16, layout_);
    gpu_.allocate_kv(kBlock, kBlocks, kv::KvCacheType::kF16, layout_);
  }
  static constexpr int32_t kBlock = 16;
  static constexpr int32_t kBlocks = 64;

  const kv::KvGroupLayout& layout() const { return layout_; }
  model::CpuRunner& cpu() { return cpu_; }
  CudaRunner& gpu() { return gpu_; }

  // Runs `batch` on both; returns the CPU's argmax of each row.
  std::vector<int32_t> step(const kv::StepBatch& batch, double tolerance, const std::string& what) {
    const model::LogitsView a = cpu_.execute(batch);
    std::vector<std::vector<float>> want;
    for (int32_t r = 0; r < a.n_rows; ++r) want.emplace_back(a.row(r).begin(), a.row(r).end());
    const model::LogitsView b = gpu_.execute(batch);
    EXPECT_EQ(b.n_rows, a.n_rows) << what;
    EXPECT_EQ(b.n_vocab, a.n_vocab) << what;
    std::vector<int32_t> tops;
    for (int32_t r = 0; r < std::min(a.n_rows, b.n_rows); ++r) {
      const std::vector<float> got(b.row(r).begin(), b.row(r).end());
      const std::vector<float>& w = want[static_cast<size_t>(r)];
      EXPECT_LT(nmse(got, w), tolerance) << what << " row " << r;
      double rms = 0.0;
      for (float v : w) rms += static_cast<double>(v) * v;
      rms = std::sqrt(rms / static_cast<double>(w.size()));
      std::vector<float> sorted = w;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      const auto cpu_top = static_cast<int32_t>(std::max_element(w.begin(), w.end()) - w.begin());
      const auto gpu_top =
          static_cast<int32_t>(std::max_element(got.begin(), got.end()) - got.begin());
      if (sorted[0] - sorted[1] > 0.05 * rms) {
        EXPECT_EQ(gpu_top, cpu_top) << what << " row " << r;
      }
      tops.push_back(cpu_top);
    }
    return tops;
  }

 private:
  std::vector<uint8_t> bytes_;
  gguf::GgufFile file_;
  model::CpuRunner cpu_;
  CudaRunner gpu_;
  kv::KvGroupLayout layout_;
};

// A sequence's block table: pages first_page, first_page + 1, ... interleaved per cache group,
// with a windowed group's blocks wholly before position `lowest_query`'s window given back.
std::vector<kv::BlockId> table_for(const kv::KvGroupLayout& layout, int32_t first_page,
                                   int32_t n_context, int32_t lowest_query) {
  const int32_t groups = layout.n_groups();
  const int32_t blocks = (n_context + TwinRunners::kBlock - 1) / TwinRunners::kBlock;
  std::vector<kv::BlockId> table;
  for (int32_t b = 0; b < blocks; ++b) {
    for (int32_t g = 0; g < groups; ++g) {
      const int64_t window = layout.window(g);
      const bool before_window =
          window > 0 && (b + 1) * TwinRunners::kBlock <= lowest_query - window + 1;
      table.push_back(before_window ? kv::kNoBlock : first_page + b * groups + g);
    }
  }
  return table;
}

struct EndToEndCase {
  std::string architecture;
  GgmlType type;
  uint32_t n_embd;
  uint32_t n_layers;
};

class CudaEndToEnd : public CudaConformance, public ::testing::WithParamInterface<EndToEndCase> {
 protected:
  model::TinyModelSpec spec() const {
    const EndToEndCase& p = GetParam();
    model::TinyModelSpec s;
    s.architecture = p.architecture;
    s.weight_type = p.type;
    s.n_embd = p.n_embd;
    s.n_ff = 2 * p.n_embd;
    s.n_heads = 4;
    s.n_kv_heads = 2;
    s.n_layers = p.n_layers;
    s.sliding_window = p.architecture == "gemma3" ? 16 : 0;
    return s;
  }
};

// A 40-token prompt in one step (the GEMM path, its slices small enough that every layer
// matrix takes several), then 24 greedy steps fed the CPU's tokens; Gemma 3's windowed layers
// get their early blocks given back as decoding passes them.
TEST_P(CudaEndToEnd, GreedyStepsMatchTheCpuRunner) {
  TwinRunners twins(spec(), device_, /*use_graphs=*/true, /*slice_elements=*/4096);
  std::mt19937 rng(3);
  std::vector<int32_t> step_tokens;
  for (int i = 0; i < 40; ++i) step_tokens.push_back(static_cast<int32_t>(rng() % 200) + 10);
  int32_t cached = 0;
  for (int step = 0; step < 25; ++step) {
    kv::StepBatch batch;
    batch.n_kv_groups = twins.layout().n_groups();
    const int32_t n_ctx = cached + static_cast<int32_t>(step_tokens.size());
    const auto table = table_for(twins.layout(), 0, n_ctx, cached);
    batch.add_sequence(0, step_tokens, cached, table, 1);
    const auto tops = twins.step(batch, 1e-3, "step " + std::to_string(step));
    ASSERT_EQ(tops.size(), 1u);
    cached = n_ctx;
    step_tokens = {tops[0]};
  }
  EXPECT_GT(twins.gpu().graph_launches(), 0) << "the decode steps did not replay a graph";
}

// Two sequences in one step: one prefilling in chunks with its last three rows asked for, one
// decoding; then the decoding one forks its last block (copy-on-write) and goes on from the
// copy. A step of more than 8 logits rows takes the output matrix 8 rows at a time.
TEST_P(CudaEndToEnd, MixedBatchesAndBlockCopiesMatchTheCpuRunner) {
  TwinRunners twins(spec(), device_, /*use_graphs=*/false, CudaRunner::kDefaultWeightSliceElements);
  const kv::KvGroupLayout& layout = twins.layout();
  std::mt19937 rng(5);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng() % 200) + 10);
    return t;
  };
  const int32_t b_first_page = 32;  // sequence B's pages; A's start at 0
  // B: a 20-token prompt alone first.
  int32_t b_cached = 0;
  {
    kv::StepBatch batch;
    batch.n_kv_groups = layout.n_groups();
    const auto table = table_for(layout, b_first_page, 20, 0);
    batch.add_sequence(1, random_tokens(20), 0, table, 1);
    twins.step(batch, 1e-3, "B prompt");
    b_cached = 20;
  }
  int32_t a_cached = 0;
  for (int step = 0; step < 4; ++step) {
    kv::StepBatch batch;
    batch.n_kv_groups = layout.n_groups();
    const int32_t a_chunk = step < 3 ? 12 : 1;
    const auto a_table = table_for(layout, 0, a_cached + a_chunk, a_cached);
    const auto b_table = table_for(layout, b_first_page, b_cached + 1, b_cached);
    batch.add_sequence(0, random_tokens(a_chunk), a_cached, a_table, std::min(a_chunk, 3));
    batch.add_sequence(1, random_tokens(1), b_cached, b_table, 1);
    twins.step(batch, 1e-3, "mixed step " + std::to_string(step));
    a_cached += a_chunk;
    ++b_cached;
  }
  // B forks: its last block's pages are copied to fresh ones and B goes on there.
  const int32_t groups = layout.n_groups();
  const int32_t last_block = (b_cached - 1) / TwinRunners::kBlock;
  std::vector<kv::BlockCopy> copies;
  const int32_t fork_page = 56;
  for (int32_t g = 0; g < groups; ++g) {
    copies.push_back({b_first_page + last_block * groups + g, fork_page + g});
  }
  twins.cpu().copy_blocks(copies);
  twins.gpu().copy_blocks(copies);
  auto b_table = table_for(layout, b_first_page, b_cached + 1, b_cached);
  for (int32_t g = 0; g < groups; ++g) {
    b_table[static_cast<size_t>(last_block * groups + g)] = fork_page + g;
  }
  // Ten rows of A (more than one GEMV call of 8) beside B's decode on the forked block.
  kv::StepBatch batch;
  batch.n_kv_groups = groups;
  const auto a_table = table_for(layout, 0, a_cached + 10, a_cached);
  batch.add_sequence(0, random_tokens(10), a_cached, a_table, 10);
  batch.add_sequence(1, random_tokens(1), b_cached, b_table, 1);
  EXPECT_EQ(twins.step(batch, 1e-3, "after the fork").size(), 11u);
}

// F32 weights and steps of at most 8 tokens: no bf16 anywhere and f32 activations on both
// sides, so the runners agree a thousand times more tightly than the bf16 bound above (f16 KV
// rounding of nearly equal keys is what is left).
TEST_F(CudaConformance, F32ModelInSmallStepsMatchesTheCpuTightly) {
  model::TinyModelSpec s;
  s.architecture = "qwen2";
  s.n_layers = 3;
  TwinRunners twins(s, device_, /*use_graphs=*/true, CudaRunner::kDefaultWeightSliceElements);
  std::mt19937 rng(7);
  int32_t cached = 0;
  for (int step = 0; step < 8; ++step) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 8; ++i) tokens.push_back(static_cast<int32_t>(rng() % 200) + 10);
    kv::StepBatch batch;
    const auto table = table_for(twins.layout(), 0, cached + 8, cached);
    batch.add_sequence(0, tokens, cached, table, 8);
    twins.step(batch, 1e-6, "step " + std::to_string(step));
    cached += 8;
  }
}

// Captured step graphs replay exactly the kernels an eager step launches: the same logits bit
// for bit, step after step (each decode step of a shape replays the graph its first one made,
// with new tokens, positions and a block table that grows a block every 16 tokens), and with
// two sequences in a step (another shape, another graph).
TEST_F(CudaConformance, StepGraphsGiveTheEagerStepsBitForBit) {
  model::TinyModelSpec s;
  s.architecture = "llama";
  s.weight_type = GgmlType::kQ4_K;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_layers = 2;
  const auto bytes = model::build_tiny_model(s).to_bytes();
  const gguf::GgufFile file = gguf::GgufFile::from_bytes(bytes);
  CudaRunner graphs(file, device_, 0.5, /*use_graphs=*/true);
  CudaRunner eager(file, device_, 0.5, /*use_graphs=*/false);
  const kv::KvGroupLayout layout = graphs.config().windowed_kv_layout();
  for (CudaRunner* r : {&graphs, &eager}) r->allocate_kv(16, 32, kv::KvCacheType::kF16, layout);
  std::mt19937 rng(11);
  std::vector<int32_t> cached = {0, 0};
  auto run_both = [&](const kv::StepBatch& batch, const std::string& what) {
    const model::LogitsView a = graphs.execute(batch);
    const std::vector<float> got(a.data, a.data + static_cast<size_t>(a.n_rows) * a.n_vocab);
    const model::LogitsView b = eager.execute(batch);
    const std::vector<float> want(b.data, b.data + static_cast<size_t>(b.n_rows) * b.n_vocab);
    ASSERT_EQ(got, want) << what;
  };
  for (int step = 0; step < 40; ++step) {
    kv::StepBatch batch;
    const int n_seqs = step < 20 ? 1 : 2;
    for (int q = 0; q < n_seqs; ++q) {
      const int32_t n_new = step == 0 || (step == 20 && q == 1) ? 12 : 1;  // prompts, then decode
      std::vector<int32_t> tokens;
      for (int i = 0; i < n_new; ++i) tokens.push_back(static_cast<int32_t>(rng() % 200) + 10);
      const auto table = table_for(layout, 16 * q, cached[q] + n_new, cached[q]);
      batch.add_sequence(q, tokens, cached[q], table, 1);
      cached[q] += n_new;
    }
    ASSERT_NO_FATAL_FAILURE(run_both(batch, "step " + std::to_string(step)));
  }
  // Every step of up to 8 tokens but the first of each shape replayed a graph.
  EXPECT_GE(graphs.graph_launches(), 30);
  EXPECT_EQ(eager.graph_launches(), 0);
}

// Kernel timings for the device run (LLMS_CUDA_TIMING=1; skipped otherwise, and never an
// assertion on time): the batch-1 GEMV per weight type on 7B/8B-shaped matrices and decode
// attention over a long context, each as bytes read per second and as a fraction of the read
// bandwidth measured on the device in the same run. One JSON line per kernel on stdout.
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
    for (const Shape& shape : {Shape{4096, 4096}, Shape{14336, 4096}, Shape{4096, 14336}}) {
      const size_t row_bytes = *gguf::ggml_row_bytes(type, static_cast<uint64_t>(shape.cols));
      const auto bytes =
          model::fast_weight_bytes(type, static_cast<uint64_t>(shape.rows * shape.cols), 1, 0.05f);
      DeviceBuffer dw = upload(bytes);
      DeviceBuffer dx = upload(random_floats(static_cast<size_t>(shape.cols), 2));
      DeviceBuffer dy(static_cast<size_t>(shape.rows) * sizeof(float));
      const DeviceMatrix w{type, dw.get(), shape.rows, shape.cols, row_bytes};
      const double s =
          time_calls([&] { gemv(w, dx.get<float>(), 1, dy.get<float>(), stream.get()); });
      const double rate = static_cast<double>(bytes.size()) / s;
      std::printf(
          "{\"kernel\": \"gemv\", \"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
          "\"us\": %.2f, \"bytes_per_s\": %.4g, \"fraction_of_bandwidth\": %.3f}\n",
          std::string(gguf::ggml_type_name(type)).c_str(), static_cast<long long>(shape.rows),
          static_cast<long long>(shape.cols), s * 1e6, rate, rate / bandwidth);
    }
  }
  // Decode attention: one token per sequence, 8 sequences x 4,096 cached tokens, 32 query heads
  // on 8 KV heads of 128 (Llama-3-8B's layer), block size 16.
  {
    const int32_t n_seqs = 8;
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
    const double s = time_calls(
        [&] { paged_attention(view, ab, dq.get<float>(), dout.get<float>(), stream.get()); });
    const double rate = static_cast<double>(k.bytes() + v.bytes()) / s;
    std::printf(
        "{\"kernel\": \"paged_attention_decode\", \"seqs\": %d, \"context\": %d, "
        "\"us\": %.2f, \"kv_bytes_per_s\": %.4g, \"fraction_of_bandwidth\": %.3f}\n",
        n_seqs, ctx, s * 1e6, rate, rate / bandwidth);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaEndToEnd,
                         ::testing::Values(EndToEndCase{"qwen2", GgmlType::kF32, 64, 3},
                                           EndToEndCase{"llama", GgmlType::kQ8_0, 128, 3},
                                           EndToEndCase{"qwen3", GgmlType::kQ4_K, 256, 3},
                                           EndToEndCase{"gemma3", GgmlType::kF16, 128, 7},
                                           EndToEndCase{"qwen2", GgmlType::kQ6_K, 256, 2},
                                           EndToEndCase{"llama", GgmlType::kQ4_0, 128, 2},
                                           EndToEndCase{"qwen2", GgmlType::kQ5_K, 256, 2},
                                           EndToEndCase{"llama", GgmlType::kBF16, 64, 2}),
                         [](const ::testing::TestParamInfo<EndToEndCase>& param_info) {
                           const EndToEndCase& c = param_info.param;
                           return c.architecture + "_" + std::string(gguf::ggml_type_name(c.type));
                         });

}  // namespace
}  // namespace llms::cuda
