// JSON schema → GBNF text → Grammar (see json_schema.h for the accepted subset).
#include "constrain/json_schema.h"

#include <cctype>
#include <cmath>
#include <optional>
#include <map>
#include <set>

#include "constrain/gbnf.h"
#include "constrain/schema_regex.h"

namespace rapid::constrain {

namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
constexpr int64_t kMaxCount = 4096;  // larger maxLength/maxItems are capped here (a subset)

bool is_rule_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Decodes UTF-8 (already validated by the JSON parser) into code points.
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len && i + size_t(k) < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + size_t(k)]) & 0x3F);
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

std::string cp_class_escape(uint32_t c) {
  char buf[16];
  if (c <= 0xFFFF) std::snprintf(buf, sizeof buf, "\\u%04X", c);
  else std::snprintf(buf, sizeof buf, "\\U%08X", c);
  return buf;
}

class SchemaConverter {
 public:
  SchemaConverter(const ojson& root, std::string root_name)
      : root_(root), root_name_(std::move(root_name)) {
    for (const char* p : {"ws", "char", "rawtext", "plainchar", "keyrest", "string", "number", "unumber",
                          "integer", "uinteger", "pinteger", "boolean", "null", "value", "object", "array",
                          "date", "time", "date-time", "uuid"})
      names_.insert(prim_name(p));
  }

  // Arguments of a tool call in a non-JSON encoding: "xml" (one `param` template per argument,
  // with {KEY} and {VALUE}; string values are raw text) or "python-kwargs" (k=v, ...).
  // Arguments come in schema order; optional ones may be left out.
  std::string run_args(const std::string& encoding, const std::string& param) {
    const ojson& s = deref(root_, "#");
    ojson props = s.is_object() && s.contains("properties") && s["properties"].is_object() ? s["properties"] : ojson::object();
    std::set<std::string> required;
    if (s.is_object() && s.contains("required") && s["required"].is_array())
      for (const auto& r : s["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    std::string body;
    if (encoding == "xml") {
      for (auto it = props.begin(); it != props.end(); ++it) {
        std::string value = xml_value(it.value(), "#/properties/" + it.key());
        std::string part = expand_param(param, it.key(), value);
        std::string r = define("param-" + it.key(), part);
        body += (body.empty() ? "" : " ") + r + (required.count(it.key()) ? "" : "?");
      }
    } else if (encoding == "python-kwargs") {
      // k=v pairs joined by ", ": the same "skip only optional ones" chain as JSON objects.
      std::vector<std::string> items;
      std::vector<bool> req;
      for (auto it = props.begin(); it != props.end(); ++it) {
        items.push_back(define("kw-" + it.key(), gbnf_literal(it.key() + "=") + " " +
                                                     python_value(it.value(), "#/properties/" + it.key())));
        req.push_back(required.count(it.key()) > 0);
      }
      body = chain(items, req, "\", \"", "\"\"");
    } else {
      fail("#", "tool argument encoding '" + encoding + "' is not supported");
    }
    std::string out = root_name_ + " ::= " + (body.empty() ? "\"\"" : body) + "\n";
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    return out;
  }

  std::string run() {
    std::string body = visit(root_, "#", 0);
    std::string out = root_name_ + " ::= " + body + "\n";
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw GrammarError("JSON schema " + path + ": " + what);
  }

  std::string prim_name(const std::string& p) const { return root_name_ + "." + p; }

  // The rule for a shared primitive, defined on first use.
  std::string prim(const std::string& p) {
    std::string name = prim_name(p);
    if (prims_done_.count(p)) return name;
    prims_done_.insert(p);
    std::string body;
    auto P = [&](const char* q) { return prim(q); };
    if (p == "ws") body = R"(([ \t] | "\n" [ \t]{0,20})?)";
    // Escapes exclude \uD800-\uDFFF: lone surrogates are not valid Unicode text.
    else if (p == "char")
      body = R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))";
    else if (p == "rawtext") body = R"(([^<] | "<" [^/<])*)";
    else if (p == "plainchar") body = R"([^"\\\x00-\x1F])";
    else if (p == "keyrest") body = P("plainchar") + "* \"\\\"\"";
    else if (p == "string") body = "\"\\\"\" " + P("char") + "* \"\\\"\"";
    else if (p == "uinteger") body = R"(("0" | [1-9] [0-9]{0,19}))";
    else if (p == "integer") body = "\"-\"? " + P("uinteger");
    else if (p == "pinteger") body = R"([1-9] [0-9]{0,19})";
    else if (p == "unumber") body = P("uinteger") + R"( ("." [0-9]{1,20})? ([eE] [-+]? [0-9]{1,2})?)";
    else if (p == "number") body = "\"-\"? " + P("unumber");
    else if (p == "boolean") body = R"("true" | "false")";
    else if (p == "null") body = R"("null")";
    else if (p == "value")
      body = P("object") + " | " + P("array") + " | " + P("string") + " | " + P("number") + " | " +
             P("boolean") + " | " + P("null");
    else if (p == "object")
      body = "\"{\" " + P("ws") + " (" + P("string") + " " + P("ws") + " \":\" " + P("ws") + " " +
             P("value") + " " + P("ws") + " (\",\" " + P("ws") + " " + P("string") + " " + P("ws") +
             " \":\" " + P("ws") + " " + P("value") + " " + P("ws") + ")*)? \"}\"";
    else if (p == "array")
      body = "\"[\" " + P("ws") + " (" + P("value") + " " + P("ws") + " (\",\" " + P("ws") + " " +
             P("value") + " " + P("ws") + ")*)? \"]\"";
    // Real calendar days only (February stops at 28: leap years are not worth a grammar).
    else if (p == "date")
      body = R"([1-9] [0-9]{3} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))";
    else if (p == "time")
      body = R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
    else if (p == "date-time") body = P("date") + " \"T\" " + P("time");
    else if (p == "uuid")
      body = R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})";
    rules_.push_back({name, body});
    return name;
  }

  // A fresh helper rule name derived from `hint`.
  std::string helper(const std::string& hint) {
    std::string base = root_name_ + ".";
    for (char c : hint) base += is_rule_char(c) && c != '.' ? c : '-';
    if (base.size() > 80) base.resize(80);
    std::string name = base;
    for (int k = 2; names_.count(name); ++k) name = base + "-" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  std::string define(const std::string& hint, const std::string& body) {
    std::string name = helper(hint);
    rules_.push_back({name, body});
    return name;
  }

  static std::string join(const std::vector<std::string>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }

  const ojson& resolve_pointer(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') fail(path, "only local $ref (\"#...\") is supported: " + ref);
    try {
      ojson::json_pointer ptr(ref.substr(1));
      if (!root_.contains(ptr)) fail(path, "$ref " + ref + " points to nothing");
      return root_.at(ptr);
    } catch (const nlohmann::json::exception& e) {
      fail(path, "bad $ref " + ref + ": " + e.what());
    }
  }

  std::string ref_rule(const ojson& ref, const std::string& path, int depth) {
    if (!ref.is_string()) fail(path, "$ref must be a string");
    const std::string r = ref.get<std::string>();
    auto it = ref_rules_.find(r);
    if (it != ref_rules_.end()) return it->second;
    const ojson& target = resolve_pointer(r, path);
    std::string last = r.substr(r.rfind('/') + 1);
    std::string name = helper("ref-" + (last.empty() ? std::string("root") : last));
    ref_rules_[r] = name;  // before visiting: recursive schemas refer to themselves
    size_t slot = rules_.size();
    rules_.push_back({name, ""});
    std::string body = visit(target, r, depth + 1);
    rules_[slot].second = body;
    return name;
  }

  // The schema with $ref followed (for merging), bounded to catch $ref cycles.
  const ojson& deref(const ojson& s, const std::string& path) {
    const ojson* cur = &s;
    for (int i = 0; cur->is_object() && cur->contains("$ref"); ++i) {
      if (i > 32) fail(path, "$ref chain too long or cyclic");
      if (!(*cur)["$ref"].is_string()) fail(path, "$ref must be a string");
      cur = &resolve_pointer((*cur)["$ref"].get<std::string>(), path);
    }
    return *cur;
  }

  // allOf as one schema: properties united, required united, other keywords last-wins.
  void merge_into(ojson& a, const ojson& b_in, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail(path, "allOf nested too deeply");
    const ojson& b = deref(b_in, path);
    if (b.is_boolean()) {
      if (!b.get<bool>()) fail(path, "allOf contains schema 'false'");
      return;
    }
    if (!b.is_object()) fail(path, "allOf entries must be schemas");
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string& k = it.key();
      const ojson& v = it.value();
      if (k == "allOf") {
        if (!v.is_array()) fail(path, "allOf must be an array");
        for (const auto& sub : v) merge_into(a, sub, path, depth + 1);
      } else if (k == "properties" && a.contains("properties") && a["properties"].is_object() &&
                 v.is_object()) {
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (a["properties"].contains(p.key()))
            a["properties"][p.key()] = ojson{{"allOf", ojson::array({a["properties"][p.key()], p.value()})}};
          else
            a["properties"][p.key()] = p.value();
        }
      } else if (k == "required" && a.contains("required") && a["required"].is_array() && v.is_array()) {
        for (const auto& r : v)
          if (std::find(a["required"].begin(), a["required"].end(), r) == a["required"].end())
            a["required"].push_back(r);
      } else {
        a[k] = v;
      }
    }
  }

  std::string visit(const ojson& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail(path, "schema nested too deeply");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "schema 'false' matches nothing");
      return prim("value");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    if (s.contains("$ref")) return ref_rule(s["$ref"], path, depth);
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array()) fail(path, "allOf must be an array");
      ojson merged = s;
      merged.erase("allOf");
      for (const auto& sub : s["allOf"]) merge_into(merged, sub, path + "/allOf", depth);
      merged.erase("allOf");
      return visit(merged, path, depth + 1);
    }
    bool nullable = false;
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) fail(path, "nullable must be a boolean");
      nullable = s["nullable"].get<bool>();
    }
    std::vector<std::string> alts;
    if (s.contains("const")) {
      alts.push_back(value_expr(s["const"]));
    } else if (s.contains("enum")) {
      const ojson& e = s["enum"];
      if (!e.is_array() || e.empty()) fail(path, "enum must be a non-empty array");
      for (const auto& v : e) alts.push_back(value_expr(v));
    } else if (s.contains("anyOf") || s.contains("oneOf")) {
      const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
      const ojson& branches = s[key];
      if (!branches.is_array() || branches.empty()) fail(path, std::string(key) + " must be a non-empty array");
      ojson siblings = s;
      siblings.erase("anyOf");
      siblings.erase("oneOf");
      siblings.erase("nullable");
      for (size_t i = 0; i < branches.size(); ++i) {
        std::string sub = path + "/" + key + "/" + std::to_string(i);
        if (siblings.empty()) {
          alts.push_back(visit(branches[i], sub, depth + 1));
        } else {
          ojson merged = siblings;
          merge_into(merged, branches[i], sub, depth);
          alts.push_back(visit(merged, sub, depth + 1));
        }
      }
    } else {
      std::vector<std::string> types;
      if (s.contains("type")) {
        const ojson& t = s["type"];
        if (t.is_string()) types.push_back(t.get<std::string>());
        else if (t.is_array() && !t.empty()) {
          for (const auto& x : t) {
            if (!x.is_string()) fail(path, "type entries must be strings");
            types.push_back(x.get<std::string>());
          }
        } else {
          fail(path, "type must be a string or a non-empty array");
        }
      } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
        types.push_back("object");
      } else if (s.contains("items") || s.contains("prefixItems")) {
        types.push_back("array");
      } else if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength") ||
                 s.contains("format")) {
        types.push_back("string");
      } else {
        return nullable ? prim("value") : prim("value");
      }
      for (const auto& t : types) {
        if (t == "null") nullable = false;  // already an alternative
        alts.push_back(type_expr(t, s, path, depth));
      }
    }
    if (nullable) alts.push_back(prim("null"));
    return join(alts);
  }

  // A fixed JSON value (enum / const): scalars compact, arrays and objects with the same
  // bounded whitespace as everywhere else (keys in the given order).
  std::string value_expr(const ojson& v) {
    if (v.is_array()) {
      if (v.empty()) return "\"[\" " + prim("ws") + " \"]\"";
      std::string out = "(\"[\" " + prim("ws");
      for (size_t i = 0; i < v.size(); ++i)
        out += (i ? " \",\" " + prim("ws") + " " : " ") + value_expr(v[i]) + " " + prim("ws");
      return out + " \"]\")";
    }
    if (v.is_object()) {
      if (v.empty()) return "\"{\" " + prim("ws") + " \"}\"";
      std::string out = "(\"{\" " + prim("ws");
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        out += (first ? " " : " \",\" " + prim("ws") + " ") + gbnf_literal(ojson(it.key()).dump()) + " " +
               prim("ws") + " \":\" " + prim("ws") + " " + value_expr(it.value()) + " " + prim("ws");
        first = false;
      }
      return out + " \"}\")";
    }
    return gbnf_literal(v.dump());
  }

  // Splits a parameter template into GBNF: literal text quoted, {KEY} the name, {VALUE} the
  // value rule, and a literal "true|false" (DeepSeek's string="true|false") as a choice.
  static std::string expand_param(const std::string& tmpl, const std::string& key, const std::string& value) {
    std::string out, lit;
    auto flush = [&] {
      if (!lit.empty()) out += (out.empty() ? "" : " ") + gbnf_literal(lit);
      lit.clear();
    };
    for (size_t i = 0; i < tmpl.size();) {
      if (tmpl.compare(i, 5, "{KEY}") == 0) { lit += key; i += 5; }
      else if (tmpl.compare(i, 7, "{VALUE}") == 0) { flush(); out += (out.empty() ? "" : " ") + value; i += 7; }
      else if (tmpl.compare(i, 10, "true|false") == 0) { flush(); out += (out.empty() ? "" : " ") + std::string("(\"true\" | \"false\")"); i += 10; }
      else lit += tmpl[i++];
    }
    flush();
    return out.empty() ? "\"\"" : out;
  }

  // XML parameter values: plain strings are raw text (no "<" so the closing tag is unambiguous),
  // string enums their raw values; anything else is JSON.
  std::string xml_value(const ojson& s_in, const std::string& path) {
    const ojson& s = deref(s_in, path);
    if (s.is_object() && s.value("type", ojson()) == "string" && !s.contains("pattern") && !s.contains("const") &&
        !s.contains("format")) {
      if (s.contains("enum") && s["enum"].is_array() && !s["enum"].empty()) {
        std::vector<std::string> alts;
        for (const auto& v : s["enum"])
          if (v.is_string()) alts.push_back(gbnf_literal(v.get<std::string>()));
        if (!alts.empty()) return join(alts);
      }
      return prim("rawtext");
    }
    return visit(s_in, path, 1);
  }

  // Python literal values: True/False/None instead of true/false/null at the top level.
  std::string python_value(const ojson& s_in, const std::string& path) {
    const ojson& s = deref(s_in, path);
    if (s.is_object() && s.contains("type") && s["type"].is_string()) {
      if (s["type"] == "boolean") return "(\"True\" | \"False\")";
      if (s["type"] == "null") return "\"None\"";
    }
    return visit(s_in, path, 1);
  }

  // items[i] joined by `sep` in order, where only optional items may be skipped; `end` closes
  // the list when nothing required is left.
  std::string chain(const std::vector<std::string>& items, const std::vector<bool>& req, const std::string& sep,
                    const std::string& end) {
    const size_t n = items.size();
    if (n == 0) return end;
    std::vector<size_t> first_req(n + 1, n);
    for (size_t i = n; i-- > 0;) first_req[i] = req[i] ? i : first_req[i + 1];
    std::vector<std::string> tail(n);
    for (size_t i = n; i-- > 0;) {
      tail[i] = helper("then");
      std::vector<std::string> alts;
      for (size_t j = i + 1; j <= std::min(first_req[i + 1], n - 1) && j < n; ++j)
        alts.push_back(sep + " " + items[j] + " " + tail[j]);
      if (first_req[i + 1] == n) alts.push_back(end);
      std::string body;
      for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
      rules_.push_back({tail[i], body});
    }
    std::vector<std::string> alts;
    for (size_t j = 0; j <= std::min(first_req[0], n - 1); ++j) alts.push_back(items[j] + " " + tail[j]);
    if (first_req[0] == n) alts.push_back(end);
    return join(alts);
  }

  // Integers: a closed range of up to kMaxIntRange values is enforced exactly (a digit trie);
  // otherwise only the sign (minimum >= 0) and a leading digit (minimum >= 1) are.
  static constexpr int64_t kMaxIntRange = 2000;
  std::string integer_expr(const ojson& s, const std::string& path) {
    auto bound = [&](const char* incl, const char* excl, bool lower) -> std::optional<int64_t> {
      std::optional<double> b;
      if (s.contains(incl) && s[incl].is_number()) b = s[incl].get<double>();
      if (s.contains(excl) && s[excl].is_number()) {
        double e = s[excl].get<double>();
        // the smallest integer > e (or largest < e)
        double x = lower ? std::floor(e) + 1 : std::ceil(e) - 1;
        if (!b || (lower ? x > *b : x < *b)) b = x;
      }
      if (!b || std::abs(*b) > 1e15) return std::nullopt;
      return int64_t(lower ? std::ceil(*b) : std::floor(*b));
    };
    std::optional<int64_t> lo = bound("minimum", "exclusiveMinimum", true);
    std::optional<int64_t> hi = bound("maximum", "exclusiveMaximum", false);
    if (lo && hi) {
      if (*hi < *lo) fail(path, "integer range is empty");
      if (*hi - *lo < kMaxIntRange) {
        std::vector<std::string> values;
        for (int64_t v = *lo; v <= *hi; ++v) values.push_back(std::to_string(v));
        return literal_trie(values, "int");
      }
    }
    if (lo && *lo >= 1) return prim("pinteger");
    if (lo && *lo >= 0) return prim("uinteger");
    return prim("integer");
  }

  // Alternation of literal strings as a trie of rules, so that shared prefixes share states.
  std::string literal_trie(const std::vector<std::string>& words, const std::string& hint) {
    struct Node {
      std::map<char, size_t> next;
      bool end = false;
    };
    std::vector<Node> t(1);
    for (const auto& w : words) {
      size_t n = 0;
      for (char c : w) {
        auto it = t[n].next.find(c);
        if (it == t[n].next.end()) {
          t.push_back({});
          t[n].next[c] = t.size() - 1;
          n = t.size() - 1;
        } else {
          n = it->second;
        }
      }
      t[n].end = true;
    }
    std::vector<std::string> names(t.size());
    for (size_t i = 0; i < t.size(); ++i) names[i] = helper(hint);
    for (size_t i = 0; i < t.size(); ++i) {
      std::string body;
      for (const auto& [c, child] : t[i].next)
        body += (body.empty() ? "" : " | ") + gbnf_literal(std::string(1, c)) + " " + names[child];
      if (t[i].end) body += body.empty() ? "\"\"" : " | \"\"";
      rules_.push_back({names[i], body});
    }
    return names[0];
  }

  static bool non_negative_bound(const ojson& s) {
    for (const char* k : {"minimum", "exclusiveMinimum"})
      if (s.contains(k) && s[k].is_number() && s[k].get<double>() >= 0) return true;
    return false;
  }

  int64_t count(const ojson& s, const char* key, int64_t dflt, const std::string& path) {
    if (!s.contains(key)) return dflt;
    const ojson& v = s[key];
    if (!v.is_number_integer() && !v.is_number_unsigned()) fail(path, std::string(key) + " must be an integer");
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      return u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(u);
    }
    int64_t x = v.get<int64_t>();
    if (x < 0) fail(path, std::string(key) + " must not be negative");
    return x;
  }

  std::string type_expr(const std::string& t, const ojson& s, const std::string& path, int depth) {
    if (t == "object") return object_expr(s, path, depth);
    if (t == "array") return array_expr(s, path, depth);
    if (t == "string") return string_expr(s, path);
    if (t == "number") return prim(non_negative_bound(s) ? "unumber" : "number");
    if (t == "integer") return integer_expr(s, path);
    if (t == "boolean") return prim("boolean");
    if (t == "null") return prim("null");
    fail(path, "unknown type '" + t + "'");
  }

  std::string string_expr(const ojson& s, const std::string& path) {
    const std::string q = "\"\\\"\"";
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail(path, "pattern must be a string");
      return define("pattern", q + " " + regex_to_gbnf(s["pattern"].get<std::string>(), prim("char")) + " " + q);
    }
    if (s.contains("format") && s["format"].is_string()) {
      std::string f = s["format"].get<std::string>();
      if (f == "date" || f == "time" || f == "date-time" || f == "uuid") return q + " " + prim(f) + " " + q;
    }
    int64_t lo = count(s, "minLength", 0, path), hi = count(s, "maxLength", -1, path);
    if (lo == 0 && hi < 0) return prim("string");
    if (hi >= 0 && hi < lo) fail(path, "maxLength < minLength");
    if (lo > kMaxCount) fail(path, "minLength above " + std::to_string(kMaxCount) + " is not supported");
    if (hi > kMaxCount) hi = kMaxCount;
    std::string rep = "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
    return define("string", q + " " + prim("char") + rep + " " + q);
  }

  std::string array_expr(const ojson& s, const std::string& path, int depth) {
    const std::string ws = prim("ws");
    if (s.contains("prefixItems") && s["prefixItems"].is_array() && !s["prefixItems"].empty()) {
      const ojson& pre = s["prefixItems"];
      const int64_t min_items = count(s, "minItems", 0, path);
      bool closed = s.contains("items") && s["items"].is_boolean() && !s["items"].get<bool>();
      // Items past minItems are optional, each only if the previous one is present:
      // P0 ("," P1 ("," P2 (more)?)?)? — built from the inside out.
      std::string inner;
      if (!closed) {
        std::string extra = define("item", visit(s.value("items", ojson(true)), path + "/items", depth + 1));
        inner = "(\",\" " + ws + " " + extra + " " + ws + ")*";
      }
      for (size_t i = pre.size(); i-- > 0;) {
        std::string item = define("item" + std::to_string(i), visit(pre[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
        std::string part = (i ? "\",\" " + ws + " " : std::string()) + item + " " + ws + (inner.empty() ? "" : " " + inner);
        inner = int64_t(i) < min_items ? part : "(" + part + ")?";
      }
      std::string body = "\"[\" " + ws + " " + inner;
      return define("tuple", body + " \"]\"");
    }
    const ojson items = s.contains("items") ? s["items"] : ojson(true);
    int64_t lo = count(s, "minItems", 0, path), hi = count(s, "maxItems", -1, path);
    if (hi >= 0 && hi < lo) fail(path, "maxItems < minItems");
    if (lo > kMaxCount) fail(path, "minItems above " + std::to_string(kMaxCount) + " is not supported");
    if (hi > kMaxCount) hi = kMaxCount;
    if (hi == 0) return "\"[\" " + ws + " \"]\"";
    if (items.is_boolean() && !items.get<bool>()) {
      if (lo > 0) fail(path, "items: false with minItems > 0 matches nothing");
      return "\"[\" " + ws + " \"]\"";
    }
    std::string item = define("item", visit(items, path + "/items", depth + 1));
    std::string more = "(\",\" " + ws + " " + item + " " + ws + ")";
    int64_t mlo = lo > 0 ? lo - 1 : 0;
    std::string rep = "{" + std::to_string(mlo) + "," + (hi >= 0 ? std::to_string(hi - 1) : "") + "}";
    std::string list = item + " " + ws + " " + more + rep;
    std::string body = "\"[\" " + ws + (lo > 0 ? " " + list : " (" + list + ")?") + " \"]\"";
    return define("array", body);
  }

  // Keys for additionalProperties: any escape-free string that is not a declared property name
  // (a duplicate key would override the declared one when parsed). Built as a trie over code
  // points: at each node the key may close (unless it equals a declared name), continue along
  // a declared name, or leave the trie with any other character.
  struct KeyTrie {
    std::map<uint32_t, int> next;
    bool terminal = false;
  };
  std::string key_rule(const std::vector<std::string>& known) {
    std::vector<KeyTrie> t(1);
    for (const auto& k : known) {
      bool plain = true;
      for (unsigned char c : k)
        if (c == '"' || c == '\\' || c < 0x20) plain = false;
      if (!plain) continue;  // an escape-free key can never equal it
      int n = 0;
      for (uint32_t cp : code_points(k)) {
        auto it = t[size_t(n)].next.find(cp);
        if (it == t[size_t(n)].next.end()) {
          t.push_back({});
          int id = int(t.size() - 1);
          t[size_t(n)].next[cp] = id;
          n = id;
        } else {
          n = it->second;
        }
      }
      t[size_t(n)].terminal = true;
    }
    std::vector<std::string> names(t.size());
    for (size_t i = 0; i < t.size(); ++i) names[i] = helper("key");
    for (size_t i = 0; i < t.size(); ++i) {
      std::vector<std::string> alts;
      if (!t[i].terminal) alts.push_back("\"\\\"\"");
      std::string other = "[^\"\\\\\\x00-\\x1F";
      for (const auto& [cp, child] : t[i].next) {
        other += cp_class_escape(cp);
        std::string step = "[";  // (built piecewise: GCC 12 warns falsely on "[" + string)
        step += cp_class_escape(cp);
        step += "] ";
        step += names[size_t(child)];
        alts.push_back(std::move(step));
      }
      alts.push_back(other + "] " + prim("keyrest"));
      std::string body;
      for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
      rules_.push_back({names[i], body});
    }
    return "\"\\\"\" " + names[0];
  }

  std::string object_expr(const ojson& s, const std::string& path, int depth) {
    const std::string ws = prim("ws");
    ojson props = ojson::object();
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail(path, "properties must be an object");
      props = s["properties"];
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "required must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(path, "required entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    // additionalProperties: absent → none when properties are declared, any object otherwise.
    std::optional<ojson> extra;
    if (s.contains("additionalProperties")) {
      const ojson& ap = s["additionalProperties"];
      if (ap.is_boolean()) {
        if (ap.get<bool>()) extra = ojson(true);
      } else if (ap.is_object()) {
        extra = ap;
      } else {
        fail(path, "additionalProperties must be a boolean or a schema");
      }
    } else if (props.empty() && required.empty()) {
      return prim("object");
    }
    // Required names without a declared schema are declared with the extra schema (or any).
    for (const auto& r : required)
      if (!props.contains(r)) props[r] = extra ? *extra : ojson(true);

    std::vector<std::string> keys, items;
    std::vector<bool> req;
    for (auto it = props.begin(); it != props.end(); ++it) {
      keys.push_back(it.key());
      req.push_back(required.count(it.key()) > 0);
      std::string value = visit(it.value(), path + "/properties/" + it.key(), depth + 1);
      items.push_back(define("kv-" + it.key(), gbnf_literal(ojson(it.key()).dump()) + " " + ws +
                                                   " \":\" " + ws + " " + value + " " + ws));
    }
    std::string extra_tail = "\"\"";
    std::string extra_kv;
    if (extra) {
      std::string value = visit(*extra, path + "/additionalProperties", depth + 1);
      extra_kv = define("extra-kv", key_rule(keys) + " " + ws + " \":\" " + ws + " " + value + " " + ws);
      extra_tail = define("extra-tail", "(\",\" " + ws + " " + extra_kv + ")*");
    }
    const size_t n = keys.size();
    // first_req[i]: the first required index >= i (n if none).
    std::vector<size_t> first_req(n + 1, n);
    for (size_t i = n; i-- > 0;) first_req[i] = req[i] ? i : first_req[i + 1];
    // tail[i]: what may follow property i: a later property (skipping only optional ones), or
    // the end when nothing required remains.
    std::vector<std::string> tail(n);
    for (size_t i = n; i-- > 0;) {
      tail[i] = helper("after-" + keys[i]);
      std::vector<std::string> alts;
      size_t lim = std::min(first_req[i + 1], n - 1);
      for (size_t j = i + 1; j <= lim && j < n; ++j) alts.push_back("\",\" " + ws + " " + items[j] + " " + tail[j]);
      if (first_req[i + 1] == n) alts.push_back(extra_tail);
      std::string body;
      for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
      rules_.push_back({tail[i], body});
    }
    std::vector<std::string> alts;
    if (n > 0)
      for (size_t j = 0; j <= std::min(first_req[0], n - 1); ++j) alts.push_back(items[j] + " " + tail[j]);
    if (first_req[0] == n) {
      if (extra) alts.push_back(extra_kv + " " + extra_tail);
      alts.push_back("\"\"");
    }
    std::string body;
    for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
    return define("object", "\"{\" " + ws + " (" + body + ") \"}\"");
  }

  const ojson& root_;
  std::string root_name_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::set<std::string> prims_done_;
  std::map<std::string, std::string> ref_rules_;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& root) {
  if (root.empty()) throw GrammarError("json_schema_to_gbnf: empty root rule name");
  for (char c : root)
    if (!is_rule_char(c)) throw GrammarError("json_schema_to_gbnf: bad rule name '" + root + "'");
  return SchemaConverter(schema, root).run();
}

std::shared_ptr<const Grammar> grammar_from_json_schema(const nlohmann::ordered_json& schema) {
  return parse_gbnf(json_schema_to_gbnf(schema, "root"), "root");
}

std::shared_ptr<const Grammar> grammar_from_json_schema(const nlohmann::json& schema) {
  return grammar_from_json_schema(nlohmann::ordered_json::parse(schema.dump()));
}

std::shared_ptr<const Grammar> grammar_from_json_schema_text(std::string_view text) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw GrammarError(std::string("JSON schema does not parse: ") + e.what());
  }
  return grammar_from_json_schema(j);
}

std::shared_ptr<const Grammar> grammar_for_json_object() {
  return grammar_from_json_schema(nlohmann::ordered_json{{"type", "object"}});
}

namespace {

// Whether `text` mentions rule `name` as a whole word, and whether it defines it.
void scan_rule(std::string_view text, const std::string& name, bool& used, bool& defined) {
  used = defined = false;
  for (size_t p = text.find(name); p != std::string_view::npos; p = text.find(name, p + 1)) {
    size_t e = p + name.size();
    if ((p > 0 && is_rule_char(text[p - 1])) || (e < text.size() && is_rule_char(text[e]))) continue;
    size_t q = e;
    while (q < text.size() && (text[q] == ' ' || text[q] == '\t')) ++q;
    if (text.substr(q, 3) == "::=") defined = true;
    else used = true;
  }
}

}  // namespace

std::string gbnf_with_tool_args(std::string_view gbnf, const nlohmann::ordered_json& tools,
                                const std::string& encoding, const std::string& param_syntax) {
  if (!tools.is_array()) throw GrammarError("tools must be an array");
  std::string out(gbnf);
  if (!out.empty() && out.back() != '\n') out += '\n';
  for (const auto& tool : tools) {
    const nlohmann::ordered_json* fn = &tool;
    if (tool.is_object() && tool.contains("function") && tool["function"].is_object()) fn = &tool["function"];
    if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      throw GrammarError("tool without a name: " + tool.dump());
    const std::string name = (*fn)["name"].get<std::string>();
    std::string rule = "args-";
    for (char c : name) rule += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    nlohmann::ordered_json schema = {{"type", "object"}};
    if (fn->contains("parameters")) schema = (*fn)["parameters"];
    else if (fn->contains("input_schema")) schema = (*fn)["input_schema"];
    bool used, defined;
    scan_rule(out, rule, used, defined);
    if (!used || defined) continue;
    if (encoding == "json") out += json_schema_to_gbnf(schema, rule);
    else out += SchemaConverter(schema, rule).run_args(encoding, param_syntax);
  }
  return out;
}

}  // namespace rapid::constrain
