// bench/chunk_reader (private): reads one JSON response object or stream chunk of an
// OpenAI-compatible server into a ChunkInfo (bench/openai.h).
//
// One event per streamed token makes this the load client's hot path, so the fields are read in
// one pass by a strict JSON scanner, without building a tree; anything the scanner does not take
// (bad syntax, lone surrogates, 64-bit overflow, deep nesting, an error object) goes to
// nlohmann's parser, which decides, so a shortcut can cost time but never change an answer.
#pragma once

#include <string_view>

#include "bench/openai.h"

namespace llms::bench {

// The object's fields; is_malformed when `text` is not a JSON object.
ChunkInfo read_chunk_object(std::string_view text);

}  // namespace llms::bench
