#include "sampling/sampler.h"

#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "util/error.h"

namespace llms::sampling {

namespace {

[[noreturn]] void bad_param(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, message);
}

// When the nucleus fits inside the best kNucleusPrefix candidates, only those are sorted.
constexpr size_t kNucleusPrefix = 256;

}  // namespace

int32_t argmax(std::span<const float> values) {
  const auto n = static_cast<int64_t>(values.size());
  const float* x = values.data();
  // Lane l of vector k follows values 16j + 4k + l: a strict > keeps each lane's first maximum.
  // SSE2 (every x86-64 CPU): the module is built for the baseline ISA.
  constexpr int64_t kLanes = 16;
  if (n < kLanes) {
    return n == 0 ? -1 : static_cast<int32_t>(std::max_element(x, x + n) - x);
  }
  __m128 best[4];
  __m128i where[4];
  __m128i index[4];
  for (int k = 0; k < 4; ++k) {
    best[k] = _mm_loadu_ps(x + 4 * k);
    where[k] = _mm_setr_epi32(4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3);
    index[k] = where[k];
  }
  const __m128i step = _mm_set1_epi32(kLanes);
  int64_t i = kLanes;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < 4; ++k) {
      index[k] = _mm_add_epi32(index[k], step);
      const __m128 v = _mm_loadu_ps(x + i + 4 * k);
      const __m128i greater = _mm_castps_si128(_mm_cmpgt_ps(v, best[k]));
      best[k] = _mm_max_ps(v, best[k]);  // v > best ? v : best
      where[k] =
          _mm_or_si128(_mm_and_si128(greater, index[k]), _mm_andnot_si128(greater, where[k]));
    }
  }
  // The lanes' winners, then the tail, each beaten only by a greater value or an equal one
  // at a lower index.
  alignas(16) float lane_best[kLanes];
  alignas(16) int32_t lane_where[kLanes];
  for (int k = 0; k < 4; ++k) {
    _mm_store_ps(lane_best + 4 * k, best[k]);
    _mm_store_si128(reinterpret_cast<__m128i*>(lane_where + 4 * k), where[k]);
  }
  int32_t arg = lane_where[0];
  float top = lane_best[0];
  for (int64_t l = 1; l < kLanes; ++l) {
    if (lane_best[l] > top || (lane_best[l] == top && lane_where[l] < arg)) {
      top = lane_best[l];
      arg = lane_where[l];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > top) {
      top = x[i];
      arg = static_cast<int32_t>(i);
    }
  }
  return arg;
}

void SamplingParams::validate(int32_t n_vocab) const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    bad_param("temperature must be a finite number >= 0");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) bad_param("top_p must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) bad_param("min_p must be in [0, 1]");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    bad_param("repetition_penalty must be a finite number > 0");
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    bad_param("presence_penalty must be in [-2, 2]");
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    bad_param("frequency_penalty must be in [-2, 2]");
  }
  if (n_top_logprobs < 0 || n_top_logprobs > 20) bad_param("top_logprobs must be in [0, 20]");
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= n_vocab) {
      bad_param("logit_bias token " + std::to_string(token) + " is outside the vocabulary");
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) bad_param("logit_bias values must be in [-100, 100]");
  }
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params),
      n_vocab_(n_vocab),
      rng_(params.seed ? *params.seed : std::random_device{}()),
      in_prompt_(n_vocab, 0),
      out_count_(n_vocab, 0) {
  params_.validate(n_vocab);
  order_.reserve(n_vocab);
  probs_.reserve(n_vocab);
}

void Sampler::set_prompt(std::span<const int32_t> prompt) {
  for (int32_t t : prompt) {
    if (t < 0 || t >= n_vocab_ || in_prompt_[t]) continue;
    if (out_count_[t] == 0) seen_.push_back(t);
    in_prompt_[t] = 1;
  }
}

void Sampler::accept(int32_t token) {
  if (token < 0 || token >= n_vocab_) return;
  if (constraint_) constraint_->accept(token);
  if (out_count_[token] == 0 && !in_prompt_[token]) seen_.push_back(token);
  ++out_count_[token];
}

void Sampler::apply_penalties(std::span<float> logits) const {
  const float rep = params_.repetition_penalty;
  for (int32_t t : seen_) {
    float& l = logits[t];
    // Divide positive logits and multiply negative ones, so the token always becomes less likely.
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    if (int32_t n = out_count_[t]; n > 0) {
      l -= params_.frequency_penalty * static_cast<float>(n) + params_.presence_penalty;
    }
  }
  for (const auto& [token, bias] : params_.logit_bias) logits[token] += bias;
}

double Sampler::uniform01() {
  // 53 random bits -> [0, 1); unlike std::uniform_real_distribution, the same on every library.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

float Distribution::prob_of(int32_t id) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return probs[i];
  }
  return 0.0f;
}

void Sampler::apply_constraint(std::span<float> logits) {
  if (constraint_ && !constraint_->mask(logits)) throw ConstraintDeadEnd();
}

SampleResult Sampler::sample(std::span<float> logits) {
  SampleResult result;
  const bool logprobs_wanted = wants_logprobs();
  if (logprobs_wanted) raw_.assign(logits.begin(), logits.end());
  apply_constraint(logits);
  apply_penalties(logits);
  result.token = draw(logits);
  if (logprobs_wanted) fill_logprobs(raw_, result, result.token);
  return result;
}

void Sampler::distribution(std::span<float> logits, Distribution& out) {
  out.clear();
  apply_constraint(logits);
  apply_penalties(logits);
  if (is_greedy()) {
    out.ids.push_back(argmax(logits));
    out.probs.push_back(1.0f);
    return;
  }
  double total = 0.0;
  const size_t n_cand = candidates(logits, total);
  out.ids.assign(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n_cand));
  out.probs.resize(n_cand);
  const double inv_total = total > 0.0 ? 1.0 / total : 0.0;
  for (size_t i = 0; i < n_cand; ++i) {
    out.probs[i] = static_cast<float>(probs_[i] * inv_total);
  }
}

int32_t Sampler::draw_from(const Distribution& dist) {
  if (dist.ids.empty()) return -1;
  double total = 0.0;
  for (float p : dist.probs) total += p;
  double u = uniform01() * total;
  for (size_t i = 0; i < dist.ids.size(); ++i) {
    u -= dist.probs[i];
    if (u < 0.0) return dist.ids[i];
  }
  // Rounding left a sliver of mass: the last candidate that has any takes it (a masked one has
  // none).
  for (size_t i = dist.ids.size(); i-- > 0;) {
    if (dist.probs[i] > 0.0f) return dist.ids[i];
  }
  return dist.ids.back();
}

int32_t Sampler::draw(std::span<float> logits) {
  if (params_.temperature == 0.0f) {
    return argmax(logits);
  }
  double total = 0.0;
  const size_t n_cand = candidates(logits, total);
  double u = uniform01() * total;
  for (size_t i = 0; i < n_cand; ++i) {
    u -= probs_[i];
    if (u < 0.0) return order_[i];
  }
  // Rounding left a sliver of mass: the last candidate that has any takes it (a masked one has
  // none).
  for (size_t i = n_cand; i-- > 0;) {
    if (probs_[i] > 0.0) return order_[i];
  }
  return order_[n_cand - 1];
}

size_t Sampler::candidates(std::span<const float> logits, double& total_out) {
  const int32_t n = n_vocab_;
  const float inv_t = 1.0f / params_.temperature;
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };

  size_t n_cand = static_cast<size_t>(n);
  if (params_.top_k > 0 && params_.top_k < n) {
    n_cand = static_cast<size_t>(params_.top_k);
    std::nth_element(order_.begin(), order_.begin() + n_cand - 1, order_.end(), by_logit);
  }

  // Softmax over the candidates at temperature T.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n_cand; ++i) max_logit = std::max(max_logit, logits[order_[i]]);
  probs_.resize(n_cand);
  double total = 0.0;
  for (size_t i = 0; i < n_cand; ++i) {
    probs_[i] = std::exp((logits[order_[i]] - max_logit) * inv_t);
    total += probs_[i];
  }

  if (params_.top_p < 1.0f) {
    // Sort candidates by probability (ids break ties), cheaply when a short prefix holds the
    // whole nucleus, then keep the smallest prefix whose mass reaches top_p.
    auto by_prob_then_id = [&](size_t a, size_t b) { return by_logit(order_[a], order_[b]); };
    std::vector<size_t>& idx = nucleus_index_;
    idx.resize(n_cand);
    std::iota(idx.begin(), idx.end(), 0);
    size_t prefix = std::min(n_cand, kNucleusPrefix);
    std::partial_sort(idx.begin(), idx.begin() + prefix, idx.end(), by_prob_then_id);
    double mass = 0.0, target = params_.top_p * total;
    size_t keep = 0;
    while (keep < prefix && mass < target) mass += probs_[idx[keep++]];
    if (mass < target && prefix < n_cand) {
      std::sort(idx.begin() + prefix, idx.end(), by_prob_then_id);
      while (keep < n_cand && mass < target) mass += probs_[idx[keep++]];
    }
    // Rebuild the candidate list in probability order.
    reorder_ids_.resize(keep);
    reorder_probs_.resize(keep);
    for (size_t i = 0; i < keep; ++i) {
      reorder_ids_[i] = order_[idx[i]];
      reorder_probs_[i] = probs_[idx[i]];
    }
    std::copy(reorder_ids_.begin(), reorder_ids_.end(), order_.begin());
    std::copy(reorder_probs_.begin(), reorder_probs_.end(), probs_.begin());
    n_cand = keep;
    total = mass;
  }

  if (params_.min_p > 0.0f) {
    float p_max = *std::max_element(probs_.begin(), probs_.begin() + n_cand);
    float threshold = params_.min_p * p_max;
    size_t kept = 0;
    total = 0.0;
    for (size_t i = 0; i < n_cand; ++i) {
      if (probs_[i] >= threshold) {
        order_[kept] = order_[i];
        probs_[kept] = probs_[i];
        total += probs_[kept];
        ++kept;
      }
    }
    n_cand = kept;
  }
  total_out = total;
  return n_cand;
}

void Sampler::fill_logprobs(std::span<const float> raw, SampleResult& result, int32_t chosen) {
  float max_logit = *std::max_element(raw.begin(), raw.end());
  double sum = 0.0;
  for (float l : raw) sum += std::exp(static_cast<double>(l - max_logit));
  const float log_z = max_logit + static_cast<float>(std::log(sum));
  result.logprob = raw[chosen] - log_z;
  if (params_.n_top_logprobs > 0) {
    order_.resize(n_vocab_);
    std::iota(order_.begin(), order_.end(), 0);
    size_t k = std::min<size_t>(params_.n_top_logprobs, raw.size());
    std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), [&](int32_t a, int32_t b) {
      return raw[a] > raw[b] || (raw[a] == raw[b] && a < b);
    });
    result.top_logprobs.reserve(k);
    for (size_t i = 0; i < k; ++i)
      result.top_logprobs.push_back({order_[i], raw[order_[i]] - log_z});
  }
}

}  // namespace llms::sampling
