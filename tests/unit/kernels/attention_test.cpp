// Attention block conformance: each ISA's block step, driven over a paged sequence the way the
// model drives it (block by block, per-row causal and window ranges, partial last blocks), is
// compared with a double-precision softmax attention computed here; plus the contract's edge
// cases (rows are independent of their tile, unseen keys may hold NaN, empty rows are left
// alone) and the vectorised exp against std::exp.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "quant/float_convert.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using testing::gaussian;
using testing::normalized_error;
using testing::rng_for;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One sequence's cache: n_blocks blocks of block_size keys (and values), block b holding
// positions [b * block_size, (b + 1) * block_size). k and v are key-major, for the reference;
// the kernel reads the blocks as the cache stores them (keys dim-major per block), in f32, in
// halves, or in int8 / fp8 bytes with a bf16 scale per key and per value (k and v then hold the
// values the stored form represents).
struct Cache {
  int64_t hdk = 0;
  int64_t hdv = 0;
  int32_t block_size = 0;
  int32_t n_pos = 0;  // positions that hold real data; later slots are NaN
  KvElement element = KvElement::kF32;
  std::vector<float> k;
  std::vector<float> v;
  std::vector<float> k_blocks;       // per block: hdk rows of block_size keys
  std::vector<uint16_t> k_blocks16;  // the same in halves
  std::vector<uint16_t> v16;         // v in halves
  std::vector<uint8_t> k_blocks8;    // the same in 8-bit elements
  std::vector<uint8_t> v8;
  std::vector<uint16_t> k_scales;  // per slot
  std::vector<uint16_t> v_scales;
  const float* key(int32_t p) const { return k.data() + p * hdk; }
  const float* value(int32_t p) const { return v.data() + p * hdv; }
  KvBlock block(int32_t b) const {
    KvBlock view;
    const size_t k_off = static_cast<size_t>(b) * static_cast<size_t>(block_size * hdk);
    const size_t v_off = static_cast<size_t>(b) * static_cast<size_t>(block_size * hdv);
    switch (element) {
      case KvElement::kF32:
        view.k = k_blocks.data() + k_off;
        view.v = v.data() + v_off;
        break;
      case KvElement::kF16:
        view.k = k_blocks16.data() + k_off;
        view.v = v16.data() + v_off;
        break;
      case KvElement::kInt8:
      case KvElement::kFp8:
        view.k = k_blocks8.data() + k_off;
        view.v = v8.data() + v_off;
        view.k_scale = k_scales.data() + static_cast<size_t>(b) * block_size;
        view.v_scale = v_scales.data() + static_cast<size_t>(b) * block_size;
        break;
    }
    view.k_stride = block_size;
    view.element = element;
    return view;
  }
};

const char* element_name(KvElement e) {
  switch (e) {
    case KvElement::kF16:
      return "f16 cache";
    case KvElement::kInt8:
      return "int8 cache";
    case KvElement::kFp8:
      return "fp8 cache";
    case KvElement::kF32:
      break;
  }
  return "f32 cache";
}

constexpr KvElement kAllElements[] = {KvElement::kF32, KvElement::kF16, KvElement::kInt8,
                                      KvElement::kFp8};

float decode_8bit(KvElement e, uint8_t byte, uint16_t scale) {
  const float raw = e == KvElement::kInt8 ? static_cast<float>(static_cast<int8_t>(byte))
                                          : quant::fp8_e4m3_to_fp32(byte);
  return raw * quant::bf16_to_fp32(scale);
}

Cache make_cache(uint64_t salt, int64_t hdk, int64_t hdv, int32_t block_size, int32_t n_pos,
                 KvElement element = KvElement::kF32) {
  auto rng = rng_for(salt);
  Cache c;
  c.hdk = hdk;
  c.hdv = hdv;
  c.block_size = block_size;
  c.n_pos = n_pos;
  c.element = element;
  const int32_t n_blocks = (n_pos + block_size - 1) / block_size;
  const auto slots = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size);
  const auto bs = static_cast<size_t>(block_size);
  c.k = gaussian(rng, slots * static_cast<size_t>(hdk));
  c.v = gaussian(rng, slots * static_cast<size_t>(hdv));
  std::fill(c.k.begin() + n_pos * hdk, c.k.end(), kNaN);
  std::fill(c.v.begin() + n_pos * hdv, c.v.end(), kNaN);
  if (element == KvElement::kF16) {
    for (float& x : c.k) x = quant::fp16_to_fp32(quant::fp32_to_fp16(x));
    for (float& x : c.v) x = quant::fp16_to_fp32(quant::fp32_to_fp16(x));
  }
  if (element == KvElement::kInt8 || element == KvElement::kFp8) {
    // Quantized as the cache does it, token by token; the NaN slots get NaN scales.
    c.k_blocks8.resize(c.k.size());
    c.v8.resize(c.v.size());
    c.k_scales.resize(slots);
    c.v_scales.resize(slots);
    for (size_t p = 0; p < slots; ++p) {
      uint8_t* kb = c.k_blocks8.data() + (p / bs) * bs * static_cast<size_t>(hdk) + p % bs;
      quantize_kv_vector(c.key(static_cast<int32_t>(p)), hdk, element, kb, block_size,
                         &c.k_scales[p]);
      quantize_kv_vector(c.value(static_cast<int32_t>(p)), hdv, element,
                         c.v8.data() + p * static_cast<size_t>(hdv), 1, &c.v_scales[p]);
      if (p >= static_cast<size_t>(n_pos)) continue;
      for (int64_t e = 0; e < hdk; ++e) {
        c.k[p * static_cast<size_t>(hdk) + static_cast<size_t>(e)] =
            decode_8bit(element, kb[e * block_size], c.k_scales[p]);
      }
      for (int64_t e = 0; e < hdv; ++e) {
        c.v[p * static_cast<size_t>(hdv) + static_cast<size_t>(e)] = decode_8bit(
            element, c.v8[p * static_cast<size_t>(hdv) + static_cast<size_t>(e)], c.v_scales[p]);
      }
    }
  }
  c.k_blocks.resize(c.k.size());
  for (size_t p = 0; p < slots; ++p) {
    const size_t b = p / bs;
    const size_t slot = p % bs;
    for (int64_t e = 0; e < hdk; ++e) {
      c.k_blocks[(b * static_cast<size_t>(hdk) + static_cast<size_t>(e)) * block_size + slot] =
          c.k[p * static_cast<size_t>(hdk) + static_cast<size_t>(e)];
    }
  }
  for (float x : c.k_blocks) c.k_blocks16.push_back(quant::fp32_to_fp16(x));
  for (float x : c.v) c.v16.push_back(quant::fp32_to_fp16(x));
  return c;
}

// Attention of rows (q pre-scaled, row r at position pos[r], seeing [lo[r], pos[r]]) over the
// cache, block by block as the model does it; returns [row][hdv].
std::vector<float> attend(const AttentionTable& table, const Cache& c, const std::vector<float>& q,
                          const std::vector<int32_t>& pos, const std::vector<int32_t>& lo) {
  const auto n_rows = static_cast<int32_t>(pos.size());
  std::vector<float> acc(static_cast<size_t>(n_rows * c.hdv), 0.0f);
  std::vector<float> max(static_cast<size_t>(n_rows), kNegInf);
  std::vector<float> sum(static_cast<size_t>(n_rows), 0.0f);
  std::vector<float> scores(static_cast<size_t>(n_rows * c.block_size), 0.0f);
  std::vector<int32_t> begin(static_cast<size_t>(n_rows));
  std::vector<int32_t> end(static_cast<size_t>(n_rows));
  AttentionTile t;
  t.q = q.data();
  t.acc = acc.data();
  t.max = max.data();
  t.sum = sum.data();
  t.key_begin = begin.data();
  t.key_end = end.data();
  t.scores = scores.data();
  t.n_rows = n_rows;
  t.head_dim_k = c.hdk;
  t.head_dim_v = c.hdv;
  const int32_t last = *std::max_element(pos.begin(), pos.end());
  for (int32_t first = 0; first <= last; first += c.block_size) {
    for (int32_t r = 0; r < n_rows; ++r) {
      begin[static_cast<size_t>(r)] = std::max(lo[static_cast<size_t>(r)] - first, 0);
      end[static_cast<size_t>(r)] = std::min(pos[static_cast<size_t>(r)] + 1 - first, c.block_size);
    }
    table.block(t, c.block(first / c.block_size), c.block_size);
  }
  for (int32_t r = 0; r < n_rows; ++r) {
    for (int64_t e = 0; e < c.hdv; ++e)
      acc[static_cast<size_t>(r * c.hdv + e)] /= sum[static_cast<size_t>(r)];
  }
  return acc;
}

// The same in double, straight from the definition.
std::vector<float> attend_truth(const Cache& c, const std::vector<float>& q,
                                const std::vector<int32_t>& pos, const std::vector<int32_t>& lo) {
  std::vector<float> out;
  for (size_t r = 0; r < pos.size(); ++r) {
    std::vector<double> s;
    double max = -INFINITY;
    for (int32_t p = lo[r]; p <= pos[r]; ++p) {
      double d = 0;
      for (int64_t e = 0; e < c.hdk; ++e) d += static_cast<double>(q[r * c.hdk + e]) * c.key(p)[e];
      s.push_back(d);
      max = std::max(max, d);
    }
    double total = 0;
    for (double& x : s) total += (x = std::exp(x - max));
    for (int64_t e = 0; e < c.hdv; ++e) {
      double o = 0;
      for (int32_t p = lo[r]; p <= pos[r]; ++p)
        o += s[static_cast<size_t>(p - lo[r])] * c.value(p)[e];
      out.push_back(static_cast<float>(o / total));
    }
  }
  return out;
}

class Attention : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    LLMS_SKIP_UNLESS_ISA(GetParam());
    table_ = &attention_table(GetParam());
  }
  void check_shapes(KvElement element) const;
  const AttentionTable* table_ = nullptr;
};

struct Shape {
  int64_t hdk, hdv;
  int32_t block_size;
  int32_t n_pos;
  int32_t window;  // 0: none
};

TEST_P(Attention, MatchesSoftmaxAttentionOverPagedBlocks) {
  for (KvElement element : kAllElements) {
    SCOPED_TRACE(element_name(element));
    check_shapes(element);
  }
}

void Attention::check_shapes(KvElement element) const {
  const Shape shapes[] = {
      {64, 64, 16, 77, 0},   {64, 64, 16, 300, 0},   {64, 64, 16, 300, 37},
      {256, 256, 16, 40, 0}, {256, 256, 16, 61, 20}, {128, 128, 5, 23, 0},  // 5: scalar fallback
      {64, 64, 64, 130, 0},  {8, 16, 3, 10, 4},      {12, 20, 16, 33, 0},   // 20: scalar fallback
      {64, 64, 1, 9, 0},     {64, 64, 24, 50, 9},    {12, 16, 8, 21, 0},
      {64, 64, 32, 70, 11},  {24, 24, 16, 40, 0},  // values 16 + 8 dims at a time
  };
  uint64_t salt = 0;
  for (const Shape& sh : shapes) {
    ++salt;
    const Cache c = make_cache(1000 + salt, sh.hdk, sh.hdv, sh.block_size, sh.n_pos, element);
    auto rng = rng_for(2000 + salt);
    // Rows at spread positions, 7 rows per position (like the heads of a group: the kernel
    // sums their values 4 + 3 at a time), the last position included so the partial last block
    // is exercised.
    std::vector<int32_t> pos;
    std::vector<int32_t> lo;
    for (int32_t p : {0, 1, sh.n_pos / 3, sh.n_pos / 2 + 1, sh.n_pos - 2, sh.n_pos - 1}) {
      for (int h = 0; h < 7; ++h) {
        pos.push_back(std::max(p, 0));
        lo.push_back(sh.window > 0 ? std::max(0, std::max(p, 0) - sh.window + 1) : 0);
      }
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hdk));
    std::vector<float> q = gaussian(rng, pos.size() * static_cast<size_t>(sh.hdk), 2.0f * scale);
    const std::vector<float> y = attend(*table_, c, q, pos, lo);
    const std::vector<float> truth = attend_truth(c, q, pos, lo);
    for (float x : y) ASSERT_TRUE(std::isfinite(x)) << sh.hdk << " " << sh.block_size;
    EXPECT_LE(normalized_error(y, truth), 2e-6)
        << "hdk " << sh.hdk << " hdv " << sh.hdv << " block " << sh.block_size << " n_pos "
        << sh.n_pos << " window " << sh.window;
  }
}

// Large score gaps: the running max changes between blocks, and most weights underflow.
TEST_P(Attention, SurvivesLargeScoresAndRescales) {
  const Cache c = make_cache(3000, 64, 64, 16, 100);
  auto rng = rng_for(3001);
  std::vector<int32_t> pos = {99, 99, 50};
  std::vector<int32_t> lo = {0, 0, 0};
  std::vector<float> q = gaussian(rng, 3 * 64, 8.0f);
  const std::vector<float> y = attend(*table_, c, q, pos, lo);
  // Scores reach ~100 here, where one f32 ulp is ~8e-6: the weights carry that much rounding.
  EXPECT_LE(normalized_error(y, attend_truth(c, q, pos, lo)), 5e-5);
}

// A row's result is bit-identical whether it runs alone or among other rows (batch invariance).
TEST_P(Attention, RowResultDoesNotDependOnTheTile) {
  // Rows with their own ranges, then the 7 heads of one decoding position (one range, whose
  // values the kernel sums 4 + 3 rows at a time).
  const std::vector<std::vector<int32_t>> positions = {{89, 3, 40, 89, 17, 64, 88},
                                                       {89, 89, 89, 89, 89, 89, 89}};
  const std::vector<std::vector<int32_t>> lows = {{0, 0, 25, 70, 0, 0, 5}, {0, 0, 0, 0, 0, 0, 0}};
  for (size_t set = 0; set < positions.size(); ++set) {
    for (KvElement element : kAllElements) {
      const Cache c = make_cache(4000, 64, 64, 16, 90, element);
      auto rng = rng_for(4001);
      const std::vector<int32_t>& pos = positions[set];
      const std::vector<int32_t>& lo = lows[set];
      const std::vector<float> q = gaussian(rng, pos.size() * 64, 0.3f);
      const std::vector<float> together = attend(*table_, c, q, pos, lo);
      for (size_t r = 0; r < pos.size(); ++r) {
        const std::vector<float> q_r(q.begin() + static_cast<int64_t>(r) * 64,
                                     q.begin() + static_cast<int64_t>(r + 1) * 64);
        const std::vector<float> alone = attend(*table_, c, q_r, {pos[r]}, {lo[r]});
        EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + r * 64, 64 * sizeof(float)))
            << "set " << set << " row " << r << " (" << element_name(element) << ")";
      }
    }
  }
}

// A visible key that is not finite (a NaN element; for 8-bit caches the NaN scale that
// quantize_kv_vector gives a vector with a NaN or infinity) makes the rows that see it NaN, never
// a finite number; rows that do not see it are unaffected. The poisoned key sits in each of the
// three groups of 8 of its block in turn (the last group once hid a NaN from the running max).
TEST_P(Attention, NonFiniteVisibleKeyMakesItsRowsNaN) {
  for (KvElement element : kAllElements) {
    for (int32_t bad : {3, 9, 15, 17}) {
      SCOPED_TRACE(std::string(element_name(element)) + " slot " + std::to_string(bad));
      Cache c = make_cache(7000, 64, 64, 16, 40, element);
      const size_t block = static_cast<size_t>(bad / 16);
      const size_t slot = static_cast<size_t>(bad % 16);
      switch (element) {
        case KvElement::kF32:
          c.k_blocks[(block * 64 + 5) * 16 + slot] = kNaN;
          break;
        case KvElement::kF16:
          c.k_blocks16[(block * 64 + 5) * 16 + slot] = quant::fp32_to_fp16(kNaN);
          break;
        case KvElement::kInt8:
        case KvElement::kFp8:
          c.k_scales[static_cast<size_t>(bad)] = quant::fp32_to_bf16(kNaN);
          break;
      }
      auto rng = rng_for(7001);
      const std::vector<int32_t> pos = {39, 39, 20, 2};
      const std::vector<int32_t> lo = {0, 0, 0, 0};
      const std::vector<float> q = gaussian(rng, pos.size() * 64, 0.3f);
      const std::vector<float> y = attend(*table_, c, q, pos, lo);
      for (size_t r = 0; r < pos.size(); ++r) {
        const bool sees = pos[r] >= bad;
        for (size_t e = 0; e < 64; ++e) {
          const float x = y[r * 64 + e];
          ASSERT_EQ(std::isnan(x), sees) << "row " << r << " element " << e << " = " << x;
        }
      }
    }
  }
}

// A row with no visible key in a block keeps its state untouched.
TEST_P(Attention, RowWithoutVisibleKeysIsUntouched) {
  const Cache c = make_cache(5000, 64, 64, 16, 16);
  std::vector<float> q(64, 0.1f);
  std::vector<float> acc(64, 1.5f);
  float max = 2.0f;
  float sum = 3.0f;
  std::vector<float> scores(16, 0.0f);
  const int32_t begin = 9;
  const int32_t end = 9;
  AttentionTile t{q.data(), acc.data(), &max, &sum, &begin, &end, scores.data(), 1, 64, 64};
  table_->block(t, c.block(0), 16);
  EXPECT_EQ(max, 2.0f);
  EXPECT_EQ(sum, 3.0f);
  for (float a : acc) EXPECT_EQ(a, 1.5f);
}

TEST_P(Attention, ExpMatchesStdExp) {
  auto rng = rng_for(6000);
  std::uniform_real_distribution<float> uniform(-87.0f, 88.0f);
  std::vector<float> x(1003);
  for (float& v : x) v = uniform(rng);
  x[0] = 0.0f;
  x[1] = -1e-8f;
  x[2] = 1e-8f;
  x[3] = -87.3f;
  x[4] = 88.0f;
  std::vector<float> y(x.size());
  table_->exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double truth = std::exp(static_cast<double>(x[i]));
    EXPECT_LE(std::fabs(y[i] - truth) / truth, 1e-6) << "exp(" << x[i] << ")";
  }
  // Underflow is exactly zero (a masked score weighs nothing); in place works.
  std::vector<float> low = {kNegInf, -1000.0f, -87.4f, -200.0f, -90.0f,
                            -88.0f,  -100.0f,  -87.5f, kNegInf, -95.0f};
  table_->exp(low.data(), low.data(), static_cast<int64_t>(low.size()));
  for (float v : low) EXPECT_EQ(v, 0.0f);
}

// The f16 cache's conversion gives the same bits on every path: f32 -> f16 rounds to nearest
// even (ties, subnormals, overflow to inf, NaN kept a NaN). Lengths that are not multiples of
// the vector width exercise the tails.
TEST_P(Attention, ToF16MatchesTheScalarReferenceBitForBit) {
  auto rng = rng_for(6100);
  std::vector<float> x = gaussian(rng, 1001, 3.0f);
  const float specials[] = {0.0f,           -0.0f,
                            65504.0f,       65519.99f,
                            65520.0f,       -65520.0f,
                            1e9f,           -1e9f,
                            6.1035156e-05f, 5.9604645e-08f,
                            2.9802322e-08f, 2.9802326e-08f,
                            1e-10f,
                            1.00048828125f,  // exactly halfway between two halves: ties to even
                            1.00146484375f, std::numeric_limits<float>::infinity(),
                            kNegInf,        kNaN};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 7] = specials[i];
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{1001}}) {
    std::vector<uint16_t> got(static_cast<size_t>(n));
    table_->to_f16(x.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = quant::fp32_to_fp16(x[static_cast<size_t>(i)]);
      ASSERT_EQ(got[static_cast<size_t>(i)], want) << "x = " << x[static_cast<size_t>(i)];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, Attention, ::testing::ValuesIn(testing::all_isas()),
                         [](const auto& param_info) {
                           return std::string(isa_name(param_info.param));
                         });

TEST(AttentionDispatch, FreeFunctionsMatchTheBestTable) {
  const float x[3] = {-1.0f, 0.5f, 2.0f};
  float y[3];
  float ref[3];
  exp_array(x, y, 3);
  attention_table(best_isa()).exp(x, ref, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y[i], ref[i]);
  uint16_t h[3];
  uint16_t h_ref[3];
  f32_to_f16_array(x, h, 3);
  attention_table(best_isa()).to_f16(x, h_ref, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(h[i], h_ref[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(quant::fp16_to_fp32(h[i]), x[i]);  // exact halves
}

// The 8-bit cache's quantizer: the scale is the largest magnitude over the type's range,
// rounded up to a bfloat16 (never clipping), and each element is the nearest representable one.
TEST(QuantizeKvVector, ScalesRoundUpAndElementsRoundToNearest) {
  auto rng = rng_for(6000);
  for (KvElement element : {KvElement::kInt8, KvElement::kFp8}) {
    SCOPED_TRACE(element_name(element));
    const float range = element == KvElement::kInt8 ? 127.0f : 448.0f;
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x = gaussian(rng, 64, trial % 2 ? 40.0f : 0.02f);
      x[static_cast<size_t>(trial)] *= 10;  // an outlier channel
      std::vector<uint8_t> out(3 * 64, 0xab);
      uint16_t scale_bits = 0;
      quantize_kv_vector(x.data(), 64, element, out.data(), 3, &scale_bits);
      float amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      const float scale = quant::bf16_to_fp32(scale_bits);
      EXPECT_GE(scale, amax / range);
      EXPECT_LE(scale, amax / range * (1 + 1.0f / 128));
      for (size_t i = 0; i < 64; ++i) {
        ASSERT_EQ(out[3 * i + 1], 0xab) << "wrote outside its stride";
        const float got = decode_8bit(element, out[3 * i], scale_bits);
        const float y = x[i] / scale;
        // The nearest representable value: within half a step of int8's unit grid, or of the
        // e4m3 grid at y's magnitude (3 mantissa bits; 2^-9 spacing below 2^-6).
        const float step = element == KvElement::kInt8
                               ? 1.0f
                               : std::ldexp(1.0f, std::max(std::ilogb(std::fabs(y)), -6) - 3);
        EXPECT_LE(std::fabs(got / scale - y), step / 2 * (1 + 1e-6f)) << x[i];
      }
    }
  }
}

TEST(QuantizeKvVector, ZerosAndNonFiniteInputs) {
  std::vector<float> zeros(16, 0.0f);
  std::vector<uint8_t> out(16, 7);
  uint16_t scale = 99;
  quantize_kv_vector(zeros.data(), 16, KvElement::kInt8, out.data(), 1, &scale);
  EXPECT_EQ(scale, 0);
  for (uint8_t b : out) EXPECT_EQ(b, 0);
  std::vector<float> bad(16, 1.0f);
  bad[5] = std::numeric_limits<float>::infinity();
  quantize_kv_vector(bad.data(), 16, KvElement::kFp8, out.data(), 1, &scale);
  EXPECT_TRUE(std::isnan(quant::bf16_to_fp32(scale)));
  EXPECT_THROW(quantize_kv_vector(zeros.data(), 16, KvElement::kF16, out.data(), 1, &scale), Error);
}

}  // namespace
}  // namespace llms::kernels
