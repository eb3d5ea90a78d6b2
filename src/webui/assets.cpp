// webui/assets: URL table over the embedded files (see assets.h).
#include "webui/assets.h"

#include <string>
#include <vector>

#include "embedded_files.h"

namespace llms::webui {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct Table {
  std::vector<std::string> urls;   // storage behind Asset::url_path
  std::vector<std::string> etags;  // storage behind Asset::etag
  std::vector<Asset> assets;
};

const Table& table() {
  static const Table t = [] {
    Table out;
    const auto files = detail::embedded_files();
    out.urls.reserve(files.size());
    out.etags.reserve(files.size());
    for (const detail::EmbeddedFile& f : files) {
      if (f.name == "index.html") {
        out.urls.emplace_back("/");
      } else if (f.name == "dashboard.html") {
        out.urls.emplace_back("/dashboard");
      } else {
        out.urls.push_back("/webui/" + std::string(f.name));
      }
      out.etags.push_back("\"" + std::string(f.hash) + "\"");
    }
    for (size_t i = 0; i < files.size(); ++i) {
      out.assets.push_back(
          {out.urls[i], content_type_for(files[i].name), files[i].bytes, out.etags[i]});
    }
    return out;
  }();
  return t;
}

}  // namespace

std::string_view content_type_for(std::string_view file_name) {
  if (ends_with(file_name, ".html")) return "text/html; charset=utf-8";
  if (ends_with(file_name, ".js")) return "text/javascript; charset=utf-8";
  if (ends_with(file_name, ".css")) return "text/css; charset=utf-8";
  if (ends_with(file_name, ".svg")) return "image/svg+xml";
  if (ends_with(file_name, ".png")) return "image/png";
  if (ends_with(file_name, ".json")) return "application/json";
  return "application/octet-stream";
}

const Asset* find_asset(std::string_view url_path) {
  for (const Asset& a : table().assets) {
    if (a.url_path == url_path) return &a;
  }
  return nullptr;
}

std::span<const Asset> all_assets() { return table().assets; }

std::span<const std::pair<std::string_view, std::string_view>> security_headers() {
  static constexpr std::pair<std::string_view, std::string_view> kHeaders[] = {
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"X-Frame-Options", "DENY"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
  };
  return kHeaders;
}

}  // namespace llms::webui
