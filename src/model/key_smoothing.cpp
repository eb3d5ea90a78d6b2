#include "model/key_smoothing.h"

#include <algorithm>
#include <cmath>

namespace llms::model {

KeyStatistics::KeyStatistics(const ModelConfig& config) : head_dim_(config.head_dim_k) {
  size_t heads = 0;
  for (uint64_t h : config.n_kv_heads) {
    layer_start_.push_back(heads);
    heads += h;
  }
  sum_squares_.assign(heads * head_dim_, 0.0);
  count_.assign(heads, 0);
}

size_t KeyStatistics::index(size_t layer, uint64_t kv_head) const {
  return layer_start_[layer] + kv_head;
}

void KeyStatistics::add(size_t layer, uint64_t kv_head, const float* key) {
  const size_t h = index(layer, kv_head);
  double* sums = sum_squares_.data() + h * head_dim_;
  for (uint64_t e = 0; e < head_dim_; ++e) sums[e] += static_cast<double>(key[e]) * key[e];
  ++count_[h];
}

double KeyStatistics::mean_square(size_t layer, uint64_t kv_head, uint64_t e) const {
  const size_t h = index(layer, kv_head);
  return count_[h] == 0 ? 0.0 : sum_squares_[h * head_dim_ + e] / static_cast<double>(count_[h]);
}

std::vector<float> smoothing_factors(const ModelConfig& config, const KeyStatistics& stats,
                                     kernels::RopeMode mode) {
  const uint64_t hd = stats.head_dim();
  auto partner = [&](uint64_t e) {
    if (mode == kernels::RopeMode::kNeox) return e < hd / 2 ? e + hd / 2 : e - hd / 2;
    return e ^ 1u;
  };
  std::vector<float> factors;
  std::vector<double> pair_rms(hd);
  for (size_t layer = 0; layer < config.n_kv_heads.size(); ++layer) {
    for (uint64_t h = 0; h < config.n_kv_heads[layer]; ++h) {
      double largest = 0;
      for (uint64_t e = 0; e < hd; ++e) {
        const uint64_t p = std::min(partner(e), hd - 1);  // an odd last dimension pairs itself
        pair_rms[e] =
            std::sqrt((stats.mean_square(layer, h, e) + stats.mean_square(layer, h, p)) / 2.0);
        largest = std::max(largest, pair_rms[e]);
      }
      if (largest == 0) {  // no keys seen: no smoothing
        factors.insert(factors.end(), hd, 1.0f);
        continue;
      }
      for (uint64_t e = 0; e < hd; ++e) {
        factors.push_back(static_cast<float>(std::sqrt(std::max(pair_rms[e], 1e-4 * largest))));
      }
    }
  }
  return factors;
}

std::vector<int32_t> calibration_tokens(int32_t n_vocab, int32_t n) {
  // Ids from the body of the vocabulary: BPE vocabularies start with bytes and control tokens
  // (SentencePiece ones with control tokens), whose activations are atypical.
  const int32_t lo = std::min(1000, n_vocab / 4);
  const int32_t hi = std::min(n_vocab, 32000);
  std::vector<int32_t> ids;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int32_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(lo + static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(hi - lo)));
  }
  return ids;
}

}  // namespace llms::model
