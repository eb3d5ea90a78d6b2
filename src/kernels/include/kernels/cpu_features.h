// kernels/cpu_features: what the CPU (and the OS, for the wider register state) supports, and
// which instruction-set level the kernels run at.
//
// Contract:
//   - cpu_features() reads cpuid once; a feature is reported only when the OS also saves its
//     register state (xgetbv), so a true flag is safe to use.
//   - Isa::kAvx2 needs AVX2 + FMA + F16C. Isa::kAvx512 needs AVX-512 F, BW, VL, DQ and VNNI
//     (Ice Lake, Sapphire Rapids, Zen 4 and later); BF16 is reported but not required, and the
//     *_avx512.cpp kernels never use it.
//   - best_isa() is the best level the CPU supports, capped by the environment variable
//     LLMS_ISA=scalar|avx2|avx512 when set (read once). An unknown LLMS_ISA value throws
//     llms::Error(kInvalidArgument) naming it.
//   - Kernels refuse (throw) an Isa the CPU does not support instead of running it.
#pragma once

#include <optional>
#include <string_view>

namespace llms::kernels {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
};

const CpuFeatures& cpu_features();

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// Whether this CPU can run kernels of level `isa` (ignores LLMS_ISA).
bool isa_supported(Isa isa);
// The best supported level, capped by LLMS_ISA.
Isa best_isa();
std::string_view isa_name(Isa isa);                   // "scalar", "avx2", "avx512"
std::optional<Isa> parse_isa(std::string_view name);  // inverse of isa_name

}  // namespace llms::kernels
