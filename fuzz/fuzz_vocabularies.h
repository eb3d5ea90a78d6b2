// fuzz/fuzz_vocabularies: the two small hand-built tokenizers the fuzz targets share (no model
// file): byte-level BPE with all 256 byte tokens, a few merges and ChatML specials, and a
// SentencePiece-style vocabulary with byte fallback and Gemma's turn markers.
#pragma once

#include <string>

#include "tokenizer/byte_alphabet.h"
#include "tokenizer/tokenizer.h"

namespace llms::fuzz {

using llms::tokenizer::ModelKind;
using llms::tokenizer::Tokenizer;
using llms::tokenizer::VocabSpec;

inline std::string byte_char(int b) {
  return llms::tokenizer::byte_level_utf8(static_cast<uint8_t>(b));
}

inline Tokenizer make_byte_level() {
  VocabSpec spec;
  spec.kind = ModelKind::kByteLevelBpe;
  spec.pre = "qwen2";
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(byte_char(b));
  auto merge = [&](const std::string& l, const std::string& r) {
    spec.merges.push_back(l + " " + r);
    spec.tokens.push_back(l + r);
  };
  const std::string sp = byte_char(' ');
  merge(sp, "t");
  merge("h", "e");
  merge(sp + "t", "he");
  merge("a", "a");
  merge("aa", "aa");
  merge(sp, sp);
  merge(sp + sp, sp + sp);
  merge(byte_char(0xE4), byte_char(0xB8));
  merge("i", "n");
  merge("in", "g");
  spec.token_types.assign(spec.tokens.size(), 1);
  for (const char* special : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}) {
    spec.tokens.push_back(special);
    spec.token_types.push_back(3);
  }
  spec.tokens.push_back("<tool_call>");
  spec.token_types.push_back(4);
  spec.eos_id = static_cast<int32_t>(spec.tokens.size()) - 3;
  return Tokenizer::from_spec(spec);
}

inline Tokenizer make_sentencepiece() {
  VocabSpec spec;
  spec.kind = ModelKind::kSentencePieceBpe;
  spec.architecture = "gemma3";
  spec.tokens = {"<pad>",           "<eos>",         "<bos>", "<unk>",
                 "<start_of_turn>", "<end_of_turn>", "\n",    "<b>"};
  spec.token_types = {3, 3, 3, 3, 3, 3, 4, 4};
  const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    spec.token_types.push_back(6);
  }
  for (const char* piece : {"\xE2\x96\x81", "a", "b", "c", "t", "h", "e", "\xE4\xB8\xAD", "ab",
                            "th", "the", "\xE2\x96\x81t", "\xE2\x96\x81the", "aa", "aaaa",
                            "\xE2\x96\x81\xE2\x96\x81", "  ", "e\xE2\x96\x81", ">\xE2\x96\x81<"}) {
    spec.tokens.push_back(piece);
    spec.token_types.push_back(1);
  }
  spec.bos_id = 2;
  spec.eos_id = 1;
  spec.unk_id = 3;
  return Tokenizer::from_spec(spec);
}

}  // namespace llms::fuzz
