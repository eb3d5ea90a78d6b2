// model/transformer: the forward pass shared by every supported decoder-only family.
//
// Contract: forward() takes one StepBatch (any mix of prefill chunks, decode tokens and
// speculative tokens from many sequences), writes each token's keys and values into the paged
// KV storage at the slots its sequence's block table names, attends causally (and within the
// sliding window on layers that have one) over each sequence's own cache, and returns logits
// only for the rows the batch asks for. Activation buffers are sized by reserve() and reused, so
// a step allocates nothing once the largest step has been seen.
//
// An optional activation observer sees the input of every weight matmul (what importance
// matrices are gathered from, quantize/importance_matrix.h) without model/ knowing what it does
// with it: unset, it costs one test per matmul.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kv/step_batch.h"
#include "model/architecture.h"
#include "model/kv_storage.h"
#include "model/model_config.h"
#include "model/rope.h"
#include "model/transformer_weights.h"
#include "util/huge_page_buffer.h"
#include "util/thread_pool.h"

namespace llms::model {

class PagedAttention;  // model/paged_attention.h

// kInPlace multiplies the file's weights in their own formats with 8-bit activations (the fast
// path). kDequantizedF32 converts every matrix to F32 at load, so no activation is quantized:
// a numerics reference that isolates the forward pass from quantized arithmetic (4-8x the
// memory, slower).
enum class WeightMode { kInPlace, kDequantizedF32 };

// The input of one weight matmul y = W x of a forward pass: n_rows activation rows (one per token
// of the step, or per logits row for the output matrix) of n_columns f32 values each, row-major,
// n_columns being W's input width (ne[0] of the weight tensor).
struct MatmulInput {
  std::string_view weight;  // the weight tensor's GGUF name, e.g. "blk.3.ffn_down.weight"
  const float* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_columns = 0;
};

// Called on the thread that runs forward(), before the matmul; `data` is valid only during the
// call. It must not call back into the Transformer.
using ActivationObserver = std::function<void(const MatmulInput&)>;

class Transformer {
 public:
  // `file` must outlive the Transformer: the embedding table (and in the F32 mode nothing else)
  // stays a view into its mmap; the matrices decode streams are moved into an arena it owns.
  Transformer(const gguf::GgufFile& file, int n_threads, WeightMode mode = WeightMode::kInPlace);
  // Runs its loops on `pool`, which other models may share (a draft model beside its target:
  // two pools spinning on the same cores would take them from each other).
  Transformer(const gguf::GgufFile& file, std::shared_ptr<ThreadPool> pool,
              WeightMode mode = WeightMode::kInPlace);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return config_; }
  const ArchitectureTraits& traits() const { return traits_; }
  int32_t n_vocab() const { return static_cast<int32_t>(config_.n_vocab); }
  // Width of a logits row: n_vocab, or fewer after limit_output_rows().
  int32_t n_outputs() const { return static_cast<int32_t>(weights_.output.n_rows); }
  // Computes logits for token ids [0, n) only (n rounded up to a multiple of 16, at most
  // n_vocab): a draft model's head over the most frequent tokens, since byte-level BPE
  // vocabularies number tokens in merge order, most frequent first. The output matrix is read
  // as its first rows (every weight layout keeps rows in order in whole 16-row units).
  void limit_output_rows(int64_t n);
  ThreadPool& pool() { return *pool_; }
  const std::shared_ptr<ThreadPool>& shared_pool() const { return pool_; }

  // Sizes the activation buffers for steps of up to max_tokens tokens and max_logit_rows logits.
  void reserve(int32_t max_tokens, int32_t max_logit_rows);

  // Runs one step. `logits` receives batch.logits_rows.size() rows of n_vocab floats.
  // Throws llms::Error(kInvalidArgument) for a malformed batch or an out-of-vocabulary token.
  // An int8 `kv` must have its key smoothing calibrated first (attention throws otherwise).
  void forward(const kv::StepBatch& batch, KvStorage& kv, float* logits);

  // Gives an int8 store its key-smoothing factors (model/key_smoothing.h) from one forward pass
  // over calibration_tokens() in a scratch f32 cache; a no-op for other stores and for one
  // calibrated already. The same model gets the same factors on every run on one machine.
  void calibrate_key_smoothing(KvStorage& kv);

  // Attention sinks plus a recent window for every full-attention layer (StreamingLLM;
  // ModelConfig::set_streaming_attention, which validates; window 0: off).
  void set_streaming_attention(int64_t window, int64_t sinks);

  // While on, forward() also sums the attention mass each KV block draws (model/paged_attention.h
  // AttentionMass; H2O eviction): attention_mass(i) is slice i's, per block index.
  void track_attention_mass(bool on) { track_mass_ = on; }
  std::span<const float> attention_mass(size_t slice) const;

  // Tells `observer` the input of every weight matmul of each later forward(), per layer in
  // order: attn_q, attn_k, attn_v (one shared input, told once per weight all the same),
  // attn_output, ffn_gate, ffn_up (shared likewise), ffn_down; then, when the step asks for
  // logits, the output matrix over the logits rows only ("output.weight", or "token_embd.weight"
  // when the model ties its output to the embedding). An empty function removes the observer.
  // calibrate_key_smoothing()'s own pass is not told.
  void set_activation_observer(ActivationObserver observer);

 private:
  struct Buffers {
    int32_t max_tokens = 0;
    int32_t max_logit_rows = 0;
    std::vector<float> x, xn, q, k, v, attn, gate, up, ffn, logit_in;
    // Per token of the step: cos and sin of each rotated pair (head_dim / 2), for the model's
    // RoPE and for the sliding-window layers' own (Gemma 3).
    std::vector<float> rope_cos, rope_sin, rope_cos_local, rope_sin_local;
    // With attention sinks: each query rotated at its position in the cache of sinks and
    // window, and those angles.
    std::vector<float> q_sink, rope_cos_sink, rope_sin_sink;
  };

  void embed(const kv::StepBatch& batch);
  void rope_tables(const kv::StepBatch& batch);
  void attention_block(size_t layer, const kv::StepBatch& batch, KvStorage& kv);
  void feed_forward_block(size_t layer, int32_t n_tokens);
  void matmul(const kernels::QuantMatrix& w, const float* x, int32_t m, float* y);
  void observe(const std::string& weight, const float* x, int32_t n_rows, int64_t n_columns) const;
  void place_weights();
  // fn(i) for every row i < n, on the pool when n >= kMinParallelRows (rows are independent).
  template <class F>
  void for_rows(int32_t n, F&& fn);
  static constexpr int32_t kMinParallelRows = 16;

  ModelConfig config_;
  ArchitectureTraits traits_;
  RopeFrequencies rope_;        // every layer but Gemma 3's sliding-window ones
  RopeFrequencies rope_local_;  // sliding-window layers (empty when they use rope_)
  TransformerWeights weights_;
  std::list<std::vector<float>> f32_weights_;  // only in WeightMode::kDequantizedF32
  HugePageBuffer placed_weights_;  // the matrices decode streams (grouped or copied), one arena
  std::shared_ptr<ThreadPool> pool_;
  kernels::MatmulScratch scratch_;
  Buffers buf_;
  std::unique_ptr<PagedAttention> attention_;
  bool track_mass_ = false;
  std::vector<float> block_mass_;
  std::vector<size_t> mass_offset_;  // per slice, then the total
  // The observer and the GGUF names it is told, made when it is set (so an unobserved step
  // builds no string).
  struct LayerWeightNames {
    std::string q, k, v, o, gate, up, down;
  };
  ActivationObserver observer_;
  std::vector<LayerWeightNames> weight_names_;
  std::string output_name_;
  bool output_tied_ = false;  // no output.weight in the file: the embedding is the output matrix
};

}  // namespace llms::model
