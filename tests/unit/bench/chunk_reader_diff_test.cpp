// Differential test of the stream-chunk reader: its one-pass scanner (and the nlohmann SAX
// fallback behind it) must answer exactly what a plain nlohmann tree gives for the same text,
// for realistic chunks and for every truncation and many one-byte mutations of them (bad
// syntax, escapes, surrogates, invalid UTF-8, numbers at the edges of 64 bits).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/openai.h"

namespace llms::bench {
namespace {

using json = nlohmann::json;

int64_t int_or(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return -1;
  return it->get<int64_t>();
}

size_t string_bytes(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get_ref<const std::string&>().size() : 0;
}

// The reader's contract, computed on the tree (no error objects in this corpus' expectations
// beyond "is there one").
ChunkInfo reference(std::string_view text) {
  ChunkInfo info;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.is_malformed = true;
    return info;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    info.error = "?";
    return info;
  }
  if (auto o = j.find("object"); o != j.end() && o->is_string() && *o == "error") {
    info.error = "?";
    return info;
  }
  bool tools = false;
  if (auto c = j.find("choices"); c != j.end() && c->is_array()) {
    for (const auto& choice : *c) {
      if (!choice.is_object()) continue;
      info.content_bytes += string_bytes(choice, "text");
      for (const char* holder : {"delta", "message"}) {
        auto d = choice.find(holder);
        if (d == choice.end() || !d->is_object()) continue;
        info.content_bytes += string_bytes(*d, "content") + string_bytes(*d, "reasoning_content") +
                              string_bytes(*d, "reasoning");
        if (auto t = d->find("tool_calls"); t != d->end() && t->is_array() && !t->empty()) {
          tools = true;
        }
      }
    }
  }
  info.has_content = info.content_bytes > 0 || tools;
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    Usage usage;
    usage.prompt_tokens = int_or(*u, "prompt_tokens");
    usage.completion_tokens = int_or(*u, "completion_tokens");
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object()) {
      usage.cached_tokens = int_or(*d, "cached_tokens");
    }
    info.usage = usage;
  }
  return info;
}

void expect_same(const std::string& text) {
  const ChunkInfo want = reference(text);
  const ChunkInfo got = read_stream_chunk(text);
  SCOPED_TRACE(json(text).dump(-1, ' ', true, json::error_handler_t::replace));
  EXPECT_EQ(got.is_malformed, want.is_malformed);
  EXPECT_EQ(got.error.has_value(), want.error.has_value());
  if (want.is_malformed || want.error) return;
  EXPECT_EQ(got.content_bytes, want.content_bytes);
  EXPECT_EQ(got.has_content, want.has_content);
  ASSERT_EQ(got.usage.has_value(), want.usage.has_value());
  if (want.usage) {
    EXPECT_EQ(got.usage->prompt_tokens, want.usage->prompt_tokens);
    EXPECT_EQ(got.usage->completion_tokens, want.usage->completion_tokens);
    EXPECT_EQ(got.usage->cached_tokens, want.usage->cached_tokens);
  }
}

std::vector<std::string> corpus() {
  return {
      R"({"choices":[{"finish_reason":null,"index":0,"logprobs":null,"text":" hello"}],)"
      R"("created":1700000000,"id":"cmpl-1f2e3d4c5b6a","model":"m","object":"text_completion"})",
      R"({"choices":[{"delta":{"content":"caf\u00e9 \ud83d\ude00 \n\t\"\\\/"},"finish_reason":)"
      R"(null,"index":0,"logprobs":null}],"id":"x","usage":null})",
      "{\"choices\":[{\"delta\":{\"content\":\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\"}}]}",
      R"({"choices":[{"delta":{"role":"assistant","content":""},"index":0}],"usage":null})",
      R"({"choices":[],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":-9223372036854775808,)"
      R"("total_tokens":1.5e3,"prompt_tokens_details":{"cached_tokens":-0}}})",
      R"({"choices":[{"message":{"reasoning":"r","tool_calls":[{"id":"t"}]},"text":"ab"}]})",
      R"({"error":{"message":"overloaded","code":503}})",
      R"({"object":"error","message":"bad"})",
      " \r\n\t{ \"choices\" : [ { \"text\" : \"a b\" } ] , \"usage\" : { \"prompt_tokens\" : 0 } "
      "} ",
  };
}

TEST(ChunkReaderDiff, CorpusAsIs) {
  for (const std::string& text : corpus()) expect_same(text);
}

TEST(ChunkReaderDiff, EveryTruncation) {
  for (const std::string& text : corpus()) {
    for (size_t n = 0; n < text.size(); ++n) expect_same(text.substr(0, n));
  }
}

TEST(ChunkReaderDiff, OneByteMutations) {
  const std::string replacements = std::string("\"\\{}[],:0-9e.+ ut\x01\x7f") + "\x80\xC3\xED\xF4";
  for (const std::string& text : corpus()) {
    for (size_t i = 0; i < text.size(); ++i) {
      for (char r : replacements) {
        if (text[i] == r) continue;
        std::string m = text;
        m[i] = r;
        expect_same(m);
      }
    }
  }
}

}  // namespace
}  // namespace llms::bench
