// kernels/cpu_features: cpuid + xgetbv probing (see cpu_features.h).
#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "util/error.h"

namespace llms::kernels {
namespace {

// XCR0: which register states the OS saves on a context switch.
uint64_t read_xcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures probe() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(1, 0, eax, ebx, ecx, edx);
  const bool osxsave = (ecx >> 27) & 1;
  const bool avx = (ecx >> 28) & 1;
  const bool fma = (ecx >> 12) & 1;
  const bool f16c = (ecx >> 29) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_ymm) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx >> 5) & 1;
  f.fma = fma;
  f.f16c = f16c;
  if (os_zmm) {
    f.avx512f = (ebx >> 16) & 1;
    f.avx512dq = (ebx >> 17) & 1;
    f.avx512bw = (ebx >> 30) & 1;
    f.avx512vl = (ebx >> 31) & 1;
    f.avx512vnni = (ecx >> 11) & 1;
    const unsigned max_subleaf = eax;
    if (max_subleaf >= 1) {
      __cpuid_count(7, 1, eax, ebx, ecx, edx);
      f.avx512bf16 = (eax >> 5) & 1;
    }
  }
  return f;
}

Isa probe_best() {
  const CpuFeatures& f = cpu_features();
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa capped_best() {
  Isa best = probe_best();
  const char* env = std::getenv("LLMS_ISA");
  if (env != nullptr && *env != '\0') {
    const std::optional<Isa> cap = parse_isa(env);
    if (!cap) {
      throw Error(Error::Kind::kInvalidArgument, std::string("LLMS_ISA: unknown value '") + env +
                                                     "' (expected scalar, avx2 or avx512)");
    }
    if (static_cast<int>(*cap) < static_cast<int>(best)) best = *cap;
  }
  return best;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = probe();
  return features;
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512:
      return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
             f.avx512vnni;
  }
  return false;
}

Isa best_isa() {
  static const Isa isa = capped_best();
  return isa;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (name == isa_name(isa)) return isa;
  }
  return std::nullopt;
}

}  // namespace llms::kernels
