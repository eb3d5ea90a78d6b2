// kernels/ops_kernels (private): the per-ISA op tables behind kernels/ops.h.
#pragma once

#include "kernels/ops.h"

namespace llms::kernels::detail {

const OpTable& ops_scalar();
const OpTable& ops_avx2();

}  // namespace llms::kernels::detail
