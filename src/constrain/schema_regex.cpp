// Regex subset → GBNF, emitting each matched character in its JSON-encoded form.
#include "constrain/schema_regex.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "constrain/grammar.h"

namespace rapid::constrain {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges m;
  for (auto p : r) {
    if (!m.empty() && p.first <= m.back().second + 1) m.back().second = std::max(m.back().second, p.second);
    else m.push_back(p);
  }
  return m;
}

Ranges complement(const Ranges& in) {
  Ranges r = normalize(in), out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = std::max(next, hi + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

bool contains(const Ranges& r, uint32_t c) {
  for (auto [lo, hi] : r)
    if (c >= lo && c <= hi) return true;
  return false;
}

std::string cp_escape(uint32_t c) {
  char buf[16];
  if (c <= 0xFFFF) std::snprintf(buf, sizeof buf, "\\u%04X", c);
  else std::snprintf(buf, sizeof buf, "\\U%08X", c);
  return buf;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

// A set of decoded characters as a GBNF expression over their JSON encodings.
std::string set_expr(const Ranges& in) {
  Ranges r = normalize(in);
  // Characters JSON must escape: '"', '\\' and controls. The rest are written raw.
  Ranges safe;
  for (auto [lo, hi] : r) {
    for (auto [a, b] : complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}})) {
      uint32_t x = std::max(lo, a), y = std::min(hi, b);
      if (x <= y) safe.push_back({x, y});
    }
  }
  std::vector<std::string> alts;
  if (!safe.empty()) {
    std::string cls = "[";
    for (auto [lo, hi] : safe) cls += lo == hi ? cp_escape(lo) : cp_escape(lo) + "-" + cp_escape(hi);
    alts.push_back(cls + "]");
  }
  static const std::pair<uint32_t, const char*> escapes[] = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}, {'\b', "\\b"}, {'\f', "\\f"}};
  for (auto [c, esc] : escapes)
    if (contains(r, c)) alts.push_back(gbnf_literal(esc));
  if (alts.empty()) throw GrammarError("pattern: a character class matches no character");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

class RegexConverter {
 public:
  RegexConverter(std::string_view p, const std::string& any) : p_(p), any_(any) {}

  std::string convert() {
    bool start_anchor = !p_.empty() && p_[0] == '^';
    if (start_anchor) ++i_;
    std::string body = parse_alt(0);
    bool end_anchor = false;
    if (i_ < p_.size() && p_[i_] == '$' && i_ + 1 == p_.size()) {
      end_anchor = true;
      ++i_;
    }
    if (i_ != p_.size()) fail("unsupported construct");
    std::string out;
    if (!start_anchor) out += any_ + "* ";
    out += "(" + body + ")";
    if (!end_anchor) out += " " + any_ + "*";
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw GrammarError("pattern '" + std::string(p_) + "' at " + std::to_string(i_) + ": " + what);
  }

  std::string parse_alt(int depth) {
    if (depth > 100) fail("groups nested too deeply");
    std::vector<std::string> alts{parse_seq(depth)};
    while (i_ < p_.size() && p_[i_] == '|') {
      ++i_;
      alts.push_back(parse_seq(depth));
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

  std::string parse_seq(int depth) {
    std::string out;
    while (i_ < p_.size()) {
      char c = p_[i_];
      if (c == '|' || c == ')') break;
      if (c == '$' && i_ + 1 == p_.size() && depth == 0) break;
      std::string atom = parse_atom(depth);
      atom = parse_quant(atom);
      out += (out.empty() ? "" : " ") + atom;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string parse_quant(std::string atom) {
    while (i_ < p_.size()) {
      char c = p_[i_];
      std::string q;
      if (c == '*' || c == '+' || c == '?') {
        q = std::string(1, c);
        ++i_;
      } else if (c == '{' && i_ + 1 < p_.size() && isdigit(static_cast<unsigned char>(p_[i_ + 1]))) {
        size_t close = p_.find('}', i_);
        if (close == std::string_view::npos) fail("unterminated {m,n}");
        q = std::string(p_.substr(i_, close - i_ + 1));
        for (char d : q)
          if (!isdigit(static_cast<unsigned char>(d)) && d != ',' && d != '{' && d != '}') fail("bad {m,n}");
        i_ = close + 1;
      } else {
        break;
      }
      if (i_ < p_.size() && p_[i_] == '?') ++i_;  // lazy: same language
      atom = "(" + atom + ")" + q;
    }
    return atom;
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (i_ >= p_.size() || !isxdigit(static_cast<unsigned char>(p_[i_]))) fail("bad hex escape");
      char c = p_[i_++];
      v = v * 16 + uint32_t(isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 32) - 'a' + 10);
    }
    return v;
  }

  uint32_t utf8_char() {
    unsigned char c = static_cast<unsigned char>(p_[i_]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i_ + size_t(len) > p_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(p_[i_ + size_t(k)]);
      if ((d & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    i_ += size_t(len);
    return cp;
  }

  // After a backslash: a class escape (\d…) or one character.
  Ranges escape() {
    if (i_ >= p_.size()) fail("trailing backslash");
    char e = p_[i_++];
    switch (e) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': { uint32_t v = hex(2); return {{v, v}}; }
      case 'u': { uint32_t v = hex(4); return {{v, v}}; }
      default:
        if (isalnum(static_cast<unsigned char>(e))) fail(std::string("unsupported escape \\") + e);
        return {{uint32_t(static_cast<unsigned char>(e)), uint32_t(static_cast<unsigned char>(e))}};
    }
  }

  std::string parse_atom(int depth) {
    char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < p_.size() && p_[i_] == '?') {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
        else fail("lookaround and named groups are not supported");
      }
      std::string inner = parse_alt(depth + 1);
      if (i_ >= p_.size() || p_[i_] != ')') fail("expected ')'");
      ++i_;
      return "(" + inner + ")";
    }
    if (c == '[') return set_expr(parse_class());
    if (c == '.') {
      ++i_;
      return set_expr(complement({{'\n', '\n'}, {'\r', '\r'}}));
    }
    if (c == '\\') {
      ++i_;
      return set_expr(escape());
    }
    if (c == '*' || c == '+' || c == '?' || c == '{' || c == '^' || c == '$')
      fail(std::string("unexpected '") + c + "'");
    uint32_t cp = utf8_char();
    return set_expr({{cp, cp}});
  }

  Ranges parse_class() {
    ++i_;
    bool neg = false;
    if (i_ < p_.size() && p_[i_] == '^') {
      neg = true;
      ++i_;
    }
    Ranges r;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) fail("unterminated class");
      if (p_[i_] == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      Ranges item;
      if (p_[i_] == '\\') {
        ++i_;
        item = escape();
      } else {
        uint32_t cp = utf8_char();
        item = {{cp, cp}};
      }
      if (item.size() == 1 && item[0].first == item[0].second && i_ + 1 < p_.size() &&
          p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (p_[i_] == '\\') {
          ++i_;
          Ranges h = escape();
          if (h.size() != 1 || h[0].first != h[0].second) fail("bad class range");
          hi = h[0].first;
        } else {
          hi = utf8_char();
        }
        if (hi < item[0].first) fail("class range out of order");
        item[0].second = hi;
      }
      r.insert(r.end(), item.begin(), item.end());
    }
    return neg ? complement(r) : r;
  }

  std::string_view p_;
  size_t i_ = 0;
  std::string any_;
};

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += char(c);  // UTF-8 passes through; the GBNF parser decodes it back
    }
  }
  return out + "\"";
}

std::string regex_to_gbnf(std::string_view pattern, const std::string& json_char_rule) {
  return RegexConverter(pattern, json_char_rule).convert();
}

}  // namespace rapid::constrain
