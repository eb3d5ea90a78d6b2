#include "model/cpu_runner.h"

#include <algorithm>

#include "util/error.h"

namespace llms::model {

CpuRunner::CpuRunner(const gguf::GgufFile& file, std::shared_ptr<ThreadPool> pool)
    : model_(file, std::move(pool)) {}

size_t CpuRunner::kv_bytes_per_block(int32_t block_size, kv::KvCacheType type,
                                     const kv::KvGroupLayout& layout) const {
  return KvStorage::bytes_per_block(model_.config(), block_size, type, layout);
}

void CpuRunner::allocate_kv(int32_t block_size, int32_t n_blocks, kv::KvCacheType type,
                            const kv::KvGroupLayout& layout) {
  if (kv_) throw Error(Error::Kind::kInternal, "CpuRunner: the KV storage exists already");
  kv_ = std::make_unique<KvStorage>(model_.config(), block_size, n_blocks, type, layout);
  model_.calibrate_key_smoothing(*kv_);
}

size_t CpuRunner::kv_bytes() const { return kv_ ? kv_->bytes() : 0; }

void CpuRunner::reserve(int32_t max_tokens, int32_t max_logit_rows) {
  model_.reserve(max_tokens, max_logit_rows);
  const size_t want =
      static_cast<size_t>(std::max(max_logit_rows, 1)) * static_cast<size_t>(model_.n_vocab());
  if (logits_.size() < want) logits_.resize(want);
}

void CpuRunner::copy_blocks(std::span<const kv::BlockCopy> copies) {
  for (const kv::BlockCopy& c : copies) kv_->copy_block(c.src, c.dst);
}

void CpuRunner::copy_slots(std::span<const kv::SlotCopy> copies) {
  for (const kv::SlotCopy& c : copies) kv_->copy_slot(c);
}

LogitsView CpuRunner::execute(const kv::StepBatch& batch) {
  if (!kv_) throw Error(Error::Kind::kInternal, "CpuRunner: execute() before allocate_kv()");
  const auto n_rows = static_cast<int32_t>(batch.logits_rows.size());
  reserve(static_cast<int32_t>(batch.tokens.size()), n_rows);
  model_.forward(batch, *kv_, logits_.data());
  return LogitsView{logits_.data(), n_rows, model_.n_outputs()};
}

}  // namespace llms::model
