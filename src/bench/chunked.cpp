// bench/chunked: chunked transfer decoding (see chunked.h).
#include "bench/chunked.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace llms::bench {

namespace {

constexpr uint64_t kMaxChunk = uint64_t{1} << 40;

[[noreturn]] void malformed(const char* what) {
  throw Error(Error::Kind::kInvalidFile, std::string("chunked body: ") + what);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void ChunkedDecoder::end_size_line() {
  if (n_digits_ == 0) malformed("a chunk size line has no size");
  state_ = size_ == 0 ? State::kTrailerLineStart : State::kData;
  n_digits_ = 0;
}

size_t ChunkedDecoder::feed(std::string_view in, std::vector<std::string_view>& data) {
  size_t i = 0;
  while (i < in.size() && state_ != State::kDone) {
    const char c = in[i];
    switch (state_) {
      case State::kSize: {
        const int v = hex_value(c);
        if (v >= 0) {
          if (n_digits_ == 0) size_ = 0;
          size_ = size_ * 16 + static_cast<uint64_t>(v);
          if (size_ > kMaxChunk) malformed("a chunk is larger than 2^40 bytes");
          ++n_digits_;
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kSizeExtension;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == '\n') {
          end_size_line();
        } else {
          malformed("a chunk size is not hexadecimal");
        }
        ++i;
        break;
      }
      case State::kSizeExtension:
        if (c == '\n') end_size_line();
        ++i;
        break;
      case State::kSizeLf:
        if (c != '\n') malformed("a chunk size line does not end with CRLF");
        end_size_line();
        ++i;
        break;
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(size_, in.size() - i));
        data.push_back(in.substr(i, n));
        i += n;
        size_ -= n;
        if (size_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c == '\r') {
          state_ = State::kDataLf;
        } else if (c == '\n') {
          state_ = State::kSize;
        } else {
          malformed("chunk data is not followed by CRLF");
        }
        ++i;
        break;
      case State::kDataLf:
        if (c != '\n') malformed("chunk data is not followed by CRLF");
        state_ = State::kSize;
        ++i;
        break;
      case State::kTrailerLineStart:
        if (c == '\r') {
          state_ = State::kTrailerEndLf;
        } else if (c == '\n') {
          state_ = State::kDone;
        } else {
          state_ = State::kTrailerLine;
        }
        ++i;
        break;
      case State::kTrailerLine:
        if (c == '\n') state_ = State::kTrailerLineStart;
        ++i;
        break;
      case State::kTrailerEndLf:
        if (c != '\n') malformed("the trailer section does not end with CRLF");
        state_ = State::kDone;
        ++i;
        break;
      case State::kDone:
        break;
    }
  }
  return i;
}

}  // namespace llms::bench
