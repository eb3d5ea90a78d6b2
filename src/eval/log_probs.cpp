// eval/log_probs: see log_probs.h.
#include "eval/log_probs.h"

#include <algorithm>
#include <cmath>

namespace llms::eval {

double log_sum_exp(std::span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return std::log(sum) + max;
}

double negative_log_likelihood(std::span<const float> logits, int32_t token) {
  return log_sum_exp(logits) - static_cast<double>(logits[static_cast<size_t>(token)]);
}

void log_softmax(std::span<const float> logits, std::span<float> log_probs) {
  const auto shift = static_cast<float>(log_sum_exp(logits));
  for (size_t i = 0; i < logits.size(); ++i) log_probs[i] = logits[i] - shift;
}

int32_t arg_max(std::span<const float> values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

}  // namespace llms::eval
