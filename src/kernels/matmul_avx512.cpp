// kernels/matmul_avx512: the AVX-512 kernel table: the AVX2 kernels with VNNI GEMMs (their
// GEMVs measured faster than the AVX-512 row tiles they replaced, docs/KERNELS.md). The other
// types (the floats, Q4_1/Q5_1) fall back to AVX2 in the driver.
#include "matmul_kernels.h"

namespace llms::kernels::detail {

const Kernel* find_kernel_avx512(gguf::GgmlType type) {
  if (const Kernel* k = find_q8x8_avx512(type)) return k;
  return find_kquant_avx512(type);
}

}  // namespace llms::kernels::detail
