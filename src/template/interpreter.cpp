#include "template/interpreter.h"

#include <cmath>

#include "template/builtins.h"
#include "template/utf8.h"

namespace rapid::jinja {

using EK = ExprKind;
using SK = StmtKind;

[[noreturn]] void throw_undefined(const Value& u) {
  throw TemplateError(TemplateError::Kind::Undefined, u.s.empty() ? "value is undefined" : u.s);
}

[[noreturn]] void throw_type(const std::string& msg) { throw TemplateError(TemplateError::Kind::Type, msg); }

// Python ints are unbounded; ours are 64-bit, so overflow is refused rather than wrapped.
static int64_t checked(bool overflow, int64_t v) {
  if (overflow) throw TemplateError(TemplateError::Kind::Limit, "integer overflow (values are limited to 64 bits)");
  return v;
}
static int64_t add_i(int64_t a, int64_t b) {
  int64_t r;
  bool overflow = __builtin_add_overflow(a, b, &r);
  return checked(overflow, r);
}
static int64_t sub_i(int64_t a, int64_t b) {
  int64_t r;
  bool overflow = __builtin_sub_overflow(a, b, &r);
  return checked(overflow, r);
}
static int64_t mul_i(int64_t a, int64_t b) {
  int64_t r;
  bool overflow = __builtin_mul_overflow(a, b, &r);
  return checked(overflow, r);
}

static bool compare_op(const std::string& op, const Value& l, const Value& r);

const Value* Frame::find(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get())
    for (auto& [k, v] : f->vars)
      if (k == name) return &v;
  return nullptr;
}

void Frame::set(const std::string& name, Value v) {
  for (auto& [k, x] : vars)
    if (k == name) {
      x = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

Interpreter::DepthGuard::DepthGuard(Interpreter& i) : in(i) {
  if (++in.depth_ > in.limits_.max_depth)
    throw TemplateError(TemplateError::Kind::Limit, "maximum recursion depth exceeded");
}

namespace {

// A `{% macro %}` (or the `caller` of a call block): renders its body in a fresh scope whose
// parent is the scope it was defined in.
struct MacroObjImpl;

}  // namespace

struct MacroObj : Object {
  const Stmt* def;
  const Body* body;
  std::shared_ptr<Frame> closure;  // a cycle (the frame holds the macro), broken by ~Interpreter
  std::string name;
  std::string type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  std::string repr() const override { return "<Macro '" + name + "'>"; }
  std::optional<Value> get_attr(const std::string& n) override {
    if (n == "name") return Value::string(name);
    return std::nullopt;
  }
  Value call(Interpreter& interp, CallArgs& args) override {
    Interpreter::DepthGuard g(interp);
    interp.count_iteration();
    auto frame = std::make_shared<Frame>();
    frame->parent = closure;
    const auto& params = def->params;
    size_t np = params.size();
    for (size_t k = 0; k < np; ++k) {
      const std::string& pn = params[k].first;
      std::optional<Value> v;
      for (auto it = args.kw.begin(); it != args.kw.end(); ++it)
        if (it->first == pn) {
          if (k < args.pos.size()) throw_type("macro '" + name + "' got multiple values for argument '" + pn + "'");
          v = std::move(it->second);
          args.kw.erase(it);
          break;
        }
      if (!v && k < args.pos.size()) v = args.pos[k];
      if (!v && params[k].second) {
        // Defaults are evaluated at call time in the macro's scope, as jinja2 does.
        auto saved = interp.frame_;
        interp.frame_ = frame;
        try {
          v = interp.eval(*params[k].second);
        } catch (...) {
          interp.frame_ = saved;
          throw;
        }
        interp.frame_ = saved;
      }
      frame->set(pn, v ? std::move(*v) : Value::undefined("'" + pn + "' is undefined"));
    }
    // As jinja2's Macro.__call__: caller, unknown keywords and extra positionals are accepted
    // only when the body mentions caller / kwargs / varargs.
    if (def->uses_caller) {
      std::optional<Value> c;
      for (auto it = args.kw.begin(); it != args.kw.end(); ++it)
        if (it->first == "caller") {
          c = std::move(it->second);
          args.kw.erase(it);
          break;
        }
      frame->set("caller", c ? *c : Value::undefined("No caller defined"));
    }
    if (def->uses_kwargs) {
      Value kw = Value::new_dict();
      for (auto& [k, v] : args.kw) kw.dict->set(k, v);
      frame->set("kwargs", kw);
    } else if (!args.kw.empty()) {
      if (args.kwarg("caller"))
        throw_type("macro '" + name + "' was invoked with two values for the special caller argument. This is most likely a bug.");
      throw_type("macro '" + name + "' takes no keyword argument '" + args.kw[0].first + "'");
    }
    if (def->uses_varargs) {
      List extra;
      for (size_t k = np; k < args.pos.size(); ++k) extra.push_back(args.pos[k]);
      frame->set("varargs", Value::new_list(std::move(extra), true));
    } else if (args.pos.size() > np) {
      throw_type("macro '" + name + "' takes not more than " + std::to_string(np) + " argument(s)");
    }
    return Value::string(interp.render_body(*body, frame));
  }
};

namespace {

// The `loop` variable of a for loop.
struct LoopObj : Object, std::enable_shared_from_this<LoopObj> {
  std::shared_ptr<const std::vector<Value>> items;  // shared: a loop object may outlive its loop
  size_t index = 0;
  std::optional<Value> last_changed;
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index + 1) + "/" + std::to_string(items->size()) + ">";
  }
  std::optional<Value> get_attr(const std::string& n) override {
    int64_t len = static_cast<int64_t>(items->size()), i = static_cast<int64_t>(index);
    if (n == "index") return Value::integer(i + 1);
    if (n == "index0") return Value::integer(i);
    if (n == "revindex") return Value::integer(len - i);
    if (n == "revindex0") return Value::integer(len - i - 1);
    if (n == "first") return Value::boolean(i == 0);
    if (n == "last") return Value::boolean(i == len - 1);
    if (n == "length") return Value::integer(len);
    if (n == "depth") return Value::integer(1);
    if (n == "depth0") return Value::integer(0);
    if (n == "previtem")
      return i > 0 ? (*items)[index - 1] : Value::undefined("there is no previous item");
    if (n == "nextitem")
      return i + 1 < len ? (*items)[index + 1] : Value::undefined("there is no next item");
    if (n == "cycle") {
      size_t idx = index;
      return make_function("cycle", [idx](Interpreter&, CallArgs& a) -> Value {
        if (a.pos.empty()) throw_type("no items for cycling given");
        return a.pos[idx % a.pos.size()];
      });
    }
    if (n == "changed") {
      auto self = shared_from_this();
      return make_function("changed", [self](Interpreter&, CallArgs& a) -> Value {
        Value cur = Value::new_list(a.pos);
        bool changed = !self->last_changed || !equals(*self->last_changed, cur);
        self->last_changed = cur;
        return Value::boolean(changed);
      });
    }
    return std::nullopt;
  }
};

}  // namespace

Interpreter::Interpreter(const Body& root, const Value& context, const Limits& limits, const std::tm& now)
    : root_(root), limits_(limits), now_(now) {
  globals_ = std::make_shared<Frame>();
  install_globals(*globals_);
  auto ctx = std::make_shared<Frame>();
  ctx->parent = globals_;
  if (context.is_dict())
    for (auto& [k, v] : context.dict->items)
      if (k.is_string()) ctx->set(k.s, v);
  frame_ = ctx;
}

Interpreter::~Interpreter() {
  for (auto& ns : namespaces_) ns->attrs.items.clear();
  // Frames may hold macros and loops; clearing them breaks any remaining cycle through values.
  for (auto& f : pinned_) f->vars.clear();
}

std::string Interpreter::run() {
  std::string out;
  try {
    exec_body(root_, out);
  } catch (const TemplateError& e) {
    if (e.line() > 0) throw;
    throw TemplateError(e.kind(), e.reason(), line_);
  }
  return out;
}

void Interpreter::count_iteration() {
  if (++iterations_ > limits_.max_iterations)
    throw TemplateError(TemplateError::Kind::Limit, "too many loop iterations");
}

void Interpreter::append(std::string& out, const std::string& s) {
  if (out.size() + s.size() > limits_.max_output)
    throw TemplateError(TemplateError::Kind::Limit, "rendered output exceeds the size limit");
  out += s;
}

std::string Interpreter::render_body(const Body& body, std::shared_ptr<Frame> frame) {
  auto saved = frame_;
  frame_ = std::move(frame);
  std::string out;
  try {
    exec_body(body, out);
  } catch (...) {
    frame_ = saved;
    throw;
  }
  frame_ = saved;
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, std::string& out) {
  for (auto& s : body) {
    Flow f = exec(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, std::string& out) {
  line_ = s.line;
  switch (s.kind) {
    case SK::Text: append(out, s.text); return Flow::Normal;
    case SK::Output: {
      Value v = eval(*s.expr);
      if (v.is_string()) append(out, v.s);
      else append(out, to_str(v));
      return Flow::Normal;
    }
    case SK::If:
      for (size_t k = 0; k < s.conds.size(); ++k) {
        line_ = s.conds[k]->line;
        if (eval(*s.conds[k]).truthy()) return exec_body(s.bodies[k], out);
      }
      if (s.bodies.size() > s.conds.size()) return exec_body(s.bodies.back(), out);
      return Flow::Normal;
    case SK::For: exec_for(s, out); return Flow::Normal;
    case SK::Set: {
      Value v = eval(*s.expr);
      if (s.attr_target) {
        const Value* ns = frame_->find(s.targets[0]);
        if (!ns || !ns->is_object() || !ns->obj->set_attr(s.targets[1], v))
          throw TemplateError(TemplateError::Kind::Type, "cannot assign attribute on non-namespace object", s.line);
      } else {
        assign(s.targets, v);
      }
      return Flow::Normal;
    }
    case SK::SetBlock: {
      auto child = std::make_shared<Frame>();
      child->parent = frame_;
      std::string text = render_body(s.bodies[0], child);
      Value v = Value::string(std::move(text));
      if (s.expr) {
        block_body_ = &v.s;
        v = eval(*s.expr);
        block_body_ = nullptr;
      }
      frame_->set(s.targets[0], std::move(v));
      return Flow::Normal;
    }
    case SK::Macro: {
      auto m = std::make_shared<MacroObj>();
      m->def = &s;
      m->body = &s.bodies[0];
      m->closure = pin(frame_);
      m->name = s.name;
      frame_->set(s.name, Value::object(m));
      return Flow::Normal;
    }
    case SK::CallBlock: {
      auto caller = std::make_shared<MacroObj>();
      caller->def = &s;
      caller->body = &s.bodies[0];
      caller->closure = pin(frame_);
      caller->name = "caller";
      const Expr& call = *s.expr;
      Value callee = eval(*call.a);
      CallArgs args;
      eval_args(call, args);
      args.kw.emplace_back("caller", Value::object(caller));
      Value r = this->call(callee, args);
      append(out, to_str(r));
      return Flow::Normal;
    }
    case SK::FilterBlock: {
      auto child = std::make_shared<Frame>();
      child->parent = frame_;
      std::string text = render_body(s.bodies[0], child);
      block_body_ = &text;
      Value v = eval(*s.expr);
      block_body_ = nullptr;
      append(out, to_str(v));
      return Flow::Normal;
    }
    case SK::Break: return Flow::Break;
    case SK::Continue: return Flow::Continue;
    case SK::With: {
      auto child = std::make_shared<Frame>();
      child->parent = frame_;
      for (auto& [n, e] : s.assigns) child->set(n, eval(*e));
      append(out, render_body(s.bodies[0], child));
      return Flow::Normal;
    }
    case SK::Scope: {
      auto child = std::make_shared<Frame>();
      child->parent = frame_;
      append(out, render_body(s.bodies[0], child));
      return Flow::Normal;
    }
  }
  return Flow::Normal;
}

void Interpreter::assign(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    frame_->set(targets[0], v);
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() != targets.size())
    throw_type(items.size() < targets.size() ? "not enough values to unpack (expected " +
                                                   std::to_string(targets.size()) + ", got " +
                                                   std::to_string(items.size()) + ")"
                                             : "too many values to unpack (expected " +
                                                   std::to_string(targets.size()) + ")");
  for (size_t k = 0; k < targets.size(); ++k) frame_->set(targets[k], items[k]);
}

void Interpreter::exec_for(const Stmt& s, std::string& out) {
  Value seq = eval(*s.expr);
  std::vector<Value> items = iterate(seq);
  auto outer = frame_;
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& it : items) {
      count_iteration();
      auto f = std::make_shared<Frame>();
      f->parent = outer;
      frame_ = f;
      try {
        assign(s.targets, it);
        if (eval(*s.cond).truthy()) kept.push_back(it);
      } catch (...) {
        frame_ = outer;
        throw;
      }
      frame_ = outer;
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (s.bodies.size() > 1) exec_body(s.bodies[1], out);
    return;
  }
  auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  const std::vector<Value>& items_ref = *shared_items;
  auto loop = std::make_shared<LoopObj>();
  loop->items = shared_items;
  Value loop_val = Value::object(loop);
  try {
    for (size_t k = 0; k < items_ref.size(); ++k) {
      count_iteration();
      loop->index = k;
      // jinja2 gives every iteration a fresh scope: assignments do not survive to the next one.
      auto f = std::make_shared<Frame>();
      f->parent = outer;
      frame_ = f;
      f->vars.emplace_back("loop", loop_val);
      assign(s.targets, items_ref[k]);
      Flow fl = exec_body(s.bodies[0], out);
      frame_ = outer;
      if (fl == Flow::Break) break;
    }
  } catch (...) {
    frame_ = outer;
    throw;
  }
  frame_ = outer;
}

Value Interpreter::lookup(const std::string& name) {
  if (const Value* v = frame_->find(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

static std::string obj_desc(const Value& v) {
  if (v.is_none()) return "'None'";
  return "'" + v.type_name() + " object'";
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::Undefined: throw_undefined(obj);
    case Kind::Object:
      if (name.empty() || name[0] != '_')
        if (auto v = obj.obj->get_attr(name)) return *v;
      break;
    case Kind::String:
    case Kind::List:
    case Kind::Tuple:
    case Kind::Dict:
      if (!name.empty() && name[0] != '_') {
        if (auto m = bound_method(obj, name)) return *m;
        if (obj.is_dict())
          if (const Value* v = obj.dict->find(std::string_view(name))) return *v;
      }
      break;
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
      if (name == "real") return obj.kind == Kind::Float ? obj : Value::integer(obj.as_int());
      if (name == "imag") return obj.kind == Kind::Float ? Value::number(0.0) : Value::integer(0);
      break;
    default: break;
  }
  return Value::undefined(obj_desc(obj) + " has no attribute '" + name + "'");
}

static int64_t norm_index(int64_t i, int64_t len) { return i < 0 ? i + len : i; }

// Python slice semantics (start/stop/step with negatives and clamping) over n elements.
static std::vector<int64_t> slice_indices(const Value& start, const Value& stop, const Value& step, int64_t n) {
  auto as_opt = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int()) throw_type("slice indices must be integers or None");
    return v.as_int();
  };
  int64_t st = as_opt(step).value_or(1);
  if (st == 0) throw_type("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> x, int64_t def) -> int64_t {
    if (!x) return def;
    int64_t v = *x;
    if (v < 0) {
      v += n;
      if (v < 0) v = st < 0 ? -1 : 0;
    } else if (v >= n) {
      v = st < 0 ? n - 1 : n;
    }
    return v;
  };
  int64_t b = clamp(as_opt(start), st < 0 ? n - 1 : 0);
  int64_t e = clamp(as_opt(stop), st < 0 ? -1 : n);
  std::vector<int64_t> idx;
  // Steps are compared against the remaining distance so huge steps cannot overflow.
  if (st > 0)
    for (int64_t k = b; k < e; k = (e - k > st) ? k + st : e) idx.push_back(k);
  else
    for (int64_t k = b; k > e; k = (k - e > -st) ? k + st : e) idx.push_back(k);
  return idx;
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (key.is_object() && key.obj->type_name() == "slice") {
    auto* sl = static_cast<Namespace*>(key.obj.get());
    const Value* a = sl->attrs.find(std::string_view("start"));
    const Value* b = sl->attrs.find(std::string_view("stop"));
    const Value* c = sl->attrs.find(std::string_view("step"));
    if (obj.is_string()) {
      if (is_ascii(obj.s)) {
        std::string r;
        for (int64_t i : slice_indices(*a, *b, *c, static_cast<int64_t>(obj.s.size()))) r.push_back(obj.s[i]);
        return Value::string(std::move(r));
      }
      std::u32string u = utf8_decode(obj.s), r;
      for (int64_t i : slice_indices(*a, *b, *c, static_cast<int64_t>(u.size()))) r.push_back(u[i]);
      return Value::string(utf8_encode(r));
    }
    if (obj.is_seq()) {
      List r;
      for (int64_t i : slice_indices(*a, *b, *c, static_cast<int64_t>(obj.list->size()))) r.push_back((*obj.list)[i]);
      return Value::new_list(std::move(r), obj.kind == Kind::Tuple);
    }
    return Value::undefined(obj_desc(obj) + " has no attribute 'slice'");
  }
  switch (obj.kind) {
    case Kind::String:
      if (key.is_int()) {
        int64_t n = is_ascii(obj.s) ? static_cast<int64_t>(obj.s.size()) : static_cast<int64_t>(utf8_length(obj.s));
        int64_t i = norm_index(key.as_int(), n);
        if (i >= 0 && i < n) {
          if (is_ascii(obj.s)) return Value::string(std::string(1, obj.s[i]));
          std::u32string u = utf8_decode(obj.s);
          return Value::string(utf8_encode(std::u32string(1, u[i])));
        }
        return Value::undefined("string index out of range");
      }
      break;
    case Kind::List:
    case Kind::Tuple:
      if (key.is_int()) {
        int64_t n = static_cast<int64_t>(obj.list->size());
        int64_t i = norm_index(key.as_int(), n);
        if (i >= 0 && i < n) return (*obj.list)[i];
        return Value::undefined(obj_desc(obj) + " has no element " + to_str(key));
      }
      break;
    case Kind::Dict:
      if (const Value* v = obj.dict->find(key)) return *v;
      break;
    default: break;
  }
  if (key.is_string()) return getattr(obj, key.s);
  return Value::undefined(obj_desc(obj) + " has no element " + repr(key));
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return {};
    case Kind::List:
    case Kind::Tuple: return *v.list;
    case Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict->items.size());
      for (auto& kv : v.dict->items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      if (is_ascii(v.s)) {
        for (char c : v.s) chars.push_back(Value::string(std::string(1, c)));
      } else {
        for (char32_t c : utf8_decode(v.s)) chars.push_back(Value::string(utf8_encode(std::u32string(1, c))));
      }
      return chars;
    }
    case Kind::Object:
      if (auto* g = dynamic_cast<Generator*>(v.obj.get())) {
        if (g->consumed) return {};
        g->consumed = true;
        return g->items;
      }
      [[fallthrough]];
    default: throw_type("'" + v.type_name() + "' object is not iterable");
  }
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) throw_undefined(callee);
  if (callee.is_object() && callee.obj->callable()) {
    DepthGuard g(*this);
    return callee.obj->call(*this, args);
  }
  throw_type("'" + callee.type_name() + "' object is not callable");
}

void Interpreter::eval_args(const Expr& e, CallArgs& args) {
  args.pos.reserve(e.items.size());
  for (auto& a : e.items) args.pos.push_back(eval(*a));
  for (auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a));
}

Value Interpreter::eval_call(const Expr& e) {
  CallArgs args;
  if (e.a->kind == EK::Attr) {
    Value obj = eval(*e.a->a);
    if (obj.is_string() || obj.is_seq() || obj.is_dict()) {
      eval_args(e, args);
      if (auto r = call_method(*this, obj, e.a->name, args)) return *r;
      return call(getattr(obj, e.a->name), args);
    }
    Value callee = getattr(obj, e.a->name);
    eval_args(e, args);
    return call(callee, args);
  }
  Value callee = eval(*e.a);
  eval_args(e, args);
  return call(callee, args);
}

Value Interpreter::eval_filter(const Expr& e) {
  Value v = e.a ? eval(*e.a) : Value::string(block_body_ ? *block_body_ : std::string());
  CallArgs args;
  eval_args(e, args);
  return apply_filter(*this, e.name, std::move(v), args);
}

Value Interpreter::eval_test(const Expr& e) {
  Value v;
  // `x is defined` must not fail on an undefined chain: evaluate leniently.
  v = eval(*e.a);
  CallArgs args;
  eval_args(e, args);
  bool r = apply_test(*this, e.name, v, args);
  return Value::boolean(e.negate ? !r : r);
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard g(*this);
  switch (e.kind) {
    case EK::Literal: return e.value;
    case EK::Name: return lookup(e.name);
    case EK::List:
    case EK::Tuple: {
      List items;
      items.reserve(e.items.size());
      for (auto& x : e.items) items.push_back(eval(*x));
      return Value::new_list(std::move(items), e.kind == EK::Tuple);
    }
    case EK::Dict: {
      Value d = Value::new_dict();
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        Value key = eval(*e.items[k]);
        if (key.is_seq() && key.kind == Kind::List) throw_type("unhashable type: 'list'");
        if (key.is_dict()) throw_type("unhashable type: 'dict'");
        d.dict->set(key, eval(*e.items[k + 1]));
      }
      return d;
    }
    case EK::Attr: return getattr(eval(*e.a), e.name);
    case EK::Subscript: {
      Value obj = eval(*e.a);
      if (e.b->kind == EK::Slice) {
        auto sl = std::make_shared<Namespace>();
        for (int k = 0; k < 3; ++k)
          sl->attrs.set(k == 0 ? "start" : k == 1 ? "stop" : "step",
                        e.b->items[k] ? eval(*e.b->items[k]) : Value::none());
        struct SliceObj : Namespace {
          std::string type_name() const override { return "slice"; }
        };
        auto s2 = std::make_shared<SliceObj>();
        s2->attrs = std::move(sl->attrs);
        return getitem(obj, Value::object(s2));
      }
      return getitem(obj, eval(*e.b));
    }
    case EK::Slice: throw_type("unexpected slice");
    case EK::Call: return eval_call(e);
    case EK::Filter: return eval_filter(e);
    case EK::Test: return eval_test(e);
    case EK::Unary: {
      Value v = eval(*e.a);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) throw_undefined(v);
      if (!v.is_number()) throw_type("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.kind == Kind::Bool ? Value::integer(v.as_int()) : v;
      if (v.kind == Kind::Float) return Value::number(-v.f);
      return Value::integer(sub_i(0, v.as_int()));
    }
    case EK::Binary: return eval_binary(e);
    case EK::Compare: {
      // a < b < c is (a < b) and (b < c), each operand evaluated once.
      Value left = eval(*e.a);
      for (size_t k = 0; k < e.items.size(); ++k) {
        Value right = eval(*e.items[k]);
        if (!compare_op(e.ops[k], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case EK::Cond:
      if (eval(*e.b).truthy()) return eval(*e.a);
      if (e.c) return eval(*e.c);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

static double checked_div(double a, double b) {
  if (b == 0) throw TemplateError(TemplateError::Kind::Type, "division by zero");
  return a / b;
}

static int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw TemplateError(TemplateError::Kind::Type, "integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) throw TemplateError(TemplateError::Kind::Type, "integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

static Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  uint64_t unit = seq.is_string() ? seq.s.size() : seq.list->size();
  if (unit && static_cast<uint64_t>(n) > (64u << 20) / unit)
    throw TemplateError(TemplateError::Kind::Limit, "repetition result too large");
  if (seq.is_string()) {
    if (seq.s.size() * static_cast<uint64_t>(n) > (64u << 20))
      throw TemplateError(TemplateError::Kind::Limit, "string repetition too large");
    std::string r;
    r.reserve(seq.s.size() * n);
    for (int64_t k = 0; k < n; ++k) r += seq.s;
    Value v = Value::string(std::move(r));
    v.safe = seq.safe;
    return v;
  }
  if (seq.list->size() * static_cast<uint64_t>(n) > 10'000'000)
    throw TemplateError(TemplateError::Kind::Limit, "list repetition too large");
  List r;
  for (int64_t k = 0; k < n; ++k) r.insert(r.end(), seq.list->begin(), seq.list->end());
  return Value::new_list(std::move(r), seq.kind == Kind::Tuple);
}

static bool compare_op(const std::string& op, const Value& l, const Value& r) {
  if (op == "==") return equals(l, r);
  if (op == "!=") return !equals(l, r);
  if (op == "in") return contains(r, l);
  if (op == "not in") return !contains(r, l);
  if (l.is_undefined()) throw_undefined(l);
  if (r.is_undefined()) throw_undefined(r);
  int c = compare(l, r);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value l = eval(*e.a);
    return l.truthy() ? eval(*e.b) : l;
  }
  if (op == "or") {
    Value l = eval(*e.a);
    return l.truthy() ? l : eval(*e.b);
  }
  Value l = eval(*e.a);
  Value r = eval(*e.b);
  if (op == "~") return Value::string(to_str(l) + to_str(r));
  if (op == "==" || op == "!=" || op == "in" || op == "not in" || op == "<" || op == "<=" || op == ">" || op == ">=")
    return Value::boolean(compare_op(op, l, r));
  if (l.is_undefined()) throw_undefined(l);
  if (r.is_undefined()) throw_undefined(r);
  auto unsupported = [&]() -> Value {
    throw_type("unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
  };
  bool both_int = l.is_int() && r.is_int();
  bool both_num = l.is_number() && r.is_number();
  if (op == "+") {
    if (both_int) return Value::integer(add_i(l.as_int(), r.as_int()));
    if (both_num) return Value::number(l.as_float() + r.as_float());
    if (l.is_string() && r.is_string()) {
      // markupsafe: Markup + str escapes the str side and stays Markup.
      if (l.safe == r.safe) {
        Value v = Value::string(l.s + r.s);
        v.safe = l.safe;
        return v;
      }
      return Value::markup(l.safe ? l.s + html_escape(r.s) : html_escape(l.s) + r.s);
    }
    if (l.is_seq() && l.kind == r.kind) {
      List items = *l.list;
      items.insert(items.end(), r.list->begin(), r.list->end());
      return Value::new_list(std::move(items), l.kind == Kind::Tuple);
    }
    if (l.is_string())
      throw_type("can only concatenate str (not \"" + r.type_name() + "\") to str");
    if (l.kind == Kind::List)
      throw_type("can only concatenate list (not \"" + r.type_name() + "\") to list");
    return unsupported();
  }
  if (op == "-") {
    if (both_int) return Value::integer(sub_i(l.as_int(), r.as_int()));
    if (both_num) return Value::number(l.as_float() - r.as_float());
    return unsupported();
  }
  if (op == "*") {
    if (both_int) return Value::integer(mul_i(l.as_int(), r.as_int()));
    if (both_num) return Value::number(l.as_float() * r.as_float());
    if ((l.is_string() || l.is_seq()) && r.is_int()) return repeat(l, r.as_int());
    if ((r.is_string() || r.is_seq()) && l.is_int()) return repeat(r, l.as_int());
    return unsupported();
  }
  if (op == "/") {
    if (both_num) return Value::number(checked_div(l.as_float(), r.as_float()));
    return unsupported();
  }
  if (op == "//") {
    if (both_int) return Value::integer(floor_div(l.as_int(), r.as_int()));
    if (both_num) return Value::number(std::floor(checked_div(l.as_float(), r.as_float())));
    return unsupported();
  }
  if (op == "%") {
    if (l.is_string()) return Value::string(percent_format(l.s, r));
    if (both_int) {
      int64_t b = r.as_int();
      int64_t q = floor_div(l.as_int(), b);
      return Value::integer(sub_i(l.as_int(), mul_i(q, b)));
    }
    if (both_num) {
      double a = l.as_float(), b = r.as_float();
      if (b == 0) throw TemplateError(TemplateError::Kind::Type, "float modulo");
      double m = std::fmod(a, b);
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return Value::number(m);
    }
    return unsupported();
  }
  if (op == "**") {
    if (both_int && r.as_int() >= 0) {
      int64_t base = l.as_int(), ex = r.as_int(), res = 1;
      if (base == 0 || base == 1) return Value::integer(ex == 0 ? 1 : base);
      if (base == -1) return Value::integer(ex % 2 ? -1 : 1);
      for (int64_t k = 0; k < ex; ++k)  // |base| >= 2 overflows within 63 steps
        if (__builtin_mul_overflow(res, base, &res))
          throw TemplateError(TemplateError::Kind::Limit, "integer power overflows 64 bits");
      return Value::integer(res);
    }
    if (both_num) return Value::number(std::pow(l.as_float(), r.as_float()));
    return unsupported();
  }
  throw_type("unknown operator " + op);
}

}  // namespace rapid::jinja
