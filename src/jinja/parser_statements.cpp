// jinja/parser_statements: the template body and its tags (for, if, set, macro, call, filter,
// with, print, break/continue, generation); see parser.h for the contract.
#include "parser.h"
#include "parser_impl.h"

namespace llms::jinja::detail {

StmtList Parser::subparse(std::initializer_list<std::string_view> end_tokens) {
  StmtList body;
  while (true) {
    const Token& t = cur();
    if (t.type == TokenType::kEof) {
      if (end_tokens.size() != 0) fail_eof(end_tokens);
      return body;
    }
    if (t.type == TokenType::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kData;
      s->loc = t.loc;
      s->text = t.value;
      body.push_back(std::move(s));
      advance();
    } else if (t.type == TokenType::kVariableBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->loc = t.loc;
      advance();
      s->expr = parse_tuple(false, true, {}, false, false);
      expect_type(TokenType::kVariableEnd);
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      advance();
      for (std::string_view end : end_tokens) {
        if (is_name(end)) return body;
      }
      parse_statement(body);
      expect_type(TokenType::kBlockEnd);
    } else {
      fail("unexpected '" + describe(t) + "'");
    }
  }
}

void Parser::fail_eof(std::initializer_list<std::string_view> end_tokens) {
  std::string looking;
  for (std::string_view e : end_tokens) {
    if (!looking.empty()) looking += " or ";
    looking += "'" + std::string(e) + "'";
  }
  std::string msg =
      "Unexpected end of template. Jinja was looking for the following tags: " + looking + ".";
  if (!tag_stack_.empty()) {
    msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
  }
  fail(msg);
}

StmtList Parser::parse_statements(std::initializer_list<std::string_view> end_tokens,
                                  bool drop_needle) {
  skip_op(":");
  expect_type(TokenType::kBlockEnd);
  StmtList body = subparse(end_tokens);
  if (drop_needle) advance();
  return body;
}

StmtPtr Parser::new_stmt(StmtKind kind, SourceLoc loc) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->loc = loc;
  return s;
}

void Parser::parse_statement(StmtList& out) {
  DepthGuard guard(*this);
  const Token& t = cur();
  if (t.type != TokenType::kName) fail("tag name expected");
  const std::string tag = t.value;
  const SourceLoc loc = t.loc;
  tag_stack_.push_back(tag);
  if (tag == "for") {
    out.push_back(parse_for());
  } else if (tag == "if") {
    out.push_back(parse_if());
  } else if (tag == "set") {
    out.push_back(parse_set());
  } else if (tag == "macro") {
    out.push_back(parse_macro());
  } else if (tag == "call") {
    out.push_back(parse_call_block());
  } else if (tag == "filter") {
    advance();
    auto s = new_stmt(StmtKind::kFilterBlock, loc);
    s->expr = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    out.push_back(std::move(s));
  } else if (tag == "with") {
    out.push_back(parse_with());
  } else if (tag == "print") {
    advance();
    bool first = true;
    while (cur().type != TokenType::kBlockEnd) {
      if (!first) expect_op(",");
      first = false;
      auto s = new_stmt(StmtKind::kOutput, cur().loc);
      s->expr = parse_expression(true);
      out.push_back(std::move(s));
    }
  } else if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
    advance();
    out.push_back(new_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, loc));
  } else if (tag == "generation") {
    advance();
    auto s = new_stmt(StmtKind::kScope, loc);
    s->body = parse_statements({"endgeneration"}, true);
    out.push_back(std::move(s));
  } else if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" ||
             tag == "from" || tag == "autoescape") {
    fail("the '" + tag + "' tag is not supported in chat templates");
  } else {
    tag_stack_.pop_back();
    fail("Encountered unknown tag '" + tag + "'.");
  }
  tag_stack_.pop_back();
}

StmtPtr Parser::parse_for() {
  auto s = new_stmt(StmtKind::kFor, cur().loc);
  advance();
  s->target = parse_assign_target(true, false, {"in"}, false);
  expect_name("in");
  s->expr = parse_tuple(false, false, {"recursive"}, false, false);
  if (skip_name("if")) s->filter = parse_expression(true);
  if (is_name("recursive")) fail("recursive loops are not supported");
  ++loop_depth_;
  s->body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  const bool has_else = is_name("else");
  advance();
  if (has_else) s->else_body = parse_statements({"endfor"}, true);
  return s;
}

StmtPtr Parser::parse_if() {
  auto s = new_stmt(StmtKind::kIf, cur().loc);
  advance();
  while (true) {
    ExprPtr test = parse_tuple(false, false, {}, false, false);
    StmtList body = parse_statements({"elif", "else", "endif"}, false);
    s->branches.emplace_back(std::move(test), std::move(body));
    if (skip_name("elif")) continue;
    if (skip_name("else"))
      s->else_body = parse_statements({"endif"}, true);
    else
      advance();  // endif
    break;
  }
  return s;
}

StmtPtr Parser::parse_set() {
  const SourceLoc loc = cur().loc;
  advance();
  ExprPtr target = parse_assign_target(true, false, {}, true);
  if (skip_op("=")) {
    auto s = new_stmt(StmtKind::kSet, loc);
    s->target = std::move(target);
    s->expr = parse_tuple(false, true, {}, false, false);
    return s;
  }
  auto s = new_stmt(StmtKind::kSetBlock, loc);
  s->target = std::move(target);
  if (is_op("|")) s->expr = parse_filter(nullptr, false);
  s->body = parse_statements({"endset"}, true);
  return s;
}

void Parser::parse_signature(Stmt& s) {
  expect_op("(");
  while (!is_op(")")) {
    if (!s.params.empty()) expect_op(",");
    s.params.push_back(expect_any_name());
    if (skip_op("=")) {
      s.defaults.push_back(parse_expression(true));
    } else if (!s.defaults.empty()) {
      fail("non-default argument follows default argument");
    }
  }
  expect_op(")");
}

StmtPtr Parser::parse_macro() {
  auto s = new_stmt(StmtKind::kMacro, cur().loc);
  advance();
  s->name = expect_any_name();
  parse_signature(*s);
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  s->body = parse_statements({"endmacro"}, true);
  loop_depth_ = saved_loops;
  return s;
}

StmtPtr Parser::parse_call_block() {
  auto s = new_stmt(StmtKind::kCallBlock, cur().loc);
  advance();
  if (is_op("(")) parse_signature(*s);
  s->expr = parse_expression(true);
  if (s->expr->kind != ExprKind::kCall) fail_at(s->loc, "expected call");
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  s->body = parse_statements({"endcall"}, true);
  loop_depth_ = saved_loops;
  return s;
}

StmtPtr Parser::parse_with() {
  auto s = new_stmt(StmtKind::kWith, cur().loc);
  advance();
  while (cur().type != TokenType::kBlockEnd) {
    if (!s->targets.empty()) expect_op(",");
    s->targets.push_back(parse_assign_target(true, false, {}, false));
    expect_op("=");
    s->values.push_back(parse_expression(true));
  }
  s->body = parse_statements({"endwith"}, true);
  return s;
}

}  // namespace llms::jinja::detail

namespace llms::jinja {

Program parse_program(std::string_view source, uint32_t max_depth) {
  return detail::Parser(tokenize(source), max_depth).parse();
}

}  // namespace llms::jinja
