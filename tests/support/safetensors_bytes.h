// tests/support/safetensors_bytes: hand-built safetensors files for tests and fuzz seeds.
//
// SafetensorsBuilder lays tensors out back to back and writes a well-formed header; tests that
// need a broken file either edit the header text it produces or build raw bytes from any header
// text with safetensors_bytes(), which can also declare a header length that lies.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llms::testing {

class SafetensorsBuilder {
 public:
  // Appends a tensor whose data follows the previous one's. `dtype` is the name written to the
  // file, so unknown names can be tested too.
  SafetensorsBuilder& add(std::string name, std::string dtype, std::vector<uint64_t> shape,
                          std::vector<uint8_t> data);

  template <typename T>
  SafetensorsBuilder& add_values(std::string name, std::string dtype, std::vector<uint64_t> shape,
                                 const std::vector<T>& values) {
    std::vector<uint8_t> data(values.size() * sizeof(T));
    if (!data.empty()) std::memcpy(data.data(), values.data(), data.size());
    return add(std::move(name), std::move(dtype), std::move(shape), std::move(data));
  }

  SafetensorsBuilder& metadata(std::string key, std::string value);

  // The header JSON (keys in insertion order), padded with spaces to a multiple of 8 bytes as
  // the official writer does.
  std::string header() const;
  std::vector<uint8_t> data() const { return data_; }
  std::vector<uint8_t> build() const;

 private:
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    uint64_t begin;
    uint64_t end;
  };
  std::vector<Entry> entries_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<uint8_t> data_;
};

// 8-byte little-endian length, header text, data. The length is header.size() unless
// `declared_length` overrides it.
std::vector<uint8_t> safetensors_bytes(std::string_view header, std::span<const uint8_t> data = {},
                                       std::optional<uint64_t> declared_length = std::nullopt);

}  // namespace llms::testing
