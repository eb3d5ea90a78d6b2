// libFuzzer target for what the load client parses from a server it does not control: the
// chunked-transfer decoder (bench/chunked.h) and the reader of SSE event data (bench/openai.h).
//
// Checks, beyond "no sanitizer finding":
//   - the decoder gives the same data, the same end and the same refusal whether the body arrives
//     at once or split at the position the first byte chooses and then byte by byte;
//   - the event reader calls the data malformed exactly when nlohmann (strict RFC 8259) does not
//     parse it as a JSON object, unless it is the [DONE] sentinel.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "bench/chunked.h"
#include "bench/openai.h"
#include "util/error.h"

namespace {

struct Decoded {
  std::string data;
  size_t consumed = 0;
  bool done = false;
  bool refused = false;
};

// Feeds `pieces` in order; stops at the end of the body or at a refusal.
Decoded decode(const std::vector<std::string_view>& pieces) {
  Decoded r;
  llms::bench::ChunkedDecoder decoder;
  std::vector<std::string_view> out;
  try {
    for (std::string_view piece : pieces) {
      out.clear();
      const size_t used = decoder.feed(piece, out);
      if (used > piece.size()) std::abort();
      for (std::string_view d : out) r.data.append(d);
      r.consumed += used;
      if (decoder.done()) break;
      if (used != piece.size()) std::abort();  // the contract: all of it unless the body ended
    }
  } catch (const llms::Error&) {
    r.refused = true;
  }
  r.done = decoder.done();
  return r;
}

void check_decoder(std::string_view body, size_t split) {
  const Decoded whole = decode({body});
  std::vector<std::string_view> pieces = {body.substr(0, split)};
  for (size_t i = split; i < body.size(); ++i) pieces.push_back(body.substr(i, 1));
  const Decoded parts = decode(pieces);
  if (whole.refused != parts.refused || whole.done != parts.done) std::abort();
  if (!whole.refused && (whole.data != parts.data || whole.consumed != parts.consumed)) {
    std::abort();
  }
}

void check_event_reader(std::string_view text) {
  const llms::bench::ChunkInfo info = llms::bench::read_stream_chunk(text);
  if (info.is_done) return;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const bool is_object = !j.is_discarded() && j.is_object();
  if (info.is_malformed == is_object) std::abort();
  (void)llms::bench::error_message_of(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  check_decoder(input, input.empty() ? 0 : data[0] % (input.size() + 1));
  check_event_reader(input);
  return 0;
}
