// bench/server_info: model discovery, /tokenize dialects and base-URL parsing (no Beast here).
#include "bench/server_info.h"

#include <nlohmann/json.hpp>

#include "bench/openai.h"
#include "util/error.h"

namespace llms::bench {

std::string Target::url() const {
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + base_path;
}

Target parse_base_url(const std::string& url) {
  Target t;
  std::string rest = url;
  if (rest.rfind("https://", 0) == 0) {
    throw Error(Error::Kind::kUnsupported, "base URL '" + url + "': https is not supported");
  }
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (rest.find("://") != std::string::npos) {
    throw Error(Error::Kind::kInvalidArgument, "base URL '" + url + "': only http:// is supported");
  }
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.pop_back();
  // A base URL ending in /v1 is common (OpenAI clients want it); our paths already start with /v1.
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0)
    path.resize(path.size() - 3);
  t.base_path = path;
  t.port = 80;
  std::string host = authority;
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == std::string::npos) {
      throw Error(Error::Kind::kInvalidArgument, "base URL '" + url + "': unclosed '[' in host");
    }
    host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') {
      throw Error(Error::Kind::kInvalidArgument, "base URL '" + url + "': junk after host");
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    authority = colon == std::string::npos ? "" : authority.substr(colon);
  }
  if (!authority.empty()) {
    const std::string port = authority.substr(1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) == 0 ||
        std::stoul(port) > 65535) {
      throw Error(Error::Kind::kInvalidArgument, "base URL '" + url + "': bad port '" + port + "'");
    }
    t.port = static_cast<uint16_t>(std::stoul(port));
  }
  if (host.empty()) throw Error(Error::Kind::kInvalidArgument, "base URL '" + url + "': no host");
  t.host = host;
  return t;
}

std::optional<std::string> first_model_id(SyncHttpClient& client, std::string* why) {
  HttpResponse r = client.get("/v1/models");
  if (r.status != 200) {
    if (why) *why = r.status == 0 ? r.error : "HTTP " + std::to_string(r.status);
    return std::nullopt;
  }
  auto id = first_model_id_of(r.body);
  if (!id && why) *why = "GET /v1/models lists no model";
  return id;
}

std::optional<std::string> first_model_id_of(const std::string& models_body) {
  auto j = nlohmann::json::parse(models_body, nullptr, false);
  if (j.is_object() && j.contains("data") && j["data"].is_array()) {
    for (const auto& m : j["data"]) {
      if (m.is_object() && m.contains("id") && m["id"].is_string()) {
        return m["id"].get<std::string>();
      }
    }
  }
  return std::nullopt;
}

std::optional<int64_t> ServerTokenizer::count_with(int dialect, const std::string& text,
                                                   std::string* why) {
  nlohmann::json body;
  if (dialect == 1) {
    body = {{"prompt", text}};
    if (!model_.empty()) body["model"] = model_;
  } else {
    body = {{"content", text}, {"add_special", true}};
  }
  ++n_calls_;
  HttpResponse r = client_.post_json("/tokenize", body.dump());
  if (r.status != 200) {
    if (why) {
      *why = r.status == 0 ? r.error
                           : "HTTP " + std::to_string(r.status) + ": " + error_message_of(r.body);
    }
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object()) {
    if (auto c = j.find("count"); c != j.end() && c->is_number_integer()) return c->get<int64_t>();
    if (auto t = j.find("tokens"); t != j.end() && t->is_array()) {
      return static_cast<int64_t>(t->size());
    }
  }
  if (why) *why = "the /tokenize answer has neither \"count\" nor \"tokens\"";
  return std::nullopt;
}

bool ServerTokenizer::probe(std::string* why) {
  std::string reasons;
  for (int d : {1, 2}) {
    std::string reason;
    if (count_with(d, "Hello world", &reason)) {
      dialect_ = d;
      return true;
    }
    reasons += std::string(reasons.empty() ? "" : "; ") +
               (d == 1 ? "vLLM-style: " : "llama.cpp-style: ") + reason;
  }
  if (why) *why = reasons;
  return false;
}

std::optional<int64_t> ServerTokenizer::count(const std::string& text) {
  if (dialect_ == 0) return std::nullopt;
  return count_with(dialect_, text, nullptr);
}

}  // namespace llms::bench
