// bench/sse: incremental parser of a text/event-stream body (WHATWG "server-sent events").
//
// Bytes may arrive split anywhere, including inside a CRLF pair or a UTF-8 sequence; the parser
// keeps the partial line between feeds. Lines end with CRLF, LF or CR. A line "field: value"
// (one leading space of the value dropped) sets a field; "data" lines append to the event's data,
// joined with "\n"; a line starting with ':' is a comment; an empty line dispatches the event
// unless its data is empty. A leading UTF-8 byte-order mark is skipped. An unterminated event at
// the end of the stream is not dispatched (as the spec says). A line or event larger than the limit
// throws llms::Error, so a hostile server cannot grow memory without bound.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace llms::bench {

struct SseEvent {
  std::string type = "message";  // the "event" field, "message" when absent
  std::string data;              // "data" lines joined with '\n'
  std::string id;                // the last "id" field seen, if any
};

class SseParser {
 public:
  explicit SseParser(size_t max_event_bytes = size_t{16} << 20) : max_bytes_(max_event_bytes) {}

  // Parses `bytes` and appends every event completed by them to `out` (which is not cleared).
  void feed(std::string_view bytes, std::vector<SseEvent>& out);

  // Bytes held for an incomplete line or event.
  size_t pending_bytes() const { return line_.size() + data_.size(); }

 private:
  void take_line(std::vector<SseEvent>& out);

  size_t max_bytes_;
  std::string line_;
  std::string data_;
  std::string type_;
  std::string last_id_;
  bool has_data_ = false;
  bool after_cr_ = false;   // the previous byte ended a line with CR: skip one LF
  bool at_start_ = true;    // BOM check pending
  size_t bom_matched_ = 0;  // bytes of a split BOM seen so far
};

}  // namespace llms::bench
