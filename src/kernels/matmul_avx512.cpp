// kernels/matmul_avx512: the AVX-512 kernel table. Float weights have no AVX-512 kernel (the
// driver falls back to AVX2 for them: GEMV is bandwidth-bound either way).
#include "matmul_kernels.h"

namespace llms::kernels::detail {

const Kernel* find_kernel_avx512(gguf::GgmlType type) {
  if (const Kernel* k = find_legacy_avx512(type)) return k;
  return find_kquant_avx512(type);
}

}  // namespace llms::kernels::detail
