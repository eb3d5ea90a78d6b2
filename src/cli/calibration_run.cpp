// cli/calibration_run: see calibration_run.h.
#include "calibration_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>

#include "kv/step_batch.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/text_file.h"
#include "util/thread_pool.h"
#include "util/utf8.h"

namespace llms::cli {
namespace {

constexpr int32_t kKvBlock = 16;

[[noreturn]] void refuse(std::string message) {
  throw Error(Error::Kind::kInvalidArgument, std::move(message));
}

std::string read_text(const std::string& path, const std::string& flag) {
  std::string text = read_text_file(path, flag);
  if (text.empty()) refuse(fmt::format("{}: '{}' is empty", flag, path));
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string::npos) {
    refuse(fmt::format("{}: '{}' is not UTF-8 (invalid byte at offset {})", flag, path, bad));
  }
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

CalibrationRun::CalibrationRun(const gguf::GgufFile& file, const std::string& model_label,
                               const CalibrationOptions& options)
    : options_(options), model_label_(model_label) {
  const CalibrationOptions& o = options_;
  if (o.chunks < 0)
    refuse(fmt::format("--chunks: {} is not a positive number of chunks", o.chunks));
  if (o.ctx < o.min_ctx) {
    refuse(fmt::format("--ctx: {} is less than {} tokens (a matmul of fewer rows is not counted)",
                       o.ctx, o.min_ctx));
  }
  const std::string text = read_text(o.text_file, o.text_flag);
  const uint64_t n_ctx_train = model::ModelConfig::from_gguf(file).n_ctx_train;
  if (n_ctx_train > 0 && static_cast<uint64_t>(o.ctx) > n_ctx_train) {
    refuse(fmt::format("--ctx: {} is more than the model's context {}", o.ctx, n_ctx_train));
  }
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  tokens_ = tok.encode(text);
  const auto n_available = static_cast<int64_t>(tokens_.size()) / o.ctx;
  if (n_available < 1) {
    refuse(fmt::format("the text has {} tokens; one chunk of --ctx {} needs {}", tokens_.size(),
                       o.ctx, o.ctx));
  }
  n_chunks_ = o.chunks > 0 ? std::min(o.chunks, n_available) : n_available;
  if (o.chunks > n_available) {
    fmt::print(stderr, "[{}] the text holds {} chunks of {} tokens, not {}: using {}\n", o.tag,
               n_available, o.ctx, o.chunks, n_available);
  }
  bos_ = tok.add_bos() ? tok.bos_id() : -1;
  runner_ = std::make_unique<model::CpuRunner>(file, std::make_shared<ThreadPool>(o.threads));
  n_blocks_ = (o.ctx + kKvBlock - 1) / kKvBlock;
  runner_->allocate_kv(kKvBlock, n_blocks_, kv::KvCacheType::kF16,
                       runner_->config().single_kv_layout());
  runner_->reserve(o.ctx, o.logits_rows ? o.ctx : 1);
}

void CalibrationRun::run(const model::ActivationObserver& observer) {
  const CalibrationOptions& o = options_;
  // The output matmul runs only over rows that want logits: all of them when it is observed.
  const int32_t n_logits = o.logits_rows ? o.ctx : 0;
  runner_->transformer().set_activation_observer(observer);
  std::vector<kv::BlockId> table(static_cast<size_t>(n_blocks_));
  for (int32_t b = 0; b < n_blocks_; ++b) table[static_cast<size_t>(b)] = b;
  fmt::print(stderr, "[{}] {}: {} tokens, {} chunks of {}, {} threads\n", o.tag, model_label_,
             tokens_.size(), n_chunks_, o.ctx, o.threads);
  const auto start = std::chrono::steady_clock::now();
  kv::StepBatch batch;
  std::vector<int32_t> chunk;
  for (int64_t c = 0; c < n_chunks_; ++c) {
    const auto begin = tokens_.begin() + static_cast<std::ptrdiff_t>(c * o.ctx);
    chunk.assign(begin, begin + o.ctx);
    if (bos_ >= 0) chunk[0] = bos_;
    batch.clear();
    // Each chunk is a new sequence at position 0 over the same blocks: nothing of the previous
    // chunk is attended to.
    batch.add_sequence(c, chunk, 0, table, n_logits);
    runner_->execute(batch);
    const double s = seconds_since(start);
    fmt::print(stderr, "[{}] chunk {}/{}  {:.1f} s, ~{:.0f} s left\n", o.tag, c + 1, n_chunks_, s,
               s / static_cast<double>(c + 1) * static_cast<double>(n_chunks_ - c - 1));
  }
  runner_->transformer().set_activation_observer(nullptr);
}

int64_t run_calibration(const std::filesystem::path& model, const CalibrationOptions& options,
                        const model::ActivationObserver& observer) {
  const gguf::GgufFile file = gguf::GgufFile::open(model);
  CalibrationRun run(file, model.filename().string(), options);
  run.run(observer);
  return run.n_chunks();
}

}  // namespace llms::cli
