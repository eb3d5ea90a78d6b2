// webui/embedded_files: the raw embedded files, as the build wrote them (private header).
#pragma once

#include <span>
#include <string_view>

namespace llms::webui::detail {

struct EmbeddedFile {
  std::string_view name;   // base name in src/webui/assets/
  std::string_view bytes;  // the file's contents
  std::string_view hash;   // hex prefix of its SHA-256
};

// Every file of src/webui/assets/, sorted by name (generated: embed_assets.cmake).
std::span<const EmbeddedFile> embedded_files();

}  // namespace llms::webui::detail
