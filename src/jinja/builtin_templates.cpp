// jinja/builtin_templates: chat templates for model files that carry none.
//
// Each template is a raw string literal preceded by a "// @chat-template NAME" marker line;
// tools/make_chat_golden.py extracts them by that marker and renders them with transformers, so
// the goldens test exactly these bytes. Keep the marker, the constant and the R"jinja( delimiter
// together when editing.
//
// They render plain chats (string content, or OpenAI-style lists of {"type": "text"} parts) in
// the models' published prompt formats; tool calling needs the model's own template.
#include <array>
#include <utility>

#include "jinja/chat_template.h"

namespace llms::jinja {

namespace {

// @chat-template chatml
constexpr std::string_view kChatml = R"jinja({%- macro text_of(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- else -%}
        {%- for part in content if part.type == 'text' -%}
            {{- part.text -}}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- for message in messages -%}
    {{- '<|im_start|>' + message.role + '\n' + text_of(message.content) + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
)jinja";

// @chat-template llama3
constexpr std::string_view kLlama3 = R"jinja({%- macro text_of(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- else -%}
        {%- for part in content if part.type == 'text' -%}
            {{- part.text -}}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{{- bos_token -}}
{%- for message in messages -%}
    {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' -}}
    {{- text_of(message.content) | trim -}}
    {{- '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}
)jinja";

// @chat-template gemma
constexpr std::string_view kGemma = R"jinja({%- macro text_of(content) -%}
    {%- if content is string -%}
        {{- content | trim -}}
    {%- else -%}
        {%- for part in content -%}
            {%- if part.type == 'image' -%}
                {{- '<start_of_image>' -}}
            {%- elif part.type == 'text' -%}
                {{- part.text | trim -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{{- bos_token -}}
{%- if messages[0].role == 'system' -%}
    {%- set system_prefix = text_of(messages[0].content) + '\n\n' -%}
    {%- set turns = messages[1:] -%}
{%- else -%}
    {%- set system_prefix = '' -%}
    {%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
    {%- if (message.role == 'user') != (loop.index0 % 2 == 0) -%}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
    {%- endif -%}
    {%- set role = 'model' if message.role == 'assistant' else message.role -%}
    {{- '<start_of_turn>' + role + '\n' + (system_prefix if loop.first else '') -}}
    {{- text_of(message.content) -}}
    {{- '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<start_of_turn>model\n' -}}
{%- endif -%}
)jinja";

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kBuiltins = {{
    {"chatml", kChatml},
    {"llama3", kLlama3},
    {"gemma", kGemma},
}};

}  // namespace

std::string_view builtin_chat_template(std::string_view name) {
  for (const auto& [n, source] : kBuiltins) {
    if (n == name) return source;
  }
  throw Error(Error::Kind::kNotFound, "no built-in chat template named '" + std::string(name) +
                                          "' (known: chatml, llama3, gemma)");
}

std::vector<std::string_view> builtin_chat_template_names() {
  std::vector<std::string_view> names;
  for (const auto& entry : kBuiltins) names.push_back(entry.first);
  return names;
}

}  // namespace llms::jinja
