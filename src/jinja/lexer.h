// jinja/lexer: template text -> tokens, reproducing jinja2's lexer under the environment that
// transformers' apply_chat_template uses (trim_blocks=True, lstrip_blocks=True, default
// delimiters, keep_trailing_newline=False, "\n" newlines).
//
// Contract: linear time in the source size, no recursion. Whitespace control (-, +, trim_blocks,
// lstrip_blocks) is applied here, so template data tokens are final text. A malformed tag is an
// llms::Error naming line and column. Raw blocks become data; comments disappear.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llms::jinja {

struct SourceLoc {
  uint32_t line = 1;
  uint32_t column = 1;
};

// Throws llms::Error(kInvalidArgument) "template syntax error at line L, column C: message".
[[noreturn]] void throw_syntax_error(SourceLoc loc, const std::string& message);

enum class TokenType : uint8_t {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;  // data text, name, unescaped string literal, operator spelling
  int64_t int_value = 0;
  double float_value = 0.0;
  SourceLoc loc;
};

std::vector<Token> tokenize(std::string_view source);

}  // namespace llms::jinja
