// model/cpu_runner: the ModelRunner of the CPU transformer (model/transformer.h) over a paged
// KvStorage (model/kv_storage.h). Logits live in a host buffer that grows to the largest step's
// rows, so nothing assumes one row per sequence.
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/kv_storage.h"
#include "model/model_runner.h"
#include "model/transformer.h"
#include "util/thread_pool.h"

namespace llms::model {

class CpuRunner final : public ModelRunner {
 public:
  // `file` must outlive the runner. `pool` may be shared with another runner (a draft model).
  CpuRunner(const gguf::GgufFile& file, std::shared_ptr<ThreadPool> pool);

  const ModelConfig& config() const override { return model_.config(); }
  int32_t n_vocab() const override { return model_.n_vocab(); }
  size_t kv_bytes_per_block(int32_t block_size, kv::KvCacheType type,
                            const kv::KvGroupLayout& layout) const override;
  void allocate_kv(int32_t block_size, int32_t n_blocks, kv::KvCacheType type,
                   const kv::KvGroupLayout& layout) override;
  size_t kv_bytes() const override;
  void reserve(int32_t max_tokens, int32_t max_logit_rows) override;
  void limit_output_rows(int32_t n) override { model_.limit_output_rows(n); }
  void set_streaming_attention(int64_t window, int64_t sinks) override {
    model_.set_streaming_attention(window, sinks);
  }
  void track_attention_mass(bool on) override { model_.track_attention_mass(on); }
  std::span<const float> attention_mass(size_t slice) const override {
    return model_.attention_mass(slice);
  }
  void copy_blocks(std::span<const kv::BlockCopy> copies) override;
  void copy_slots(std::span<const kv::SlotCopy> copies) override;
  LogitsView execute(const kv::StepBatch& batch) override;
  void rest() override { model_.pool().rest(); }

  Transformer& transformer() { return model_; }

 private:
  Transformer model_;
  std::unique_ptr<KvStorage> kv_;
  std::vector<float> logits_;
};

}  // namespace llms::model
