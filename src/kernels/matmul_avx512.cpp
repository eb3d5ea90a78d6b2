// kernels/matmul_avx512: the AVX-512 kernel table. A type has an entry only where its AVX-512
// kernel measured faster than the AVX2 one; the others (the float types, Q4_1/Q5_1, the
// K-quants for now) fall back to AVX2 in the driver.
#include "matmul_kernels.h"

namespace llms::kernels::detail {

const Kernel* find_kernel_avx512(gguf::GgmlType type) { return find_q8x8_avx512(type); }

}  // namespace llms::kernels::detail
