// cuda/device_kernels: the CUDA kernels of the model runner, as host functions that launch them.
//
// Every pointer is a device pointer unless a parameter says otherwise; every function only
// enqueues work on `stream` (nothing synchronizes, nothing allocates) and reports a launch
// failure by throwing llms::Error(kInternal) with cudaGetErrorString's text (cuda/cuda_check.h).
// Shapes are checked by the caller (cuda/cuda_runner.cpp): these functions assume them.
//
// Matrices stay in their GGUF block format on the device (DeviceMatrix, row r at
// data + r * row_bytes), so decode streams exactly the file's bytes; the block decoders shared
// with the host tests are in cuda/block_decode.h. This header is plain C++ (no CUDA syntax but
// cuda/host_device.h's qualifiers), so host code compiled by the C++ compiler includes it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "host_device.h"

namespace llms::cuda {

struct DeviceMatrix {
  gguf::GgmlType type = gguf::GgmlType::kF32;
  const void* data = nullptr;  // device memory
  int64_t n_rows = 0;
  int64_t n_cols = 0;  // a whole number of the type's blocks
  size_t row_bytes = 0;
};

// Types the kernels multiply and dequantize: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K (what kernels::matmul takes on the CPU).
bool device_supports(gguf::GgmlType type);

// The most activation rows gemv() takes in one call; larger m goes through dequantize_bf16 and a
// cuBLAS GEMM (cuda/cuda_runner.cpp).
inline constexpr int32_t kMaxGemvRows = 8;

// Which kernel gemv() runs. kAuto: for every type but F32, when the matrix starts on a 16-byte
// boundary, each warp copies its row through shared memory with 16-byte loads and decodes it
// there (cuda/matmul.cu, gemv_staged_kernel); otherwise each lane decodes its sub-blocks straight
// from global memory. kSubBlocks forces the latter (the timings compare the two). Both give the
// same bits.
enum class GemvKernel { kAuto, kSubBlocks };

// y[i * w.n_rows + r] = sum_c W[r][c] * x[i * w.n_cols + c] for i < m (1 <= m <= kMaxGemvRows),
// r < w.n_rows; weights decoded in registers, f32 accumulation. May read up to 15 bytes past the
// matrix's last row (whole 16-byte words).
void gemv(const DeviceMatrix& w, const float* x, int32_t m, float* y, cudaStream_t stream,
          GemvKernel kernel = GemvKernel::kAuto);

// out[r * w.n_cols + c] = W[r][c] as bf16 bits (round to nearest even), r < n_rows (a prefix of
// the matrix's rows). The GEMM path multiplies these with bf16 activations on tensor cores.
void dequantize_bf16(const DeviceMatrix& w, int64_t n_rows, uint16_t* out, cudaStream_t stream);

// Activations for tiled_gemm: its blocks read whole tiles of this many rows.
inline constexpr int32_t kTiledGemmRowAlign = 64;

// y[i * ldy + r] = sum_c bf16(W[r][c]) * x_bf16[i * w.n_cols + c] for i < m, r < w.n_rows (ldy
// >= w.n_rows): tensor-core products of bf16 values with f32 sums, the weights decoded from
// their blocks into shared memory once per 64 activation rows (cuda/tiled_gemm.cu), for steps
// of a few dozen tokens. x_bf16 starts on a 32-byte boundary and holds m rounded up to
// kTiledGemmRowAlign rows (the rows past m are read, their products dropped).
void tiled_gemm(const DeviceMatrix& w, const uint16_t* x_bf16, int32_t m, float* y, int64_t ldy,
                cudaStream_t stream);

// out[i * w.n_cols + c] = W[rows[i]][c] * scale for i < n (embedding lookup; rows in device
// memory, each in [0, w.n_rows)).
void gather_rows(const DeviceMatrix& w, const int32_t* rows, int32_t n, float scale, float* out,
                 cudaStream_t stream);

// out[i] = x[i] as bf16 bits, i < n.
void f32_to_bf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

// y[r * dim + e] = x[r * dim + e] / sqrt(mean_e(x[r]^2) + eps) * weight[e], r < n_rows. y may
// equal x. Per-head norms pass n_rows = tokens * heads and dim = head_dim.
void rms_norm(const float* x, const float* weight, float* y, int32_t n_rows, int32_t dim, float eps,
              cudaStream_t stream);

// x[r * dim + e] += bias[e], r < n_rows.
void add_bias(float* x, const float* bias, int32_t n_rows, int32_t dim, cudaStream_t stream);

// x[i] += y[i], i < n.
void add(float* x, const float* y, int64_t n, cudaStream_t stream);

// Rotates every head of every token: x is [n_tokens][n_heads][head_dim], cos/sin are
// [n_tokens][head_dim / 2] (pair p of token t turns by the angle whose cos is cos[t * half + p]).
// neox: pair p is (x[p], x[p + half]) (RopeLayout::kHalves); else (x[2p], x[2p + 1]).
void rope(float* x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, const float* cos,
          const float* sin, bool neox, cudaStream_t stream);

// gate[i] = act(gate[i]) * up[i], i < n: act = silu (x / (1 + e^-x)) or gelu_tanh
// (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))).
void silu_mul(float* gate, const float* up, int64_t n, cudaStream_t stream);
void gelu_tanh_mul(float* gate, const float* up, int64_t n, cudaStream_t stream);

// The paged f16 KV cache of one layer. A page (KV block) of the pool holds block_size slots of
// page_heads KV heads; this layer's key of page p, KV head h, slot s starts at
//   k + ((p * page_heads + h) * block_size + s) * head_dim_k
// and its value likewise at v with head_dim_v (the runner points k and v at the pool of the
// layer's member slot; cuda/cuda_runner.h describes the pools).
struct KvLayerView {
  uint16_t* k = nullptr;  // f16 bits
  uint16_t* v = nullptr;
  int32_t block_size = 0;
  int32_t page_heads = 0;  // KV heads a page holds (the most of any layer sharing the pool)
  int32_t n_kv_heads = 0;  // this layer's (<= page_heads)
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
};

// Writes this step's keys and values (f32 [n_tokens][n_kv_heads][head_dim], rounded to f16) into
// the cache: token i goes to page pages[i], slot slots[i].
void write_kv(const KvLayerView& kv, const float* k, const float* v, int32_t n_tokens,
              const int32_t* pages, const int32_t* slots, cudaStream_t stream);

// One step's attention of a layer, after write_kv.
struct AttentionBatch {
  int32_t n_tokens = 0;
  int32_t n_heads = 0;                 // query heads; n_heads / kv.n_kv_heads share a KV head (GQA)
  const int32_t* token_seq = nullptr;  // [n_tokens]: index of the token's sequence
  const int32_t* token_pos = nullptr;  // [n_tokens]: its cache slot index (= its position)
  const int32_t* seq_table_begin = nullptr;  // [n_seqs]: offset of its block table in tables
  const int32_t* tables = nullptr;           // block tables, n_groups entries per block index
  int32_t n_groups = 1;                      // the layout's cache groups
  int32_t group = 0;                         // this layer's group: page of block b is
                                             //   tables[seq_table_begin[s] + b * n_groups + group]
  int32_t window = 0;  // 0: full causal attention; else keys (pos - window, pos]
  float scale = 1.0f;  // score = scale * q.k
};

// paged_attention cuts a token's keys into tiles at multiples of this many positions.
constexpr int32_t kAttentionTileKeys = 128;

// The first key a token at position pos sees with a window (0: none), and the tiles it spans
// (the kernels and the host's capacity check share these).
LLMS_HOST_DEVICE LLMS_FORCE_INLINE int32_t attention_first_key(int32_t pos, int32_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}
LLMS_HOST_DEVICE LLMS_FORCE_INLINE int32_t attention_tiles(int32_t pos, int32_t window) {
  return pos / kAttentionTileKeys - attention_first_key(pos, window) / kAttentionTileKeys + 1;
}

// How many thread blocks share one token's tiles. With splits = 1 a block per (token, KV head)
// walks all of them, which suits steps of many tokens; a decode step of a few tokens then has
// too few blocks to fill the GPU (flash-decoding's observation), so splits > 1 blocks take
// every splits-th tile each and store each tile's softmax state (max, sum, weighted values) in
// tile_states, which a second kernel merges in order. The output is the same bits for any
// splits: a token's tiles and the order they merge in depend only on its own keys.
struct AttentionSplit {
  int32_t splits = 1;
  float* tile_states = nullptr;  // splits > 1: attention_tile_state_floats(...) floats
  int64_t tile_capacity = 0;     // tiles per (token, query head) it holds; every token's
                                 // attention_tiles(pos, window) must fit (the caller checks)
};

// Floats of tile states for n_tokens x n_heads x tiles.
int64_t attention_tile_state_floats(int32_t n_tokens, int32_t n_heads, int32_t head_dim_v,
                                    int64_t tiles);

// The splits that give a step of n_tokens about target_blocks thread blocks (at least 1, at
// most kMaxAttentionSplits).
constexpr int32_t kMaxAttentionSplits = 64;
int32_t attention_splits_for(int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads,
                             int32_t target_blocks);

// out[i][h][:] = sum_j softmax_j(scale * q[i][h] . k_j) v_j over the keys j that token i sees:
// cache slots max(0, pos - window + 1) .. pos of its sequence (all of 0 .. pos with window 0),
// read from the pages its block table names. q: [n_tokens][n_heads][head_dim_k] f32; out:
// [n_tokens][n_heads][head_dim_v] f32. Online softmax in f32 over tiles of kAttentionTileKeys
// keys; head dims up to 256. A token's output does not depend on the other tokens of the step
// nor on split.
void paged_attention(const KvLayerView& kv, const AttentionBatch& batch, const float* q, float* out,
                     cudaStream_t stream, const AttentionSplit& split = {});

// Copies page src[i] to page dst[i] in every member's pool (copy-on-write), for i < n. Member m's
// page p of keys is the k_page_elements f16 values at k_pool + (m * n_pages + p) *
// k_page_elements; values likewise in v_pool.
void copy_pages(uint16_t* k_pool, uint16_t* v_pool, int32_t n_members, int64_t n_pages,
                size_t k_page_elements, size_t v_page_elements, const int32_t* src,
                const int32_t* dst, int32_t n, cudaStream_t stream);

}  // namespace llms::cuda
