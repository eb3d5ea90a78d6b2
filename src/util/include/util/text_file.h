// util/text_file: a whole file read into memory (schemas, grammars, texts to score).
#pragma once

#include <string>
#include <string_view>

namespace llms {

// The file's bytes; throws llms::Error(kNotFound) "<what>: cannot open '<path>'" when it cannot be
// opened and llms::Error(kIo) when reading fails.
std::string read_text_file(const std::string& path, std::string_view what);

}  // namespace llms
