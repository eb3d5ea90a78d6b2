// jinja/parser_expressions: expressions, mirroring jinja2's Parser.
//
// Precedence, loosest first: `x if c else y`, or, and, not, comparisons (== != < > <= >= in,
// not in), + -, ~, * / // %, **, unary - +, then postfix (.attr [item] (call)), filters (|f)
// and tests (is t). As in jinja2, filters bind tighter than every binary operator and unary minus
// applies before filters (-x|abs is abs(-x)).
#include "parser_impl.h"

namespace llms::jinja::detail {

bool Parser::can_assign(const Expr& e) {
  if (e.kind == ExprKind::kName || e.kind == ExprKind::kNsRef) return true;
  if (e.kind != ExprKind::kTuple) return false;
  for (const ExprPtr& item : e.args) {
    if (!can_assign(*item)) return false;
  }
  return true;
}

ExprPtr Parser::parse_assign_target(bool with_tuple, bool name_only,
                                    std::initializer_list<std::string_view> extra_end,
                                    bool with_namespace) {
  const SourceLoc loc = cur().loc;
  ExprPtr target;
  if (name_only) {
    target = node(ExprKind::kName, loc);
    target->name = expect_any_name();
    return target;
  }
  target = with_tuple ? parse_tuple(true, true, extra_end, false, with_namespace)
                      : parse_primary(with_namespace);
  if (!can_assign(*target)) fail_at(loc, "can't assign to this expression");
  return target;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  SourceLoc loc = cur().loc;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    auto cond = node(ExprKind::kCond, loc);
    cond->a = parse_or();
    if (skip_name("else")) cond->c = parse_expression(true);
    cond->b = std::move(expr1);
    expr1 = std::move(cond);
    loc = cur().loc;
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    auto e = node(ExprKind::kOr, cur().loc);
    advance();
    e->a = std::move(left);
    e->b = parse_and();
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    auto e = node(ExprKind::kAnd, cur().loc);
    advance();
    e->a = std::move(left);
    e->b = parse_not();
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto e = node(ExprKind::kNot, cur().loc);
    advance();
    e->a = parse_not();
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const SourceLoc loc = cur().loc;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    CmpOp op;
    if (is_op("=="))
      op = CmpOp::kEq;
    else if (is_op("!="))
      op = CmpOp::kNe;
    else if (is_op("<"))
      op = CmpOp::kLt;
    else if (is_op("<="))
      op = CmpOp::kLe;
    else if (is_op(">"))
      op = CmpOp::kGt;
    else if (is_op(">="))
      op = CmpOp::kGe;
    else if (is_name("in"))
      op = CmpOp::kIn;
    else if (is_name("not") && look().type == TokenType::kName && look().value == "in") {
      op = CmpOp::kNotIn;
      advance();
    } else {
      break;
    }
    advance();
    if (!cmp) {
      cmp = node(ExprKind::kCompare, loc);
      cmp->args.push_back(std::move(first));
    }
    cmp->cmp_ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::binary(BinOp op, ExprPtr left, ExprPtr right, SourceLoc loc) {
  auto e = node(ExprKind::kBinary, loc);
  e->bin_op = op;
  e->a = std::move(left);
  e->b = std::move(right);
  return e;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const BinOp op = is_op("+") ? BinOp::kAdd : BinOp::kSub;
    const SourceLoc loc = cur().loc;
    advance();
    left = binary(op, std::move(left), parse_concat(), loc);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const SourceLoc loc = cur().loc;
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto e = node(ExprKind::kConcat, loc);
  e->args.push_back(std::move(first));
  while (skip_op("~")) e->args.push_back(parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (true) {
    BinOp op;
    if (is_op("*"))
      op = BinOp::kMul;
    else if (is_op("/"))
      op = BinOp::kDiv;
    else if (is_op("//"))
      op = BinOp::kFloorDiv;
    else if (is_op("%"))
      op = BinOp::kMod;
    else
      break;
    const SourceLoc loc = cur().loc;
    advance();
    left = binary(op, std::move(left), parse_pow(), loc);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const SourceLoc loc = cur().loc;
    advance();
    left = binary(BinOp::kPow, std::move(left), parse_unary(true), loc);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = node(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur().loc);
    advance();
    e->a = parse_unary(false);
  } else {
    e = parse_primary(false);
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary(bool with_namespace) {
  const Token& t = cur();
  const SourceLoc loc = t.loc;
  if (t.type == TokenType::kName) {
    const std::string name = t.value;
    advance();
    auto e = node(ExprKind::kConst, loc);
    if (name == "true" || name == "True" || name == "false" || name == "False") {
      e->constant = Value::boolean(name == "true" || name == "True");
    } else if (name == "none" || name == "None") {
      e->constant = Value::none();
    } else if (with_namespace && is_op(".")) {
      advance();
      e->kind = ExprKind::kNsRef;
      e->name = name;
      e->attr = expect_any_name();
    } else {
      e->kind = ExprKind::kName;
      e->name = name;
    }
    return e;
  }
  if (t.type == TokenType::kString) {
    std::string text;
    while (cur().type == TokenType::kString) {
      text += cur().value;
      advance();
    }
    auto e = node(ExprKind::kConst, loc);
    e->constant = Value::string(std::move(text));
    return e;
  }
  if (t.type == TokenType::kInteger || t.type == TokenType::kFloat) {
    auto e = node(ExprKind::kConst, loc);
    e->constant =
        t.type == TokenType::kInteger ? Value::integer(t.int_value) : Value::number(t.float_value);
    advance();
    return e;
  }
  if (skip_op("(")) {
    ExprPtr e = parse_tuple(false, true, {}, true, false);
    expect_op(")");
    return e;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  fail("unexpected '" + describe(t) + "'");
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  if (cur().type == TokenType::kVariableEnd || cur().type == TokenType::kBlockEnd ||
      cur().type == TokenType::kEof || is_op(")")) {
    return true;
  }
  for (std::string_view e : extra_end) {
    if (is_name(e)) return true;
  }
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            std::initializer_list<std::string_view> extra_end, bool explicit_parens,
                            bool with_namespace) {
  const SourceLoc loc = cur().loc;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
  }
  auto e = node(ExprKind::kTuple, loc);
  e->args = std::move(items);
  return e;
}

ExprPtr Parser::parse_list() {
  auto e = node(ExprKind::kList, cur().loc);
  expect_op("[");
  while (!is_op("]")) {
    if (!e->args.empty()) expect_op(",");
    if (is_op("]")) break;
    e->args.push_back(parse_expression(true));
  }
  expect_op("]");
  return e;
}

ExprPtr Parser::parse_dict() {
  auto e = node(ExprKind::kDict, cur().loc);
  expect_op("{");
  while (!is_op("}")) {
    if (!e->args.empty()) expect_op(",");
    if (is_op("}")) break;
    e->args.push_back(parse_expression(true));
    expect_op(":");
    e->args.push_back(parse_expression(true));
  }
  expect_op("}");
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      e = parse_filter(std::move(e), false);
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const SourceLoc loc = cur().loc;
  if (skip_op(".")) {
    if (cur().type == TokenType::kName) {
      auto e = node(ExprKind::kGetattr, loc);
      e->a = std::move(obj);
      e->name = cur().value;
      advance();
      return e;
    }
    if (cur().type != TokenType::kInteger) fail("expected name or number");
    auto e = node(ExprKind::kGetitem, loc);
    e->a = std::move(obj);
    e->b = node(ExprKind::kConst, cur().loc);
    e->b->constant = Value::integer(cur().int_value);
    advance();
    return e;
  }
  expect_op("[");
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  auto e = node(ExprKind::kGetitem, loc);
  e->a = std::move(obj);
  if (args.size() == 1) {
    e->b = std::move(args[0]);
  } else {
    e->b = node(ExprKind::kTuple, loc);
    e->b->args = std::move(args);
  }
  return e;
}

ExprPtr Parser::parse_subscribed() {
  const SourceLoc loc = cur().loc;
  ExprPtr start;
  if (!skip_op(":")) {
    ExprPtr first = parse_expression(true);
    if (!skip_op(":")) return first;
    start = std::move(first);
  }
  auto slice = node(ExprKind::kSlice, loc);
  slice->a = std::move(start);
  if (!is_op(":") && !is_op("]") && !is_op(",")) slice->b = parse_expression(true);
  if (skip_op(":")) {
    if (!is_op("]") && !is_op(",")) slice->c = parse_expression(true);
  }
  return slice;
}

void Parser::parse_call_args(Expr& call) {
  const SourceLoc loc = cur().loc;
  expect_op("(");
  bool require_comma = false;
  const auto ensure = [&](bool ok) {
    if (!ok) fail_at(loc, "invalid syntax for function call expression");
  };
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*")) {
      ensure(!call.dyn_args && !call.dyn_kwargs);
      advance();
      call.dyn_args = parse_expression(true);
    } else if (is_op("**")) {
      ensure(!call.dyn_kwargs);
      advance();
      call.dyn_kwargs = parse_expression(true);
    } else if (cur().type == TokenType::kName && look().type == TokenType::kOperator &&
               look().value == "=") {
      ensure(!call.dyn_kwargs);
      std::string key = cur().value;
      advance();
      advance();
      call.kwargs.push_back({std::move(key), parse_expression(true)});
    } else {
      ensure(!call.dyn_args && !call.dyn_kwargs && call.kwargs.empty());
      call.args.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = node(ExprKind::kCall, cur().loc);
  e->a = std::move(callee);
  parse_call_args(*e);
  return e;
}

std::string Parser::dotted_name() {
  std::string name = expect_any_name();
  while (skip_op(".")) name += "." + expect_any_name();
  return name;
}

ExprPtr Parser::parse_filter(ExprPtr input, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    auto e = node(ExprKind::kFilter, cur().loc);
    e->name = dotted_name();
    if (is_op("(")) parse_call_args(*e);
    e->a = std::move(input);
    input = std::move(e);
  }
  return input;
}

ExprPtr Parser::parse_test(ExprPtr input) {
  const SourceLoc loc = cur().loc;
  advance();  // is
  const bool negated = skip_name("not");
  auto e = node(ExprKind::kTest, loc);
  e->name = dotted_name();
  const TokenType t = cur().type;
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((t == TokenType::kName || t == TokenType::kString || t == TokenType::kInteger ||
              t == TokenType::kFloat || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    e->args.push_back(parse_postfix(parse_primary(false)));
  }
  e->a = std::move(input);
  if (!negated) return e;
  auto n = node(ExprKind::kNot, loc);
  n->a = std::move(e);
  return n;
}

}  // namespace llms::jinja::detail
