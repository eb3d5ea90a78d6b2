// quant/k_layout (private): where each element's bits live inside a K-quant super-block.
//
// One place for the index arithmetic so that the dequantizers and the quantizers cannot
// disagree. Element indices e are in [0, 256). Setters OR bits in: clear the arrays first.
#pragma once

#include <cstdint>

namespace llms::quant::detail {

// 2-bit fields (Q2_K/Q3_K low bits, Q6_K high bits): 64 bytes, two halves of 128 elements;
// in each half, 32 bytes carry 4 groups of 32 elements at bit offsets 0, 2, 4, 6.
inline int crumb_byte(int e) { return 32 * (e / 128) + e % 32; }
inline int crumb_shift(int e) { return 2 * ((e % 128) / 32); }
inline int get_crumb(const uint8_t* q, int e) { return (q[crumb_byte(e)] >> crumb_shift(e)) & 3; }
inline void set_crumb(uint8_t* q, int e, int v) {
  q[crumb_byte(e)] = static_cast<uint8_t>(q[crumb_byte(e)] | ((v & 3) << crumb_shift(e)));
}

// 4-bit fields of Q4_K/Q5_K: 128 bytes in chunks of 32; chunk c holds elements 64c..64c+31 in
// low nibbles and 64c+32..64c+63 in high nibbles.
inline int k4_byte(int e) { return 32 * (e / 64) + e % 32; }
inline int k4_shift(int e) { return 4 * ((e % 64) / 32); }
inline int get_k4(const uint8_t* q, int e) { return (q[k4_byte(e)] >> k4_shift(e)) & 0x0f; }
inline void set_k4(uint8_t* q, int e, int v) {
  q[k4_byte(e)] = static_cast<uint8_t>(q[k4_byte(e)] | ((v & 0x0f) << k4_shift(e)));
}

// 4-bit fields of Q6_K: 128 bytes, two halves of 64 bytes; in each half, 64 bytes carry
// elements 0..63 of the half in low nibbles and 64..127 in high nibbles.
inline int k6_byte(int e) { return 64 * (e / 128) + e % 64; }
inline int k6_shift(int e) { return 4 * ((e % 128) / 64); }
inline int get_k6_low(const uint8_t* q, int e) { return (q[k6_byte(e)] >> k6_shift(e)) & 0x0f; }
inline void set_k6_low(uint8_t* q, int e, int v) {
  q[k6_byte(e)] = static_cast<uint8_t>(q[k6_byte(e)] | ((v & 0x0f) << k6_shift(e)));
}

// 1-bit fields (Q3_K hmask, Q5_K qh): 32 bytes; element e is bit e / 32 of byte e % 32.
inline int get_bit(const uint8_t* q, int e) { return (q[e % 32] >> (e / 32)) & 1; }
inline void set_bit(uint8_t* q, int e, int v) {
  q[e % 32] = static_cast<uint8_t>(q[e % 32] | ((v & 1) << (e / 32)));
}

// Q3_K's sixteen 6-bit scales (stored biased by 32) in 12 bytes: low 4 bits in the nibbles of
// bytes 0..7 (j < 8 low nibble of byte j, else high nibble of byte j - 8), high 2 bits at bit
// offset 2 * (j / 4) of byte 8 + j % 4.
inline int get_q3_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}
inline void set_q3_scale(uint8_t* s, int j, int scale) {
  const int biased = (scale + 32) & 63;
  if (j < 8) {
    s[j] = static_cast<uint8_t>(s[j] | (biased & 0x0f));
  } else {
    s[j - 8] = static_cast<uint8_t>(s[j - 8] | ((biased & 0x0f) << 4));
  }
  s[8 + j % 4] = static_cast<uint8_t>(s[8 + j % 4] | ((biased >> 4) << (2 * (j / 4))));
}

}  // namespace llms::quant::detail
