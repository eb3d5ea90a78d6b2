// The chunked-body decoder: framing split at every byte, extensions, trailers, the end of the
// body, and malformed framing.
#include "bench/chunked.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/error.h"

namespace llms::bench {
namespace {

// Decodes `body` fed in pieces of `step` bytes; returns the data and how many bytes were used.
std::string decode(const std::string& body, size_t step, size_t* used = nullptr,
                   bool* done = nullptr) {
  ChunkedDecoder d;
  std::string out;
  size_t total = 0;
  for (size_t pos = 0; pos < body.size(); pos += step) {
    std::vector<std::string_view> pieces;
    const std::string_view part = std::string_view(body).substr(pos, step);
    const size_t n = d.feed(part, pieces);
    for (std::string_view p : pieces) out.append(p);
    total += n;
    if (n < part.size()) break;
  }
  if (used) *used = total;
  if (done) *done = d.done();
  return out;
}

TEST(ChunkedDecoder, DecodesAtEverySplit) {
  const std::string body = "5\r\nhello\r\n1A;name=\"x\"\r\n" + std::string(26, 'z') +
                           "\r\na \r\n data: x\n\n\r\n0\r\nTrailer: 1\r\n\r\n";
  const std::string want = "hello" + std::string(26, 'z') + " data: x\n\n";
  for (size_t step = 1; step <= body.size(); ++step) {
    size_t used = 0;
    bool done = false;
    EXPECT_EQ(decode(body, step, &used, &done), want) << step;
    EXPECT_EQ(used, body.size()) << step;
    EXPECT_TRUE(done) << step;
  }
}

TEST(ChunkedDecoder, StopsAtTheEndOfTheBody) {
  size_t used = 0;
  bool done = false;
  const std::string body = "3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n";
  EXPECT_EQ(decode(body, body.size(), &used, &done), "abc");
  EXPECT_TRUE(done);
  EXPECT_EQ(used, std::string("3\r\nabc\r\n0\r\n\r\n").size());
}

TEST(ChunkedDecoder, AcceptsBareLfAndUpperCaseHex) {
  bool done = false;
  EXPECT_EQ(decode("A\n0123456789\n0\n\n", 1, nullptr, &done), "0123456789");
  EXPECT_TRUE(done);
}

TEST(ChunkedDecoder, NotDoneUntilTheTrailerSectionEnds) {
  bool done = true;
  EXPECT_EQ(decode("2\r\nab\r\n0\r\n", 4, nullptr, &done), "ab");
  EXPECT_FALSE(done);
}

TEST(ChunkedDecoder, RefusesMalformedFraming) {
  for (const char* bad : {"zz\r\n", "\r\n", "3\rxabc", "3\r\nabcX\r\n", "3\r\nabc\rX",
                          "10000000001\r\n", "0\r\n\rX"}) {
    EXPECT_THROW(decode(bad, 1), Error) << bad;
  }
}

}  // namespace
}  // namespace llms::bench
