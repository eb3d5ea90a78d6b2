// eval/kl_divergence: how far one run's next-token distributions are from a base run's, token by
// token (the base: an f16 KV cache or the unquantized model; the other: what is being measured).
//
// Per row: KL(P_base || Q) = sum_i p_i (log p_i - log q_i), and whether both put their highest
// probability on the same token. The summary gives the mean, median, 99th percentile and maximum
// KL (as llama.cpp's perplexity tool reports them) and the share of rows whose top token agrees.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llms::eval {

struct KlDivergenceSummary {
  int64_t n_rows = 0;
  double mean = 0.0;
  double median = 0.0;
  double p99 = 0.0;
  double max = 0.0;
  double same_top = 0.0;  // fraction of rows with the same most likely token
};

class KlDivergence {
 public:
  // Both rows are log-probabilities over the same vocabulary; base_top is the base's most likely
  // token (-1: the first largest of base_log_probs).
  void add(std::span<const float> base_log_probs, std::span<const float> log_probs,
           int32_t base_top = -1);
  KlDivergenceSummary summary() const;

 private:
  std::vector<double> per_row_;
  int64_t same_top_ = 0;
};

}  // namespace llms::eval
