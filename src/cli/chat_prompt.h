// cli/chat_prompt: a chat turned into prompt token ids through the model's chat template.
//
// Special-token text is recognised only in the template's own scaffolding: each message's
// string content is located in the rendered prompt (in order) and encoded with special-token
// parsing off, so a user who types "<|im_end|>" gets those characters, not the control token.
// Content the template rewrote beyond recognition is encoded as scaffolding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace llms::cli {

// The file's tokenizer.chat_template, or the built-in template for its family.
std::string chat_template_for(const gguf::GgufFile& file);

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> ids;
};

// Renders `chat` (bos/eos tokens are filled in from the tokenizer) and tokenizes the result.
ChatPrompt encode_chat(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok,
                       jinja::ChatInputs chat);

// One user turn, with an optional system message, ready for generation.
std::vector<int32_t> encode_chat_prompt(const gguf::GgufFile& file,
                                        const tokenizer::Tokenizer& tok, const std::string& system,
                                        const std::string& user);

}  // namespace llms::cli
