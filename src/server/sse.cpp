// server/sse: event framing (see sse.h).
#include "server/sse.h"

#include "server/json_body.h"

namespace llms::server {

void append_sse_event(std::string& out, const nlohmann::json& payload) {
  out += "data: ";
  out += dump_json(payload);
  out += "\n\n";
}

}  // namespace llms::server
