#include "safetensors_bytes.h"

#include <nlohmann/json.hpp>

namespace llms::testing {

SafetensorsBuilder& SafetensorsBuilder::add(std::string name, std::string dtype,
                                            std::vector<uint64_t> shape,
                                            std::vector<uint8_t> data) {
  uint64_t begin = data_.size();
  data_.insert(data_.end(), data.begin(), data.end());
  entries_.push_back({std::move(name), std::move(dtype), std::move(shape), begin, data_.size()});
  return *this;
}

SafetensorsBuilder& SafetensorsBuilder::metadata(std::string key, std::string value) {
  metadata_.emplace_back(std::move(key), std::move(value));
  return *this;
}

std::string SafetensorsBuilder::header() const {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata_) meta[key] = value;
    root["__metadata__"] = meta;
  }
  for (const auto& e : entries_) {
    root[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  }
  std::string text = root.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::vector<uint8_t> SafetensorsBuilder::build() const {
  return safetensors_bytes(header(), data_);
}

std::vector<uint8_t> safetensors_bytes(std::string_view header, std::span<const uint8_t> data,
                                       std::optional<uint64_t> declared_length) {
  uint64_t n = declared_length.value_or(header.size());
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace llms::testing
