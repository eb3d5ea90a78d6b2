#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/ops.h"
#include "kernels/row_groups.h"
#include "kernels/row_pairs.h"
#include "model/paged_attention.h"
#include "quant/quant.h"
#include "util/error.h"

namespace llms::model {

namespace {

kernels::RopeMode rope_mode(RopeLayout layout) {
  return layout == RopeLayout::kHalves ? kernels::RopeMode::kNeox : kernels::RopeMode::kNormal;
}

}  // namespace

Transformer::Transformer(const gguf::GgufFile& file, int n_threads, WeightMode mode)
    : Transformer(file, std::make_shared<ThreadPool>(std::max(1, n_threads)), mode) {}

Transformer::Transformer(const gguf::GgufFile& file, std::shared_ptr<ThreadPool> pool,
                         WeightMode mode)
    : config_(ModelConfig::from_gguf(file)),
      traits_(runnable_traits(config_)),
      rope_(rope_frequencies(config_, config_.rope_freq_base, true)),
      rope_local_(has_local_rope(config_, traits_)
                      ? rope_frequencies(config_, traits_.local_rope_base, false)
                      : RopeFrequencies{}),
      weights_(TransformerWeights::load(file, config_, traits_)),
      pool_(std::move(pool)),
      attention_(std::make_unique<PagedAttention>()),
      output_tied_(file.find_tensor("output.weight") == nullptr) {
  if (!pool_) throw Error(Error::Kind::kInvalidArgument, "Transformer: no thread pool");
  if (mode == WeightMode::kDequantizedF32) {
    auto to_f32 = [this](kernels::QuantMatrix& m) {
      auto& store = f32_weights_.emplace_back(static_cast<size_t>(m.n_rows * m.n_cols));
      for (int64_t r = 0; r < m.n_rows; ++r) {
        quant::dequantize_row(m.type, static_cast<const uint8_t*>(m.data) + r * m.row_bytes,
                              store.data() + r * m.n_cols, m.n_cols);
      }
      m = kernels::QuantMatrix{gguf::GgmlType::kF32, store.data(), m.n_rows, m.n_cols,
                               static_cast<size_t>(m.n_cols) * sizeof(float)};
    };
    bool tied = weights_.output.data == weights_.token_embd.data;
    to_f32(weights_.token_embd);
    if (tied) {
      weights_.output = weights_.token_embd;
    } else {
      to_f32(weights_.output);
    }
    for (auto& l : weights_.layers) {
      for (auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) to_f32(*m);
    }
  } else {
    place_weights();
  }
  reserve(1, 1);
}

// Every matrix a decode step streams moves once into one arena on huge pages
// (util/huge_page_buffer.h): with 4 KiB pages of the file's map each 4 KiB of a GEMV's stream
// is a new TLB entry. Those whose kernels run faster in another layout on this CPU are
// repacked on the way, with the same values: into 16-row groups (kernels/row_groups.h: Q4_0,
// Q5_0, Q8_0, Q4_K, Q6_K on AVX-512; Q4_0, Q5_0, Q8_0 on AVX2) or into row pairs
// (kernels/row_pairs.h: short-row Q4_K, Q5_K, Q6_K on AVX2); the others are copied as they are. The
// embedding table stays in the map (a token's lookup reads one row), so a tied output gets its
// own copy.
void Transformer::place_weights() {
  const kernels::Isa isa = kernels::best_isa();
  enum class Repack { kCopy, kGroup, kPair };
  struct Move {
    kernels::QuantMatrix* matrix;
    Repack repack;
    size_t bytes;
  };
  std::vector<Move> moves;
  auto consider = [&](kernels::QuantMatrix& m) {
    if (m.layout != kernels::WeightLayout::kRows || m.n_rows == 0) return;
    if (kernels::group_rows_pays(m.type, isa)) {
      moves.push_back({&m, Repack::kGroup, kernels::grouped_bytes(m)});
      return;
    }
    if (kernels::pair_rows_pays(m, isa)) {
      moves.push_back({&m, Repack::kPair, kernels::paired_bytes(m)});
      return;
    }
    const auto row = gguf::ggml_row_bytes(m.type, static_cast<uint64_t>(m.n_cols));
    if (!row) return;  // not whole blocks: the matmul refuses it with its own message
    moves.push_back({&m, Repack::kCopy, static_cast<size_t>(m.n_rows - 1) * m.row_bytes + *row});
  };
  consider(weights_.output);
  for (auto& l : weights_.layers) {
    for (auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) consider(*m);
  }
  constexpr size_t kAlign = 64;
  auto padded = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  size_t total = 0;
  for (const Move& mv : moves) total += padded(mv.bytes);
  placed_weights_ = HugePageBuffer(total);
  uint8_t* dst = placed_weights_.data();
  for (const Move& mv : moves) {
    kernels::QuantMatrix& m = *mv.matrix;
    if (mv.repack == Repack::kGroup) {
      m = kernels::group_rows(m, dst, pool_.get());
    } else if (mv.repack == Repack::kPair) {
      m = kernels::pair_rows(m, dst, pool_.get());
    } else {
      const uint8_t* src = static_cast<const uint8_t*>(m.data);
      pool_->parallel_for(static_cast<int64_t>(mv.bytes), [&](int64_t begin, int64_t end, int) {
        std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin));
      });
      m.data = dst;
    }
    dst += padded(mv.bytes);
  }
}

Transformer::~Transformer() = default;

void Transformer::limit_output_rows(int64_t n) {
  if (n < 1) throw Error(Error::Kind::kInvalidArgument, "output rows must be >= 1");
  const int64_t rounded = (n + 15) / 16 * 16;
  weights_.output.n_rows = std::min<int64_t>(rounded, static_cast<int64_t>(config_.n_vocab));
}

void Transformer::reserve(int32_t max_tokens, int32_t max_logit_rows) {
  if (max_tokens <= buf_.max_tokens && max_logit_rows <= buf_.max_logit_rows) return;
  max_tokens = std::max(max_tokens, buf_.max_tokens);
  max_logit_rows = std::max(max_logit_rows, buf_.max_logit_rows);
  const ModelConfig& c = config_;
  size_t t = static_cast<size_t>(max_tokens);
  uint64_t max_kv = c.max_kv_heads();
  buf_.x.assign(t * c.n_embd, 0.0f);
  buf_.xn.assign(t * std::max(c.n_embd, c.n_heads * c.head_dim_v), 0.0f);
  buf_.q.assign(t * c.n_heads * c.head_dim_k, 0.0f);
  buf_.k.assign(t * max_kv * c.head_dim_k, 0.0f);
  buf_.v.assign(t * max_kv * c.head_dim_v, 0.0f);
  buf_.attn.assign(t * c.n_heads * c.head_dim_v, 0.0f);
  buf_.gate.assign(t * c.n_ff, 0.0f);
  buf_.up.assign(t * c.n_ff, 0.0f);
  buf_.ffn.assign(t * c.n_embd, 0.0f);
  buf_.logit_in.assign(static_cast<size_t>(max_logit_rows) * c.n_embd, 0.0f);
  const size_t half = c.head_dim_k / 2;
  buf_.rope_cos.assign(t * half, 0.0f);
  buf_.rope_sin.assign(t * half, 0.0f);
  if (!rope_local_.inv_freq.empty()) {
    buf_.rope_cos_local.assign(t * half, 0.0f);
    buf_.rope_sin_local.assign(t * half, 0.0f);
  }
  if (c.attention_sinks > 0) {
    buf_.q_sink.assign(t * c.n_heads * c.head_dim_k, 0.0f);
    buf_.rope_cos_sink.assign(t * half, 0.0f);
    buf_.rope_sin_sink.assign(t * half, 0.0f);
  }
  buf_.max_tokens = max_tokens;
  buf_.max_logit_rows = max_logit_rows;
  scratch_.reserve(max_tokens, static_cast<int64_t>(std::max(c.n_ff, c.n_heads * c.head_dim_v)));
}

template <class F>
void Transformer::for_rows(int32_t n, F&& fn) {
  // Row-wise ops (norms, RoPE, activations, residual adds) are cheap per row: share them out
  // only when there are enough rows to pay for waking the pool (prefill chunks, big batches).
  if (n < kMinParallelRows) {
    for (int32_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool_->parallel_for(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) fn(static_cast<int32_t>(i));
  });
}

void Transformer::matmul(const kernels::QuantMatrix& w, const float* x, int32_t m, float* y) {
  kernels::matmul(w, x, m, w.n_cols, y, w.n_rows, *pool_, scratch_);
}

void Transformer::set_activation_observer(ActivationObserver observer) {
  observer_ = std::move(observer);
  weight_names_.clear();
  if (!observer_) return;
  for (uint64_t layer = 0; layer < config_.n_layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    weight_names_.push_back({p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight",
                             p + "attn_output.weight", p + "ffn_gate.weight", p + "ffn_up.weight",
                             p + "ffn_down.weight"});
  }
  output_name_ = output_tied_ ? "token_embd.weight" : "output.weight";
}

void Transformer::observe(const std::string& weight, const float* x, int32_t n_rows,
                          int64_t n_columns) const {
  observer_(MatmulInput{weight, x, n_rows, n_columns});
}

void Transformer::calibrate_key_smoothing(KvStorage& kv) {
  if (!kv.needs_key_smoothing()) return;
  constexpr int32_t kTokens = 128;
  constexpr int32_t kBlock = 16;
  KvStorage scratch(config_, kBlock, kTokens / kBlock, kv::KvCacheType::kF32);
  KeyStatistics stats(config_);
  scratch.record_keys(&stats);
  std::vector<kv::BlockId> table(kTokens / kBlock);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<kv::BlockId>(i);
  const std::vector<int32_t> ids = calibration_tokens(n_vocab(), kTokens);
  kv::StepBatch batch;
  batch.add_sequence(0, ids, 0, table, 0);
  // This pass is the store's own, not a step of the caller's: an activation observer skips it.
  ActivationObserver observer = std::exchange(observer_, nullptr);
  try {
    forward(batch, scratch, nullptr);
  } catch (...) {
    observer_ = std::move(observer);
    throw;
  }
  observer_ = std::move(observer);
  kv.set_key_smoothing(smoothing_factors(config_, stats, rope_mode(traits_.rope)));
}

void Transformer::forward(const kv::StepBatch& batch, KvStorage& kv, float* logits) {
  batch.validate(kv.block_size(), kv.n_blocks());
  if (batch.n_kv_groups != kv.layout().n_groups()) {
    throw Error(Error::Kind::kInvalidArgument,
                "StepBatch: block tables of " + std::to_string(batch.n_kv_groups) +
                    " cache groups for a KV storage of " + std::to_string(kv.layout().n_groups()));
  }
  const int32_t n_tokens = static_cast<int32_t>(batch.tokens.size());
  const int32_t n_logits = static_cast<int32_t>(batch.logits_rows.size());
  if (n_tokens == 0) return;
  reserve(n_tokens, n_logits);
  mass_offset_.clear();
  if (track_mass_) {
    size_t total = 0;
    for (const kv::SequenceSlice& s : batch.sequences) {
      mass_offset_.push_back(total);
      total += static_cast<size_t>((s.n_context + kv.block_size() - 1) / kv.block_size());
    }
    mass_offset_.push_back(total);
    block_mass_.assign(total, 0.0f);
  }
  embed(batch);
  rope_tables(batch);
  for (size_t layer = 0; layer < config_.n_layers; ++layer) {
    attention_block(layer, batch, kv);
    feed_forward_block(layer, n_tokens);
  }
  if (n_logits == 0) return;
  const uint64_t d = config_.n_embd;
  for (int32_t i = 0; i < n_logits; ++i) {
    kernels::rms_norm(buf_.x.data() + batch.logits_rows[i] * d, weights_.output_norm,
                      buf_.logit_in.data() + i * d, static_cast<int64_t>(d),
                      static_cast<float>(config_.rms_norm_eps));
  }
  if (observer_) observe(output_name_, buf_.logit_in.data(), n_logits, static_cast<int64_t>(d));
  matmul(weights_.output, buf_.logit_in.data(), n_logits, logits);
}

void Transformer::embed(const kv::StepBatch& batch) {
  const uint64_t d = config_.n_embd;
  const auto& e = weights_.token_embd;
  const float scale = traits_.scales_embedding ? std::sqrt(static_cast<float>(d)) : 1.0f;
  for (size_t i = 0; i < batch.tokens.size(); ++i) {
    int32_t id = batch.tokens[i];
    if (id < 0 || id >= n_vocab()) {
      throw Error(Error::Kind::kInvalidArgument, "token id " + std::to_string(id) +
                                                     " is outside the vocabulary (" +
                                                     std::to_string(n_vocab()) + ")");
    }
    const auto* row = static_cast<const uint8_t*>(e.data) + static_cast<size_t>(id) * e.row_bytes;
    float* out = buf_.x.data() + i * d;
    quant::dequantize_row(e.type, row, out, static_cast<int64_t>(d));
    if (scale != 1.0f) kernels::scale(out, scale, static_cast<int64_t>(d));
  }
}

// Every layer rotates a token by the same angles: computed once per step.
void Transformer::rope_tables(const kv::StepBatch& batch) {
  const size_t half = config_.head_dim_k / 2;
  for_rows(static_cast<int32_t>(batch.tokens.size()), [&](int32_t i) {
    const int64_t pos = batch.positions[i];  // >= 0: forward() validated the batch
    rope_cos_sin(rope_, pos, buf_.rope_cos.data() + i * half, buf_.rope_sin.data() + i * half);
    if (!rope_local_.inv_freq.empty()) {
      rope_cos_sin(rope_local_, pos, buf_.rope_cos_local.data() + i * half,
                   buf_.rope_sin_local.data() + i * half);
    }
    if (config_.attention_sinks > 0) {
      // The query's position in the cache of sinks and window (model/paged_attention.h).
      const auto last =
          static_cast<int64_t>(config_.attention_sinks + config_.streaming_window) - 1;
      rope_cos_sin(rope_, std::min(pos, last), buf_.rope_cos_sink.data() + i * half,
                   buf_.rope_sin_sink.data() + i * half);
    }
  });
}

std::span<const float> Transformer::attention_mass(size_t slice) const {
  if (slice + 1 >= mass_offset_.size()) {
    throw Error(Error::Kind::kInvalidArgument,
                "attention_mass: no slice " + std::to_string(slice) + " in the last step");
  }
  return std::span<const float>(block_mass_)
      .subspan(mass_offset_[slice], mass_offset_[slice + 1] - mass_offset_[slice]);
}

void Transformer::set_streaming_attention(int64_t window, int64_t sinks) {
  config_.set_streaming_attention(window, sinks);
  // Size the sinks' query buffers for the steps seen so far.
  const int32_t tokens = buf_.max_tokens;
  const int32_t rows = buf_.max_logit_rows;
  buf_.max_tokens = 0;
  buf_.max_logit_rows = 0;
  reserve(std::max(tokens, 1), std::max(rows, 1));
}

void Transformer::attention_block(size_t layer, const kv::StepBatch& batch, KvStorage& kv) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const int32_t n = static_cast<int32_t>(batch.tokens.size());
  const int64_t d = static_cast<int64_t>(c.n_embd);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t n_kv = static_cast<int64_t>(c.n_kv_heads[layer]);
  const int64_t q_width = static_cast<int64_t>(c.n_heads * c.head_dim_k);
  const int64_t k_width = n_kv * static_cast<int64_t>(c.head_dim_k);
  const int64_t v_width = n_kv * static_cast<int64_t>(c.head_dim_v);

  for_rows(n, [&](int32_t i) {
    kernels::rms_norm(buf_.x.data() + i * d, w.attn_norm, buf_.xn.data() + i * d, d, eps);
  });
  if (observer_) {
    const LayerWeightNames& names = weight_names_[layer];
    for (const std::string* name : {&names.q, &names.k, &names.v}) {
      observe(*name, buf_.xn.data(), n, d);
    }
  }
  const kernels::MatmulTarget qkv[] = {{w.wq, buf_.q.data(), w.wq.n_rows},
                                       {w.wk, buf_.k.data(), w.wk.n_rows},
                                       {w.wv, buf_.v.data(), w.wv.n_rows}};
  kernels::matmul_many(qkv, buf_.xn.data(), n, d, *pool_, scratch_);

  const bool local = c.is_sliding[layer] && !rope_local_.inv_freq.empty();
  const bool sinks = c.attention_sinks_of(layer) > 0;
  const float* rope_cos = local ? buf_.rope_cos_local.data() : buf_.rope_cos.data();
  const float* rope_sin = local ? buf_.rope_sin_local.data() : buf_.rope_sin.data();
  const auto mode = rope_mode(traits_.rope);
  const int64_t hd = static_cast<int64_t>(c.head_dim_k);
  const int64_t half = hd / 2;
  for_rows(n, [&](int32_t i) {
    float* q = buf_.q.data() + i * q_width;
    float* k = buf_.k.data() + i * k_width;
    float* v = buf_.v.data() + i * v_width;
    if (w.bq) {
      kernels::add(q, w.bq, q, q_width);
      kernels::add(k, w.bk, k, k_width);
      kernels::add(v, w.bv, v, v_width);
    }
    if (w.q_norm) {
      for (int64_t h = 0; h < static_cast<int64_t>(c.n_heads); ++h) {
        kernels::rms_norm(q + h * hd, w.q_norm, q + h * hd, hd, eps);
      }
      for (int64_t h = 0; h < n_kv; ++h)
        kernels::rms_norm(k + h * hd, w.k_norm, k + h * hd, hd, eps);
    }
    const float* cs = rope_cos + i * half;
    const float* sn = rope_sin + i * half;
    if (sinks) {
      float* qs = buf_.q_sink.data() + i * q_width;
      std::copy_n(q, q_width, qs);
      kernels::rope_apply(qs, static_cast<int64_t>(c.n_heads), hd,
                          buf_.rope_cos_sink.data() + i * half,
                          buf_.rope_sin_sink.data() + i * half, mode);
    }
    kernels::rope_apply(q, static_cast<int64_t>(c.n_heads), hd, cs, sn, mode);
    kernels::rope_apply(k, n_kv, hd, cs, sn, mode);
  });

  AttentionMass mass;
  if (track_mass_) {  // forward() sized the offsets for this batch
    mass = AttentionMass{block_mass_.data(),
                         std::span<const size_t>(mass_offset_).first(batch.sequences.size()),
                         block_mass_.size()};
  }
  attention_->run(c, layer, batch, kv, buf_.q.data(), sinks ? buf_.q_sink.data() : nullptr,
                  buf_.k.data(), buf_.v.data(), buf_.attn.data(), *pool_,
                  track_mass_ ? &mass : nullptr);

  if (observer_) observe(weight_names_[layer].o, buf_.attn.data(), n, w.wo.n_cols);
  matmul(w.wo, buf_.attn.data(), n, buf_.ffn.data());
  for_rows(n, [&](int32_t i) {
    float* out = buf_.ffn.data() + i * d;
    if (w.post_attn_norm) kernels::rms_norm(out, w.post_attn_norm, out, d, eps);
    kernels::add(buf_.x.data() + i * d, out, buf_.x.data() + i * d, d);
  });
}

void Transformer::feed_forward_block(size_t layer, int32_t n) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const int64_t d = static_cast<int64_t>(c.n_embd);
  const int64_t ff = static_cast<int64_t>(c.n_ff);
  const float eps = static_cast<float>(c.rms_norm_eps);
  for_rows(n, [&](int32_t i) {
    kernels::rms_norm(buf_.x.data() + i * d, w.ffn_norm, buf_.xn.data() + i * d, d, eps);
  });
  if (observer_) {
    observe(weight_names_[layer].gate, buf_.xn.data(), n, d);
    observe(weight_names_[layer].up, buf_.xn.data(), n, d);
  }
  const kernels::MatmulTarget gate_up[] = {{w.w_gate, buf_.gate.data(), w.w_gate.n_rows},
                                           {w.w_up, buf_.up.data(), w.w_up.n_rows}};
  kernels::matmul_many(gate_up, buf_.xn.data(), n, d, *pool_, scratch_);
  for_rows(n, [&](int32_t i) {
    float* g = buf_.gate.data() + i * ff;
    const float* u = buf_.up.data() + i * ff;
    if (traits_.activation == FeedForwardActivation::kGeluTanh) {
      kernels::gelu_tanh_mul(g, u, g, ff);
    } else {
      kernels::silu_mul(g, u, g, ff);
    }
  });
  if (observer_) observe(weight_names_[layer].down, buf_.gate.data(), n, ff);
  matmul(w.w_down, buf_.gate.data(), n, buf_.ffn.data());
  for_rows(n, [&](int32_t i) {
    float* out = buf_.ffn.data() + i * d;
    if (w.post_ffn_norm) kernels::rms_norm(out, w.post_ffn_norm, out, d, eps);
    kernels::add(buf_.x.data() + i * d, out, buf_.x.data() + i * d, d);
  });
}

}  // namespace llms::model
