// libFuzzer target for the safetensors reader: any input either is refused with llms::Error or
// yields a file whose every tensor span lies in bounds and agrees with its shape and dtype.
// Violations trap so the fuzzer reports them; ASan catches any out-of-bounds touch.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/safetensors_file.h"
#include "util/error.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = llms::gguf::SafetensorsFile::from_bytes(std::span<const uint8_t>(data, size));
    check(file.data_offset() + file.data_size() == file.file_size());
    uint64_t sum = 0;
    const llms::gguf::SafetensorsTensor* previous = nullptr;
    for (const auto& tensor : file.tensors()) {
      auto bytes = file.tensor_data(tensor);
      check(bytes.size() == tensor.n_bytes);
      check(tensor.n_bytes == tensor.n_elements * llms::gguf::dtype_size(tensor.dtype));
      for (uint8_t b : bytes) sum += b;  // every byte must be readable
      check(file.find_tensor(tensor.name) == &tensor);
      check(previous == nullptr || previous->name < tensor.name);
      previous = &tensor;
    }
    for (const auto& [key, value] : file.metadata()) sum += key.size() + value.size();
    volatile uint64_t sink = sum;
    (void)sink;
  } catch (const llms::Error&) {
    // Refusing bad input is the expected outcome.
  }
  return 0;
}
