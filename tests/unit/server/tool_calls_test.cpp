// ToolCallParser: each format's calls become OpenAI tool calls (arguments as compact JSON, ids
// unique per output), text around them stays content, malformed calls stay content as written,
// and streaming the text in pieces of any size gives exactly what one push gives (with content
// released as soon as it cannot begin a call). The template decides the format.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llms::server {
namespace {

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

Parsed parse_in_pieces(ToolCallFormat format, const std::string& text, size_t piece) {
  ToolCallParser p(format, "x");
  Parsed out;
  for (size_t i = 0; i < text.size(); i += piece) {
    p.push(std::string_view(text).substr(i, piece), out.content, out.calls);
  }
  p.finish(out.content, out.calls);
  return out;
}

// Every piece size gives the same result; returns it.
Parsed parse(ToolCallFormat format, const std::string& text) {
  const Parsed whole = parse_in_pieces(format, text, text.size() + 1);
  for (size_t piece = 1; piece <= 7; ++piece) {
    const Parsed p = parse_in_pieces(format, text, piece);
    EXPECT_EQ(p.content, whole.content) << "piece " << piece;
    EXPECT_EQ(p.calls.size(), whole.calls.size()) << "piece " << piece;
    for (size_t i = 0; i < std::min(p.calls.size(), whole.calls.size()); ++i) {
      EXPECT_EQ(p.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(p.calls[i].arguments, whole.calls[i].arguments);
      EXPECT_EQ(p.calls[i].id, whole.calls[i].id);
    }
  }
  return whole;
}

TEST(ToolCalls, HermesCallsAndTheContentAroundThem) {
  const Parsed p = parse(ToolCallFormat::kHermes,
                         "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                         "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n"
                         "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(p.content, "Let me check.\n\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, "{\"city\":\"Paris\",\"days\":2}");
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
  EXPECT_EQ(p.calls[0].id.rfind("call_", 0), 0u);
}

TEST(ToolCalls, HermesMalformedOrUnterminatedCallsStayContent) {
  const std::string bad =
      "a <tool_call>{\"name\": 3}</tool_call> b <tool_call>not json</tool_call>";
  const Parsed p = parse(ToolCallFormat::kHermes, bad);
  EXPECT_EQ(p.content, bad);
  EXPECT_TRUE(p.calls.empty());
  const Parsed open = parse(ToolCallFormat::kHermes, "x <tool_call>{\"name\": \"f\"");
  EXPECT_EQ(open.content, "x <tool_call>{\"name\": \"f\"");
  EXPECT_TRUE(open.calls.empty());
  // Text that only looks like the start of a tag is released at the end.
  const Parsed tail = parse(ToolCallFormat::kHermes, "a < b <tool_c");
  EXPECT_EQ(tail.content, "a < b <tool_c");
}

TEST(ToolCalls, HermesReleasesContentBeforeTheCallEnds) {
  ToolCallParser p(ToolCallFormat::kHermes, "x");
  std::string content;
  std::vector<ToolCall> calls;
  p.push("Sure, <tool", content, calls);
  EXPECT_EQ(content, "Sure, ");  // "<tool" may begin a tag: held back
  p.push("_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}", content, calls);
  EXPECT_TRUE(calls.empty());
  p.push("</tool_call> done", content, calls);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(content, "Sure,  done");
}

TEST(ToolCalls, Llama3JsonIsTheWholeMessage) {
  const Parsed p = parse(ToolCallFormat::kLlama3Json,
                         "{\"name\": \"search\", \"parameters\": {\"q\": \"llm\"}}");
  EXPECT_TRUE(p.content.empty());
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "search");
  EXPECT_EQ(p.calls[0].arguments, "{\"q\":\"llm\"}");
  const Parsed tagged = parse(ToolCallFormat::kLlama3Json,
                              "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; "
                              "{\"name\": \"b\", \"parameters\": {\"x\": 1}}");
  ASSERT_EQ(tagged.calls.size(), 2u);
  EXPECT_EQ(tagged.calls[1].name, "b");
  const Parsed text = parse(ToolCallFormat::kLlama3Json, "The answer is {42}.");
  EXPECT_EQ(text.content, "The answer is {42}.");
  EXPECT_TRUE(text.calls.empty());
  const Parsed braces = parse(ToolCallFormat::kLlama3Json, "{not a call}");
  EXPECT_EQ(braces.content, "{not a call}");
}

TEST(ToolCalls, MistralListAfterTheTag) {
  const Parsed p = parse(ToolCallFormat::kMistral,
                         "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}, "
                         "{\"name\": \"g\", \"arguments\": \"{\\\"b\\\": true}\"}]");
  EXPECT_TRUE(p.content.empty());
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, "{\"a\":[1,2]}");
  EXPECT_EQ(p.calls[1].arguments, "{\"b\": true}");  // given as a string: kept as written
  const Parsed text = parse(ToolCallFormat::kMistral, "[TOOL] not calls");
  EXPECT_EQ(text.content, "[TOOL] not calls");
}

TEST(ToolCalls, NoFormatMeansAllContent) {
  const Parsed p = parse(ToolCallFormat::kNone, "<tool_call>{\"name\": \"f\"}</tool_call>");
  EXPECT_EQ(p.content, "<tool_call>{\"name\": \"f\"}</tool_call>");
  EXPECT_TRUE(p.calls.empty());
}

TEST(ToolCalls, TheTemplateTellsTheFormat) {
  EXPECT_EQ(tool_call_format_for_template("{% for tool in tools %}...<tool_call>\\n{{...}}"),
            ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_for_template("[AVAILABLE_TOOLS] ... [TOOL_CALLS]"),
            ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format_for_template(
                "<|start_header_id|>ipython ... {\"name\": function name, \"parameters\": ...}"),
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(tool_call_format_for_template("{{ messages[0].content }}"), ToolCallFormat::kNone);
}

}  // namespace
}  // namespace llms::server
