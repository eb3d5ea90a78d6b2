// Reader of tests/data/quant/golden.bin, the gguf-py reference data made by
// tools/make_quant_golden.py (format documented in that script).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace llms::quant::testing {

struct GoldenRecord {
  gguf::GgmlType type;
  std::string label;
  int64_t n_elements = 0;
  std::vector<uint8_t> bytes;  // blocks as stored (gguf-py's quantization when has_source)
  bool has_source = false;
  std::vector<float> source;    // the floats gguf-py quantized (when has_source)
  std::vector<float> expected;  // gguf-py's dequantization of `bytes`
};

struct GoldenFile {
  std::string generator;  // which script and gguf/numpy versions made it
  std::vector<GoldenRecord> records;
};

// Reads and checks the whole file; fails the calling test (ADD_FAILURE) and returns an empty
// file on any malformed content.
GoldenFile read_golden_file(const std::string& path);

inline std::string golden_path() { return std::string(LLMS_TEST_DATA_DIR) + "/quant/golden.bin"; }

}  // namespace llms::quant::testing
