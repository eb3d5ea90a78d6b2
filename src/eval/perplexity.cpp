// eval/perplexity: see perplexity.h.
#include "eval/perplexity.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "eval/log_probs.h"
#include "kv/step_batch.h"
#include "util/error.h"

namespace llms::eval {

int32_t count_windows(int64_t n_tokens, const PerplexityOptions& options) {
  if (options.ctx < 4 || options.ctx % 2 != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--ctx: {} is not an even number of at least 4 tokens", options.ctx));
  }
  if (options.batch < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--batch: {} is not a positive number of tokens", options.batch));
  }
  if (options.batch > options.ctx && options.batch % options.ctx != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--batch: {} is larger than --ctx {} but not a multiple of it",
                            options.batch, options.ctx));
  }
  options.h2o.validate(options.kv_block);
  if (options.h2o.enabled() && options.batch >= options.ctx) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--h2o-budget: evictions happen between a window's passes, so --batch "
                            "({}) must be smaller than --ctx ({})",
                            options.batch, options.ctx));
  }
  if (n_tokens < 2 * static_cast<int64_t>(options.ctx)) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("the text has {} tokens; a context of {} needs at least {} (two "
                            "windows)",
                            n_tokens, options.ctx, 2 * static_cast<int64_t>(options.ctx)));
  }
  return static_cast<int32_t>(n_tokens / options.ctx);
}

PerplexityResult perplexity(model::ModelRunner& runner, std::span<const int32_t> tokens,
                            const PerplexityOptions& options,
                            const std::function<void(const PerplexityProgress&)>& on_window,
                            const std::function<void(const ScoredRow&)>& on_row) {
  PerplexityResult result;
  result.n_tokens = static_cast<int64_t>(tokens.size());
  result.n_windows = count_windows(result.n_tokens, options);
  const int32_t ctx = options.ctx;
  const int32_t first = ctx / 2;  // the first scored position
  const int32_t windows_per_pass = std::max(1, options.batch / ctx);
  const int32_t tokens_per_pass = std::min(options.batch, ctx);  // per window
  const int32_t blocks_per_window = (ctx + options.kv_block - 1) / options.kv_block;
  runner.allocate_kv(options.kv_block, blocks_per_window * windows_per_pass, options.kv_type,
                     runner.config().single_kv_layout());
  runner.reserve(tokens_per_pass * windows_per_pass, (ctx - first) * windows_per_pass);

  std::vector<std::vector<kv::BlockId>> tables(static_cast<size_t>(windows_per_pass));
  auto reset_tables = [&] {
    for (int32_t s = 0; s < windows_per_pass; ++s) {
      tables[static_cast<size_t>(s)].clear();
      for (int32_t b = 0; b < blocks_per_window; ++b) {
        tables[static_cast<size_t>(s)].push_back(s * blocks_per_window + b);
      }
    }
  };
  reset_tables();
  // H2O: each window's blocks' accumulated attention; an evicted block's entry becomes kNoBlock.
  std::vector<std::vector<double>> scores(static_cast<size_t>(windows_per_pass));
  if (options.h2o.enabled()) runner.track_attention_mass(true);
  double nll_sum = 0.0;
  double nll_sq_sum = 0.0;
  std::vector<double> window_nll;  // per window of the pass, summed in window order after it
  std::vector<std::vector<int32_t>> pass_windows;
  kv::StepBatch batch;
  for (int32_t w0 = 0; w0 < result.n_windows; w0 += windows_per_pass) {
    const int32_t n_here = std::min(windows_per_pass, result.n_windows - w0);
    pass_windows.assign(static_cast<size_t>(n_here), {});
    window_nll.assign(static_cast<size_t>(n_here), 0.0);
    reset_tables();
    for (auto& sc : scores) sc.assign(static_cast<size_t>(blocks_per_window), 0.0);
    for (int32_t s = 0; s < n_here; ++s) {
      const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(w0 + s) * ctx;
      pass_windows[static_cast<size_t>(s)].assign(begin, begin + ctx);
      if (options.bos_id >= 0) pass_windows[static_cast<size_t>(s)][0] = options.bos_id;
    }
    for (int32_t p0 = 0; p0 < ctx; p0 += tokens_per_pass) {
      const int32_t p1 = std::min(ctx, p0 + tokens_per_pass);
      // Rows at positions >= first are scored; within a pass they are always a suffix.
      const int32_t n_logits = std::max(0, p1 - std::max(p0, first));
      batch.clear();
      for (int32_t s = 0; s < n_here; ++s) {
        const std::vector<int32_t>& toks = pass_windows[static_cast<size_t>(s)];
        batch.add_sequence(w0 + s,
                           std::span<const int32_t>(toks).subspan(static_cast<size_t>(p0),
                                                                  static_cast<size_t>(p1 - p0)),
                           p0, tables[static_cast<size_t>(s)], n_logits);
      }
      const model::LogitsView logits = runner.execute(batch);
      if (options.h2o.enabled()) {
        for (int32_t s = 0; s < n_here; ++s) {
          const std::span<const float> mass = runner.attention_mass(static_cast<size_t>(s));
          std::vector<double>& sc = scores[static_cast<size_t>(s)];
          for (size_t b = 0; b < mass.size(); ++b) sc[b] += mass[b];
          // The table covers the whole window up front; what counts is what is computed.
          std::vector<kv::BlockId>& table = tables[static_cast<size_t>(s)];
          const std::span<const kv::BlockId> computed =
              std::span<const kv::BlockId>(table).first(
                  static_cast<size_t>((p1 + options.kv_block - 1) / options.kv_block));
          for (int64_t b = kv::block_to_evict(computed, sc, p1, options.kv_block, options.h2o);
               b >= 0; b = kv::block_to_evict(computed, sc, p1, options.kv_block, options.h2o)) {
            table[static_cast<size_t>(b)] = kv::kNoBlock;
          }
        }
      }
      if (n_logits == 0) continue;
      for (int32_t s = 0; s < n_here; ++s) {
        const std::span<const int32_t> text =
            tokens.subspan(static_cast<size_t>(w0 + s) * static_cast<size_t>(ctx));
        for (int32_t r = 0; r < n_logits; ++r) {
          const int32_t pos = p1 - n_logits + r;
          if (pos + 1 >= ctx) continue;  // the window's last logits predict past it
          const int32_t next = text[static_cast<size_t>(pos) + 1];
          if (next < 0 || next >= logits.n_vocab) {
            throw Error(Error::Kind::kInvalidArgument,
                        fmt::format("token {} is outside the model's {} logits rows", next,
                                    logits.n_vocab));
          }
          const std::span<const float> row = logits.row(s * n_logits + r);
          const double nll = negative_log_likelihood(row, next);
          if (on_row) on_row({w0 + s, pos, row, next});
          window_nll[static_cast<size_t>(s)] += nll;
          nll_sq_sum += nll * nll;
        }
      }
    }
    for (int32_t s = 0; s < n_here; ++s) {
      nll_sum += window_nll[static_cast<size_t>(s)];
      result.n_scored += ctx - first - 1;
      result.ppl_after_window.push_back(std::exp(nll_sum / static_cast<double>(result.n_scored)));
    }
    if (on_window) on_window({w0 + n_here, result.n_windows, result.ppl_after_window.back()});
  }
  const auto n = static_cast<double>(result.n_scored);
  result.mean_nll = nll_sum / n;
  result.ppl = std::exp(result.mean_nll);
  const double variance = nll_sq_sum / n - result.mean_nll * result.mean_nll;
  result.ppl_stderr =
      variance > 0.0 && n > 1.0 ? result.ppl * std::sqrt(variance / (n - 1.0)) : 0.0;
  return result;
}

}  // namespace llms::eval
