// render_chat's input handling (transformers' normalization) and the built-in templates.
#include "jinja/chat_template.h"

#include <gtest/gtest.h>

namespace llms::jinja {
namespace {

using Json = nlohmann::ordered_json;

ChatInputs chat(const char* messages_json) {
  ChatInputs in;
  in.messages = Json::parse(messages_json);
  return in;
}

TEST(JinjaChat, DropsNullFieldsLikeTransformers) {
  ChatInputs in = chat(R"([{"role": "user", "content": "hi", "tool_calls": null}])");
  EXPECT_EQ(render_chat("{{ messages[0] }}|{{ messages[0].tool_calls is defined }}", in),
            "{'role': 'user', 'content': 'hi'}|False");
}

TEST(JinjaChat, AliasesReasoningFields) {
  ChatInputs in = chat(R"([{"role": "assistant", "content": "a", "reasoning": "r"}])");
  EXPECT_EQ(render_chat("{{ messages[0] }}", in),
            "{'thinking': 'r', 'role': 'assistant', 'content': 'a', 'reasoning': 'r', "
            "'reasoning_content': 'r'}");
}

TEST(JinjaChat, ContextVariables) {
  ChatInputs in = chat(R"([{"role": "user", "content": "x"}])");
  const char* tmpl =
      "{{ bos_token is defined }}{{ eos_token }}|{{ tools }}|{{ documents }}|"
      "{{ add_generation_prompt }}|{{ custom }}";
  EXPECT_EQ(render_chat(tmpl, in), "False|None|None|False|");
  in.eos_token = "</s>";
  in.add_generation_prompt = true;
  in.tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  in.extra = Json::parse(R"({"custom": 7, "bos_token": "<override>"})");
  EXPECT_EQ(render_chat(tmpl, in),
            "True</s>|[{'type': 'function', 'function': {'name': 'f'}}]|None|True|7");
}

TEST(JinjaChat, RejectsMalformedInputs) {
  EXPECT_THROW(render_chat("x", chat("[]")), Error);
  EXPECT_THROW(render_chat("x", chat(R"(["not an object"])")), Error);
  ChatInputs in = chat(R"([{"role": "user", "content": "x"}])");
  in.extra = Json::parse(R"({"messages": []})");
  EXPECT_THROW(render_chat("x", in), Error);
  in.extra = Json::object();
  in.tools = Json::parse(R"({"not": "an array"})");
  EXPECT_THROW(render_chat("x", in), Error);
}

TEST(JinjaChat, BuiltinTemplates) {
  const std::vector<std::string_view> names = builtin_chat_template_names();
  ASSERT_EQ(names.size(), 3u);
  ChatInputs in = chat(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])");
  in.add_generation_prompt = true;
  EXPECT_EQ(render_chat(builtin_chat_template("chatml"), in),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>assistant\n");
  in.bos_token = "<bos>";
  EXPECT_EQ(render_chat(builtin_chat_template("gemma"), in),
            "<bos><start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n");
  in.bos_token = "<|begin_of_text|>";
  EXPECT_EQ(render_chat(builtin_chat_template("llama3"), in),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  try {
    builtin_chat_template("vicuna");
    FAIL() << "expected kNotFound";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kNotFound);
  }
}

TEST(JinjaChat, GemmaBuiltinEnforcesAlternation) {
  ChatInputs in = chat(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  EXPECT_THROW(render_chat(builtin_chat_template("gemma"), in), TemplateRaised);
}

TEST(JinjaChat, ParsedTemplateRendersRepeatedly) {
  const Template t = Template::parse(builtin_chat_template("chatml"));
  ChatInputs a = chat(R"([{"role": "user", "content": "one"}])");
  ChatInputs b = chat(R"([{"role": "user", "content": "two"}])");
  EXPECT_EQ(render_chat(t, a), "<|im_start|>user\none<|im_end|>\n");
  EXPECT_EQ(render_chat(t, b), "<|im_start|>user\ntwo<|im_end|>\n");
  EXPECT_EQ(render_chat(t, a), "<|im_start|>user\none<|im_end|>\n");
}

}  // namespace
}  // namespace llms::jinja
