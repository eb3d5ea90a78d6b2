// jinja/parser: recursive descent mirroring jinja2's Parser (see parser.h for the contract).
//
// Precedence, loosest first: `x if c else y`, or, and, not, comparisons (== != < > <= >= in,
// not in), + -, ~, * / // %, **, unary - +, then postfix (.attr [item] (call)), filters (|f)
// and tests (is t). As in jinja2, filters bind tighter than every binary operator and unary minus
// applies before filters (-x|abs is abs(-x)).
#include "parser.h"

#include <initializer_list>

namespace llms::jinja {

namespace {

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

  // ---- statements ----

  StmtList subparse(std::initializer_list<std::string_view> end_tokens) {
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

  [[noreturn]] void fail_eof(std::initializer_list<std::string_view> end_tokens) {
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

  StmtList parse_statements(std::initializer_list<std::string_view> end_tokens, bool drop_needle) {
    skip_op(":");
    expect_type(TokenType::kBlockEnd);
    StmtList body = subparse(end_tokens);
    if (drop_needle) advance();
    return body;
  }

  StmtPtr new_stmt(StmtKind kind, SourceLoc loc) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->loc = loc;
    return s;
  }

  void parse_statement(StmtList& out) {
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

  StmtPtr parse_for() {
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

  StmtPtr parse_if() {
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

  StmtPtr parse_set() {
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

  void parse_signature(Stmt& s) {
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

  StmtPtr parse_macro() {
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

  StmtPtr parse_call_block() {
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

  StmtPtr parse_with() {
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

  // ---- expressions ----

  static bool can_assign(const Expr& e) {
    if (e.kind == ExprKind::kName || e.kind == ExprKind::kNsRef) return true;
    if (e.kind != ExprKind::kTuple) return false;
    for (const ExprPtr& item : e.args) {
      if (!can_assign(*item)) return false;
    }
    return true;
  }

  ExprPtr parse_assign_target(bool with_tuple, bool name_only,
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

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
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

  ExprPtr parse_or() {
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

  ExprPtr parse_and() {
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

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = node(ExprKind::kNot, cur().loc);
      advance();
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr binary(BinOp op, ExprPtr left, ExprPtr right, SourceLoc loc) {
    auto e = node(ExprKind::kBinary, loc);
    e->bin_op = op;
    e->a = std::move(left);
    e->b = std::move(right);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const BinOp op = is_op("+") ? BinOp::kAdd : BinOp::kSub;
      const SourceLoc loc = cur().loc;
      advance();
      left = binary(op, std::move(left), parse_concat(), loc);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const SourceLoc loc = cur().loc;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = node(ExprKind::kConcat, loc);
    e->args.push_back(std::move(first));
    while (skip_op("~")) e->args.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
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

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const SourceLoc loc = cur().loc;
      advance();
      left = binary(BinOp::kPow, std::move(left), parse_unary(true), loc);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary(bool with_namespace) {
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
      e->constant = t.type == TokenType::kInteger ? Value::integer(t.int_value)
                                                  : Value::number(t.float_value);
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

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    if (cur().type == TokenType::kVariableEnd || cur().type == TokenType::kBlockEnd ||
        cur().type == TokenType::kEof || is_op(")")) {
      return true;
    }
    for (std::string_view e : extra_end) {
      if (is_name(e)) return true;
    }
    return false;
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr,
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

  ExprPtr parse_list() {
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

  ExprPtr parse_dict() {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_filter_expr(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr obj) {
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

  ExprPtr parse_subscribed() {
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

  void parse_call_args(Expr& call) {
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

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(ExprKind::kCall, cur().loc);
    e->a = std::move(callee);
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_any_name();
    while (skip_op(".")) name += "." + expect_any_name();
    return name;
  }

  ExprPtr parse_filter(ExprPtr input, bool start_inline) {
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

  ExprPtr parse_test(ExprPtr input) {
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

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  uint32_t depth_ = 0;
  uint32_t max_depth_;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
};

}  // namespace

Program parse_program(std::string_view source, uint32_t max_depth) {
  return Parser(tokenize(source), max_depth).parse();
}

}  // namespace llms::jinja
