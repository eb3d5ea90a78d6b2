// cpu_features / best_isa: consistency of the probed flags, names, and the LLMS_ISA cap.
#include "kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace llms::kernels {
namespace {

TEST(CpuFeatures, FlagsAreConsistent) {
  const CpuFeatures& f = cpu_features();
  std::printf("[cpu] avx2 %d fma %d f16c %d avx512f %d bw %d vl %d dq %d vnni %d bf16 %d\n", f.avx2,
              f.fma, f.f16c, f.avx512f, f.avx512bw, f.avx512vl, f.avx512dq, f.avx512vnni,
              f.avx512bf16);
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_EQ(isa_supported(Isa::kAvx2), f.avx2 && f.fma && f.f16c);
  if (isa_supported(Isa::kAvx512)) {
    EXPECT_TRUE(isa_supported(Isa::kAvx2));
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni);
  }
  if (f.avx512bw || f.avx512vnni) {
    EXPECT_TRUE(f.avx512f);
  }
}

TEST(CpuFeatures, BestIsaIsSupportedAndHonoursTheCap) {
  const Isa best = best_isa();
  EXPECT_TRUE(isa_supported(best));
  std::printf("[cpu] best_isa %s\n", std::string(isa_name(best)).c_str());
  const char* cap = std::getenv("LLMS_ISA");
  if (cap != nullptr && *cap != '\0') {
    EXPECT_LE(static_cast<int>(best), static_cast<int>(*parse_isa(cap)));
  } else {
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
      if (isa_supported(isa)) {
        EXPECT_GE(static_cast<int>(best), static_cast<int>(isa));
      }
    }
  }
}

TEST(CpuFeatures, NamesRoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  }
  EXPECT_FALSE(parse_isa("sse2"));
  EXPECT_FALSE(parse_isa(""));
}

}  // namespace
}  // namespace llms::kernels
