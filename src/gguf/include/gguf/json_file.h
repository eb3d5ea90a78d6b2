// gguf/json_file: bounded parsing of the JSON files that sit beside model weights
// (config.json, tokenizer.json, model.safetensors.index.json, ...).
//
// Contract: a file larger than its cap is refused before it is read; nesting deeper than
// kMaxJsonDepth is refused while parsing (so neither parsing nor later recursive walks of the
// tree can exhaust the stack); invalid JSON or UTF-8 is refused. Errors are llms::Error naming
// the file: kNotFound when it does not exist, kIo when it cannot be read, kInvalidFile otherwise.
// Duplicate object keys keep the last value, as Python's json module (which writes these
// files) does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

namespace llms::gguf {

inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{64} << 20;  // 64 MiB
inline constexpr int kMaxJsonDepth = 64;

nlohmann::json read_json_file(const std::filesystem::path& path,
                              uint64_t max_bytes = kMaxJsonFileBytes);

// Parses text already in memory; `source` names it in error messages.
nlohmann::json parse_json_text(std::string_view text, std::string_view source);

// "an object", "a string", "an integer", ... for messages about a value of the wrong type.
std::string_view json_type_phrase(const nlohmann::json& value);

}  // namespace llms::gguf
