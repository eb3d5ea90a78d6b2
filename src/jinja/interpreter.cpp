// jinja/interpreter: statement execution, expression evaluation and jinja2's lookup rules
// (see interpreter.h for the invariants).
#include "interpreter.h"

#include "builtins.h"
#include "ops.h"
#include "pystr.h"

namespace llms::jinja {

namespace {

// An EvalError that already carries its location; outer nodes pass it through unchanged.
class LocatedError : public std::runtime_error {
 public:
  explicit LocatedError(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] void throw_located(SourceLoc loc, const char* message) {
  throw LocatedError("template error at line " + std::to_string(loc.line) + ", column " +
                     std::to_string(loc.column) + ": " + message);
}

// Macros and call-block callers hold their defining frame weakly: frames hold the macros, and a
// strong reference back would be a cycle.
class MacroFn : public CallableObj {
 public:
  MacroFn(const Stmt& def, std::weak_ptr<Frame> closure, bool is_caller)
      : def_(def), closure_(std::move(closure)), is_caller_(is_caller) {}

  Value call(Interpreter& interp, CallArgs& args) override {
    std::shared_ptr<Frame> frame = closure_.lock();
    if (!frame) throw EvalError("macro '" + name() + "' called after its scope ended");
    return interp.call_macro(def_, frame, args, is_caller_);
  }
  std::string name() const override { return is_caller_ ? "caller" : def_.name; }

 private:
  const Stmt& def_;
  std::weak_ptr<Frame> closure_;
  bool is_caller_;
};

class CycleFn : public CallableObj {
 public:
  explicit CycleFn(size_t index) : index_(index) {}
  Value call(Interpreter&, CallArgs& args) override {
    if (args.positional.empty()) throw EvalError("no items for cycling given");
    return args.positional[index_ % args.positional.size()];
  }
  std::string name() const override { return "cycle"; }

 private:
  size_t index_;
};

}  // namespace

struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter& in) : interp(in) {
    if (++interp.depth_ > interp.options_.max_depth) {
      --interp.depth_;
      throw EvalError("template nesting exceeds the depth limit of " +
                      std::to_string(interp.options_.max_depth));
    }
  }
  ~DepthGuard() { --interp.depth_; }
  Interpreter& interp;
};

Interpreter::Interpreter(const RenderOptions& options) : options_(options) {}

Interpreter::~Interpreter() {
  // Break any reference cycles through namespaces (ns.self = ns).
  for (Value& ns : namespaces_) ns.namespace_obj().attrs.clear();
}

std::string Interpreter::render(const Program& program, const Value& context) {
  auto root = std::make_shared<Frame>();
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict_obj().entries()) {
      if (k.is_string()) root->vars[k.as_string()] = v;
    }
  }
  frame_ = root;
  std::string out;
  out_ = &out;
  StringLimitScope string_limit(options_.max_output_bytes);
  try {
    exec_list(program.body);
  } catch (const LocatedError& e) {
    throw Error(Error::Kind::kInvalidArgument, e.what());
  } catch (const EvalError& e) {
    throw Error(Error::Kind::kInvalidArgument, std::string("template error: ") + e.what());
  }
  out_ = nullptr;
  frame_.reset();
  return out;
}

void Interpreter::charge(uint64_t steps) {
  steps_ += steps;
  if (steps_ > options_.max_steps) {
    throw EvalError("template exceeded the step budget of " + std::to_string(options_.max_steps));
  }
}

void Interpreter::charge_size(const Value& v) {
  if (v.is_string()) {
    charge_bytes(v.as_string().size());
  } else if (v.is_list()) {
    charge(v.items().size());
  } else if (v.is_dict()) {
    charge(v.dict_obj().size());
  }
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > options_.max_output_bytes) {
    throw EvalError("template string exceeds the output limit of " +
                    std::to_string(options_.max_output_bytes) + " bytes");
  }
}

void Interpreter::emit(std::string_view text) {
  if (text.empty()) return;
  charge_bytes(text.size());
  if (out_->size() + text.size() > options_.max_output_bytes) {
    throw EvalError("template output exceeds the limit of " +
                    std::to_string(options_.max_output_bytes) + " bytes");
  }
  out_->append(text);
}

Value Interpreter::make_namespace() {
  Value ns = Value::new_namespace();
  namespaces_.push_back(ns);
  return ns;
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_list(const StmtList& body) {
  for (const StmtPtr& s : body) {
    const Flow flow = exec(*s);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  DepthGuard guard(*this);
  charge(1);
  try {
    return exec_inner(s);
  } catch (const EvalError& e) {
    throw_located(s.loc, e.what());
  }
}

namespace {

// Restores the interpreter's frame and output buffer when a scope ends (also on errors).
template <typename T>
class Restore {
 public:
  Restore(T& slot, T value) : slot_(slot), saved_(std::move(slot)) { slot_ = std::move(value); }
  ~Restore() { slot_ = std::move(saved_); }
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;

 private:
  T& slot_;
  T saved_;
};

std::shared_ptr<Frame> child_of(const std::shared_ptr<Frame>& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

}  // namespace

std::string Interpreter::render_body(const StmtList& body, std::shared_ptr<Frame> frame) {
  std::string buffer;
  Restore<std::shared_ptr<Frame>> frame_scope(frame_, std::move(frame));
  Restore<std::string*> out_scope(out_, &buffer);
  exec_list(body);
  return buffer;
}

Interpreter::Flow Interpreter::exec_inner(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::kData:
      emit(s.text);
      return Flow::kNormal;
    case StmtKind::kOutput: {
      const Value v = eval(*s.expr);
      if (v.is_string()) {
        emit(v.as_string());
      } else {
        emit(to_str(v));
      }
      return Flow::kNormal;
    }
    case StmtKind::kFor:
      return exec_for(s);
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (truthy(eval(*cond))) return exec_list(body);
      }
      return exec_list(s.else_body);
    case StmtKind::kSet:
      assign(*s.target, eval(*s.expr));
      return Flow::kNormal;
    case StmtKind::kSetBlock: {
      Value v = Value::string(render_body(s.body, child_of(frame_)));
      if (s.expr) v = eval_filter_chain(*s.expr, v);
      assign(*s.target, v);
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      frame_->vars[s.name] = Value::callable(std::make_shared<MacroFn>(s, frame_, false));
      return Flow::kNormal;
    case StmtKind::kCallBlock: {
      const Value caller = Value::callable(std::make_shared<MacroFn>(s, frame_, true));
      const Value v = eval_call(*s.expr, &caller);
      emit(to_str(v));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      const Value body = Value::string(render_body(s.body, child_of(frame_)));
      emit(to_str(eval_filter_chain(*s.expr, body)));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      std::vector<Value> values;
      for (const ExprPtr& v : s.values) values.push_back(eval(*v));
      Restore<std::shared_ptr<Frame>> scope(frame_, child_of(frame_));
      for (size_t k = 0; k < s.targets.size(); ++k) assign(*s.targets[k], values[k]);
      return exec_list(s.body);
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kScope: {
      Restore<std::shared_ptr<Frame>> scope(frame_, child_of(frame_));
      exec_list(s.body);
      return Flow::kNormal;
    }
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
  std::vector<Value> items = iterate(eval(*s.expr));
  if (s.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      Restore<std::shared_ptr<Frame>> scope(frame_, child_of(frame_));
      assign(*s.target, item);
      if (truthy(eval(*s.filter))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Restore<std::shared_ptr<Frame>> scope(frame_, child_of(frame_));
    return exec_list(s.else_body) == Flow::kBreak ? Flow::kBreak : Flow::kNormal;
  }
  const size_t n = items.size();
  const auto length = static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i) {
    Restore<std::shared_ptr<Frame>> scope(frame_, child_of(frame_));
    assign(*s.target, items[i]);
    const auto index = static_cast<int64_t>(i);
    DictObj loop;
    loop.set(Value::string("index"), Value::integer(index + 1));
    loop.set(Value::string("index0"), Value::integer(index));
    loop.set(Value::string("revindex"), Value::integer(length - index));
    loop.set(Value::string("revindex0"), Value::integer(length - index - 1));
    loop.set(Value::string("first"), Value::boolean(i == 0));
    loop.set(Value::string("last"), Value::boolean(i + 1 == n));
    loop.set(Value::string("length"), Value::integer(length));
    loop.set(Value::string("depth"), Value::integer(1));
    loop.set(Value::string("depth0"), Value::integer(0));
    if (i > 0) loop.set(Value::string("previtem"), items[i - 1]);
    if (i + 1 < n) loop.set(Value::string("nextitem"), items[i + 1]);
    loop.set(Value::string("cycle"), Value::callable(std::make_shared<CycleFn>(i)));
    frame_->vars["loop"] = Value::dict(std::move(loop));
    if (exec_list(s.body) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::assign(const Expr& target, const Value& value) {
  switch (target.kind) {
    case ExprKind::kName:
      frame_->vars[target.name] = value;
      return;
    case ExprKind::kNsRef: {
      const Value ns = lookup(target.name);
      if (!ns.is_namespace()) throw EvalError("cannot assign attribute on non-namespace object");
      if (!target.attr.empty() && target.attr[0] == '_') {
        throw EvalError(
            "Chat templates cannot store underscore-prefixed attributes on a "
            "namespace, but got '" +
            target.attr + "'. Please rename the attribute.");
      }
      ns.namespace_obj().attrs.set(Value::string(target.attr), value);
      return;
    }
    case ExprKind::kTuple: {
      const std::vector<Value> items = iterate(value);
      const size_t want = target.args.size();
      if (items.size() < want) {
        throw EvalError("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                        std::to_string(items.size()) + ")");
      }
      if (items.size() > want) {
        throw EvalError("too many values to unpack (expected " + std::to_string(want) + ")");
      }
      for (size_t k = 0; k < want; ++k) assign(*target.args[k], items[k]);
      return;
    }
    default:
      throw EvalError("cannot assign to this expression");
  }
}

Value Interpreter::call_macro(const Stmt& def, const std::shared_ptr<Frame>& closure,
                              CallArgs& args, bool is_caller) {
  DepthGuard guard(*this);
  auto frame = child_of(closure);
  const size_t n_params = def.params.size();
  std::vector<bool> bound(n_params, false);
  std::vector<Value> varargs;
  for (size_t k = 0; k < args.positional.size(); ++k) {
    if (k < n_params) {
      frame->vars[def.params[k]] = args.positional[k];
      bound[k] = true;
    } else {
      varargs.push_back(args.positional[k]);
    }
  }
  DictObj kwargs;
  for (auto& [key, value] : args.keyword) {
    if (key == "caller" && !is_caller) {
      frame->vars["caller"] = value;
      continue;
    }
    bool matched = false;
    for (size_t k = 0; k < n_params; ++k) {
      if (def.params[k] != key) continue;
      if (bound[k]) {
        throw EvalError("macro '" + def.name + "' got multiple values for argument '" + key + "'");
      }
      frame->vars[key] = value;
      bound[k] = true;
      matched = true;
    }
    if (!matched) kwargs.set(Value::string(key), value);
  }
  frame->vars["varargs"] = Value::list(std::move(varargs), true);
  frame->vars["kwargs"] = Value::dict(std::move(kwargs));
  Restore<std::shared_ptr<Frame>> scope(frame_, frame);
  const size_t first_default = n_params - def.defaults.size();
  for (size_t k = 0; k < n_params; ++k) {
    if (bound[k]) continue;
    if (k >= first_default) {
      frame->vars[def.params[k]] = eval(*def.defaults[k - first_default]);
    } else {
      frame->vars[def.params[k]] =
          Value::undefined("parameter '" + def.params[k] + "' was not provided");
    }
  }
  return Value::string(render_body(def.body, frame));
}

// ---- expressions ----

Value Interpreter::lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
    const auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (auto g = find_global(name)) return *g;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(*this);
  charge(1);
  try {
    return eval_inner(e);
  } catch (const EvalError& err) {
    throw_located(e.loc, err.what());
  }
}

Value Interpreter::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.constant;
    case ExprKind::kName:
      return lookup(e.name);
    case ExprKind::kNsRef:
      return getattr(lookup(e.name), e.attr);
    case ExprKind::kGetattr:
      return getattr(eval(*e.a), e.name);
    case ExprKind::kGetitem:
      return eval_getitem(e);
    case ExprKind::kSlice:
      throw EvalError("slice outside of a subscript");
    case ExprKind::kCall:
      return eval_call(e, nullptr);
    case ExprKind::kFilter:
      return eval_filter_chain(e, Value());
    case ExprKind::kTest: {
      const Value input = eval(*e.a);
      CallArgs args;
      eval_args(e, args);
      return Value::boolean(apply_test(e.name, input, args));
    }
    case ExprKind::kNeg:
      return negate(eval(*e.a));
    case ExprKind::kPos:
      return positive(eval(*e.a));
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*e.a)));
    case ExprKind::kBinary: {
      const Value a = eval(*e.a);
      const Value b = eval(*e.b);
      return binary_op(*this, e.bin_op, a, b);
    }
    case ExprKind::kAnd: {
      Value a = eval(*e.a);
      return truthy(a) ? eval(*e.b) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*e.a);
      return truthy(a) ? a : eval(*e.b);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const ExprPtr& part : e.args) {
        s += to_str(eval(*part));
        check_size(s.size());
      }
      charge_bytes(s.size());
      return Value::string(std::move(s));
    }
    case ExprKind::kCompare:
      return eval_compare(e);
    case ExprKind::kCond:
      if (truthy(eval(*e.a))) return eval(*e.b);
      if (e.c) return eval(*e.c);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section was defined.");
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const ExprPtr& item : e.args) items.push_back(eval(*item));
      return Value::list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      DictObj d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        if (key.is_list() && !key.is_tuple()) {
          throw EvalError("unhashable type: '" + type_name(key) + "'");
        }
        if (key.is_dict()) throw EvalError("unhashable type: 'dict'");
        d.set(key, eval(*e.args[k + 1]));
      }
      return Value::dict(std::move(d));
    }
  }
  return Value();
}

Value Interpreter::eval_getitem(const Expr& e) {
  const Value obj = eval(*e.a);
  if (e.b->kind == ExprKind::kSlice) {
    const Expr& s = *e.b;
    const Value start = s.a ? eval(*s.a) : Value::none();
    const Value stop = s.b ? eval(*s.b) : Value::none();
    const Value step = s.c ? eval(*s.c) : Value::none();
    if (obj.is_undefined()) fail_undefined(obj);
    return slice_value(*this, obj, start, stop, step);
  }
  return getitem(obj, eval(*e.b));
}

void Interpreter::eval_args(const Expr& e, CallArgs& args) {
  for (const ExprPtr& a : e.args) args.positional.push_back(eval(*a));
  if (e.dyn_args) {
    for (Value& v : iterate(eval(*e.dyn_args))) args.positional.push_back(std::move(v));
  }
  for (const Keyword& kw : e.kwargs) args.keyword.emplace_back(kw.name, eval(*kw.value));
  if (e.dyn_kwargs) {
    const Value d = eval(*e.dyn_kwargs);
    if (!d.is_dict()) throw EvalError("argument after ** must be a mapping");
    for (const auto& [k, v] : d.dict_obj().entries()) {
      if (!k.is_string()) throw EvalError("keywords must be strings");
      args.keyword.emplace_back(k.as_string(), v);
    }
  }
}

Value Interpreter::eval_call(const Expr& e, const Value* injected_caller) {
  const Expr& callee = *e.a;
  Value fn;
  if (callee.kind == ExprKind::kGetattr) {
    const Value obj = eval(*callee.a);
    if ((obj.is_string() || obj.is_list() || obj.is_dict()) &&
        method_kind(obj, callee.name) == MethodKind::kSafe) {
      CallArgs args;
      eval_args(e, args);
      return call_method(*this, obj, callee.name, args);
    }
    fn = getattr(obj, callee.name);
  } else {
    fn = eval(callee);
  }
  CallArgs args;
  eval_args(e, args);
  if (injected_caller) args.keyword.emplace_back("caller", *injected_caller);
  return call(fn, args);
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) fail_undefined(fn);
  if (!fn.is_callable()) throw EvalError("'" + type_name(fn) + "' object is not callable");
  return fn.callable_obj().call(*this, args);
}

Value Interpreter::eval_filter_chain(const Expr& e, const Value& input) {
  if (e.kind != ExprKind::kFilter) return eval(e);
  DepthGuard guard(*this);
  charge(1);
  try {
    const Value base = !e.a ? input : eval_filter_chain(*e.a, input);
    CallArgs args;
    eval_args(e, args);
    return apply_filter(e.name, base, args);
  } catch (const EvalError& err) {
    throw_located(e.loc, err.what());
  }
}

Value Interpreter::apply_filter(std::string_view name, const Value& input, CallArgs& args) {
  const FilterFn fn = find_filter(name);
  if (!fn) throw EvalError("No filter named '" + std::string(name) + "'.");
  charge_size(input);
  return fn(*this, input, args);
}

bool Interpreter::apply_test(std::string_view name, const Value& input, CallArgs& args) {
  const TestFn fn = find_test(name);
  if (!fn) throw EvalError("No test named '" + std::string(name) + "'.");
  charge_size(input);
  return fn(*this, input, args);
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t k = 0; k < e.cmp_ops.size(); ++k) {
    Value right = eval(*e.args[k + 1]);
    if (left.is_string() && right.is_string()) charge_size(left);
    bool result = false;
    const CmpOp op = e.cmp_ops[k];
    switch (op) {
      case CmpOp::kEq:
        result = equals(left, right);
        break;
      case CmpOp::kNe:
        result = !equals(left, right);
        break;
      case CmpOp::kIn:
        result = contains(right, left);
        break;
      case CmpOp::kNotIn:
        result = !contains(right, left);
        break;
      default: {
        if (left.is_undefined()) fail_undefined(left);
        if (right.is_undefined()) fail_undefined(right);
        static constexpr const char* kNames[] = {"==", "!=", "<", "<=", ">", ">="};
        const int c = compare(left, right, kNames[static_cast<int>(op)]);
        if (op == CmpOp::kLt) result = c == -1;
        if (op == CmpOp::kLe) result = c == -1 || c == 0;
        if (op == CmpOp::kGt) result = c == 1;
        if (op == CmpOp::kGe) result = c == 1 || c == 0;
      }
    }
    if (!result) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

// ---- object model ----

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_namespace()) {
    if (const Value* v = obj.namespace_obj().attrs.find(name)) return *v;
    return Value::undefined("'Namespace object' has no attribute '" + name + "'");
  }
  switch (method_kind(obj, name)) {
    case MethodKind::kSafe:
      return bind_method(obj, name);
    case MethodKind::kUnsafe:
      return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                              "' object is unsafe.");
    case MethodKind::kNone:
      break;
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_obj().find(name)) return *v;
  }
  return Value::undefined(object_type_repr(obj) + " has no attribute '" + name + "'");
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (key.is_string()) charge_size(key);
  if (obj.is_string()) charge_size(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_obj().find(key)) return *v;
  } else if ((obj.is_sequence() || obj.is_string()) && key.is_intlike()) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
    } else {
      const std::string& s = obj.as_string();
      const std::vector<size_t> off = pystr::offsets(s);
      const auto n = static_cast<int64_t>(off.size() - 1);
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        const auto k = static_cast<size_t>(i);
        return Value::string(s.substr(off[k], off[k + 1] - off[k]));
      }
    }
    return Value::undefined(object_type_repr(obj) + " has no element " + repr(key));
  }
  if (key.is_string()) return getattr(obj, key.as_string());
  return Value::undefined(object_type_repr(obj) + " has no element " + repr(key));
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return out;
    case Value::Kind::kList:
      if (v.is_iterator()) {  // a generator yields what is left, once
        const ListObj& gen = v.list_obj();
        if (gen.pending_error) throw EvalError(*gen.pending_error);
        out.assign(v.items().begin() + static_cast<std::ptrdiff_t>(gen.cursor), v.items().end());
        gen.cursor = v.items().size();
      } else {
        out = v.items();
      }
      break;
    case Value::Kind::kDict:
      out.reserve(v.dict_obj().size());
      for (const auto& entry : v.dict_obj().entries()) out.push_back(entry.first);
      break;
    case Value::Kind::kString: {
      const std::string& s = v.as_string();
      const std::vector<size_t> off = pystr::offsets(s);
      out.reserve(off.size() - 1);
      for (size_t k = 0; k + 1 < off.size(); ++k) {
        out.push_back(Value::string(s.substr(off[k], off[k + 1] - off[k])));
      }
      break;
    }
    default:
      throw EvalError("'" + type_name(v) + "' object is not iterable");
  }
  charge(out.size());
  return out;
}

bool Interpreter::contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw EvalError("'in <string>' requires string as left operand, not " + type_name(item));
      }
      charge_bytes(container.as_string().size());
      charge_bytes(item.as_string().size());
      return pystr::contains(container.as_string(), item.as_string());
    case Value::Kind::kList: {
      const ListObj& list = container.list_obj();
      if (list.pending_error) throw EvalError(*list.pending_error);
      const size_t start = container.is_iterator() ? list.cursor : 0;
      charge(list.items.size() - start);
      for (size_t k = start; k < list.items.size(); ++k) {
        if (equals(list.items[k], item)) {
          if (container.is_iterator()) list.cursor = k + 1;
          return true;
        }
      }
      if (container.is_iterator()) list.cursor = list.items.size();
      return false;
    }
    case Value::Kind::kDict:
      charge_size(item);
      if ((item.is_list() && !item.is_tuple()) || item.is_dict() || item.is_namespace()) {
        throw EvalError("unhashable type: '" + type_name(item) + "'");
      }
      return container.dict_obj().find(item) != nullptr;
    default:
      throw EvalError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace llms::jinja
