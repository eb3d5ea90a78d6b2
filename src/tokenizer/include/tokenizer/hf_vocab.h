// tokenizer/hf_vocab: a Hugging Face tokenizer (tokenizer.json, tokenizer_config.json) as the
// GGUF tokenizer metadata llama.cpp's converter writes for it, so a model converted from a
// safetensors directory tokenizes as its GGUF release does.
//
// Contract: vocab_from_hf() reads a byte-level BPE tokenizer (model type "BPE" behind a ByteLevel
// pre-tokenizer: GPT-2, Qwen2/2.5/3, Llama 3) and returns
//   - tokens: one per id up to n_vocab (config.json's vocab_size, which may exceed the tokenizer's
//     ids: the padding rows), ids the tokenizer lacks named "[PAD<id>]" and typed unused;
//   - token types: added tokens marked special are control tokens, other added tokens
//     user-defined, a vocabulary entry spelled "[PAD<its id>]" unused (the placeholder of a
//     padding row, which transformers keeps when it converts a GGUF), the rest normal;
//   - merges as "left right", best first (either of tokenizer.json's two spellings);
//   - pre: the GGUF pre-tokenizer name whose regex is the Split pattern of tokenizer.json
//     ("qwen2", "llama-bpe", "qwen35", "tekken", "gpt-4o"), or "gpt2" for a ByteLevel pre-tokenizer
//     with its own regex;
//   - special ids: bos, eos, pad and unk from tokenizer_config.json's *_token strings (or
//     {"content": ...} objects) looked up in the vocabulary, else config.json's and then
//     generation_config.json's *_token_id (the first of a list);
//   - add_bos / add_eos: tokenizer_config.json's add_bos_token / add_eos_token, else whether the
//     post-processor's TemplateProcessing template starts / ends with a special token, else unset;
//   - the chat template: tokenizer_config.json's chat_template (a string, or the entry named
//     "default" of a list), else the file chat_template.jinja beside it.
// It throws llms::Error naming the file and field: kNotFound without tokenizer.json,
// kUnsupported for another tokenizer kind (a SentencePiece-style BPE with byte fallback, Unigram,
// WordPiece) or a pre-tokenizer regex without a GGUF name, kInvalidFile for a malformed
// vocabulary (a token id out of range or given twice, a merge that is not a pair).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_writer.h"
#include "gguf/hf_model_dir.h"
#include "tokenizer/tokenizer.h"

namespace llms::tokenizer {

struct HfVocab {
  VocabSpec spec;
  std::string chat_template;  // empty: none
};

HfVocab vocab_from_hf(const gguf::HfModelDir& dir, uint64_t n_vocab);

// Writes tokenizer.ggml.* (and tokenizer.chat_template when there is one): the keys
// Tokenizer::from_gguf reads back into the same VocabSpec.
void write_vocab(const HfVocab& vocab, gguf::GgufWriter& writer);

}  // namespace llms::tokenizer
