// cuda/attention: the paged f16 KV cache on the GPU: write_kv, paged_attention and copy_pages
// (contracts in cuda/device_kernels.h).
//
// Layout (KvLayerView): the key of page p, KV head h, slot s is head_dim_k contiguous f16 values
// at k + ((p * page_heads + h) * block_size + s) * head_dim_k; values likewise with head_dim_v.
// Offsets are computed in 64 bits: a large pool passes 2^31 elements.
//
// paged_attention semantics, as model/paged_attention.cpp computes them without sinks or trees:
// token i (sequence s = token_seq[i], position pos = token_pos[i]) and query head h attend with
// KV head h / (n_heads / n_kv_heads) to the keys j in [lo, pos], lo = max(0, pos - window + 1)
// (0 without a window); key j is slot j % block_size of page
// tables[seq_table_begin[s] + (j / block_size) * n_groups + group]. A page entry of -1 (given
// back: outside the window, or evicted) contributes nothing and is never read, as the CPU skips
// such blocks. score_j = scale * (q . k_j) in f32, softmax over the visible keys, out =
// sum_j p_j v_j. A token that sees no key at all (every page given back; the caller never asks
// for one) gets zeros rather than NaN.
//
// Launch: one 128-thread block (4 warps) per (token, query head). Warp w walks the keys lo + w,
// lo + w + 4, ... with an online softmax of its own (running max, running sum, and a slice of the
// output accumulator in each lane: dims lane, lane + 32, ...); per key the 32 lanes split the
// head dims and shuffle-reduce the dot product. The four warps' states merge through shared
// memory at the end. The per-lane slices are sized by a template parameter (2, 4 or 8 dims per
// lane: head dims up to 64, 128, 256), chosen from max(head_dim_k, head_dim_v).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "device_kernels.h"
#include "launch.h"
#include "util/error.h"

namespace llms::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxHeadDim = 256;

constexpr int kAttentionWarps = 4;
constexpr int kAttentionThreads = kAttentionWarps * kWarpSize;

constexpr int kWriteThreads = 128;

constexpr int kCopyThreads = 256;
constexpr int64_t kMaxCopyBlocksX = 1024;
constexpr int64_t kMaxGridY = 65535;

__device__ __forceinline__ float half_bits_to_float(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

__device__ __forceinline__ uint16_t float_to_half_bits(float f) {
  return __half_as_ushort(__float2half_rn(f));
}

// Token i's keys and values of KV head blockIdx.y into its page and slot. Each thread converts
// and stores dims threadIdx.x, threadIdx.x + 128, ...
__global__ void __launch_bounds__(kWriteThreads)
    write_kv_kernel(KvLayerView kv, const float* k, const float* v, const int32_t* pages,
                    const int32_t* slots) {
  const int64_t i = blockIdx.x;
  const int32_t h = static_cast<int32_t>(blockIdx.y);
  const int32_t page = pages[i];
  // A token always has a page; an entry of -1 would address before the pool, so write nothing.
  if (page < 0) return;
  const int64_t head_slot =
      (static_cast<int64_t>(page) * kv.page_heads + h) * kv.block_size + slots[i];
  const int64_t src_head = i * kv.n_kv_heads + h;
  const float* ks = k + src_head * kv.head_dim_k;
  const float* vs = v + src_head * kv.head_dim_v;
  uint16_t* kd = kv.k + head_slot * kv.head_dim_k;
  uint16_t* vd = kv.v + head_slot * kv.head_dim_v;
  for (int32_t e = static_cast<int32_t>(threadIdx.x); e < kv.head_dim_k; e += kWriteThreads) {
    kd[e] = float_to_half_bits(ks[e]);
  }
  for (int32_t e = static_cast<int32_t>(threadIdx.x); e < kv.head_dim_v; e += kWriteThreads) {
    vd[e] = float_to_half_bits(vs[e]);
  }
}

// The device copy of an AttentionBatch with the KV head group resolved on the host.
struct AttentionParams {
  const uint16_t* k;
  const uint16_t* v;
  int32_t block_size;
  int32_t page_heads;
  int32_t head_dim_k;
  int32_t head_dim_v;
  int32_t q_per_kv;  // query heads per KV head
  int32_t n_heads;
  const int32_t* token_seq;
  const int32_t* token_pos;
  const int32_t* seq_table_begin;
  const int32_t* tables;
  int32_t n_groups;
  int32_t group;
  int32_t window;
  float scale;
  const float* q;
  float* out;
};

__device__ __forceinline__ float warp_sum(float v) {
  // xor butterfly: every lane ends with the full dot product, summed in the same order.
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// kPerLane: head dims per lane, a lane owning dims lane + 32 * t for t < kPerLane (so a warp's
// loads of one key are contiguous).
template <int kPerLane>
__global__ void __launch_bounds__(kAttentionThreads) paged_attention_kernel(AttentionParams p) {
  static_assert(kPerLane * kWarpSize <= kMaxHeadDim);
  __shared__ float warp_max[kAttentionWarps];
  __shared__ float warp_sum_exp[kAttentionWarps];
  __shared__ float warp_acc[kAttentionWarps][kPerLane * kWarpSize];

  const int64_t i = blockIdx.x;
  const int32_t h = static_cast<int32_t>(blockIdx.y);
  const int32_t warp = static_cast<int32_t>(threadIdx.x) / kWarpSize;
  const int32_t lane = static_cast<int32_t>(threadIdx.x) % kWarpSize;
  const int32_t kv_head = h / p.q_per_kv;
  const int32_t pos = p.token_pos[i];
  const int32_t lo = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  const int32_t* table = p.tables + p.seq_table_begin[p.token_seq[i]];

  // The query in registers; dims past head_dim_k are 0 so they add nothing to the dot.
  const float* q = p.q + (i * p.n_heads + h) * p.head_dim_k;
  float qr[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int32_t e = lane + t * kWarpSize;
    qr[t] = e < p.head_dim_k ? q[e] : 0.0f;
  }

  // This warp's online softmax: m the running max of its scores, l the sum of exp(score - m),
  // acc the sum of exp(score - m) * v (this lane's dims). A warp that sees no key keeps
  // m = -inf, l = 0, acc = 0; the merge below gives it weight 0.
  float m = -INFINITY;
  float l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) acc[t] = 0.0f;

  // j is the same for all lanes of a warp, so every branch below is warp-uniform and the
  // full-mask shuffles see all 32 lanes.
  for (int32_t j = lo + warp; j <= pos; j += kAttentionWarps) {
    const int32_t page = table[static_cast<int64_t>(j / p.block_size) * p.n_groups + p.group];
    if (page < 0) continue;  // given back: no key there
    const int64_t head_slot =
        (static_cast<int64_t>(page) * p.page_heads + kv_head) * p.block_size + j % p.block_size;
    const uint16_t* kj = p.k + head_slot * p.head_dim_k;
    const uint16_t* vj = p.v + head_slot * p.head_dim_v;
    float partial = 0.0f;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int32_t e = lane + t * kWarpSize;
      if (e < p.head_dim_k) partial += qr[t] * half_bits_to_float(kj[e]);
    }
    const float score = p.scale * warp_sum(partial);
    const float m_new = fmaxf(m, score);
    // m == m_new covers the first key (both -inf only for a -inf score) without forming
    // exp(-inf - -inf) = NaN; otherwise m < m_new and the old state shrinks by exp(m - m_new).
    const float correction = m == m_new ? 1.0f : expf(m - m_new);
    const float weight = score == -INFINITY ? 0.0f : expf(score - m_new);
    l = l * correction + weight;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int32_t e = lane + t * kWarpSize;
      const float ve = e < p.head_dim_v ? half_bits_to_float(vj[e]) : 0.0f;
      acc[t] = acc[t] * correction + weight * ve;
    }
    m = m_new;
  }

  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum_exp[warp] = l;
  }
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) warp_acc[warp][lane + t * kWarpSize] = acc[t];
  __syncthreads();

  // Merge: with M the largest warp max, warp w's state scales by exp(m_w - M); a warp without
  // keys (m_w = -inf) scales by 0 explicitly, since M may be -inf too. Every thread computes the
  // same factors from shared memory (nothing writes it after the barrier), then writes its dims.
  float max_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kAttentionWarps; ++w) max_all = fmaxf(max_all, warp_max[w]);
  float factor[kAttentionWarps];
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kAttentionWarps; ++w) {
    factor[w] = warp_max[w] == -INFINITY ? 0.0f : expf(warp_max[w] - max_all);
    total += factor[w] * warp_sum_exp[w];
  }
  const float inv_total = total > 0.0f ? 1.0f / total : 0.0f;
  float* out = p.out + (i * p.n_heads + h) * p.head_dim_v;
  for (int32_t e = static_cast<int32_t>(threadIdx.x); e < p.head_dim_v; e += kAttentionThreads) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kAttentionWarps; ++w) o += factor[w] * warp_acc[w][e];
    out[e] = o * inv_total;
  }
}

// Copies one page of f16 values per (i, member, pool) in units of T (uint4: 8 values, where the
// host found both page sizes and pools 16-byte aligned; else single values). blockIdx.z picks the
// pool (0 keys, 1 values); blockIdx.y walks the (i, member) pairs and blockIdx.x the page.
struct CopyParams {
  void* pool[2];
  int64_t page_units[2];  // a page's size in units of T
  int64_t n_pages;
  const int32_t* src;
  const int32_t* dst;
  int32_t n;
  int32_t n_members;
};

template <class T>
__global__ void __launch_bounds__(kCopyThreads) copy_pages_kernel(CopyParams p) {
  // Selected, not indexed: a dynamic index into the parameter struct would copy it to local
  // memory.
  const bool values = blockIdx.z != 0;
  T* pool = static_cast<T*>(values ? p.pool[1] : p.pool[0]);
  const int64_t units = values ? p.page_units[1] : p.page_units[0];
  const int64_t n_pairs = static_cast<int64_t>(p.n) * p.n_members;
  const int64_t x_stride = static_cast<int64_t>(gridDim.x) * kCopyThreads;
  for (int64_t pair = blockIdx.y; pair < n_pairs; pair += gridDim.y) {
    const int64_t i = pair / p.n_members;
    const int64_t member = pair - i * p.n_members;
    const T* from = pool + (member * p.n_pages + p.src[i]) * units;
    T* to = pool + (member * p.n_pages + p.dst[i]) * units;
    for (int64_t u = static_cast<int64_t>(blockIdx.x) * kCopyThreads + threadIdx.x; u < units;
         u += x_stride) {
      to[u] = from[u];
    }
  }
}

template <int kPerLane>
void launch_attention(const AttentionParams& params, int32_t n_tokens, int32_t n_heads,
                      cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_tokens), static_cast<unsigned>(n_heads));
  launch("paged_attention_kernel", paged_attention_kernel<kPerLane>, grid, kAttentionThreads,
         stream, params);
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

void write_kv(const KvLayerView& kv, const float* k, const float* v, int32_t n_tokens,
              const int32_t* pages, const int32_t* slots, cudaStream_t stream) {
  if (n_tokens <= 0 || kv.n_kv_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(n_tokens), static_cast<unsigned>(kv.n_kv_heads));
  launch("write_kv_kernel", write_kv_kernel, grid, kWriteThreads, stream, kv, k, v, pages, slots);
}

void paged_attention(const KvLayerView& kv, const AttentionBatch& batch, const float* q, float* out,
                     cudaStream_t stream) {
  const int32_t hdk = kv.head_dim_k;
  const int32_t hdv = kv.head_dim_v;
  if (hdk <= 0 || hdv <= 0 || hdk > kMaxHeadDim || hdv > kMaxHeadDim) {
    throw Error(Error::Kind::kUnsupported, "CUDA paged_attention: head dims must be in [1, " +
                                               std::to_string(kMaxHeadDim) + "], got " +
                                               std::to_string(hdk) + " (keys) and " +
                                               std::to_string(hdv) + " (values)");
  }
  if (kv.n_kv_heads <= 0 || batch.n_heads % kv.n_kv_heads != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                "CUDA paged_attention: " + std::to_string(batch.n_heads) +
                    " query heads are not a multiple of " + std::to_string(kv.n_kv_heads) +
                    " KV heads");
  }
  if (batch.n_tokens <= 0 || batch.n_heads <= 0) return;

  AttentionParams params{};
  params.k = kv.k;
  params.v = kv.v;
  params.block_size = kv.block_size;
  params.page_heads = kv.page_heads;
  params.head_dim_k = hdk;
  params.head_dim_v = hdv;
  params.q_per_kv = batch.n_heads / kv.n_kv_heads;
  params.n_heads = batch.n_heads;
  params.token_seq = batch.token_seq;
  params.token_pos = batch.token_pos;
  params.seq_table_begin = batch.seq_table_begin;
  params.tables = batch.tables;
  params.n_groups = batch.n_groups;
  params.group = batch.group;
  params.window = batch.window;
  params.scale = batch.scale;
  params.q = q;
  params.out = out;

  const int32_t widest = std::max(hdk, hdv);
  if (widest <= 2 * kWarpSize) {
    launch_attention<2>(params, batch.n_tokens, batch.n_heads, stream);
  } else if (widest <= 4 * kWarpSize) {
    launch_attention<4>(params, batch.n_tokens, batch.n_heads, stream);
  } else {
    launch_attention<8>(params, batch.n_tokens, batch.n_heads, stream);
  }
}

void copy_pages(uint16_t* k_pool, uint16_t* v_pool, int32_t n_members, int64_t n_pages,
                size_t k_page_elements, size_t v_page_elements, const int32_t* src,
                const int32_t* dst, int32_t n, cudaStream_t stream) {
  if (n <= 0 || n_members <= 0) return;
  CopyParams params{};
  params.pool[0] = k_pool;
  params.pool[1] = v_pool;
  params.n_pages = n_pages;
  params.src = src;
  params.dst = dst;
  params.n = n;
  params.n_members = n_members;
  // 16-byte units when every page starts 16-byte aligned: both pools aligned and both page
  // sizes a multiple of 8 halves (member m's page p starts (m * n_pages + p) pages in).
  const bool wide = aligned16(k_pool) && aligned16(v_pool) && k_page_elements % 8 == 0 &&
                    v_page_elements % 8 == 0;
  const size_t per_unit = wide ? 8 : 1;
  params.page_units[0] = static_cast<int64_t>(k_page_elements / per_unit);
  params.page_units[1] = static_cast<int64_t>(v_page_elements / per_unit);
  const int64_t widest = std::max(params.page_units[0], params.page_units[1]);
  if (widest <= 0) return;
  const int64_t pairs = static_cast<int64_t>(n) * n_members;
  const dim3 grid(
      static_cast<unsigned>(std::min((widest + kCopyThreads - 1) / kCopyThreads, kMaxCopyBlocksX)),
      static_cast<unsigned>(std::min(pairs, kMaxGridY)), 2);
  if (wide) {
    launch("copy_pages_kernel", copy_pages_kernel<uint4>, grid, kCopyThreads, stream, params);
  } else {
    launch("copy_pages_kernel", copy_pages_kernel<uint16_t>, grid, kCopyThreads, stream, params);
  }
}

}  // namespace llms::cuda
