// sched/step_time_model: the fit described in step_time_model.h.
#include "sched/step_time_model.h"

#include <algorithm>
#include <cmath>

namespace llms::sched {

namespace {

// Feature units: a step, 256 prompt tokens, 8 decode sequences, 2^18 attended positions. On a
// CPU each unit costs within an order of magnitude of the others, which keeps the 4 x 4
// normal equations well conditioned.
constexpr double kPromptUnit = 256.0;
constexpr double kDecodeUnit = 8.0;
constexpr double kAttendUnit = 262144.0;
constexpr double kFirstGuessFixedTokens = 4.0;

}  // namespace

StepTimeModel::Vec StepTimeModel::features(const StepShape& shape) {
  return {1.0, static_cast<double>(shape.prompt_tokens) / kPromptUnit,
          static_cast<double>(shape.decode_sequences) / kDecodeUnit,
          static_cast<double>(shape.attended) / kAttendUnit};
}

double StepTimeModel::predict(const StepShape& shape) const {
  if (!known()) return 0.0;
  const Vec x = features(shape);
  double t = 0.0;
  for (int j = 0; j < kTerms; ++j) t += theta_[static_cast<size_t>(j)] * x[static_cast<size_t>(j)];
  return t;
}

void StepTimeModel::observe(const StepShape& shape, double seconds) {
  if (shape.empty() || !(seconds > 0.0) || !std::isfinite(seconds)) return;
  const Vec x = features(shape);
  if (!known()) {
    // A first guess for the ridge to pull toward: every token (prompt or decode row) costs the
    // same and the step's fixed part as much as kFirstGuessFixedTokens of them, so a decode step
    // after a first prefill step is predicted neither free nor as dear as the prefill.
    const double tokens = static_cast<double>(shape.prompt_tokens + shape.decode_sequences);
    const double per_token = seconds / (tokens + kFirstGuessFixedTokens);
    theta_ = {per_token * kFirstGuessFixedTokens, per_token * kPromptUnit, per_token * kDecodeUnit,
              0.0};
  } else {
    const double predicted = predict(shape);
    error_sum_ = kForgetting * error_sum_ + std::abs(predicted / seconds - 1.0);
    error_weight_ = kForgetting * error_weight_ + 1.0;
  }
  for (auto& row : xtx_) {
    for (double& v : row) v *= kForgetting;
  }
  for (double& v : xty_) v *= kForgetting;
  time_sum_ = kForgetting * time_sum_ + seconds;
  weight_sum_ = kForgetting * weight_sum_ + 1.0;
  const double w = 1.0 / (seconds * seconds);
  for (size_t i = 0; i < kTerms; ++i) {
    for (size_t j = 0; j < kTerms; ++j) xtx_[i][j] += w * x[i] * x[j];
    xty_[i] += w * x[i] * seconds;
  }
  ++n_steps_;
  // The pull toward the last fit weighs as one step of the usual length with one unit of
  // the feature.
  const double typical = time_sum_ / weight_sum_;
  refit(1.0 / (typical * typical));
}

void StepTimeModel::refit(double ridge) {
  // Minimise the decayed weighted squares + ridge * |theta - theta_prev|^2 with theta >= 0:
  // solve the normal equations over the free terms; while one comes out negative, pin the most
  // negative at 0 and solve again (at most kTerms rounds).
  const Vec prev = theta_;
  std::array<bool, kTerms> free{};
  free.fill(true);
  for (int round = 0; round < kTerms; ++round) {
    // Gaussian elimination with partial pivoting on the free terms' system.
    Mat a{};
    Vec b{};
    for (size_t i = 0; i < kTerms; ++i) {
      for (size_t j = 0; j < kTerms; ++j) {
        a[i][j] = free[i] && free[j] ? xtx_[i][j] : (i == j ? 1.0 : 0.0);
      }
      if (free[i]) {
        a[i][i] += ridge;
        b[i] = xty_[i] + ridge * prev[i];
      }
    }
    for (size_t c = 0; c < kTerms; ++c) {
      size_t pivot = c;
      for (size_t r = c + 1; r < kTerms; ++r) {
        if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
      }
      std::swap(a[c], a[pivot]);
      std::swap(b[c], b[pivot]);
      // The ridge keeps every free pivot positive; a pinned term's row is the identity.
      for (size_t r = c + 1; r < kTerms; ++r) {
        const double f = a[r][c] / a[c][c];
        for (size_t k = c; k < kTerms; ++k) a[r][k] -= f * a[c][k];
        b[r] -= f * b[c];
      }
    }
    Vec theta{};
    for (size_t i = kTerms; i-- > 0;) {
      double v = b[i];
      for (size_t k = i + 1; k < kTerms; ++k) v -= a[i][k] * theta[k];
      theta[i] = v / a[i][i];
    }
    size_t most_negative = kTerms;
    for (size_t i = 0; i < kTerms; ++i) {
      if (free[i] && theta[i] < 0.0 &&
          (most_negative == kTerms || theta[i] < theta[most_negative])) {
        most_negative = i;
      }
    }
    if (most_negative == kTerms) {
      theta_ = theta;
      return;
    }
    free[most_negative] = false;
  }
  theta_.fill(0.0);  // unreachable: with every term pinned the solution is 0
}

StepTimeEstimate StepTimeModel::estimate() const {
  StepTimeEstimate e;
  e.step_s = theta_[0];
  e.prompt_token_s = theta_[1] / kPromptUnit;
  e.decode_sequence_s = theta_[2] / kDecodeUnit;
  e.attended_token_s = theta_[3] / kAttendUnit;
  e.relative_error = error_weight_ > 0.0 ? error_sum_ / error_weight_ : 0.0;
  e.n_steps = n_steps_;
  return e;
}

}  // namespace llms::sched
