// Row-op conformance: each ISA's op table against a double-precision truth computed here (and
// so against the scalar reference too), on fresh random rows of odd lengths, plus the edge
// behaviour the contract promises (in place, masked softmax rows, rope at huge positions).
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using testing::gaussian;
using testing::normalized_error;
using testing::rng_for;

constexpr int64_t kSizes[] = {1, 7, 8, 31, 33, 896, 4867};
constexpr double kBound = 2e-6;  // normalized error vs the double truth, every ISA

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

class Ops : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    LLMS_SKIP_UNLESS_ISA(GetParam());
    ops_ = &op_table(GetParam());
  }
  const OpTable* ops_ = nullptr;
};

TEST_P(Ops, RmsNorm) {
  for (int64_t n : kSizes) {
    auto rng = rng_for(100 + static_cast<uint64_t>(n));
    const std::vector<float> x = gaussian(rng, static_cast<size_t>(n), 3.0f);
    const std::vector<float> w = gaussian(rng, static_cast<size_t>(n));
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    std::vector<double> truth(static_cast<size_t>(n));
    std::vector<double> truth_unweighted(static_cast<size_t>(n));
    for (size_t i = 0; i < truth.size(); ++i) {
      truth_unweighted[i] = x[i] * inv;
      truth[i] = x[i] * inv * w[i];
    }
    std::vector<float> y(static_cast<size_t>(n));
    ops_->rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    EXPECT_LE(normalized_error(y, to_float(truth)), kBound) << n;
    std::vector<float> in_place = x;
    ops_->rms_norm(in_place.data(), nullptr, in_place.data(), n, 1e-6f);
    EXPECT_LE(normalized_error(in_place, to_float(truth_unweighted)), kBound) << n;
  }
  float zeros[3] = {0, 0, 0};
  ops_->rms_norm(zeros, nullptr, zeros, 3, 1e-5f);  // eps keeps it finite
  EXPECT_EQ(zeros[1], 0.0f);
}

TEST_P(Ops, Softmax) {
  for (int64_t n : kSizes) {
    auto rng = rng_for(200 + static_cast<uint64_t>(n));
    std::vector<float> x = gaussian(rng, static_cast<size_t>(n), 5.0f);
    for (float& v : x) v += 1000.0f;                            // stability: large common offset
    if (n > 3) x[2] = -std::numeric_limits<float>::infinity();  // a masked entry
    double max = -INFINITY;
    for (float v : x) max = std::fmax(max, v);
    std::vector<double> truth(x.size());
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += truth[i] = std::exp(x[i] - max);
    for (double& t : truth) t /= sum;
    ops_->softmax(x.data(), n);
    EXPECT_LE(normalized_error(x, to_float(truth)), kBound) << n;
    if (n > 3) {
      EXPECT_EQ(x[2], 0.0f);
    }
    double total = 0;
    for (float v : x) total += v;
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  std::vector<float> masked(11, -std::numeric_limits<float>::infinity());
  ops_->softmax(masked.data(), 11);
  EXPECT_EQ(masked, std::vector<float>(11, 0.0f));
  std::vector<float> tiny = {0.0f, -200.0f, -90.0f, -87.0f};  // exp underflow is clean
  ops_->softmax(tiny.data(), 4);
  EXPECT_FLOAT_EQ(tiny[0], 1.0f);
  EXPECT_EQ(tiny[1], 0.0f);
  EXPECT_GE(tiny[3], 0.0f);
}

// The gated activations over a wide range, including |g| beyond exp's range.
std::vector<float> gate_values(std::mt19937_64& rng, int64_t n) {
  std::vector<float> g = gaussian(rng, static_cast<size_t>(n), 4.0f);
  if (n > 4) {
    g[0] = 100.0f;
    g[1] = -100.0f;
    g[2] = 0.0f;
    g[3] = -1e-30f;
  }
  return g;
}

TEST_P(Ops, SiluMul) {
  for (int64_t n : kSizes) {
    auto rng = rng_for(300 + static_cast<uint64_t>(n));
    const std::vector<float> g = gate_values(rng, n);
    const std::vector<float> u = gaussian(rng, static_cast<size_t>(n));
    std::vector<double> truth(g.size());
    for (size_t i = 0; i < g.size(); ++i) truth[i] = g[i] / (1.0 + std::exp(-double{g[i]})) * u[i];
    std::vector<float> out(g.size());
    ops_->silu_mul(g.data(), u.data(), out.data(), n);
    EXPECT_LE(normalized_error(out, to_float(truth)), kBound) << n;
    for (float v : out) ASSERT_TRUE(std::isfinite(v));
    std::vector<float> in_place = g;
    ops_->silu_mul(in_place.data(), u.data(), in_place.data(), n);
    EXPECT_EQ(in_place, out);
  }
}

TEST_P(Ops, GeluTanhMul) {
  for (int64_t n : kSizes) {
    auto rng = rng_for(400 + static_cast<uint64_t>(n));
    const std::vector<float> g = gate_values(rng, n);
    const std::vector<float> u = gaussian(rng, static_cast<size_t>(n));
    std::vector<double> truth(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      const double x = g[i];
      truth[i] = 0.5 * x *
                 (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x))) *
                 u[i];
    }
    std::vector<float> out(g.size());
    ops_->gelu_tanh_mul(g.data(), u.data(), out.data(), n);
    // Error relative to the size of gate x up, not of the result: at small n all gates can be
    // very negative, making the result (and a result-relative error's denominator) ~0.
    double err = 0, scale = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      err += (out[i] - truth[i]) * (out[i] - truth[i]);
      scale += static_cast<double>(g[i]) * u[i] * g[i] * u[i];
    }
    EXPECT_LE(std::sqrt(err / scale), kBound) << n;
    for (float v : out) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST_P(Ops, AddScaleDotAxpy) {
  for (int64_t n : kSizes) {
    auto rng = rng_for(500 + static_cast<uint64_t>(n));
    const std::vector<float> a = gaussian(rng, static_cast<size_t>(n));
    const std::vector<float> b = gaussian(rng, static_cast<size_t>(n));
    std::vector<float> out(a.size());
    ops_->add(a.data(), b.data(), out.data(), n);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(out[i], a[i] + b[i]);
    std::vector<float> scaled = a;
    ops_->scale(scaled.data(), -0.37f, n);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(scaled[i], a[i] * -0.37f);
    double truth = 0;
    double magnitude = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      truth += static_cast<double>(a[i]) * b[i];
      magnitude += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    EXPECT_LE(std::fabs(ops_->dot(a.data(), b.data(), n) - truth), 1e-6 * magnitude + 1e-30) << n;
    std::vector<float> y = b;
    ops_->axpy(1.5f, a.data(), y.data(), n);
    // Per element, float rounding of 1.5a + b (with or without a fused multiply-add) is bounded
    // by one ulp of the operands' magnitude; a norm-wide bound fails on cancellation at small n.
    for (size_t i = 0; i < a.size(); ++i) {
      double truth_i = 1.5 * a[i] + b[i];
      double bound = 0x1.0p-23 * (std::fabs(1.5 * a[i]) + std::fabs(static_cast<double>(b[i])));
      ASSERT_LE(std::fabs(y[i] - truth_i), bound) << "n=" << n << " i=" << i;
    }
  }
  EXPECT_EQ(ops_->dot(nullptr, nullptr, 0), 0.0f);
}

// Double-precision rotation: theta_i = pos * scale * base^(-2i/d).
std::vector<float> rope_truth(const std::vector<float>& x, int64_t n_heads, int64_t head_dim,
                              int64_t pos, double base, double scale, RopeMode mode) {
  std::vector<double> out(x.begin(), x.end());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      const long double theta = static_cast<long double>(pos) * scale *
                                std::pow(static_cast<long double>(base), -2.0L * i / head_dim);
      const double c = static_cast<double>(std::cos(theta));
      const double s = static_cast<double>(std::sin(theta));
      const int64_t i0 = h * head_dim + (mode == RopeMode::kNormal ? 2 * i : i);
      const int64_t i1 = h * head_dim + (mode == RopeMode::kNormal ? 2 * i + 1 : i + half);
      const double a = x[static_cast<size_t>(i0)];
      const double b = x[static_cast<size_t>(i1)];
      out[static_cast<size_t>(i0)] = a * c - b * s;
      out[static_cast<size_t>(i1)] = a * s + b * c;
    }
  }
  return to_float(out);
}

TEST_P(Ops, RopeMatchesDoubleTruthAtAnyPosition) {
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    for (int64_t head_dim : {2, 6, 10, 64, 128, 256}) {
      for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{4095}, int64_t{131071},
                          int64_t{1000000}}) {
        const int64_t n_heads = 3;
        auto rng = rng_for(600 + static_cast<uint64_t>(head_dim * 7 + pos));
        const std::vector<float> x = gaussian(rng, static_cast<size_t>(n_heads * head_dim));
        std::vector<float> cos(static_cast<size_t>(head_dim / 2));
        std::vector<float> sin(cos.size());
        rope_cos_sin(pos, head_dim, 1000000.0f, 1.0f, cos.data(), sin.data());
        std::vector<float> y = x;
        ops_->rope_apply(y.data(), n_heads, head_dim, cos.data(), sin.data(), mode);
        const std::vector<float> truth = rope_truth(x, n_heads, head_dim, pos, 1e6, 1.0, mode);
        EXPECT_LE(normalized_error(y, truth), kBound)
            << "head_dim " << head_dim << ", pos " << pos << ", neox " << (mode == RopeMode::kNeox);
        if (pos == 0) {
          EXPECT_EQ(y, x);
        }
      }
    }
  }
}

std::string isa_case_name(const ::testing::TestParamInfo<Isa>& param_info) {
  return std::string(isa_name(param_info.param));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, Ops, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         isa_case_name);

TEST(Rope, CachedTableFollowsItsArguments) {
  auto rng = rng_for(700);
  const std::vector<float> x = gaussian(rng, 2 * 64);
  for (int64_t pos : {5, 5, 6, 5}) {
    for (float scale : {1.0f, 0.25f}) {
      std::vector<float> y = x;
      rope(y.data(), 2, 64, pos, 10000.0f, scale, RopeMode::kNeox);
      EXPECT_LE(normalized_error(y, rope_truth(x, 2, 64, pos, 10000.0, scale, RopeMode::kNeox)),
                kBound)
          << pos << " " << scale;
    }
  }
}

// Attention scores depend only on the distance between positions.
TEST(Rope, ScoresDependOnRelativePosition) {
  auto rng = rng_for(701);
  const std::vector<float> q = gaussian(rng, 128);
  const std::vector<float> k = gaussian(rng, 128);
  auto score = [&](int64_t pq, int64_t pk) {
    std::vector<float> a = q;
    std::vector<float> b = k;
    rope(a.data(), 1, 128, pq, 10000.0f, 1.0f, RopeMode::kNormal);
    rope(b.data(), 1, 128, pk, 10000.0f, 1.0f, RopeMode::kNormal);
    return dot(a.data(), b.data(), 128);
  };
  const float base = score(10, 3);
  EXPECT_NEAR(score(1010, 1003), base, 2e-4f * std::fabs(base) + 1e-3f);
  EXPECT_NEAR(score(500007, 500000), base, 2e-4f * std::fabs(base) + 1e-3f);
}

TEST(Rope, RefusesBadArguments) {
  float x[8] = {};
  EXPECT_THROW(rope(x, 1, 7, 0, 10000.0f, 1.0f, RopeMode::kNormal), Error);
  EXPECT_THROW(rope(x, 1, 0, 0, 10000.0f, 1.0f, RopeMode::kNormal), Error);
  EXPECT_THROW(rope(x, 1, 8, -1, 10000.0f, 1.0f, RopeMode::kNormal), Error);
}

TEST(OpTable, RefusesUnsupportedIsas) {
  for (Isa isa : testing::all_isas()) {
    if (isa_supported(isa)) {
      EXPECT_NO_THROW(op_table(isa));
    } else {
      EXPECT_THROW(op_table(isa), Error) << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace llms::kernels
