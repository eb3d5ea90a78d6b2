// eval/log_probs: log-probabilities from a logits row, in double precision where it sums.
#pragma once

#include <cstdint>
#include <span>

namespace llms::eval {

// log(sum_i exp(logits[i])), shifted by the maximum so that no term overflows.
double log_sum_exp(std::span<const float> logits);

// -log softmax(logits)[token].
double negative_log_likelihood(std::span<const float> logits, int32_t token);

// log_probs[i] = logits[i] - log_sum_exp(logits) (in place is fine).
void log_softmax(std::span<const float> logits, std::span<float> log_probs);

// The first index of the largest value.
int32_t arg_max(std::span<const float> values);

}  // namespace llms::eval
