// SSE parsing: events must come out the same however the bytes are split.
#include "bench/sse.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace llms::bench {
namespace {

std::vector<SseEvent> parse_all(const std::vector<std::string_view>& pieces) {
  SseParser parser;
  std::vector<SseEvent> out;
  for (auto p : pieces) parser.feed(p, out);
  return out;
}

void expect_same(const std::vector<SseEvent>& a, const std::vector<SseEvent>& b,
                 const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].type, b[i].type) << where << " event " << i;
    EXPECT_EQ(a[i].data, b[i].data) << where << " event " << i;
    EXPECT_EQ(a[i].id, b[i].id) << where << " event " << i;
  }
}

// Mixed line endings, comments, multi-line data, named events, ids and [DONE].
const std::string kStream =
    "\xEF\xBB\xBF"
    ": keep-alive comment\n"
    "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
    "data: first line\r\n"
    "data:second line without space\r\n"
    "data:  two spaces keep one\r\n\r\n"
    "event: ping\rdata: x\r\r"
    "id: 7\n"
    "retry: 100\n"
    "unknownfield: ignored\n"
    "data\n\n"
    "data: {\"text\":\"caf\xC3\xA9\"}\n\n"
    "data: [DONE]\n\n"
    "data: unterminated";

TEST(SseParser, ParsesEveryFieldKind) {
  auto events = parse_all({kStream});
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].type, "message");
  EXPECT_EQ(events[0].data, "{\"choices\":[{\"text\":\"a\"}]}");
  EXPECT_EQ(events[1].data, "first line\nsecond line without space\n two spaces keep one");
  EXPECT_EQ(events[2].type, "ping");
  EXPECT_EQ(events[2].data, "x");
  EXPECT_EQ(events[3].data, "");  // a bare "data" line dispatches an empty event
  EXPECT_EQ(events[3].id, "7");
  EXPECT_EQ(events[3].type, "message");  // the type resets after each event
  EXPECT_EQ(events[4].data, "{\"text\":\"caf\xC3\xA9\"}");
  EXPECT_EQ(events[4].id, "7");  // the last event id persists
  EXPECT_EQ(events[5].data, "[DONE]");
}

TEST(SseParser, EverySplitPointGivesTheSameEvents) {
  const auto whole = parse_all({kStream});
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    std::string_view s(kStream);
    expect_same(parse_all({s.substr(0, cut), s.substr(cut)}), whole, "cut " + std::to_string(cut));
  }
  for (size_t a = 0; a <= kStream.size(); a += 3) {
    for (size_t b = a; b <= kStream.size(); b += 5) {
      std::string_view s(kStream);
      expect_same(parse_all({s.substr(0, a), s.substr(a, b - a), s.substr(b)}), whole,
                  "cuts " + std::to_string(a) + "," + std::to_string(b));
    }
  }
}

TEST(SseParser, ByteByByte) {
  SseParser parser;
  std::vector<SseEvent> out;
  for (char c : kStream) parser.feed(std::string_view(&c, 1), out);
  expect_same(out, parse_all({kStream}), "byte by byte");
  EXPECT_EQ(parser.pending_bytes(), std::string_view("data: unterminated").size());
}

TEST(SseParser, CrLfSplitAcrossFeedsIsOneLineEnd) {
  // A CR at the end of one feed and LF at the start of the next must not make an empty line.
  auto events = parse_all({"data: a\r", "\ndata: b\r", "\n\r", "\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "a\nb");
}

TEST(SseParser, NotABomIsKept) {
  auto events = parse_all({"\xEF", "\xBB", "x: 1\ndata: y\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "y");
  auto kept = parse_all({"\xEF", "data: z\n\n"});  // a lone 0xEF starts a (bogus) field name
  EXPECT_TRUE(kept.empty());
}

TEST(SseParser, RefusesUnboundedLinesAndEvents) {
  SseParser parser(64);
  std::vector<SseEvent> out;
  EXPECT_THROW(parser.feed(std::string(100, 'a'), out), Error);
  SseParser parser2(64);
  std::string many;
  for (int i = 0; i < 10; ++i) many += "data: 0123456789\n";
  EXPECT_THROW(parser2.feed(many, out), Error);
}

}  // namespace
}  // namespace llms::bench
