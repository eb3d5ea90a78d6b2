// tokenizer/chat_prompt: a chat turned into prompt token ids through the model's chat template.
//
// Contract:
//  - The ids are those of the whole rendered prompt, tokenized in one piece as Hugging Face's
//    apply_chat_template(..., tokenize=True) does, so ordinary content gets exactly HF's ids
//    (no seams where the template's text meets a message's text).
//  - Special-token text (control tokens, BOS/EOS/...) becomes a token only where the template's
//    own output spells it (its literal text, or the bos_token / eos_token variables). Where it
//    comes from the caller's data (message strings, tool schemas, documents, extra variables,
//    object keys included) it is ordinary text: a user who types "<|im_end|>" gets those
//    characters. This is what HF's sanitize_control_tokens=True aims at, except that the text
//    stays in place rather than being encoded apart from its neighbours.
//  - How: when the caller's strings hold special-token text, the chat is rendered a second time
//    with each such occurrence overwritten byte for byte by a filler. Where both renders agree
//    byte for byte the text is the template's; a special token of the first render is parsed
//    only if all its bytes are unchanged in the second. A template whose output changes in any
//    other way when those occurrences change (it branches on them, slices them, measures them)
//    cannot be attributed, and the chat is refused with an error rather than guessed.
//  - Limitation (shared with HF): a special token the template builds from caller pieces
//    ("<|" + role + "|>") or that only forms across the seam of caller text and template text is
//    not caller text in this sense.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace llms::gguf {
class GgufFile;
}

namespace llms::tokenizer {

// The file's tokenizer.chat_template, or the built-in template for its family (gemma* -> gemma,
// llama -> llama3, anything else -> chatml).
std::string chat_template_for(const gguf::GgufFile& file);

struct ChatPrompt {
  std::string text;            // the rendered prompt (valid UTF-8)
  std::vector<int32_t> ids;    // its tokens; no BOS/EOS added beyond what the template wrote
  size_t n_text_specials = 0;  // special-token texts from the caller encoded as plain text
};

// Renders `chat` (empty bos/eos tokens are filled in from the tokenizer) and tokenizes the
// result as described above. Throws what rendering throws (jinja::TemplateRaised for a template's
// raise_exception) and llms::Error(kInvalidArgument) for a chat whose special-token text cannot be
// told apart from the template's.
ChatPrompt encode_chat(const jinja::Template& chat_template, const Tokenizer& tok,
                       jinja::ChatInputs chat, const jinja::RenderOptions& options = {});
ChatPrompt encode_chat(const gguf::GgufFile& file, const Tokenizer& tok, jinja::ChatInputs chat);

// One user turn, with an optional system message, ready for generation.
std::vector<int32_t> encode_chat_prompt(const gguf::GgufFile& file, const Tokenizer& tok,
                                        const std::string& system, const std::string& user);

}  // namespace llms::tokenizer
