// cuda/cuda_runner: the ModelRunner (model/model_runner.h) on an NVIDIA GPU.
//
// It runs the forward pass of model/transformer.cpp step for step with the kernels of
// cuda/device_kernels.h: the same families (llama, qwen2, qwen3, gemma3), the same order of
// operations, f32 activations. Weights are uploaded at load in their GGUF block formats and
// decoded in registers by the GEMV (up to kMaxGemvRows activation rows: decode steps); steps of
// up to kMaxTiledGemmRows decode tiles of them into shared memory for tensor-core products
// (tiled_gemm); larger steps dequantize a matrix to bf16 in slices and multiply through cuBLAS.
//
// KV pool: f16 keys and values in device memory, one pool per member slot of the cache-group
// layout (kv/kv_groups.h): member m's page p, KV head h, slot s of keys at
//   k_pool + ((m * n_pages + p) * page_heads + h) * block_size + s) * head_dim_k
// (values likewise), so a layer's view is a contiguous run of pages and a block copy is one
// copy per member.
//
// Per step the host validates the batch (as the CPU runner does, before anything is written),
// lays out the step's metadata (tokens, each token's sequence, cache slot and page per group,
// the block tables, RoPE angles, logits rows) in one pinned buffer, copies it with one
// transfer, enqueues the layers on one stream (small steps and decode steps as one
// captured CUDA graph per shape) and waits for the logits rows.
//
// Not implemented yet, refused naming the feature: KV types other than f16, token trees
// (copy_slots and tree batches), attention sinks (streaming_window) and attention-mass
// tracking (H2O).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "cublas.h"
#include "cuda/cuda_backend.h"
#include "device_buffer.h"
#include "device_kernels.h"
#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/model_config.h"
#include "model/model_runner.h"
#include "model/rope.h"

namespace llms::cuda {

class CudaRunner final : public model::ModelRunner {
 public:
  // A GEMM's weights are dequantized to bf16 this many elements at a time (256 MiB of bf16): a
  // slice of rows, so the scratch does not grow with the widest matrix.
  static constexpr int64_t kDefaultWeightSliceElements = int64_t{128} << 20;

  // Layer matrices of steps of more than kMaxGemvRows and up to this many tokens go through the
  // tiled GEMM on the weights' blocks (read once per 64 rows); larger steps through cuBLAS on a
  // bf16 copy of the weights (the tensor cores at their full rate, the copy's traffic spread
  // over many rows), or the tiled GEMM where cuBLAS is missing. The crossover is a guess until
  // measured (the kernel timings print both paths at 16, 64 and 256 rows).
  static constexpr int32_t kMaxTiledGemmRows = 64;
  // Steps of up to kMaxGraphTokens tokens, and decode steps (a token per sequence, each with
  // its logits row) of up to kMaxGraphDecodeTokens, run as captured CUDA graphs (use_graphs;
  // cuda_runner.cpp): one per shape, so mixed steps beyond 8 tokens, whose shapes are many, run
  // eagerly. Decode steps past 8 sequences take the tiled GEMM, which captures like any kernel.
  static constexpr int32_t kMaxGraphTokens = kMaxGemvRows;
  static constexpr int32_t kMaxGraphDecodeTokens = kMaxTiledGemmRows;
  // Steps of up to this many tokens split their attention over blocks (AttentionSplit).
  static constexpr int32_t kMaxSplitAttentionTokens = kMaxGemvRows;

  // device: the probed device options.device names (make_runner resolves it).
  // weight_slice_elements: the GEMM's slice (tests make it small to cover the slicing).
  CudaRunner(const gguf::GgufFile& file, const DeviceInfo& device, const RunnerOptions& options,
             int64_t weight_slice_elements = kDefaultWeightSliceElements);
  ~CudaRunner() override;

  const model::ModelConfig& config() const override { return config_; }
  int32_t n_vocab() const override { return static_cast<int32_t>(config_.n_vocab); }
  size_t kv_bytes_per_block(int32_t block_size, kv::KvCacheType type,
                            const kv::KvGroupLayout& layout) const override;
  void allocate_kv(int32_t block_size, int32_t n_blocks, kv::KvCacheType type,
                   const kv::KvGroupLayout& layout) override;
  size_t kv_bytes() const override { return k_pool_.bytes() + v_pool_.bytes(); }
  int64_t kv_memory_available() const override;
  void reserve(int32_t max_tokens, int32_t max_logit_rows) override;
  void limit_output_rows(int32_t n) override;
  void set_streaming_attention(int64_t window, int64_t sinks) override;
  void track_attention_mass(bool on) override;
  std::span<const float> attention_mass(size_t slice) const override;
  void copy_blocks(std::span<const kv::BlockCopy> copies) override;
  void copy_slots(std::span<const kv::SlotCopy> copies) override;
  model::LogitsView execute(const kv::StepBatch& batch) override;

  // Steps run by replaying a captured graph so far (tests check that graphs are really used).
  int64_t graph_launches() const { return graph_launches_; }

 private:
  struct Layer {
    const float* attn_norm = nullptr;  // device pointers into weights_
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    const float* bq = nullptr;
    const float* bk = nullptr;
    const float* bv = nullptr;
    const float* q_norm = nullptr;
    const float* k_norm = nullptr;
    const float* post_attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float* post_ffn_norm = nullptr;
  };
  // The step's metadata, as offsets (in int32 or float units) into the staging buffers.
  struct StepLayout {
    size_t tokens = 0, token_seq = 0, token_pos = 0, slots = 0, pages = 0, table_begin = 0,
           tables = 0, logits_rows = 0, rope_cos = 0, rope_sin = 0, rope_cos_local = 0,
           rope_sin_local = 0, total = 0;
    // Attention split over blocks (AttentionSplit): a step of a few tokens whose tiles all fit
    // tile_states_. Part of a step graph's key.
    bool split_attention = false;
  };

  void upload_weights(const gguf::GgufFile& file);
  void stage(const kv::StepBatch& batch, StepLayout& layout);
  void matmul(const DeviceMatrix& w, const float* x, int32_t m, float* y);
  // The GEMV over kMaxGemvRows activation rows at a time: each row's result is the same
  // whatever else is in the step (the output matrix always goes this way, so a sequence's
  // logits do not depend on its batch; and every matrix with batch invariance).
  void gemv_rows(const DeviceMatrix& w, const float* x, int32_t m, float* y);
  void forward(const kv::StepBatch& batch, const StepLayout& at);
  void launch_graph(const kv::StepBatch& batch, const StepLayout& at);
  void attention_block(size_t layer, int32_t n, const StepLayout& at);
  void feed_forward_block(size_t layer, int32_t n);
  KvLayerView kv_view(size_t layer) const;
  template <class T>
  T* staged(size_t offset) const {
    return reinterpret_cast<T*>(step_device_.get<uint8_t>() + offset);
  }

  // An instantiated step graph, destroyed with the map entry.
  class GraphExec {
   public:
    explicit GraphExec(cudaGraphExec_t exec) : exec_(exec) {}
    ~GraphExec() {
      if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    }
    GraphExec(GraphExec&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
    GraphExec& operator=(GraphExec&&) = delete;
    GraphExec(const GraphExec&) = delete;
    GraphExec& operator=(const GraphExec&) = delete;
    cudaGraphExec_t get() const { return exec_; }

   private:
    cudaGraphExec_t exec_ = nullptr;
  };
  // tokens, sequences, logits rows, split attention
  using GraphKey = std::tuple<int32_t, int32_t, int32_t, bool>;

  DeviceInfo device_;
  RunnerOptions options_;
  model::ModelConfig config_;
  model::ArchitectureTraits traits_;
  model::RopeFrequencies rope_;
  model::RopeFrequencies rope_local_;  // Gemma 3's sliding-window layers (empty: rope_)
  Stream stream_;
  std::unique_ptr<Cublas> cublas_;
  DeviceBuffer weights_;  // every tensor the forward pass reads, one allocation
  DeviceMatrix token_embd_;
  DeviceMatrix output_;
  int64_t output_rows_ = 0;  // the output matrix's rows in the file (limit_output_rows cuts)
  const float* output_norm_ = nullptr;
  std::vector<Layer> layers_;

  // KV pool (allocate_kv).
  kv::KvGroupLayout kv_layout_;
  int32_t block_size_ = 0;
  int32_t n_pages_ = 0;
  int32_t page_heads_ = 0;
  DeviceBuffer k_pool_, v_pool_;

  // Step buffers (reserve), f32 unless named.
  int32_t max_tokens_ = 0;
  int32_t max_logit_rows_ = 0;
  DeviceBuffer x_, xn_, q_, k_, v_, attn_, gate_, up_, ffn_, logit_in_, logits_;
  DeviceBuffer act_bf16_;              // a GEMM's activations
  DeviceBuffer weight_bf16_;           // a slice of a GEMM's weights
  int64_t weight_slice_elements_ = 0;  // the slice the scratch holds
  int64_t weight_slice_limit_ = 0;     // the slice asked for
  // Split attention's tile states (reserve): steps of up to kMaxSplitAttentionTokens, each token
  // up to tile_capacity_ tiles (the training context's, within kMaxTileStateBytes).
  static constexpr int64_t kMaxTileStateBytes = int64_t{64} << 20;
  DeviceBuffer tile_states_;
  int64_t tile_capacity_ = 0;
  PinnedBuffer logits_host_;
  // Step metadata: built in pinned memory, copied in one transfer. Nothing rewrites step_host_
  // before the stream has finished with the previous step (every path out of execute() and
  // copy_blocks(), a throw included, waits for it).
  PinnedBuffer step_host_;
  DeviceBuffer step_device_;

  // Captured step graphs (declared last: destroyed before the buffers they point at).
  std::map<GraphKey, GraphExec> graphs_;
  std::set<GraphKey> eager_keys_;  // shapes whose capture failed here: run eagerly
  int64_t graph_launches_ = 0;
};

}  // namespace llms::cuda
