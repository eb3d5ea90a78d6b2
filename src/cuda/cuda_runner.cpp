#include "cuda_runner.h"

#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

#include "model/transformer_weights.h"
#include "util/error.h"

namespace llms::cuda {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

model::ModelConfig config_on_device(int device, const gguf::GgufFile& file) {
  // Every CUDA call that follows (the stream, cuBLAS, the uploads) is for this device.
  check(cudaSetDevice(device), "cudaSetDevice");
  return model::ModelConfig::from_gguf(file);
}

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

CudaRunner::CudaRunner(const gguf::GgufFile& file, const DeviceInfo& device,
                       const RunnerOptions& options, int64_t weight_slice_elements)
    : device_(device),
      options_(options),
      config_(config_on_device(device.index, file)),
      traits_(model::runnable_traits(config_)),
      rope_(model::rope_frequencies(config_, config_.rope_freq_base, true)),
      rope_local_(model::has_local_rope(config_, traits_)
                      ? model::rope_frequencies(config_, traits_.local_rope_base, false)
                      : model::RopeFrequencies{}),
      weight_slice_limit_(std::max<int64_t>(1, weight_slice_elements)) {
  // The kernels take rows 32 values at a time (every quantized block is whole 32s; F32, F16 and
  // BF16 rows and the f32 hidden states must be too): refused here rather than at every step.
  const uint64_t attn_width = config_.n_heads * config_.head_dim_v;
  for (const auto& [width, what] :
       {std::pair{config_.n_embd, "n_embd"}, std::pair{config_.n_ff, "n_ff"},
        std::pair{attn_width, "n_heads x head_dim"}}) {
    if (width % 32 != 0) {
      throw Error(Error::Kind::kUnsupported,
                  fmt::format("--device cuda: {} = {}: the CUDA kernels need a multiple of 32",
                              what, width));
    }
  }
  if (config_.head_dim_k > 256 || config_.head_dim_v > 256) {
    throw Error(Error::Kind::kUnsupported,
                fmt::format("--device cuda: head dimension {} / {}: the attention kernel takes "
                            "up to 256",
                            config_.head_dim_k, config_.head_dim_v));
  }
  if (cublas_unavailable_reason().empty()) cublas_ = std::make_unique<Cublas>(stream_.get());
  upload_weights(file);
  reserve(1, 1);
}

CudaRunner::~CudaRunner() {
  cudaSetDevice(device_.index);
  cudaStreamSynchronize(stream_.get());
}

// Every tensor the forward pass reads goes into one device allocation, in the file's formats
// (the embedding too: the lookup decodes the rows a step needs). A tied output shares the
// embedding's bytes.
void CudaRunner::upload_weights(const gguf::GgufFile& file) {
  const model::TransformerWeights host = model::TransformerWeights::load(file, config_, traits_);
  struct Piece {
    const void* src;
    size_t bytes;
    size_t offset;
  };
  std::vector<Piece> pieces;
  std::unordered_map<const void*, size_t> index;  // host address -> piece
  size_t total = 0;
  auto add = [&](const void* src, size_t bytes) {
    if (src == nullptr || index.contains(src)) return;
    index[src] = pieces.size();
    pieces.push_back({src, bytes, total});
    total = align_up(total + bytes, 256);
  };
  auto add_matrix = [&](const kernels::QuantMatrix& m, const char* what) {
    if (!device_supports(m.type)) {
      throw Error(Error::Kind::kUnsupported,
                  fmt::format("--device cuda: {} is {}, which the CUDA kernels do not decode", what,
                              gguf::ggml_type_name(m.type)));
    }
    add(m.data, static_cast<size_t>(m.n_rows) * m.row_bytes);
  };
  const uint64_t d = config_.n_embd;
  const uint64_t q_width = config_.n_heads * config_.head_dim_k;
  add_matrix(host.token_embd, "token_embd.weight");
  add_matrix(host.output, "the output matrix");
  add(host.output_norm, d * sizeof(float));
  for (size_t i = 0; i < host.layers.size(); ++i) {
    const model::LayerWeights& l = host.layers[i];
    const uint64_t kv_k = config_.n_kv_heads[i] * config_.head_dim_k;
    const uint64_t kv_v = config_.n_kv_heads[i] * config_.head_dim_v;
    const std::string layer = fmt::format("layer {}", i);
    for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      add_matrix(*m, layer.c_str());
    }
    add(l.attn_norm, d * sizeof(float));
    add(l.ffn_norm, d * sizeof(float));
    add(l.bq, q_width * sizeof(float));
    add(l.bk, kv_k * sizeof(float));
    add(l.bv, kv_v * sizeof(float));
    add(l.q_norm, config_.head_dim_k * sizeof(float));
    add(l.k_norm, config_.head_dim_k * sizeof(float));
    add(l.post_attn_norm, d * sizeof(float));
    add(l.post_ffn_norm, d * sizeof(float));
  }

  // Refuse a model that cannot fit before allocating any of it.
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const double allowed = static_cast<double>(total_bytes) * options_.gpu_memory_utilization -
                         static_cast<double>(total_bytes - free_bytes) -
                         static_cast<double>(kDeviceReserveBytes);
  if (static_cast<double>(total) > allowed) {
    throw Error(
        Error::Kind::kUnavailable,
        fmt::format("--device cuda:{}: the model's weights take {:.2f} GiB and {} ({:.1f} "
                    "GiB, {:.1f} GiB free) leaves {:.2f} GiB under "
                    "--gpu-memory-utilization {}",
                    device_.index, static_cast<double>(total) / kGiB, device_.name,
                    static_cast<double>(total_bytes) / kGiB, static_cast<double>(free_bytes) / kGiB,
                    std::max(0.0, allowed) / kGiB, options_.gpu_memory_utilization));
  }
  weights_ = DeviceBuffer(total);
  for (const Piece& p : pieces) {
    check(cudaMemcpy(weights_.get<uint8_t>() + p.offset, p.src, p.bytes, cudaMemcpyHostToDevice),
          "cudaMemcpy (weights)");
  }
  auto dev = [&](const void* src) -> const void* {
    if (src == nullptr) return nullptr;
    return weights_.get<uint8_t>() + pieces[index.at(src)].offset;
  };
  auto vec = [&](const float* src) { return static_cast<const float*>(dev(src)); };
  auto matrix = [&](const kernels::QuantMatrix& m) {
    return DeviceMatrix{m.type, dev(m.data), m.n_rows, m.n_cols, m.row_bytes};
  };
  token_embd_ = matrix(host.token_embd);
  output_ = matrix(host.output);
  output_rows_ = output_.n_rows;
  output_norm_ = vec(host.output_norm);
  for (const model::LayerWeights& l : host.layers) {
    Layer g;
    g.attn_norm = vec(l.attn_norm);
    g.wq = matrix(l.wq);
    g.wk = matrix(l.wk);
    g.wv = matrix(l.wv);
    g.wo = matrix(l.wo);
    g.w_gate = matrix(l.w_gate);
    g.w_up = matrix(l.w_up);
    g.w_down = matrix(l.w_down);
    g.bq = vec(l.bq);
    g.bk = vec(l.bk);
    g.bv = vec(l.bv);
    g.q_norm = vec(l.q_norm);
    g.k_norm = vec(l.k_norm);
    g.post_attn_norm = vec(l.post_attn_norm);
    g.ffn_norm = vec(l.ffn_norm);
    g.post_ffn_norm = vec(l.post_ffn_norm);
    layers_.push_back(g);
  }
}

size_t CudaRunner::kv_bytes_per_block(int32_t block_size, kv::KvCacheType type,
                                      const kv::KvGroupLayout& layout) const {
  if (type != kv::KvCacheType::kF16) {
    throw Error(Error::Kind::kUnsupported,
                fmt::format("--kv-cache-dtype {}: the CUDA runner keeps an f16 KV cache only "
                            "(auto or f16)",
                            kv::kv_cache_type_name(type)));
  }
  const auto heads = static_cast<size_t>(config_.max_kv_heads());
  return static_cast<size_t>(layout.members()) * heads * static_cast<size_t>(block_size) *
         (config_.head_dim_k + config_.head_dim_v) * sizeof(uint16_t);
}

void CudaRunner::allocate_kv(int32_t block_size, int32_t n_blocks, kv::KvCacheType type,
                             const kv::KvGroupLayout& layout) {
  if (n_pages_ != 0) throw Error(Error::Kind::kInvalidArgument, "allocate_kv: called twice");
  if (block_size < 1 || n_blocks < 1) {
    throw Error(Error::Kind::kInvalidArgument, "allocate_kv: block_size and n_blocks must be >= 1");
  }
  check(cudaSetDevice(device_.index), "cudaSetDevice");
  (void)kv_bytes_per_block(block_size, type, layout);  // refuses other types
  if (layout.n_layers() != static_cast<int32_t>(config_.n_layers)) {
    throw Error(Error::Kind::kInvalidArgument,
                "allocate_kv: the layout's layers differ from the model's");
  }
  kv_layout_ = layout;
  block_size_ = block_size;
  n_pages_ = n_blocks;
  page_heads_ = static_cast<int32_t>(config_.max_kv_heads());
  const size_t slots = static_cast<size_t>(layout.members()) * static_cast<size_t>(n_blocks) *
                       static_cast<size_t>(page_heads_) * static_cast<size_t>(block_size);
  k_pool_ = DeviceBuffer(slots * config_.head_dim_k * sizeof(uint16_t));
  v_pool_ = DeviceBuffer(slots * config_.head_dim_v * sizeof(uint16_t));
  // Pages are read only where written, but zeroed pages make a stray read a wrong number
  // rather than a NaN from leftover bits.
  check(cudaMemsetAsync(k_pool_.get(), 0, k_pool_.bytes(), stream_.get()), "cudaMemset (KV)");
  check(cudaMemsetAsync(v_pool_.get(), 0, v_pool_.bytes(), stream_.get()), "cudaMemset (KV)");
  check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
}

int64_t CudaRunner::kv_memory_available() const {
  check(cudaSetDevice(device_.index), "cudaSetDevice");
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const double left = static_cast<double>(free_bytes) -
                      static_cast<double>(total_bytes) * (1.0 - options_.gpu_memory_utilization) -
                      static_cast<double>(kDeviceReserveBytes);
  return left > 0.0 ? static_cast<int64_t>(left) : 0;
}

void CudaRunner::reserve(int32_t max_tokens, int32_t max_logit_rows) {
  if (max_tokens <= max_tokens_ && max_logit_rows <= max_logit_rows_) return;
  check(cudaSetDevice(device_.index), "cudaSetDevice");
  check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
  graphs_.clear();  // they point at the buffers about to be replaced
  max_tokens = std::max(max_tokens, max_tokens_);
  max_logit_rows = std::max(max_logit_rows, max_logit_rows_);
  const model::ModelConfig& c = config_;
  const size_t t = static_cast<size_t>(max_tokens);
  const size_t f = sizeof(float);
  const uint64_t kv_heads = c.max_kv_heads();
  const uint64_t attn_width = c.n_heads * c.head_dim_v;
  // Each old buffer is freed before its replacement is made: growth after the KV pool took its
  // share has only the reserve margin to work in.
  auto remake = [](DeviceBuffer& b, size_t bytes) {
    b = DeviceBuffer();
    b = DeviceBuffer(bytes);
  };
  remake(x_, t * c.n_embd * f);
  remake(xn_, t * std::max(c.n_embd, attn_width) * f);
  remake(q_, t * c.n_heads * c.head_dim_k * f);
  remake(k_, t * kv_heads * c.head_dim_k * f);
  remake(v_, t * kv_heads * c.head_dim_v * f);
  remake(attn_, t * attn_width * f);
  remake(gate_, t * c.n_ff * f);
  remake(up_, t * c.n_ff * f);
  remake(ffn_, t * c.n_embd * f);
  const size_t rows = static_cast<size_t>(max_logit_rows);
  remake(logit_in_, rows * c.n_embd * f);
  remake(logits_, rows * c.n_vocab * f);
  logits_host_ = PinnedBuffer();
  logits_host_ = PinnedBuffer(rows * c.n_vocab * f);
  if (!options_.batch_invariant && max_tokens > kMaxGemvRows) {
    // The GEMM paths (layer matrices only: the output matrix goes through the GEMV): bf16
    // activations of the widest input (n_ff for ffn_down), in whole tiles of the tiled GEMM's
    // rows; for cuBLAS, a slice of the weights as bf16.
    const uint64_t widest = std::max({c.n_embd, c.n_ff, attn_width});
    const size_t tiles = (t + kTiledGemmRowAlign - 1) / kTiledGemmRowAlign;
    remake(act_bf16_, tiles * kTiledGemmRowAlign * widest * sizeof(uint16_t));
    const auto slice = std::max<int64_t>(weight_slice_limit_, static_cast<int64_t>(widest));
    if (cublas_ && weight_slice_elements_ < slice) {
      remake(weight_bf16_, static_cast<size_t>(slice) * sizeof(uint16_t));
      weight_slice_elements_ = slice;
    }
  }
  if (tile_capacity_ == 0) {
    // Tiles for a sequence as long as the training context (4,096 keys when the file does not
    // say), fewer where that would pass kMaxTileStateBytes: longer steps run unsplit.
    const int64_t context = c.n_ctx_train > 0 ? static_cast<int64_t>(c.n_ctx_train) : 4096;
    const int64_t per_tile =
        attention_tile_state_floats(kMaxSplitAttentionTokens, static_cast<int32_t>(c.n_heads),
                                    static_cast<int32_t>(c.head_dim_v), 1);
    const int64_t fit = kMaxTileStateBytes / (per_tile * static_cast<int64_t>(f));
    tile_capacity_ = std::min(context / kAttentionTileKeys + 1, fit);
    tile_states_ = DeviceBuffer(static_cast<size_t>(per_tile * tile_capacity_) * f);
  }
  max_tokens_ = max_tokens;
  max_logit_rows_ = max_logit_rows;
}

void CudaRunner::limit_output_rows(int32_t n) {
  if (n < 1) throw Error(Error::Kind::kInvalidArgument, "output rows must be >= 1");
  const int64_t rounded = (static_cast<int64_t>(n) + 15) / 16 * 16;
  output_.n_rows = std::min(rounded, output_rows_);
  graphs_.clear();  // they multiply by the old number of rows
}

void CudaRunner::set_streaming_attention(int64_t window, int64_t sinks) {
  if (window == 0 && sinks == 0) return;
  throw Error(Error::Kind::kUnsupported,
              "--streaming-window / --attention-sinks: not implemented with --device cuda yet");
}

void CudaRunner::track_attention_mass(bool on) {
  if (!on) return;
  throw Error(Error::Kind::kUnsupported,
              "--h2o-budget: attention-mass tracking is not implemented with --device cuda yet");
}

std::span<const float> CudaRunner::attention_mass(size_t) const {
  throw Error(Error::Kind::kUnsupported, "attention_mass: not implemented with --device cuda yet");
}

void CudaRunner::copy_blocks(std::span<const kv::BlockCopy> copies) {
  if (copies.empty()) return;
  check(cudaSetDevice(device_.index), "cudaSetDevice");
  const size_t n = copies.size();
  const size_t bytes = 2 * n * sizeof(int32_t);
  if (step_host_.bytes() < bytes) step_host_ = PinnedBuffer(bytes);
  if (step_device_.bytes() < bytes) {
    step_device_ = DeviceBuffer(bytes);
    graphs_.clear();  // they read the old buffer
  }
  auto* host = step_host_.get<int32_t>();
  for (size_t i = 0; i < n; ++i) {
    if (copies[i].src < 0 || copies[i].src >= n_pages_ || copies[i].dst < 0 ||
        copies[i].dst >= n_pages_) {
      throw Error(Error::Kind::kInvalidArgument, "copy_blocks: a block outside the pool");
    }
    host[i] = copies[i].src;
    host[n + i] = copies[i].dst;
  }
  // The kernel copies all pairs at once; a copy whose source another one writes (never made
  // by the KV manager today) must run in list order, one launch each.
  bool chained = false;
  for (size_t i = 0; i < n && !chained; ++i) {
    for (size_t j = 0; j < n; ++j) chained = chained || host[n + i] == host[j];
  }
  const size_t page = static_cast<size_t>(page_heads_) * static_cast<size_t>(block_size_);
  try {
    check(cudaMemcpyAsync(step_device_.get(), host, bytes, cudaMemcpyHostToDevice, stream_.get()),
          "cudaMemcpyAsync (block copies)");
    const int32_t* src = step_device_.get<int32_t>();
    const int32_t* dst = src + n;
    const size_t launches = chained ? n : 1;
    for (size_t i = 0; i < launches; ++i) {
      copy_pages(k_pool_.get<uint16_t>(), v_pool_.get<uint16_t>(), kv_layout_.members(), n_pages_,
                 page * config_.head_dim_k, page * config_.head_dim_v, src + i, dst + i,
                 chained ? 1 : static_cast<int32_t>(n), stream_.get());
    }
  } catch (...) {
    cudaStreamSynchronize(stream_.get());  // the staging buffer is the next step's
    throw;
  }
  // The staging buffers are the next step's: let this copy finish reading them.
  check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize (block copies)");
}

void CudaRunner::copy_slots(std::span<const kv::SlotCopy> copies) {
  if (copies.empty()) return;
  throw Error(Error::Kind::kUnsupported,
              "speculative token trees are not implemented with --device cuda yet");
}

KvLayerView CudaRunner::kv_view(size_t layer) const {
  const auto member = static_cast<size_t>(kv_layout_.member_of(static_cast<int32_t>(layer)));
  const size_t page = static_cast<size_t>(page_heads_) * static_cast<size_t>(block_size_);
  const size_t pages_before = member * static_cast<size_t>(n_pages_);
  KvLayerView v;
  v.k = k_pool_.get<uint16_t>() + pages_before * page * config_.head_dim_k;
  v.v = v_pool_.get<uint16_t>() + pages_before * page * config_.head_dim_v;
  v.block_size = block_size_;
  v.page_heads = page_heads_;
  v.n_kv_heads = static_cast<int32_t>(config_.n_kv_heads[layer]);
  v.head_dim_k = static_cast<int32_t>(config_.head_dim_k);
  v.head_dim_v = static_cast<int32_t>(config_.head_dim_v);
  return v;
}

// Lays the step's metadata out in pinned memory (4-byte units: int32 indices, then f32 RoPE
// angles) and copies it to the device in one transfer.
void CudaRunner::stage(const kv::StepBatch& batch, StepLayout& at) {
  const auto n = batch.tokens.size();
  const size_t half = config_.head_dim_k / 2;
  const size_t n_groups = static_cast<size_t>(batch.n_kv_groups);
  size_t table_entries = 0;
  for (const kv::SequenceSlice& s : batch.sequences) table_entries += s.block_table.size();
  size_t units = 0;
  auto take = [&units](size_t count) {
    const size_t offset = units;
    units += count;
    return offset;
  };
  at.tokens = take(n);
  at.token_seq = take(n);
  at.token_pos = take(n);
  at.slots = take(n);
  at.pages = take(n * n_groups);
  at.table_begin = take(batch.sequences.size());
  at.logits_rows = take(batch.logits_rows.size());
  at.rope_cos = take(n * half);
  at.rope_sin = take(n * half);
  const bool local = !rope_local_.inv_freq.empty();
  at.rope_cos_local = local ? take(n * half) : at.rope_cos;
  at.rope_sin_local = local ? take(n * half) : at.rope_sin;
  // The block tables last: every other offset depends only on the counts of tokens,
  // sequences and logits rows, which is what a captured step graph is keyed by.
  at.tables = take(table_entries);
  at.total = units;
  const size_t bytes = units * 4;
  if (step_host_.bytes() < bytes) step_host_ = PinnedBuffer(bytes * 2);
  if (step_device_.bytes() < bytes) {
    step_device_ = DeviceBuffer(bytes * 2);
    graphs_.clear();  // they read the old buffer
  }

  auto* ints = step_host_.get<int32_t>();
  auto* floats = step_host_.get<float>();
  std::copy(batch.tokens.begin(), batch.tokens.end(), ints + at.tokens);
  size_t table_at = 0;
  for (size_t si = 0; si < batch.sequences.size(); ++si) {
    const kv::SequenceSlice& s = batch.sequences[si];
    ints[at.table_begin + si] = static_cast<int32_t>(table_at);
    std::copy(s.block_table.begin(), s.block_table.end(), ints + at.tables + table_at);
    table_at += s.block_table.size();
    for (int32_t j = 0; j < s.n_query; ++j) {
      const auto t = static_cast<size_t>(s.query_begin + j);
      const int32_t slot = s.slot_of(j);
      ints[at.token_seq + t] = static_cast<int32_t>(si);
      ints[at.token_pos + t] = slot;
      ints[at.slots + t] = slot % block_size_;
      const size_t block = static_cast<size_t>(slot / block_size_);
      for (size_t g = 0; g < n_groups; ++g) {
        const kv::BlockId page = s.block_table[block * n_groups + g];
        if (page < 0) {
          // The CPU refuses this too (model/paged_attention.cpp): the token's own key would be
          // lost and its attention silently wrong.
          throw Error(Error::Kind::kInternal,
                      fmt::format("StepBatch: sequence {} writes position {} into a given-back "
                                  "block (cache group {})",
                                  s.seq_id, slot, g));
        }
        ints[at.pages + g * n + t] = page;
      }
    }
  }
  std::copy(batch.logits_rows.begin(), batch.logits_rows.end(), ints + at.logits_rows);
  const int32_t* slots_of = ints + at.token_pos;
  at.split_attention = n <= static_cast<size_t>(kMaxSplitAttentionTokens) &&
                       std::all_of(slots_of, slots_of + n, [&](int32_t slot) {
                         return attention_tiles(slot, 0) <= tile_capacity_;
                       });
  for (size_t t = 0; t < n; ++t) {
    const int64_t pos = batch.positions[t];
    model::rope_cos_sin(rope_, pos, floats + at.rope_cos + t * half,
                        floats + at.rope_sin + t * half);
    if (local) {
      model::rope_cos_sin(rope_local_, pos, floats + at.rope_cos_local + t * half,
                          floats + at.rope_sin_local + t * half);
    }
  }
  check(cudaMemcpyAsync(step_device_.get(), step_host_.get(), bytes, cudaMemcpyHostToDevice,
                        stream_.get()),
        "cudaMemcpyAsync (step metadata)");
}

model::LogitsView CudaRunner::execute(const kv::StepBatch& batch) {
  if (n_pages_ == 0) throw Error(Error::Kind::kInvalidArgument, "execute before allocate_kv");
  batch.validate(block_size_, n_pages_);
  if (batch.n_kv_groups != kv_layout_.n_groups()) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("StepBatch: block tables of {} cache groups for a KV pool of {}",
                            batch.n_kv_groups, kv_layout_.n_groups()));
  }
  for (const kv::SequenceSlice& s : batch.sequences) {
    if (!s.tree_parents.empty()) {
      throw Error(Error::Kind::kUnsupported,
                  "speculative token trees are not implemented with --device cuda yet");
    }
  }
  for (int32_t id : batch.tokens) {
    if (id < 0 || id >= n_vocab()) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("token id {} is outside the vocabulary ({})", id, n_vocab()));
    }
  }
  const auto n = static_cast<int32_t>(batch.tokens.size());
  const auto n_logits = static_cast<int32_t>(batch.logits_rows.size());
  const auto n_out = static_cast<int32_t>(output_.n_rows);
  if (n == 0) return model::LogitsView{logits_host_.get<float>(), 0, n_out};
  check(cudaSetDevice(device_.index), "cudaSetDevice");
  reserve(n, n_logits);
  StepLayout at;
  try {
    stage(batch, at);
    const bool decode = n <= kMaxGraphDecodeTokens &&
                        batch.sequences.size() == static_cast<size_t>(n) &&
                        batch.logits_rows.size() == static_cast<size_t>(n);
    if (options_.use_graphs && (n <= kMaxGraphTokens || decode)) {
      launch_graph(batch, at);
    } else {
      forward(batch, at);
    }
  } catch (...) {
    // Whatever was enqueued still reads the staging buffer: the next call (the engine re-runs
    // a failed step's sequences at once) must not rewrite it under a running copy. The
    // runtime's last error is cleared so the next step's first check does not report this one.
    cudaStreamSynchronize(stream_.get());
    (void)cudaGetLastError();
    throw;
  }
  check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize (step)");
  return model::LogitsView{logits_host_.get<float>(), n_logits, n_out};
}

// A decode step of a few tokens is hundreds of short kernels: launched one by one, the host's
// launch rate, not the GPU, would bound it. The first step of each shape (tokens, sequences,
// logits rows) is captured into a graph, and later steps of that shape replay it with one
// launch; their metadata sits at the same offsets of the same staging buffer (stage() puts the
// variable-length block tables last), and every buffer the kernels touch stays where it was
// (reserve() and a grown staging buffer drop the graphs).
void CudaRunner::launch_graph(const kv::StepBatch& batch, const StepLayout& at) {
  const GraphKey key{static_cast<int32_t>(batch.tokens.size()),
                     static_cast<int32_t>(batch.sequences.size()),
                     static_cast<int32_t>(batch.logits_rows.size()), at.split_attention};
  if (eager_keys_.contains(key)) {
    forward(batch, at);
    return;
  }
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
    try {
      forward(batch, at);
    } catch (...) {
      // The step itself failed (not the capture): end the capture, clear the error it leaves
      // and report the step's.
      cudaStreamEndCapture(stream_.get(), &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw;
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t made = cudaStreamEndCapture(stream_.get(), &graph);
    if (made == cudaSuccess) made = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      // This shape cannot be captured here: it runs eagerly from now on (the kernels were only
      // recorded, not run, so the step runs now).
      (void)cudaGetLastError();
      eager_keys_.insert(key);
      forward(batch, at);
      return;
    }
    it = graphs_.emplace(key, GraphExec(exec)).first;
  }
  check(cudaGraphLaunch(it->second.get(), stream_.get()), "cudaGraphLaunch");
  ++graph_launches_;
}

void CudaRunner::forward(const kv::StepBatch& batch, const StepLayout& at) {
  const auto n = static_cast<int32_t>(batch.tokens.size());
  const auto n_logits = static_cast<int32_t>(batch.logits_rows.size());
  const auto n_out = static_cast<int32_t>(output_.n_rows);
  const auto d = static_cast<int32_t>(config_.n_embd);
  const float embed_scale = traits_.scales_embedding ? std::sqrt(static_cast<float>(d)) : 1.0f;
  gather_rows(token_embd_, staged<int32_t>(at.tokens * 4), n, embed_scale, x_.get<float>(),
              stream_.get());
  for (size_t layer = 0; layer < layers_.size(); ++layer) {
    attention_block(layer, n, at);
    feed_forward_block(layer, n);
  }
  if (n_logits == 0) return;
  const DeviceMatrix hidden{gguf::GgmlType::kF32, x_.get(), n, d,
                            static_cast<size_t>(d) * sizeof(float)};
  gather_rows(hidden, staged<int32_t>(at.logits_rows * 4), n_logits, 1.0f, logit_in_.get<float>(),
              stream_.get());
  rms_norm(logit_in_.get<float>(), output_norm_, logit_in_.get<float>(), n_logits, d,
           static_cast<float>(config_.rms_norm_eps), stream_.get());
  gemv_rows(output_, logit_in_.get<float>(), n_logits, logits_.get<float>());
  check(cudaMemcpyAsync(logits_host_.get(), logits_.get(),
                        static_cast<size_t>(n_logits) * static_cast<size_t>(n_out) * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_.get()),
        "cudaMemcpyAsync (logits)");
}

void CudaRunner::gemv_rows(const DeviceMatrix& w, const float* x, int32_t m, float* y) {
  for (int32_t i = 0; i < m; i += kMaxGemvRows) {
    gemv(w, x + static_cast<int64_t>(i) * w.n_cols, std::min(kMaxGemvRows, m - i),
         y + static_cast<int64_t>(i) * w.n_rows, stream_.get());
  }
}

void CudaRunner::matmul(const DeviceMatrix& w, const float* x, int32_t m, float* y) {
  if (m <= kMaxGemvRows || options_.batch_invariant) {
    // With batch invariance the weights are read m / kMaxGemvRows times: slower for prompts, and
    // each row's result independent of the others (RunnerOptions::batch_invariant).
    gemv_rows(w, x, m, y);
    return;
  }
  f32_to_bf16(x, static_cast<int64_t>(m) * w.n_cols, act_bf16_.get<uint16_t>(), stream_.get());
  if (m <= kMaxTiledGemmRows || !cublas_) {
    tiled_gemm(w, act_bf16_.get<uint16_t>(), m, y, w.n_rows, stream_.get());
    return;
  }
  const int64_t rows_per_slice = std::max<int64_t>(1, weight_slice_elements_ / w.n_cols);
  for (int64_t r0 = 0; r0 < w.n_rows; r0 += rows_per_slice) {
    const int64_t rows = std::min(rows_per_slice, w.n_rows - r0);
    DeviceMatrix slice = w;
    slice.data = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r0) * w.row_bytes;
    slice.n_rows = rows;
    dequantize_bf16(slice, rows, weight_bf16_.get<uint16_t>(), stream_.get());
    cublas_->gemm_bf16(weight_bf16_.get<uint16_t>(), act_bf16_.get<uint16_t>(), y + r0, rows, m,
                       w.n_cols, w.n_rows);
  }
}

void CudaRunner::attention_block(size_t layer, int32_t n, const StepLayout& at) {
  const model::ModelConfig& c = config_;
  const Layer& w = layers_[layer];
  cudaStream_t s = stream_.get();
  const auto d = static_cast<int32_t>(c.n_embd);
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const auto n_heads = static_cast<int32_t>(c.n_heads);
  const auto n_kv = static_cast<int32_t>(c.n_kv_heads[layer]);
  const auto hd = static_cast<int32_t>(c.head_dim_k);
  float* x = x_.get<float>();
  float* xn = xn_.get<float>();
  float* q = q_.get<float>();
  float* k = k_.get<float>();
  float* v = v_.get<float>();

  rms_norm(x, w.attn_norm, xn, n, d, eps, s);
  matmul(w.wq, xn, n, q);
  matmul(w.wk, xn, n, k);
  matmul(w.wv, xn, n, v);
  if (w.bq != nullptr) {
    add_bias(q, w.bq, n, n_heads * hd, s);
    add_bias(k, w.bk, n, n_kv * hd, s);
    add_bias(v, w.bv, n, n_kv * static_cast<int32_t>(c.head_dim_v), s);
  }
  if (w.q_norm != nullptr) {
    rms_norm(q, w.q_norm, q, n * n_heads, hd, eps, s);
    rms_norm(k, w.k_norm, k, n * n_kv, hd, eps, s);
  }
  const bool local = c.is_sliding[layer] && !rope_local_.inv_freq.empty();
  const float* cos = staged<float>((local ? at.rope_cos_local : at.rope_cos) * 4);
  const float* sin = staged<float>((local ? at.rope_sin_local : at.rope_sin) * 4);
  const bool neox = traits_.rope == model::RopeLayout::kHalves;
  rope(q, n, n_heads, hd, cos, sin, neox, s);
  rope(k, n, n_kv, hd, cos, sin, neox, s);

  const KvLayerView view = kv_view(layer);
  const int32_t group = kv_layout_.group_of(static_cast<int32_t>(layer));
  write_kv(view, k, v, n, staged<int32_t>((at.pages + static_cast<size_t>(group) * n) * 4),
           staged<int32_t>(at.slots * 4), s);
  AttentionBatch ab;
  ab.n_tokens = n;
  ab.n_heads = n_heads;
  ab.token_seq = staged<int32_t>(at.token_seq * 4);
  ab.token_pos = staged<int32_t>(at.token_pos * 4);
  ab.seq_table_begin = staged<int32_t>(at.table_begin * 4);
  ab.tables = staged<int32_t>(at.tables * 4);
  ab.n_groups = kv_layout_.n_groups();
  ab.group = group;
  ab.window = static_cast<int32_t>(c.attention_window(layer));
  ab.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  AttentionSplit split;
  if (at.split_attention) {
    // About two blocks per multiprocessor.
    split.splits = attention_splits_for(n, n_heads, n_kv, 2 * device_.multiprocessors);
    split.tile_states = tile_states_.get<float>();
    split.tile_capacity = tile_capacity_;
  }
  paged_attention(view, ab, q, attn_.get<float>(), s, split);

  float* out = ffn_.get<float>();
  matmul(w.wo, attn_.get<float>(), n, out);
  if (w.post_attn_norm != nullptr) rms_norm(out, w.post_attn_norm, out, n, d, eps, s);
  add(x, out, static_cast<int64_t>(n) * d, s);
}

void CudaRunner::feed_forward_block(size_t layer, int32_t n) {
  const model::ModelConfig& c = config_;
  const Layer& w = layers_[layer];
  cudaStream_t s = stream_.get();
  const auto d = static_cast<int32_t>(c.n_embd);
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const int64_t ff = static_cast<int64_t>(c.n_ff);
  float* x = x_.get<float>();
  float* xn = xn_.get<float>();
  float* gate = gate_.get<float>();
  float* up = up_.get<float>();
  float* out = ffn_.get<float>();
  rms_norm(x, w.ffn_norm, xn, n, d, eps, s);
  matmul(w.w_gate, xn, n, gate);
  matmul(w.w_up, xn, n, up);
  if (traits_.activation == model::FeedForwardActivation::kGeluTanh) {
    gelu_tanh_mul(gate, up, n * ff, s);
  } else {
    silu_mul(gate, up, n * ff, s);
  }
  matmul(w.w_down, gate, n, out);
  if (w.post_ffn_norm != nullptr) rms_norm(out, w.post_ffn_norm, out, n, d, eps, s);
  add(x, out, static_cast<int64_t>(n) * d, s);
}

}  // namespace llms::cuda
