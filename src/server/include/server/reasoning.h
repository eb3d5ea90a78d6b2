// server/reasoning: a reasoning model's thinking (`<think>...</think>`, DeepSeek-R1 and Qwen3
// style) separated from its answer, as reasoning_content beside content.
//
// The text up to `</think>` is reasoning (a leading `<think>` dropped); the rest is content. When
// the prompt already opened the tag (a template whose generation prompt ends in `<think>`), the
// output starts inside it. An output that never opens the tag is all content; one that opens it
// and never closes it (cut by max_tokens) is all reasoning. Streamed, each part is released as
// soon as it is known, holding back only text that may be the start of a tag.
#pragma once

#include <string>
#include <string_view>

namespace llms::server {

// Whether the chat template writes thinking tags (then outputs are split).
bool template_has_reasoning(std::string_view chat_template);

class ReasoningParser {
 public:
  // starts_inside: the prompt ended with an open `<think>`.
  explicit ReasoningParser(bool starts_inside);

  // Appends to `reasoning` and `content` what `text` surely adds to each.
  void push(std::string_view text, std::string& reasoning, std::string& content);
  void finish(std::string& reasoning, std::string& content);

 private:
  enum class State { kStart, kThinking, kAnswer };
  State state_;
  std::string pending_;
  bool skip_blanks_ = false;  // right after </think>: blanks before the answer are dropped
};

}  // namespace llms::server
