// Harness-only (see harness.cc): AVX-512 intrinsics emulated by SIMDe (apt: libsimde-dev) on a
// CPU without AVX-512. SIMDe 0.7.4 lacks _mm512_cvtepi32_ps, supplied here.
#include <immintrin.h>
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
static inline simde__m512 shim_cvtepi32_ps(simde__m512i a) {
  int32_t in[16];
  float out[16];
  simde_mm512_storeu_si512(in, a);
  for (int i = 0; i < 16; ++i) out[i] = static_cast<float>(in[i]);
  return simde_mm512_loadu_ps(out);
}
#define _mm512_cvtepi32_ps shim_cvtepi32_ps
