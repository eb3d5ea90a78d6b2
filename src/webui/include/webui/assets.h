// webui/assets: the web UI's static files (chat page, dashboard, their scripts and styles),
// embedded into the binary at build time and looked up by the URL path they are served at.
//
// URLs: "/" is index.html, "/dashboard" is dashboard.html, every other file is /webui/NAME.
// Only these exact paths resolve: there is no filesystem behind them, so no traversal.
#pragma once

#include <span>
#include <string_view>
#include <utility>

namespace llms::webui {

struct Asset {
  std::string_view url_path;      // "/", "/dashboard", "/webui/chat.js"
  std::string_view content_type;  // with charset for text
  std::string_view body;
  std::string_view etag;  // quoted strong validator, e.g. "\"3f2a...\""
};

// The asset served at `url_path` (without query), or null.
const Asset* find_asset(std::string_view url_path);

// Every asset, for listings and tests.
std::span<const Asset> all_assets();

// The Content-Type for a file name by its extension (application/octet-stream when unknown).
std::string_view content_type_for(std::string_view file_name);

// Response headers every web UI response carries: a strict Content-Security-Policy (scripts,
// styles and fetches from this origin only, no inline script, no framing), nosniff, no referrer.
std::span<const std::pair<std::string_view, std::string_view>> security_headers();

}  // namespace llms::webui
