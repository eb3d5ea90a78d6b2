// jinja/parser_impl: the recursive-descent Parser shared by parser_statements.cpp (tags and
// the template body) and parser_expressions.cpp (expressions, by jinja2's precedence). Internal to
// the jinja module; the public entry point is parse_program() in parser.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ast.h"
#include "lexer.h"

namespace llms::jinja::detail {

class Parser {
 public:
  Parser(std::vector<Token> tokens, uint32_t max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  Program parse() {
    Program p;
    p.body = subparse({});
    return p;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().value == op;
  }
  bool is_name(std::string_view name) const {
    return cur().type == TokenType::kName && cur().value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::kData:
        return "template data";
      case TokenType::kVariableBegin:
        return "begin of print statement";
      case TokenType::kVariableEnd:
        return "end of print statement";
      case TokenType::kBlockBegin:
        return "begin of statement block";
      case TokenType::kBlockEnd:
        return "end of statement block";
      case TokenType::kName:
        return t.value;
      case TokenType::kString:
        return "string";
      case TokenType::kInteger:
        return "integer";
      case TokenType::kFloat:
        return "float";
      case TokenType::kOperator:
        return t.value;
      case TokenType::kEof:
        return "end of template";
    }
    return "token";
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw_syntax_error(cur().loc, message);
  }
  [[noreturn]] void fail_at(SourceLoc loc, const std::string& message) const {
    throw_syntax_error(loc, message);
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got '" + describe(cur()) + "'");
  }
  void expect_name(std::string_view name) {
    if (!skip_name(name)) {
      fail("expected '" + std::string(name) + "', got '" + describe(cur()) + "'");
    }
  }
  std::string expect_any_name() {
    if (cur().type != TokenType::kName) fail("expected name, got '" + describe(cur()) + "'");
    std::string v = cur().value;
    advance();
    return v;
  }
  void expect_type(TokenType type) {
    if (cur().type != type) {
      Token want;
      want.type = type;
      fail("expected '" + describe(want) + "', got '" + describe(cur()) + "'");
    }
    advance();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > parser.max_depth_) {
        parser.fail("template nesting exceeds the depth limit of " +
                    std::to_string(parser.max_depth_));
      }
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  ExprPtr node(ExprKind kind, SourceLoc loc) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->loc = loc;
    return e;
  }

  // ---- statements (parser_statements.cpp) ----
  StmtList subparse(std::initializer_list<std::string_view> end_tokens);
  [[noreturn]] void fail_eof(std::initializer_list<std::string_view> end_tokens);
  StmtList parse_statements(std::initializer_list<std::string_view> end_tokens, bool drop_needle);
  StmtPtr new_stmt(StmtKind kind, SourceLoc loc);
  void parse_statement(StmtList& out);
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  void parse_signature(Stmt& s);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_with();

  // ---- expressions (parser_expressions.cpp) ----
  static bool can_assign(const Expr& e);
  ExprPtr parse_assign_target(bool with_tuple, bool name_only,
                              std::initializer_list<std::string_view> extra_end,
                              bool with_namespace);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(BinOp op, ExprPtr left, ExprPtr right, SourceLoc loc);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary(bool with_namespace);
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                      std::initializer_list<std::string_view> extra_end, bool explicit_parens,
                      bool with_namespace);
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& call);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter(ExprPtr input, bool start_inline);
  ExprPtr parse_test(ExprPtr input);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  uint32_t depth_ = 0;
  uint32_t max_depth_;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
};

}  // namespace llms::jinja::detail
