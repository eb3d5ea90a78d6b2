// bench/sse: incremental text/event-stream parser (see sse.h for the rules it follows).
#include "bench/sse.h"

#include "util/error.h"

namespace llms::bench {

namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// The first CR or LF at or after `from`. (find_first_of("\r\n") calls memchr once per byte.)
size_t find_line_end(std::string_view s, size_t from) {
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') return i;
  }
  return std::string_view::npos;
}

}  // namespace

void SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  size_t i = 0;
  if (at_start_) {
    // The BOM itself may arrive split across feeds; hold matched bytes until it is decided.
    while (i < bytes.size() && bom_matched_ < kBom.size() && bytes[i] == kBom[bom_matched_]) {
      ++bom_matched_;
      ++i;
    }
    if (bom_matched_ == kBom.size()) {
      at_start_ = false;
    } else if (i < bytes.size()) {
      // Not a BOM: the bytes matched so far belong to the first line.
      line_.append(kBom.substr(0, bom_matched_));
      at_start_ = false;
    } else {
      return;  // everything so far was a BOM prefix; decide on the next feed
    }
  }
  while (i < bytes.size()) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    const size_t end = find_line_end(bytes, i);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(i));
      if (line_.size() + data_.size() > max_bytes_) {
        throw Error(Error::Kind::kInvalidFile,
                    "SSE: a line or event exceeds " + std::to_string(max_bytes_) + " bytes");
      }
      return;
    }
    line_.append(bytes.substr(i, end - i));
    after_cr_ = bytes[end] == '\r';
    i = end + 1;
    take_line(out);
  }
}

void SseParser::take_line(std::vector<SseEvent>& out) {
  if (line_.empty()) {
    if (has_data_) {
      SseEvent ev;
      if (!type_.empty()) ev.type = type_;
      if (!data_.empty() && data_.back() == '\n') data_.pop_back();
      ev.data = std::move(data_);
      ev.id = last_id_;
      out.push_back(std::move(ev));
    }
    data_.clear();
    type_.clear();
    has_data_ = false;
    return;
  }
  if (line_.front() != ':') {
    const size_t colon = line_.find(':');
    std::string_view field(line_);
    std::string_view value;
    if (colon != std::string::npos) {
      field = std::string_view(line_).substr(0, colon);
      value = std::string_view(line_).substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
      data_.append(value);
      data_.push_back('\n');
      has_data_ = true;
      if (data_.size() > max_bytes_) {
        throw Error(Error::Kind::kInvalidFile,
                    "SSE: an event's data exceeds " + std::to_string(max_bytes_) + " bytes");
      }
    } else if (field == "event") {
      type_.assign(value);
    } else if (field == "id") {
      if (value.find('\0') == std::string_view::npos) last_id_.assign(value);
    }
    // "retry" and unknown fields are ignored.
  }
  line_.clear();
}

}  // namespace llms::bench
