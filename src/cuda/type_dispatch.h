// cuda/type_dispatch: the host side of the weight kernels' per-type templates (cuda/matmul.cu,
// cuda/tiled_gemm.cu): dispatch_type() instantiates a kernel for a matrix's GGUF type, and the
// checks and names their errors share.
#pragma once

#include <cstdint>
#include <string>

#include "block_decode.h"
#include "device_kernels.h"
#include "util/error.h"

namespace llms::cuda {

template <gguf::GgmlType T>
struct TypeTag {
  static constexpr gguf::GgmlType value = T;
};

inline std::string type_label(gguf::GgmlType type) {
  const auto info = gguf::ggml_type_info(static_cast<uint32_t>(type));
  return info ? std::string(info->name)
              : "with unknown id " + std::to_string(static_cast<uint32_t>(type));
}

// The row's sub-blocks of 32 values. The quantized types' blocks are multiples of 32 values;
// no kernel takes a partial sub-block, so F32/F16/BF16 rows of other widths are refused.
inline int64_t sub_blocks(const DeviceMatrix& w, const char* what) {
  if (w.n_cols % kSubBlockValues != 0) {
    throw Error(Error::Kind::kUnsupported, std::string("CUDA ") + what + ": " + type_label(w.type) +
                                               " matrix of " + std::to_string(w.n_cols) +
                                               " columns: the device kernels need a multiple of " +
                                               std::to_string(kSubBlockValues));
  }
  return w.n_cols / kSubBlockValues;
}

// Calls fn(TypeTag<type>{}) so that fn instantiates its kernel for the type: the one switch on
// the type happens here, on the host, never inside a kernel.
template <typename Fn>
void dispatch_type(gguf::GgmlType type, const char* what, Fn&& fn) {
  switch (type) {
    case gguf::GgmlType::kF32:
      fn(TypeTag<gguf::GgmlType::kF32>{});
      return;
    case gguf::GgmlType::kF16:
      fn(TypeTag<gguf::GgmlType::kF16>{});
      return;
    case gguf::GgmlType::kBF16:
      fn(TypeTag<gguf::GgmlType::kBF16>{});
      return;
    case gguf::GgmlType::kQ4_0:
      fn(TypeTag<gguf::GgmlType::kQ4_0>{});
      return;
    case gguf::GgmlType::kQ4_1:
      fn(TypeTag<gguf::GgmlType::kQ4_1>{});
      return;
    case gguf::GgmlType::kQ5_0:
      fn(TypeTag<gguf::GgmlType::kQ5_0>{});
      return;
    case gguf::GgmlType::kQ5_1:
      fn(TypeTag<gguf::GgmlType::kQ5_1>{});
      return;
    case gguf::GgmlType::kQ8_0:
      fn(TypeTag<gguf::GgmlType::kQ8_0>{});
      return;
    case gguf::GgmlType::kQ4_K:
      fn(TypeTag<gguf::GgmlType::kQ4_K>{});
      return;
    case gguf::GgmlType::kQ5_K:
      fn(TypeTag<gguf::GgmlType::kQ5_K>{});
      return;
    case gguf::GgmlType::kQ6_K:
      fn(TypeTag<gguf::GgmlType::kQ6_K>{});
      return;
    default:
      throw Error(Error::Kind::kUnsupported, std::string("CUDA ") + what + ": weight type " +
                                                 type_label(type) +
                                                 " is not supported on the device");
  }
}

}  // namespace llms::cuda
