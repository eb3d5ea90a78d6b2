// webui/assets: the embedded files are all there, typed, validated and reachable only by their
// exact URLs; every page's /webui/ reference resolves.
#include "webui/assets.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace llms::webui {
namespace {

TEST(WebuiAssets, PagesAtTheirUrls) {
  const Asset* chat = find_asset("/");
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ(chat->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(chat->body.substr(0, 15), "<!doctype html>");
  const Asset* dashboard = find_asset("/dashboard");
  ASSERT_NE(dashboard, nullptr);
  EXPECT_EQ(dashboard->content_type, "text/html; charset=utf-8");
  EXPECT_NE(find_asset("/webui/chat.js"), nullptr);
  EXPECT_NE(find_asset("/webui/markdown.js"), nullptr);
}

TEST(WebuiAssets, EveryAssetTypedNonEmptyAndDistinctlyTagged) {
  std::set<std::string_view> urls;
  std::set<std::string_view> etags;
  ASSERT_GE(all_assets().size(), 5u);
  for (const Asset& a : all_assets()) {
    EXPECT_FALSE(a.body.empty()) << a.url_path;
    EXPECT_NE(a.content_type, "application/octet-stream") << a.url_path;
    EXPECT_TRUE(std::regex_match(std::string(a.etag), std::regex("\"[0-9a-f]{20}\""))) << a.etag;
    EXPECT_TRUE(urls.insert(a.url_path).second) << a.url_path;
    EXPECT_TRUE(etags.insert(a.etag).second) << a.url_path;
    EXPECT_EQ(find_asset(a.url_path), &a);
  }
}

TEST(WebuiAssets, PageReferencesResolve) {
  const std::regex ref(R"re((?:src|href)="(/webui/[^"]+)")re");
  for (const char* page : {"/", "/dashboard"}) {
    const std::string html(find_asset(page)->body);
    int n = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), ref);
         it != std::sregex_iterator(); ++it, ++n) {
      EXPECT_NE(find_asset((*it)[1].str()), nullptr) << page << " references " << (*it)[1];
    }
    EXPECT_GE(n, 2) << page;
  }
}

TEST(WebuiAssets, OnlyExactUrlsResolve) {
  for (const char* path :
       {"", "/index.html", "/webui/", "/webui", "/webui/../webui/chat.js", "/webui/./chat.js",
        "/webui//chat.js", "/webui/chat.js/", "/WEBUI/chat.js", "/dashboard/", "/chat.js",
        "/webui/%2e%2e/etc/passwd", "/../etc/passwd", "webui/chat.js"}) {
    EXPECT_EQ(find_asset(path), nullptr) << path;
  }
}

TEST(WebuiAssets, ContentTypesByExtension) {
  EXPECT_EQ(content_type_for("a.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_for("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(content_type_for("a.svg"), "image/svg+xml");
  EXPECT_EQ(content_type_for("a.html"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_for("js"), "application/octet-stream");
  EXPECT_EQ(content_type_for("a.js.bak"), "application/octet-stream");
}

TEST(WebuiAssets, StrictContentSecurityPolicy) {
  bool csp = false;
  for (const auto& [name, value] : security_headers()) {
    if (name != "Content-Security-Policy") continue;
    csp = true;
    EXPECT_NE(value.find("default-src 'none'"), std::string_view::npos);
    EXPECT_NE(value.find("script-src 'self'"), std::string_view::npos);
    EXPECT_EQ(value.find("unsafe"), std::string_view::npos);
  }
  EXPECT_TRUE(csp);
}

}  // namespace
}  // namespace llms::webui
