// gguf/json_file: see the header. The depth limit is enforced from nlohmann's parser callback,
// which sees every container before it is opened; the parser itself is iterative, so the
// callback is the one place where depth needs watching.
#include "gguf/json_file.h"

#include <string>

#include "util/error.h"
#include "util/mapped_file.h"

namespace llms::gguf {

nlohmann::json parse_json_text(std::string_view text, std::string_view source) {
  auto limit_depth = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    bool opens = event == nlohmann::json::parse_event_t::object_start ||
                 event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= kMaxJsonDepth) {
      throw_invalid_file(std::string(source) + ": JSON nested deeper than " +
                         std::to_string(kMaxJsonDepth) + " levels");
    }
    return true;
  };
  // nlohmann's lexer reads a NUL byte as the end of input; valid JSON never holds a raw NUL.
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw_invalid_file(std::string(source) + ": not valid JSON: NUL byte at offset " +
                       std::to_string(nul));
  }
  try {
    return nlohmann::json::parse(text.data(), text.data() + text.size(), limit_depth,
                                 /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid_file(std::string(source) + ": not valid JSON: " + e.what());
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path, uint64_t max_bytes) {
  // Mapping costs nothing until pages are touched, so the size check comes before any read.
  MappedFile file = MappedFile::open(path);
  if (file.size() > max_bytes) {
    throw_invalid_file(std::string("'") + path.string() + "' is " + std::to_string(file.size()) +
                       " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  auto bytes = file.bytes();
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return parse_json_text(text, std::string("'") + path.string() + "'");
}

std::string_view json_type_phrase(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::json::value_t::number_float:
      return "a floating-point number";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::object:
      return "an object";
    default:
      return "an unexpected value";
  }
}

}  // namespace llms::gguf
