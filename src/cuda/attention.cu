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
// Launch: one 128-thread block per (token, KV head, group of up to 8 of its query heads, split),
// each key read once for every query head of its KV head (paged_attention_kernel below), and,
// when a step is split (AttentionSplit), combine_tiles_kernel merging the tiles' states.
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
static_assert(kAttentionThreads == kAttentionTileKeys, "a thread scores one key of a tile");
constexpr int kMaxGroupHeads = 8;                                // query heads a block serves
constexpr int kDimsPerThread = kMaxHeadDim / kAttentionThreads;  // of a value vector

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

// The device copy of an AttentionBatch with the KV head group resolved on the host, and the split.
struct AttentionParams {
  const uint16_t* k;
  const uint16_t* v;
  int32_t block_size;
  int32_t page_heads;
  int32_t head_dim_k;
  int32_t head_dim_v;
  int32_t q_per_kv;     // query heads per KV head
  int32_t group_heads;  // query heads a block serves: min(q_per_kv, kMaxGroupHeads)
  int32_t head_groups;  // blocks per KV head: q_per_kv / group_heads, rounded up
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
  int32_t splits;         // blocks sharing one token's tiles (1: no tile states)
  int64_t tile_capacity;  // tiles per (token, head) in tile_states
  float* tile_states;     // splits > 1: [token][head][tile][2 + head_dim_v]: max, sum, values
};

__device__ __forceinline__ float warp_sum(float v) {
  // xor butterfly: every lane ends with the full sum, added in the same order.
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Merging a tile's softmax state (max m_tile, sum of exp l_tile, weighted values acc_tile) into
// a running one: both scale to the larger max; a state without keys (max -inf) scales by 0
// explicitly, since both maxima may be -inf. The attention kernel (splits == 1) and the combine
// kernel (splits > 1) call the same functions on the same states in the same order, and the
// products and sums are the rounded intrinsics, which nvcc never contracts into an FMA that one
// call site would get and the other not: the two paths give the same bits.
struct MergeFactors {
  float m;     // the merged maximum
  float keep;  // the running state's factor
  float tile;  // the tile's factor
};

__device__ __forceinline__ MergeFactors merge_factors(float m_run, float m_tile) {
  MergeFactors f;
  f.m = fmaxf(m_run, m_tile);
  f.keep = m_run == -INFINITY ? 0.0f : expf(m_run - f.m);
  f.tile = m_tile == -INFINITY ? 0.0f : expf(m_tile - f.m);
  return f;
}

__device__ __forceinline__ float merged(float run, float tile, const MergeFactors& f) {
  return __fadd_rn(__fmul_rn(run, f.keep), __fmul_rn(tile, f.tile));
}

// A token that sees no key at all gets zeros rather than NaN.
__device__ __forceinline__ float finished(float acc, float sum) {
  return sum > 0.0f ? __fdiv_rn(acc, sum) : 0.0f;
}

// Eight f16 values of a key from e on, widened.
template <bool kVectorKeys>
__device__ __forceinline__ void load8(const uint16_t* src, int32_t e, float (&out)[8]) {
  if constexpr (kVectorKeys) {
    const uint4 w = *reinterpret_cast<const uint4*>(src + e);
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      out[2 * t] = half_bits_to_float(static_cast<uint16_t>(words[t] & 0xffffu));
      out[2 * t + 1] = half_bits_to_float(static_cast<uint16_t>(words[t] >> 16));
    }
  } else {
#pragma unroll
    for (int t = 0; t < 8; ++t) out[t] = half_bits_to_float(src[e + t]);
  }
}

// One block per (token, KV head, group of up to 8 of its query heads, split). The token's keys
// [lo, pos] are cut at multiples of kAttentionTileKeys into tiles; split z takes tiles
// first + z, first + z + splits, ... For each tile:
//   1. thread t scores key tile * 128 + t against every query head of the group (the queries
//      in shared memory, the key read once for all of them: GQA's heads share its bytes);
//   2. warp w, for heads w, w + 4: the tile's maximum, exp(score - max) and their sum;
//   3. thread t accumulates dims t and t + 128 of sum_j p_j v_j over the tile's keys in order.
// A tile's state (max, sum, values) is then merged into the block's running state (splits ==
// 1, the output written at the end) or stored for combine_tiles_kernel (splits > 1). Either
// way every tile's state and the order of merges depend only on the token's own keys, so a
// token's output is the same bits whatever else is in the step and however it is split.
template <bool kVectorKeys>
__global__ void __launch_bounds__(kAttentionThreads) paged_attention_kernel(AttentionParams p) {
  __shared__ float4 q_shared[kMaxGroupHeads][kMaxHeadDim / 4];
  __shared__ float probs[kMaxGroupHeads][kAttentionTileKeys];  // scores, then exp(score - max)
  __shared__ float tile_max[kMaxGroupHeads];
  __shared__ float tile_sum[kMaxGroupHeads];

  const int64_t i = blockIdx.x;
  const int32_t kv_head = static_cast<int32_t>(blockIdx.y) / p.head_groups;
  const int32_t in_kv = (static_cast<int32_t>(blockIdx.y) % p.head_groups) * p.group_heads;
  const int32_t head0 = kv_head * p.q_per_kv + in_kv;
  const int32_t heads = min(p.group_heads, p.q_per_kv - in_kv);
  const int32_t tid = static_cast<int32_t>(threadIdx.x);
  const int32_t warp = tid / kWarpSize;
  const int32_t lane = tid % kWarpSize;
  const int32_t pos = p.token_pos[i];
  const int32_t lo = attention_first_key(pos, p.window);
  const int32_t first = lo / kAttentionTileKeys;
  const int32_t last = pos / kAttentionTileKeys;
  // The same for every thread of the block, so leaving before any barrier is safe.
  if (first + static_cast<int32_t>(blockIdx.z) > last) return;
  const int32_t* table = p.tables + p.seq_table_begin[p.token_seq[i]];

  // The group's queries; dims past head_dim_k stay unread.
  float* q_flat = reinterpret_cast<float*>(q_shared);
  for (int32_t x = tid; x < heads * p.head_dim_k; x += kAttentionThreads) {
    const int32_t g = x / p.head_dim_k;
    const int32_t e = x - g * p.head_dim_k;
    q_flat[g * kMaxHeadDim + e] = p.q[(i * p.n_heads + head0 + g) * p.head_dim_k + e];
  }
  __syncthreads();

  float run_max[kMaxGroupHeads];
  float run_sum[kMaxGroupHeads];
  float run_acc[kDimsPerThread][kMaxGroupHeads];
#pragma unroll
  for (int g = 0; g < kMaxGroupHeads; ++g) {
    run_max[g] = -INFINITY;
    run_sum[g] = 0.0f;
#pragma unroll
    for (int r = 0; r < kDimsPerThread; ++r) run_acc[r][g] = 0.0f;
  }

  for (int32_t t = first + static_cast<int32_t>(blockIdx.z); t <= last; t += p.splits) {
    const int32_t tile_begin = t * kAttentionTileKeys;
    // 1. This thread's key.
    {
      const int32_t j = tile_begin + tid;
      float score[kMaxGroupHeads];
#pragma unroll
      for (int g = 0; g < kMaxGroupHeads; ++g) score[g] = 0.0f;
      bool visible = j >= lo && j <= pos;
      if (visible) {
        const int32_t page = table[static_cast<int64_t>(j / p.block_size) * p.n_groups + p.group];
        visible = page >= 0;  // given back: no key there
        if (visible) {
          const int64_t head_slot =
              (static_cast<int64_t>(page) * p.page_heads + kv_head) * p.block_size +
              j % p.block_size;
          const uint16_t* kj = p.k + head_slot * p.head_dim_k;
          const int32_t whole = p.head_dim_k / 8 * 8;
          for (int32_t e = 0; e < whole; e += 8) {
            float kf[8];
            load8<kVectorKeys>(kj, e, kf);
#pragma unroll
            for (int g = 0; g < kMaxGroupHeads; ++g) {
              if (g >= heads) break;
              const float4 a = q_shared[g][e / 4];
              const float4 b = q_shared[g][e / 4 + 1];
              float s = score[g];
              s = fmaf(a.x, kf[0], s);
              s = fmaf(a.y, kf[1], s);
              s = fmaf(a.z, kf[2], s);
              s = fmaf(a.w, kf[3], s);
              s = fmaf(b.x, kf[4], s);
              s = fmaf(b.y, kf[5], s);
              s = fmaf(b.z, kf[6], s);
              s = fmaf(b.w, kf[7], s);
              score[g] = s;
            }
          }
          for (int32_t e = whole; e < p.head_dim_k; ++e) {
            const float ke = half_bits_to_float(kj[e]);
#pragma unroll
            for (int g = 0; g < kMaxGroupHeads; ++g) {
              if (g >= heads) break;
              score[g] = fmaf(q_flat[g * kMaxHeadDim + e], ke, score[g]);
            }
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kMaxGroupHeads; ++g) {
        if (g >= heads) break;
        probs[g][tid] = visible ? p.scale * score[g] : -INFINITY;
      }
    }
    __syncthreads();

    // 2. Per head: the tile's maximum, the probabilities and their sum.
    for (int32_t g = warp; g < heads; g += kAttentionWarps) {
      constexpr int kPerLane = kAttentionTileKeys / kWarpSize;
      float s[kPerLane];
      float m = -INFINITY;
#pragma unroll
      for (int x = 0; x < kPerLane; ++x) {
        s[x] = probs[g][lane + x * kWarpSize];
        m = fmaxf(m, s[x]);
      }
      m = warp_max(m);
      float sum = 0.0f;
#pragma unroll
      for (int x = 0; x < kPerLane; ++x) {
        const float e = s[x] == -INFINITY ? 0.0f : expf(s[x] - m);
        probs[g][lane + x * kWarpSize] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        tile_max[g] = m;
        tile_sum[g] = sum;
      }
    }
    __syncthreads();

    // 3. The tile's weighted values, key by key in order (the same key for every thread, so
    // the skips are uniform; a key outside [lo, pos] or on a given-back page is never read).
    float acc[kDimsPerThread][kMaxGroupHeads];
#pragma unroll
    for (int r = 0; r < kDimsPerThread; ++r) {
#pragma unroll
      for (int g = 0; g < kMaxGroupHeads; ++g) acc[r][g] = 0.0f;
    }
    const int32_t j_end = min(pos, tile_begin + kAttentionTileKeys - 1);
    for (int32_t j = max(lo, tile_begin); j <= j_end; ++j) {
      const int32_t page = table[static_cast<int64_t>(j / p.block_size) * p.n_groups + p.group];
      if (page < 0) continue;
      const int64_t head_slot =
          (static_cast<int64_t>(page) * p.page_heads + kv_head) * p.block_size + j % p.block_size;
      const uint16_t* vj = p.v + head_slot * p.head_dim_v;
#pragma unroll
      for (int r = 0; r < kDimsPerThread; ++r) {
        const int32_t d = tid + r * kAttentionThreads;
        if (d >= p.head_dim_v) break;
        const float ve = half_bits_to_float(vj[d]);
#pragma unroll
        for (int g = 0; g < kMaxGroupHeads; ++g) {
          if (g >= heads) break;
          acc[r][g] = fmaf(probs[g][j - tile_begin], ve, acc[r][g]);
        }
      }
    }

    // 4. Merge, or store for the combine kernel.
#pragma unroll
    for (int g = 0; g < kMaxGroupHeads; ++g) {
      if (g >= heads) break;
      if (p.splits == 1) {
        const MergeFactors f = merge_factors(run_max[g], tile_max[g]);
        run_max[g] = f.m;
        run_sum[g] = merged(run_sum[g], tile_sum[g], f);
#pragma unroll
        for (int r = 0; r < kDimsPerThread; ++r)
          run_acc[r][g] = merged(run_acc[r][g], acc[r][g], f);
      } else {
        const int64_t stride = p.head_dim_v + 2;
        float* state =
            p.tile_states + ((i * p.n_heads + head0 + g) * p.tile_capacity + (t - first)) * stride;
        if (tid == 0) {
          state[0] = tile_max[g];
          state[1] = tile_sum[g];
        }
#pragma unroll
        for (int r = 0; r < kDimsPerThread; ++r) {
          const int32_t d = tid + r * kAttentionThreads;
          if (d < p.head_dim_v) state[2 + d] = acc[r][g];
        }
      }
    }
    __syncthreads();  // probs, tile_max and tile_sum are the next tile's
  }

  if (p.splits != 1) return;
#pragma unroll
  for (int g = 0; g < kMaxGroupHeads; ++g) {
    if (g >= heads) break;
    float* out = p.out + (i * p.n_heads + head0 + g) * p.head_dim_v;
#pragma unroll
    for (int r = 0; r < kDimsPerThread; ++r) {
      const int32_t d = tid + r * kAttentionThreads;
      if (d < p.head_dim_v) out[d] = finished(run_acc[r][g], run_sum[g]);
    }
  }
}

// splits > 1: token blockIdx.x, query head blockIdx.y: its tiles' states merged in order from
// an empty state, as the attention kernel merges them when it runs a token's tiles itself.
__global__ void __launch_bounds__(kAttentionThreads) combine_tiles_kernel(AttentionParams p) {
  const int64_t i = blockIdx.x;
  const int32_t h = static_cast<int32_t>(blockIdx.y);
  const int32_t pos = p.token_pos[i];
  const int32_t n_tiles = attention_tiles(pos, p.window);
  const int64_t stride = p.head_dim_v + 2;
  const float* states = p.tile_states + (i * p.n_heads + h) * p.tile_capacity * stride;
  float* out = p.out + (i * p.n_heads + h) * p.head_dim_v;
  for (int32_t d = static_cast<int32_t>(threadIdx.x); d < p.head_dim_v; d += kAttentionThreads) {
    float run_max = -INFINITY;
    float run_sum = 0.0f;
    float run_acc = 0.0f;
    for (int32_t t = 0; t < n_tiles; ++t) {
      const float* state = states + t * stride;
      const MergeFactors f = merge_factors(run_max, state[0]);
      run_max = f.m;
      run_sum = merged(run_sum, state[1], f);
      run_acc = merged(run_acc, state[2 + d], f);
    }
    out[d] = finished(run_acc, run_sum);
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

// Blocks a KV head's query heads take, kMaxGroupHeads at most each.
int32_t blocks_per_kv_head(int32_t q_per_kv) {
  return (q_per_kv + kMaxGroupHeads - 1) / kMaxGroupHeads;
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
                     cudaStream_t stream, const AttentionSplit& split) {
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
  if (split.splits < 1 || split.splits > kMaxAttentionSplits ||
      (split.splits > 1 && (split.tile_states == nullptr || split.tile_capacity < 1))) {
    throw Error(Error::Kind::kInvalidArgument,
                "CUDA paged_attention: " + std::to_string(split.splits) + " splits need 1 to " +
                    std::to_string(kMaxAttentionSplits) + " and, above 1, tile states");
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

  params.group_heads = std::min(params.q_per_kv, kMaxGroupHeads);
  params.head_groups = blocks_per_kv_head(params.q_per_kv);
  params.splits = split.splits;
  params.tile_capacity = split.tile_capacity;
  params.tile_states = split.tile_states;

  const dim3 grid(static_cast<unsigned>(batch.n_tokens),
                  static_cast<unsigned>(kv.n_kv_heads * params.head_groups),
                  static_cast<unsigned>(split.splits));
  // 16-byte key loads where every key starts on a 16-byte boundary.
  if (hdk % 8 == 0 && aligned16(kv.k)) {
    launch("paged_attention_kernel", paged_attention_kernel<true>, grid, kAttentionThreads, stream,
           params);
  } else {
    launch("paged_attention_kernel", paged_attention_kernel<false>, grid, kAttentionThreads, stream,
           params);
  }
  if (split.splits > 1) {
    const dim3 heads(static_cast<unsigned>(batch.n_tokens), static_cast<unsigned>(batch.n_heads));
    launch("combine_tiles_kernel", combine_tiles_kernel, heads, kAttentionThreads, stream, params);
  }
}

int64_t attention_tile_state_floats(int32_t n_tokens, int32_t n_heads, int32_t head_dim_v,
                                    int64_t tiles) {
  return static_cast<int64_t>(n_tokens) * n_heads * tiles * (head_dim_v + 2);
}

int32_t attention_splits_for(int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads,
                             int32_t target_blocks) {
  if (n_tokens <= 0 || n_kv_heads <= 0 || n_heads < n_kv_heads) return 1;
  const int64_t blocks =
      static_cast<int64_t>(n_tokens) * n_kv_heads * blocks_per_kv_head(n_heads / n_kv_heads);
  const int64_t splits = (target_blocks + blocks - 1) / blocks;
  return static_cast<int32_t>(std::clamp<int64_t>(splits, 1, kMaxAttentionSplits));
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
