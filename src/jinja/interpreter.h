// jinja/interpreter: walks a Program and renders text, with jinja2's scoping and the Python
// semantics of values.
//
// Invariants:
//  - Bounded: every node evaluation costs one step (bulk operations cost more), nesting of
//    evaluation and macro calls is capped, and no output buffer or built string exceeds the
//    output cap. Exceeding a bound throws llms::Error; nothing recurses without a bound.
//  - Scoping as in jinja2: each for-loop iteration, macro call and with-block gets a fresh frame
//    whose parent is the enclosing one; `set` writes to the innermost frame; namespaces carry
//    values out of loops. Macros close over the frame they were defined in.
//  - Namespaces created during a render are cleared when it ends, so a namespace that holds
//    itself cannot leak.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ast.h"
#include "jinja/template.h"
#include "value.h"

namespace llms::jinja {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // `context` must be a dict; its entries become the template's top-level variables.
  std::string render(const Program& program, const Value& context);

  // ---- services for builtins ----
  void charge(uint64_t steps);
  void charge_bytes(size_t n) { charge(1 + n / 16); }
  // Charges for work proportional to the size of `v` (string bytes, list or dict entries).
  void charge_size(const Value& v);
  // Throws when a string being built would exceed the output cap.
  void check_size(size_t bytes) const;
  const RenderOptions& options() const { return options_; }

  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value call(const Value& fn, CallArgs& args);
  Value apply_filter(std::string_view name, const Value& input, CallArgs& args);
  bool apply_test(std::string_view name, const Value& input, CallArgs& args);
  // Items a for-loop visits: list items, dict keys, string code points; undefined is empty.
  std::vector<Value> iterate(const Value& v);
  bool contains(const Value& container, const Value& item);
  Value make_namespace();

  // Called by macro and caller objects.
  Value call_macro(const Stmt& def, const std::shared_ptr<Frame>& closure, CallArgs& args,
                   bool is_caller);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_list(const StmtList& body);
  Flow exec(const Stmt& s);
  Flow exec_inner(const Stmt& s);
  Flow exec_for(const Stmt& s);
  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_call(const Expr& e, const Value* injected_caller);
  void eval_args(const Expr& e, CallArgs& args);
  Value eval_filter_chain(const Expr& e, const Value& input);
  Value eval_compare(const Expr& e);
  Value eval_getitem(const Expr& e);
  Value binary(BinOp op, const Value& a, const Value& b);
  Value lookup(const std::string& name) const;
  void assign(const Expr& target, const Value& value);
  void emit(std::string_view text);
  std::string render_body(const StmtList& body, std::shared_ptr<Frame> frame);

  struct DepthGuard;

  RenderOptions options_;
  uint64_t steps_ = 0;
  uint32_t depth_ = 0;
  std::string* out_ = nullptr;
  std::shared_ptr<Frame> frame_;
  std::vector<Value> namespaces_;
};

}  // namespace llms::jinja
