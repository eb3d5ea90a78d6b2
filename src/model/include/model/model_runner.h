// model/model_runner: the executor contract behind a StepBatch.
//
// A ModelRunner holds one model's weights in its device's layout and the KV storage for a pool
// of blocks; the engine, the scheduler and the KV manager decide which block holds which
// positions and never see a tensor. Per step the engine asks the runner to
// 1. copy_blocks(): do the copy-on-write copies the KV manager reported (and copy_slots() the
//    token moves speculative decoding asks for after a tree was verified), then
// 2. execute(): run one forward pass over the batch (any mix of prefill chunks, decode tokens and
//    speculative tokens of many sequences) and return logits for exactly the rows the batch
//    lists in logits_rows, several per sequence when speculating, in that order.
// The returned rows stay valid until the next execute(). The CPU transformer is one runner
// (model/cpu_runner.h); a CUDA runner implements the same contract.
//
// Errors: execute() throws llms::Error(kInvalidArgument) for a malformed batch or a token
// outside the vocabulary before it writes anything; any other throw leaves the KV positions of
// that step unspecified (the engine recomputes or ends the sequences concerned).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kv/kv_budget.h"
#include "kv/kv_cache_manager.h"
#include "kv/step_batch.h"
#include "model/model_config.h"

namespace llms::model {

// Row i of a step's logits is the i-th entry of StepBatch::logits_rows.
struct LogitsView {
  const float* data = nullptr;
  int32_t n_rows = 0;
  int32_t n_vocab = 0;
  std::span<const float> row(int32_t i) const {
    return {data + static_cast<size_t>(i) * static_cast<size_t>(n_vocab),
            static_cast<size_t>(n_vocab)};
  }
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelConfig& config() const = 0;
  // Rows of a logits row (the model's output width; at least the tokenizer's vocabulary).
  virtual int32_t n_vocab() const = 0;
  // What one KV block of block_size tokens costs in this runner's storage, when layers share
  // blocks as `layout` says (kv/kv_groups.h; ModelConfig::windowed_kv_layout() or
  // single_kv_layout()).
  virtual size_t kv_bytes_per_block(int32_t block_size, kv::KvCacheType type,
                                    const kv::KvGroupLayout& layout) const = 0;
  // Creates the KV storage: n_blocks blocks of block_size tokens, shared by cache groups as
  // `layout` says (the batches' n_kv_groups must match). Called once, before execute().
  virtual void allocate_kv(int32_t block_size, int32_t n_blocks, kv::KvCacheType type,
                           const kv::KvGroupLayout& layout) = 0;
  virtual size_t kv_bytes() const = 0;
  // Bytes of the runner's own device memory its KV pool may still take (a GPU's, after the
  // weights and step buffers), or -1 when the pool lives in host memory and the engine sizes
  // it by the memory the system has available.
  virtual int64_t kv_memory_available() const { return -1; }
  // Sizes the step buffers for up to max_tokens tokens and max_logit_rows logits rows (execute()
  // grows them when a step needs more; this only moves the allocation to start-up).
  virtual void reserve(int32_t max_tokens, int32_t max_logit_rows) = 0;

  // Logits rows cover token ids [0, n) only, n at least the one asked (a multiple of 16 at most
  // n_vocab()); LogitsView::n_vocab then says the rows' width. A draft model's reduced head.
  virtual void limit_output_rows(int32_t n) = 0;

  // Attention sinks plus a recent window for every full-attention layer (StreamingLLM;
  // ModelConfig::set_streaming_attention validates and throws). Before allocate_kv(): the
  // windows decide the cache groups (ModelConfig::windowed_kv_layout()).
  virtual void set_streaming_attention(int64_t window, int64_t sinks) = 0;

  // While on, execute() also reports the attention mass each KV block drew in the step (H2O
  // eviction, kv/heavy_hitters.h): attention_mass(i) is, for the batch's i-th sequence, per
  // block index, the softmax weight of that block's keys summed over layers, heads and queries.
  virtual void track_attention_mass(bool on) = 0;
  virtual std::span<const float> attention_mass(size_t slice) const = 0;

  virtual void copy_blocks(std::span<const kv::BlockCopy> copies) = 0;
  // Moves single tokens' keys and values, in order (speculative decoding keeps a branch of a
  // token tree: its nodes move to the slots of a plain run).
  virtual void copy_slots(std::span<const kv::SlotCopy> copies) = 0;
  virtual LogitsView execute(const kv::StepBatch& batch) = 0;

  // The caller's next execute() is not imminent (a step ended with host work to do): compute
  // threads may stop spinning and give their cores away.
  virtual void rest() {}
};

}  // namespace llms::model
