#include "template/parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "template/lexer.h"

namespace rapid::jinja {

namespace {

constexpr int kMaxNesting = 200;    // bounds parser recursion on hostile input
constexpr int kMaxExprDepth = 200;  // bounds expression trees built by loops (a+a+a..., a.b.c...)

bool expr_mentions(const Expr* e, const std::string& n) {
  if (!e) return false;
  if (e->kind == ExprKind::Name && e->name == n) return true;
  if (expr_mentions(e->a.get(), n) || expr_mentions(e->b.get(), n) || expr_mentions(e->c.get(), n)) return true;
  for (auto& x : e->items)
    if (expr_mentions(x.get(), n)) return true;
  for (auto& kv : e->kwargs)
    if (expr_mentions(kv.second.get(), n)) return true;
  return false;
}

// jinja2's find_undeclared for the special macro names: any mention anywhere in the body.
bool body_mentions(const Body& b, const std::string& n) {
  for (auto& s : b) {
    if (expr_mentions(s->expr.get(), n) || expr_mentions(s->cond.get(), n)) return true;
    for (auto& c : s->conds)
      if (expr_mentions(c.get(), n)) return true;
    for (auto& kv : s->params)
      if (expr_mentions(kv.second.get(), n)) return true;
    for (auto& kv : s->assigns)
      if (expr_mentions(kv.second.get(), n)) return true;
    for (auto& body : s->bodies)
      if (body_mentions(body, n)) return true;
  }
  return false;
}

void mark_specials(Stmt& s) {
  s.uses_caller = body_mentions(s.bodies[0], "caller");
  s.uses_varargs = body_mentions(s.bodies[0], "varargs");
  s.uses_kwargs = body_mentions(s.bodies[0], "kwargs");
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_root() {
    std::string found;
    Body b = parse_body({}, &found);
    return b;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().value == n; }
  [[noreturn]] void fail(const std::string& msg) const {
    throw TemplateError(TemplateError::Kind::Syntax, msg, cur().line);
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Eof: return "end of template";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::VarEnd: return "end of print statement";
      case Tok::Text: return "template data";
      case Tok::String: return "string";
      default: return "'" + t.value + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail("expected name, got " + describe(cur()));
    std::string v = cur().value;
    next();
    return v;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail("expected end of statement block, got " + describe(cur()));
    next();
  }

  struct Depth {
    Parser& p;
    explicit Depth(Parser& pp) : p(pp) {
      if (++p.depth_ > kMaxNesting) p.fail("template nesting too deep");
    }
    ~Depth() { --p.depth_; }
  };

  ExprPtr mk(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }
  StmtPtr mks(StmtKind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }

  // Computes the subtree height from the children and refuses trees too deep to evaluate safely.
  ExprPtr finish(ExprPtr e) {
    int d = 0;
    for (const ExprPtr* c : {&e->a, &e->b, &e->c})
      if (*c) d = std::max(d, (*c)->depth);
    for (auto& c : e->items)
      if (c) d = std::max(d, c->depth);
    for (auto& kv : e->kwargs) d = std::max(d, kv.second->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) fail("expression nested too deeply");
    return e;
  }

  // ---- statements ------------------------------------------------------------------------------
  Body parse_body(std::initializer_list<const char*> ends, std::string* found) {
    Depth d(*this);
    Body body;
    while (true) {
      const Token& tk = cur();
      if (tk.type == Tok::Eof) {
        if (ends.size() == 0) return body;
        std::string want;
        for (auto* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
        fail("Unexpected end of template. Jinja was looking for the following tags: " + want);
      }
      if (tk.type == Tok::Text) {
        auto s = mks(StmtKind::Text, tk.line);
        s->text = tk.value;
        body.push_back(std::move(s));
        next();
      } else if (tk.type == Tok::VarBegin) {
        next();
        auto s = mks(StmtKind::Output, tk.line);
        s->expr = parse_tuple(true);
        if (cur().type != Tok::VarEnd) fail("expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (tk.type == Tok::BlockBegin) {
        const Token& nm = peek();
        if (nm.type == Tok::Name)
          for (auto* e : ends)
            if (nm.value == e) {
              next();
              next();
              *found = e;
              return body;
            }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(tk));
      }
    }
  }

  StmtPtr parse_statement() {
    if (cur().type != Tok::Name) fail("tag name expected");
    std::string tag = cur().value;
    int line = cur().line;
    next();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      expect_block_end();
      return mks(tag == "break" ? StmtKind::Break : StmtKind::Continue, line);
    }
    if (tag == "generation") {  // transformers' AssistantTracker: renders its body
      expect_block_end();
      auto s = mks(StmtKind::Scope, line);
      std::string found;
      s->bodies.push_back(parse_body({"endgeneration"}, &found));
      expect_block_end();
      return s;
    }
    if (tag == "with") return parse_with(line);
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "block")
      throw TemplateError(TemplateError::Kind::Syntax, "'" + tag + "' is not supported in chat templates", line);
    throw TemplateError(TemplateError::Kind::Syntax, "Encountered unknown tag '" + tag + "'.", line);
  }

  StmtPtr parse_if(int line) {
    auto s = mks(StmtKind::If, line);
    s->conds.push_back(parse_tuple(true));
    expect_block_end();
    while (true) {
      std::string found;
      s->bodies.push_back(parse_body({"elif", "else", "endif"}, &found));
      if (found == "elif") {
        s->conds.push_back(parse_tuple(true));
        expect_block_end();
      } else if (found == "else") {
        expect_block_end();
        s->bodies.push_back(parse_body({"endif"}, &found));
        expect_block_end();
        return s;
      } else {
        expect_block_end();
        return s;
      }
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) next();
    while (true) {
      names.push_back(expect_name());
      if (!is_op(",")) break;
      next();
      if (cur().type != Tok::Name) break;
    }
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(int line) {
    auto s = mks(StmtKind::For, line);
    s->targets = parse_targets();
    if (!is_name("in")) fail("expected 'in', got " + describe(cur()));
    next();
    s->expr = parse_tuple(false);
    if (is_name("if")) {
      next();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) fail("recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    std::string found;
    s->bodies.push_back(parse_body({"endfor", "else"}, &found));
    --loop_depth_;
    if (found == "else") {
      expect_block_end();
      s->bodies.push_back(parse_body({"endfor"}, &found));
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(int line) {
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().value == ".") {
      auto s = mks(StmtKind::Set, line);
      s->attr_target = true;
      s->targets.push_back(expect_name());
      next();
      s->targets.push_back(expect_name());
      expect_op("=");
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    std::vector<std::string> names = parse_targets();
    if (is_op("=")) {
      next();
      auto s = mks(StmtKind::Set, line);
      s->targets = std::move(names);
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    if (names.size() != 1) fail("block set needs a single name");
    auto s = mks(StmtKind::SetBlock, line);
    s->targets = std::move(names);
    if (is_op("|")) s->expr = parse_filter_chain(nullptr);
    expect_block_end();
    std::string found;
    s->bodies.push_back(parse_body({"endset"}, &found));
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string n = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        next();
        def = parse_expression(true);
      } else if (!params.empty() && params.back().second) {
        fail("non-default argument follows default argument");
      }
      params.emplace_back(n, std::move(def));
    }
    next();
  }

  StmtPtr parse_macro(int line) {
    auto s = mks(StmtKind::Macro, line);
    s->name = expect_name();
    parse_params(s->params);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    s->bodies.push_back(parse_body({"endmacro"}, &found));
    loop_depth_ = saved;
    if (cur().type == Tok::Name) next();  // `{% endmacro name %}`
    expect_block_end();
    mark_specials(*s);
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = mks(StmtKind::CallBlock, line);
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) fail("expected call");
    expect_block_end();
    std::string found;
    s->bodies.push_back(parse_body({"endcall"}, &found));
    expect_block_end();
    mark_specials(*s);
    return s;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = mks(StmtKind::FilterBlock, line);
    s->expr = parse_filter_chain(nullptr, /*first_without_pipe=*/true);
    expect_block_end();
    std::string found;
    s->bodies.push_back(parse_body({"endfilter"}, &found));
    expect_block_end();
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = mks(StmtKind::With, line);
    while (cur().type != Tok::BlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      std::string n = expect_name();
      expect_op("=");
      s->assigns.emplace_back(n, parse_expression(true));
    }
    expect_block_end();
    std::string found;
    s->bodies.push_back(parse_body({"endwith"}, &found));
    expect_block_end();
    return s;
  }

  // ---- expressions -----------------------------------------------------------------------------
  bool tuple_end() const {
    return cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || cur().type == Tok::Eof || is_op(")") ||
           is_name("if") || is_name("recursive");
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens = false) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end() && !(with_condexpr && is_name("if") && items.empty())) break;
      items.push_back(with_condexpr ? parse_expression(true) : parse_or());
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("Expected an expression, got " + describe(cur()));
    }
    auto e = mk(ExprKind::Tuple, line);
    e->items = std::move(items);
    return finish(std::move(e));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Depth d(*this);
    if (!with_condexpr) return parse_or();
    int line = cur().line;
    ExprPtr e = parse_or();
    while (is_name("if")) {
      next();
      auto c = mk(ExprKind::Cond, line);
      c->b = parse_or();
      if (is_name("else")) {
        next();
        c->c = parse_expression(true);
      }
      c->a = std::move(e);
      e = finish(std::move(c));
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, int line) {
    auto e = mk(ExprKind::Binary, line);
    e->name = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return finish(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      next();
      l = binary("or", std::move(l), parse_and(), line);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      next();
      l = binary("and", std::move(l), parse_not(), line);
    }
    return l;
  }
  ExprPtr parse_not() {
    Depth d(*this);
    if (is_name("not")) {
      auto e = mk(ExprKind::Unary, cur().line);
      next();
      e->name = "not";
      e->a = parse_not();
      return finish(std::move(e));
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> rest;
    while (true) {
      if (cur().type == Tok::Op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        ops.push_back(cur().value);
        next();
      } else if (is_name("in")) {
        ops.push_back("in");
        next();
      } else if (is_name("not") && peek().type == Tok::Name && peek().value == "in") {
        ops.push_back("not in");
        next();
        next();
      } else {
        break;
      }
      rest.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    if (ops.size() == 1) return binary(ops[0], std::move(first), std::move(rest[0]), line);
    auto e = mk(ExprKind::Compare, line);
    e->a = std::move(first);
    e->items = std::move(rest);
    e->ops = std::move(ops);
    return finish(std::move(e));
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().value;
      int line = cur().line;
      next();
      l = binary(op, std::move(l), parse_concat(), line);
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      next();
      l = binary("~", std::move(l), parse_math2(), line);
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().value;
      int line = cur().line;
      next();
      l = binary(op, std::move(l), parse_pow(), line);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      next();
      l = binary("**", std::move(l), parse_unary(true), line);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    Depth d(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = mk(ExprKind::Unary, cur().line);
      e->name = cur().value;
      next();
      e->a = parse_unary(false);
      e = finish(std::move(e));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    Depth d(*this);
    const Token& tk = cur();
    int line = tk.line;
    switch (tk.type) {
      case Tok::Name: {
        auto e = mk(ExprKind::Literal, line);
        const std::string& v = tk.value;
        if (v == "true" || v == "True") e->value = Value::boolean(true);
        else if (v == "false" || v == "False") e->value = Value::boolean(false);
        else if (v == "none" || v == "None") e->value = Value::none();
        else {
          e->kind = ExprKind::Name;
          e->name = v;
        }
        next();
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().type == Tok::String) {  // adjacent literals concatenate
          s += cur().value;
          next();
        }
        auto e = mk(ExprKind::Literal, line);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Int: {
        auto e = mk(ExprKind::Literal, line);
        int64_t v = 0;
        auto r = std::from_chars(tk.value.data(), tk.value.data() + tk.value.size(), v);
        if (r.ec != std::errc()) e->value = Value::number(std::strtod(tk.value.c_str(), nullptr));
        else e->value = Value::integer(v);
        next();
        return e;
      }
      case Tok::Float: {
        auto e = mk(ExprKind::Literal, line);
        e->value = Value::number(std::strtod(tk.value.c_str(), nullptr));
        next();
        return e;
      }
      case Tok::Op:
        if (tk.value == "(") {
          next();
          ExprPtr e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (tk.value == "[") {
          next();
          auto e = mk(ExprKind::List, line);
          while (!is_op("]")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("]")) break;
            e->items.push_back(parse_expression(true));
          }
          next();
          return finish(std::move(e));
        }
        if (tk.value == "{") {
          next();
          auto e = mk(ExprKind::Dict, line);
          while (!is_op("}")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("}")) break;
            e->items.push_back(parse_expression(true));
            expect_op(":");
            e->items.push_back(parse_expression(true));
          }
          next();
          return finish(std::move(e));
        }
        break;
      default: break;
    }
    fail("unexpected " + describe(tk));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().type == Tok::Name) {
          auto a = mk(ExprKind::Attr, line);
          a->name = cur().value;
          a->a = std::move(e);
          next();
          e = finish(std::move(a));
        } else if (cur().type == Tok::Int) {
          auto s = mk(ExprKind::Subscript, line);
          s->a = std::move(e);
          s->b = parse_primary();
          e = finish(std::move(s));
        } else {
          fail("expected name or number after '.'");
        }
      } else if (is_op("[")) {
        next();
        auto s = mk(ExprKind::Subscript, line);
        s->a = std::move(e);
        s->b = parse_subscript_index();
        expect_op("]");
        e = finish(std::move(s));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript_index() {
    int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    auto sl = mk(ExprKind::Slice, line);
    sl->items.resize(3);
    sl->items[0] = std::move(start);  // (depth computed by the enclosing Subscript)
    next();  // ':'
    if (!is_op("]") && !is_op(":")) sl->items[1] = parse_expression(true);
    if (is_op(":")) {
      next();
      if (!is_op("]")) sl->items[2] = parse_expression(true);
    }
    return finish(std::move(sl));
  }

  void parse_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().value == "=") {
        std::string n = cur().value;
        next();
        next();
        e.kwargs.emplace_back(n, parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("positional argument follows keyword argument");
        e.items.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = mk(ExprKind::Call, cur().line);
    c->a = std::move(callee);
    parse_args(*c);
    return finish(std::move(c));
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        e = parse_filter_chain(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // `| f(args) | g ...`; `inner` null = the body of a filter/set block.
  ExprPtr parse_filter_chain(ExprPtr inner, bool first_without_pipe = false) {
    bool first = true;
    while (is_op("|") || (first && first_without_pipe)) {
      if (is_op("|")) next();
      first = false;
      auto f = mk(ExprKind::Filter, cur().line);
      f->name = expect_name();
      while (is_op(".")) {
        next();
        f->name += "." + expect_name();
      }
      if (is_op("(")) parse_args(*f);
      f->a = std::move(inner);
      inner = finish(std::move(f));
    }
    return inner;
  }

  ExprPtr parse_test(ExprPtr e) {
    auto t = mk(ExprKind::Test, cur().line);
    next();  // 'is'
    if (is_name("not")) {
      t->negate = true;
      next();
    }
    t->name = expect_name();
    while (is_op(".")) {
      next();
      t->name += "." + expect_name();
    }
    if (is_op("(")) {
      parse_args(*t);
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                cur().type == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      // `is divisibleby 3`: a single argument without parentheses
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      ExprPtr arg = parse_primary();
      t->items.push_back(parse_postfix(std::move(arg)));
    }
    t->a = std::move(e);
    return finish(std::move(t));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse_root(); }

}  // namespace rapid::jinja
