// jinja/ast: the syntax tree the parser builds and the interpreter walks.
//
// Invariants: a tree is immutable after parsing (a Template can render on many threads at once);
// each node owns its children; every node carries the source location used in error messages.
// Node structs are "fat" (one struct per category, fields used according to `kind`) to keep the
// interpreter's dispatch a plain switch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lexer.h"
#include "value.h"

namespace llms::jinja {

enum class ExprKind : uint8_t {
  kConst,    // constant
  kName,     // name
  kNsRef,    // name.attr as an assignment target
  kGetattr,  // a.name
  kGetitem,  // a[b]
  kSlice,    // a:b:c inside a subscript (each optional)
  kCall,     // a(args, kwargs, *dyn_args, **dyn_kwargs)
  kFilter,   // a|name(args) ; a is null inside set-block / filter-block chains
  kTest,     // a is name(args)
  kNeg,
  kPos,
  kNot,
  kBinary,  // a bin_op b
  kAnd,
  kOr,
  kConcat,   // args joined with ~
  kCompare,  // args[0] cmp_ops[0] args[1] cmp_ops[1] args[2] ...
  kCond,     // b if a else c (c optional)
  kList,
  kTuple,
  kDict,  // args = key, value, key, value, ...
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  SourceLoc loc;
  Value constant;
  std::string name;
  std::string attr;  // kNsRef
  BinOp bin_op = BinOp::kAdd;
  std::vector<CmpOp> cmp_ops;
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<Keyword> kwargs;
  ExprPtr dyn_args, dyn_kwargs;

  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  // Iterative, so that a very long operator chain cannot overflow the stack when freed.
  ~Expr();
};

enum class StmtKind : uint8_t {
  kData,         // text
  kOutput,       // {{ expr }}
  kFor,          // for target in expr [if filter] body [else else_body]
  kIf,           // branches, else_body
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter chain in expr] body endset
  kMacro,        // macro name(params=defaults) body
  kCallBlock,    // call(params) expr body endcall
  kFilterBlock,  // filter chain in expr, body
  kWith,         // with targets = values body
  kBreak,
  kContinue,
  kScope,  // body rendered in place ({% generation %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kData;
  SourceLoc loc;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr filter;
  StmtList body;
  StmtList else_body;
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  std::vector<ExprPtr> targets;
  std::vector<ExprPtr> values;
};

struct Program {
  StmtList body;
};

}  // namespace llms::jinja
