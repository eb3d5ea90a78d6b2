// eval/perplexity: how well a model predicts a text, as exp(mean negative log-likelihood).
//
// The method is llama.cpp's llama-perplexity, so the two agree on the same file, text and window:
// the tokens are cut into floor(n / ctx) windows of ctx tokens (the rest is dropped); each window
// is computed from an empty cache, its first token replaced by BOS when the model adds one; the
// logits at positions ctx/2 .. ctx-2 are scored against the next token (ctx/2 - 1 per window: the
// second half, each with at least half a window of context). The standard error is the one
// llama.cpp prints: ppl * sqrt(var(nll) / (n - 1)).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kv/heavy_hitters.h"
#include "kv/kv_budget.h"
#include "model/model_runner.h"

namespace llms::eval {

struct PerplexityOptions {
  int32_t ctx = 512;      // tokens per window (even, >= 4)
  int32_t batch = 512;    // tokens per forward pass: a window in several passes when smaller,
                          // several windows per pass when a multiple of ctx
  int32_t bos_id = -1;    // replaces each window's first token when >= 0
  int32_t kv_block = 16;  // KV block size of the runner's storage
  kv::KvCacheType kv_type = kv::KvCacheType::kF16;
  // H2O-style eviction (kv/heavy_hitters.h) inside each window, between its passes of `batch`
  // tokens (so batch must be smaller than ctx): what a long stream under a budget would see.
  kv::HeavyHitterBudget h2o;
};

struct PerplexityProgress {
  int32_t windows_done = 0;
  int32_t windows_total = 0;
  double ppl_so_far = 0.0;
};

struct PerplexityResult {
  double ppl = 0.0;
  double ppl_stderr = 0.0;
  double mean_nll = 0.0;
  int64_t n_scored = 0;
  int32_t n_windows = 0;
  int64_t n_tokens = 0;                  // of the text (windows use n_windows * ctx of them)
  std::vector<double> ppl_after_window;  // running perplexity after each window
};

// Windows the text gives; throws llms::Error(kInvalidArgument) when the options are out of range
// or the text is shorter than two windows (llama.cpp's minimum), saying how many tokens it has.
int32_t count_windows(int64_t n_tokens, const PerplexityOptions& options);

// One scored position: the logits at `position` of window `window`, and the token they predict.
// Rows come in order (window by window, position by position); the logits are valid only during
// the call.
struct ScoredRow {
  int32_t window = 0;
  int32_t position = 0;
  std::span<const float> logits;
  int32_t next_token = 0;
};

// Runs every window through `runner` (which must be freshly made: this allocates its KV storage)
// and scores it. `on_row` sees every scored row (saving logits, KL-divergence); `on_window` is
// called after each window.
PerplexityResult perplexity(model::ModelRunner& runner, std::span<const int32_t> tokens,
                            const PerplexityOptions& options,
                            const std::function<void(const PerplexityProgress&)>& on_window = {},
                            const std::function<void(const ScoredRow&)>& on_row = {});

}  // namespace llms::eval
