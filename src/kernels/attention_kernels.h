// kernels/attention_kernels (private): the per-ISA tables behind kernels/attention.h.
#pragma once

#include "kernels/attention.h"

namespace llms::kernels::detail {

const AttentionTable& attention_scalar();
const AttentionTable& attention_avx2();

}  // namespace llms::kernels::detail
