// Syntax tree of a parsed Jinja template. Every node keeps its source line for error messages.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "template/value.h"

namespace rapid::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  Literal,    // value
  Name,       // name
  List,       // items
  Tuple,      // items
  Dict,       // items as key, value pairs
  Attr,       // a.name
  Subscript,  // a[b]
  Slice,      // items = start, stop, step (null = absent); only inside Subscript
  Call,       // a(items..., kwargs)
  Filter,     // a | name(items..., kwargs); a null = filter block body
  Test,       // a is [not] name(items...)
  Unary,      // op a   ("-", "+", "not")
  Binary,     // a op b (arithmetic, "~", "and", "or", "in", "not in", comparisons)
  Cond,       // a if b else c
  Compare,    // chained comparison a op0 items[0] op1 items[1] ... (ops), as Python's a < b < c
};

struct Expr {
  ExprKind kind;
  int line = 0;
  std::string name;  // Name, Attr, Filter, Test name; Unary/Binary operator
  Value value;       // Literal
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negate = false;  // Test: "is not"
  std::vector<std::string> ops;  // Compare
  int depth = 1;        // height of this subtree, bounded by the parser so evaluation cannot overflow the stack
};

enum class StmtKind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, With, Scope };

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                  // Text
  ExprPtr expr;                      // Output, Set value, For iterable, CallBlock call, FilterBlock filter
  ExprPtr cond;                      // For inline filter
  std::vector<ExprPtr> conds;        // If: one condition per branch
  std::vector<Body> bodies;          // If: branch bodies (+ else); others: bodies[0] (+ bodies[1] = else)
  std::vector<std::string> targets;  // For / Set names (several = tuple unpacking); Set attr: {ns, attr}
  bool attr_target = false;          // Set: `set ns.attr = ...`
  std::string name;                  // Macro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro / CallBlock parameters with defaults
  std::vector<std::pair<std::string, ExprPtr>> assigns;  // With
  // Macro / CallBlock: whether the body mentions caller, varargs, kwargs (jinja2 then accepts
  // a caller, extra positional arguments, unknown keyword arguments; otherwise they are errors).
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

}  // namespace rapid::jinja
