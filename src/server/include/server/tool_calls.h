// server/tool_calls: the model's tool-call text turned into OpenAI tool_calls.
//
// Models write tool calls in the form their chat template taught them; the template tells which:
// - Hermes (Qwen2.5, Hermes, many others): `<tool_call>\n{"name": ..., "arguments": {...}}\n
//   </tool_call>`, one tag per call, text around them is content;
// - Llama 3.x JSON: the whole message is `{"name": ..., "parameters": {...}}` (after an optional
//   `<|python_tag|>`);
// - Mistral: `[TOOL_CALLS]` followed by a JSON list of {"name", "arguments"} objects.
// A call whose JSON does not parse, or lacks a string name, is left in the content as written
// (the client sees what the model said). Arguments are re-serialized compactly, as OpenAI sends
// them.
//
// ToolCallParser works on streamed text: content is released as soon as it cannot be the start
// of a call (text that may begin a tag is held back until it is decided), a call as soon as it is
// complete. finish() releases what is held back at the end of the output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llms::server {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json, kMistral };

// The format the chat template writes tool calls in (kNone: it shows no tool-call syntax).
ToolCallFormat tool_call_format_for_template(std::string_view chat_template);
const char* tool_call_format_name(ToolCallFormat format);

struct ToolCall {
  std::string id;  // "call_" + the id prefix + its index in the output
  std::string name;
  std::string arguments;  // JSON text
};

class ToolCallParser {
 public:
  // id_prefix makes ids unique across a server's responses (e.g. the response id and choice).
  ToolCallParser(ToolCallFormat format, std::string id_prefix);

  // Feeds generated text; appends surely-content text to `content` and completed calls to `calls`.
  void push(std::string_view text, std::string& content, std::vector<ToolCall>& calls);
  // The output ended: what is held back is content, or a last call.
  void finish(std::string& content, std::vector<ToolCall>& calls);

  int32_t n_calls() const { return n_calls_; }

 private:
  void push_hermes(std::string& content, std::vector<ToolCall>& calls);
  // Parses one {"name", "arguments"|"parameters"} object; false when it is not a call.
  bool make_call(std::string_view json_text, std::vector<ToolCall>& calls);
  bool make_calls_from_list(std::string_view json_text, std::vector<ToolCall>& calls);
  // What calls start with in the whole-output formats (Llama 3, Mistral).
  std::vector<std::string_view> leads() const;

  ToolCallFormat format_;
  std::string id_prefix_;
  std::string pending_;   // text held back
  bool in_call_ = false;  // Hermes: inside <tool_call>
  bool decided_ = false;  // Llama 3 / Mistral: whether the output is calls is known
  bool is_calls_ = false;
  int32_t n_calls_ = 0;
};

}  // namespace llms::server
