// bench/chunked: incremental decoder of an HTTP/1.1 chunked message body (RFC 9112, 7.1).
//
// The load client reads a streamed response itself (one read per token), so it decodes the
// chunk framing without a general HTTP parser. Bytes may arrive split anywhere. Chunk
// extensions and trailer fields are skipped; bare LF is accepted where CRLF is due (as lenient
// parsers do). A chunk size that is not hex, larger than 2^40, or missing CRLF after a chunk's
// data throws llms::Error. After the last chunk (size 0) and the trailer section, done() is true
// and further bytes are left unconsumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace llms::bench {

class ChunkedDecoder {
 public:
  // Decodes from `in`; appends the pieces of chunk data it contains to `data` (views into `in`)
  // and returns how many bytes of `in` it consumed (all of them unless the body ended).
  size_t feed(std::string_view in, std::vector<std::string_view>& data);

  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kSize,           // hex digits of the chunk size
    kSizeExtension,  // ";ext" or whitespace up to the end of the line
    kSizeLf,         // CR seen, LF due
    kData,
    kDataCr,  // CRLF after the data
    kDataLf,
    kTrailerLineStart,
    kTrailerLine,
    kTrailerEndLf,
    kDone
  };
  void end_size_line();

  State state_ = State::kSize;
  uint64_t size_ = 0;
  int n_digits_ = 0;
};

}  // namespace llms::bench
