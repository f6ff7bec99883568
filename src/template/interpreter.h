// Executes a parsed template against a context, with jinja2's scoping rules, Undefined semantics
// and the immutable sandbox of transformers' chat-template environment.
#pragma once
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace rapid::jinja {

// Bounds that keep hostile templates from exhausting the machine.
struct Limits {
  size_t max_output = 64u << 20;         // bytes of rendered text (also for nested captures)
  uint64_t max_iterations = 1'000'000;  // loop iterations + macro calls over the whole render
  int max_depth = 256;                   // nested macro calls / nested evaluation
  size_t max_range = 100'000;            // range() length, as jinja2's sandbox MAX_RANGE
};

struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value v);
};

class Interpreter {
 public:
  Interpreter(const Body& root, const Value& context, const Limits& limits, const std::tm& now);
  std::string run();

  // jinja2's environment.getattr / getitem (attribute first vs item first), in the sandbox.
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  // The items a `for` loop over `v` sees; throws TypeError for non-iterables.
  std::vector<Value> iterate(const Value& v);
  Value call(const Value& callee, CallArgs& args);
  std::string render_body(const Body& body, std::shared_ptr<Frame> frame);
  void count_iteration();
  const std::tm& now() const { return now_; }
  const Limits& limits() const { return limits_; }
  int line() const { return line_; }

  // Objects that can form reference cycles (namespaces holding themselves, macros whose scope
  // holds them) are owned here and unlinked when the render ends, so nothing leaks.
  void track(std::shared_ptr<Namespace> ns) { namespaces_.push_back(std::move(ns)); }
  std::shared_ptr<Frame> pin(std::shared_ptr<Frame> f) {
    if (pinned_.empty() || pinned_.back() != f) pinned_.push_back(f);
    return f;
  }
  ~Interpreter();

  struct DepthGuard {
    Interpreter& in;
    explicit DepthGuard(Interpreter& i);
    ~DepthGuard() { --in.depth_; }
  };

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void assign(const std::vector<std::string>& targets, const Value& v);
  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& e);
  Value eval_test(const Expr& e);
  void eval_args(const Expr& e, CallArgs& args);
  Value lookup(const std::string& name);
  void append(std::string& out, const std::string& s);

  const Body& root_;
  Limits limits_;
  std::tm now_;
  std::shared_ptr<Frame> globals_;
  std::shared_ptr<Frame> frame_;
  const std::string* block_body_ = nullptr;  // the captured text a filter/set block filters
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  std::vector<std::shared_ptr<Frame>> pinned_;
  uint64_t iterations_ = 0;
  int depth_ = 0;
  int line_ = 0;
  friend struct MacroObj;
};

[[noreturn]] void throw_undefined(const Value& u);
[[noreturn]] void throw_type(const std::string& msg);

}  // namespace rapid::jinja
