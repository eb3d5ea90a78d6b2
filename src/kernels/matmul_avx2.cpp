// kernels/matmul_avx2: the AVX2 kernel table (kernels live in matmul_*_avx2.cpp by family).
#include "matmul_kernels.h"

namespace llms::kernels::detail {

const Kernel* find_kernel_avx2(gguf::GgmlType type) {
  if (const Kernel* k = find_q8x8_avx2(type)) return k;
  if (const Kernel* k = find_legacy_avx2(type)) return k;
  if (const Kernel* k = find_kquant_avx2(type)) return k;
  return find_float_avx2(type);
}

}  // namespace llms::kernels::detail
